"""Plots: each writes a valid, non-blank PNG (decoded and looked at), atomically."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib import image as mpimg

from tilesim import plots
from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.plots.gantt import _Lanes
from tilesim.simulator import simulate
from tilesim.traces import Workload, build
from tilesim.whatif import parse_vary, run_sweep, shapes

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert 10_000 < len(data) < 2_000_000  # a real picture, and a small one
    img = mpimg.imread(path)[..., :3]
    assert img.shape[0] > 250 and img.shape[1] > 500
    nonwhite = (img < 0.95).any(axis=2).mean()
    assert 0.02 < nonwhite < 0.9, nonwhite  # neither blank nor a solid block
    assert img.std() > 0.05
    return img


def colour_pixels(img, hex_colour, tol=0.04):
    rgb = np.array([int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(img - rgb) < tol).all(axis=2).sum())


@pytest.fixture(scope="module")
def timelines():
    gpu = load_gpu("h100")
    w = Workload(1, 1, 4096, 4096, 128)  # 32 K/V blocks: a long steady state
    return [
        simulate(build(a, w, gpu), gpu, "detailed", timeline=True, timeline_sms=2)
        for a in ("v2", "v3")
    ]


def test_roofline_png(tmp_path):
    gpu = load_gpu("h100")
    pts = [
        plots.RooflinePoint("standard", 30.0, 150.0),
        plots.RooflinePoint("v2", 900.0, 550.0, measured_tflops=470.0),
    ]
    path = plots.roofline(gpu, pts, tmp_path / "r.png")
    img = load_png(path)
    assert colour_pixels(img, plots.ALGO_COLOURS[0]) > 20  # standard's hollow marker
    assert colour_pixels(img, plots.ALGO_COLOURS[1]) > colour_pixels(img, plots.ALGO_COLOURS[0])


def test_roofs_are_memory_levels_and_tensor_paths_only():
    gpu = load_gpu("h100")
    assert [name for name, _ in plots.roofs(gpu)[0]] == ["HBM", "L2", "shared memory"]
    computes = dict(plots.roofs(gpu)[1])
    assert computes["tensor fp8 wgmma"] == gpu.peak_tensor_flops("fp8", "wgmma")
    assert all(name.startswith("tensor") for name in computes)  # no SFU/FP32 on FLOP/s
    assert "tensor fp8 wgmma" not in dict(plots.roofs(load_gpu("a100"))[1])


def test_gantt_png_from_predictions_and_files(tmp_path, timelines):
    img = load_png(plots.gantt(timelines, tmp_path / "g.png", sms=2))
    for pipe in ("tensor", "sfu", "fp32"):
        assert colour_pixels(img, plots.PIPE_COLOURS[pipe]) > 200, pipe
    # the same picture from the Perfetto JSON the engine writes
    timelines[0].timeline.write(tmp_path / "v2.json")
    one = plots.gantt(str(tmp_path / "v2.json"), tmp_path / "one.png", sms=2, window="0:5")
    load_png(one)


def test_gantt_window_and_lanes(timelines):
    lanes = _Lanes.of(plots.perfetto_of(timelines[0]))
    lo, hi = lanes.span()
    a, b = lanes.auto_window()
    assert lo <= a < b <= hi
    tensor = lanes.busy[(0, "tensor")]
    assert len(tensor) > 2 * plots.AUTO_WINDOW_OPS  # a steady-state stretch, not everything
    assert b - a < hi - lo
    assert {pipe for _, pipe in lanes.busy} <= set(plots.LANES)
    assert plots.parse_window("2:7.5") == (2.0, 7.5)
    assert plots.parse_window(None) is None
    for bad in ("7:2", "x", "3", "-1:2"):
        with pytest.raises(TilesimError, match="--window"):
            plots.parse_window(bad)


def test_gantt_needs_a_timeline(tmp_path):
    gpu = load_gpu("h100")
    p = simulate(build("v2", Workload(1, 1, 256, 256, 64), gpu), gpu)
    with pytest.raises(TilesimError, match="timeline=True"):
        plots.gantt(p, tmp_path / "g.png")
    (tmp_path / "bad.json").write_text(json.dumps({"events": []}))
    with pytest.raises(TilesimError, match="traceEvents"):
        plots.gantt(str(tmp_path / "bad.json"), tmp_path / "g.png")
    assert not list(tmp_path.glob("*.png"))


def test_whatif_plot_png(tmp_path):
    gpu = load_gpu("h100")
    res = run_sweep(
        gpu,
        parse_vary(["hbm_bandwidth_Bps=0.5x,1x,2x"], gpu),
        ["standard", "v2"],
        shapes([256], [64], batch=1, heads=2),
    )
    img = load_png(plots.whatif_plot(res, tmp_path / "w.png"))
    assert colour_pixels(img, plots.ALGO_COLOURS[0]) > 50


def test_save_is_atomic(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    fig = Figure()
    fig.add_subplot().plot([1, 2], [3, 4])
    with pytest.raises(TilesimError, match="does not exist"):
        plots.save_figure(fig, tmp_path / "missing" / "x.png")
    with pytest.raises(TilesimError, match=".png, .svg or .pdf"):
        plots.save_figure(fig, tmp_path / "x.gif")

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", boom)
    with pytest.raises(RuntimeError):
        plots.save_figure(fig, tmp_path / "x.png")
    assert list(tmp_path.iterdir()) == []  # no half-written file, no temp file left


def test_plain_file_mode(tmp_path):
    import os

    path = plots.roofline(load_gpu("a100"), [], tmp_path / "m.png")
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_same_figure_same_bytes(tmp_path):
    gpu = load_gpu("a100")
    pts = [plots.RooflinePoint("v2", 100.0, 150.0)]
    a = plots.roofline(gpu, pts, tmp_path / "a.png").read_bytes()
    b = plots.roofline(gpu, pts, tmp_path / "b.png").read_bytes()
    assert a == b
