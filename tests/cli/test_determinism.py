"""Every output format is a function of its inputs: written twice, the same bytes
(no timestamp, no version string, no random id: SVG ids are salted, PDF has no
CreationDate)."""

from __future__ import annotations

import pytest

from tilesim.hwmodels import load_gpu, write_preset
from tilesim.plots import RooflinePoint, gantt, roofline, whatif_plot
from tilesim.simulator import simulate
from tilesim.traces import build
from tilesim.traces.files import save
from tilesim.traces.workload import Workload
from tilesim.whatif import parse_vary, run_sweep, shapes

GPU = load_gpu("h100")
WORKLOAD = Workload(1, 1, 512, 512, 64)
POINTS = [
    RooflinePoint("standard", 40.0, 150.0, l2_intensity=30.0, smem_intensity=28.0),
    RooflinePoint(
        "v2",
        120.0,
        300.0,
        measured_tflops=280.0,
        measured_range=(270.0, 290.0),
        l2_intensity=60.0,
        smem_intensity=50.0,
        sfu_ceiling_tflops=900.0,
        fp32_ceiling_tflops=1200.0,
    ),
]


def twice(write, tmp_path, name):
    paths = [write(tmp_path / f"{i}-{name}") for i in (1, 2)]
    first, second = (p.read_bytes() for p in paths)
    assert first, name
    return first, second


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_figures_are_the_same_bytes_every_time(suffix, tmp_path):
    first, second = twice(lambda p: roofline(GPU, POINTS, p), tmp_path, "r" + suffix)
    assert first == second
    if suffix == ".pdf":
        assert b"CreationDate" not in first


def test_a_gantt_chart_is_the_same_bytes_every_time(tmp_path):
    pred = simulate(build("v2", WORKLOAD, GPU), GPU, "detailed", timeline=True)
    first, second = twice(lambda p: gantt(pred, p, sms=2), tmp_path, "g.svg")
    assert first == second


def test_a_whatif_plot_is_the_same_bytes_every_time(tmp_path):
    vary = parse_vary(["hbm_bandwidth_Bps=0.5x,1x,2x", "l2_bytes=0.5x,1x"], GPU)
    result = run_sweep(GPU, vary, ["v2"], shapes([512], [64], batch=1, heads=1))
    first, second = twice(lambda p: whatif_plot(result, p), tmp_path, "w.svg")
    assert first == second


def test_json_outputs_are_the_same_bytes_every_time(tmp_path):
    trace = build("v2", WORKLOAD, GPU)
    first, second = twice(lambda p: save(trace, p.with_suffix(".trace.json")), tmp_path, "t")
    assert first == second

    def timeline(path):
        pred = simulate(trace, GPU, "fast", timeline=True)
        return pred.timeline.write(path)

    first, second = twice(timeline, tmp_path, "timeline.json")
    assert first == second


def test_a_preset_file_is_the_same_bytes_every_time(tmp_path):
    gpu = GPU.with_overrides({"hbm_bandwidth_Bps": "2x"})
    first, second = twice(
        lambda p: write_preset(gpu, p, "what-if", base="h100_sxm5_80gb"), tmp_path, "p.toml"
    )
    assert first == second
