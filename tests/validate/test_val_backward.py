"""Validation and bench of the backward pass (issue 7), on the CPU.

The GPU paths are exercised with the timing mocked (do_bench needs CUDA) and, where
torch and triton are installed, with the real kernels under the Triton interpreter
and the real float32 autograd check.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from tilesim import runner
from tilesim.commands import gpu_options as gpu_cmd
from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import PAPER_HIDDEN, PAPER_TOKENS, Workload
from tilesim.validate import grid, report, schema, summary
from tilesim.validate.gpu import bench, run, timing


def predict_point(preset, algo, workload, config, clock_hz=None, counted=False):
    """The model's prediction of one measured point, as `report` makes it."""
    return runner.predict(
        runner.Job(load_gpu(preset), algo, workload, config, clock_hz=clock_hz, counted=counted)
    )


HAS_KERNELS = all(importlib.util.find_spec(m) for m in ("torch", "triton"))
needs_kernels = pytest.mark.skipif(not HAS_KERNELS, reason="needs torch and triton")


@pytest.fixture(scope="module")
def h200():
    return load_gpu("h200")


# -- the grid -------------------------------------------------------------------------


def test_backward_grid(h200):
    fwd = grid.validate_grid(h200, spot_checks=False)
    both = grid.validate_grid(h200, spot_checks=False, passes=("fwd", "bwd"))
    assert both[: len(fwd)] == fwd  # the forward's points first, unchanged
    bwd = both[len(fwd) :]
    assert bwd == grid.validate_grid(h200, spot_checks=False, passes=("bwd",))
    # v2 first (the target), then standard, then v1, v3 has no backward
    algos = list(dict.fromkeys(p.algo for p in bwd))
    assert algos == ["v2", "standard", "v1"]
    n = len(grid.VALIDATE_SEQLENS) * len(grid.HEAD_DIMS) * len(grid.CAUSAL)
    counts = {a: sum(p.algo == a for p in bwd) for a in algos}
    assert counts == {"v2": n, "standard": n, "v1": n}  # v1's released backward: every N
    for p in bwd:
        w = p.workload
        assert w.pass_ == "bwd" and w.dtype == "fp16" and p.group == "bwd"
        assert w.batch * w.seqlen_q == PAPER_TOKENS and w.heads * w.head_dim == PAPER_HIDDEN
        # the backward's own tiles, as the kernel runs them (smaller than the forward's)
        assert p.config == default_config(p.algo, w, h200)
        assert p.config == default_config(p.algo, w, h200)
        assert "bwd" in p.label
    for algo in algos:
        assert max(p.workload.seqlen_q for p in bwd if p.algo == algo) == 16384
    with pytest.raises(TilesimError, match="unknown pass 'both'"):
        grid.validate_grid(h200, passes=("both",))


def test_forward_backward_grid(h200):
    # the backward's shapes again, timed forward + backward; no config: each pass runs
    # (and build predicts it with) its own default, as attention(...).backward() does
    bwd = grid.validate_grid(h200, spot_checks=False, passes=("bwd",))
    fb = grid.validate_grid(h200, spot_checks=False, passes=("fwd_bwd",))
    assert [(p.algo, dataclasses.replace(p.workload, pass_="bwd")) for p in fb] == [
        (p.algo, p.workload) for p in bwd
    ]
    assert all(p.config is None and p.group == "fwd_bwd" for p in fb)
    assert all(p.workload.pass_ == "fwd_bwd" and "fwd_bwd" in p.label for p in fb)
    row = schema.kernel_record(fb[0].algo, fb[0].workload, None, "ok", time_s=1e-3)
    assert schema.config_from_record(row) is None
    doc = schema.new_results("validate", {})
    doc["measurements"].append(row)
    schema.check_results(doc, "fwd_bwd")  # a fwd_bwd row may leave its config out
    with pytest.raises(TilesimError, match="config must be an object"):
        schema.config_from_record({**row, "workload": bwd[0].workload.to_dict()})


def test_backward_bench_shapes_and_impls():
    shapes = grid.bench_shapes((1024,), (128,), (False,), pass_="bwd")
    assert [s.workload.pass_ for s in shapes] == ["bwd"]
    assert shapes[0].label.startswith("bwd fp16")
    assert bench.parse_impls(None, "bwd") == bench.BACKWARD_IMPLS
    assert "tilesim-v3" not in bench.BACKWARD_IMPLS and "sdpa-math" not in bench.BACKWARD_IMPLS
    assert bench.parse_impls("v2,sdpa-flash", "bwd") == ("tilesim-v2", "sdpa-flash")
    with pytest.raises(TilesimError, match="no backward kernel"):
        bench.parse_impls("v3", "bwd")


def test_pass_options():
    assert gpu_cmd.parse_validate_pass("all") == ("fwd", "bwd")
    assert gpu_cmd.parse_validate_pass(" BWD ") == ("bwd",)
    assert gpu_cmd.parse_bench_pass("bwd") == "bwd"
    for bad in ("fwd_bwd", "back"):
        with pytest.raises(TilesimError, match="--pass"):
            gpu_cmd.parse_bench_pass(bad)
    assert gpu_cmd.parse_validate_pass("fwd_bwd") == ("fwd_bwd",)
    with pytest.raises(TilesimError, match="--pass must be fwd, bwd, fwd_bwd or all"):
        gpu_cmd.parse_validate_pass("both")


def test_backward_flops_convention():
    w = Workload(2, 4, 1024, 1024, 64)
    fwd = 4 * 2 * 4 * 1024 * 1024 * 64
    assert schema.attention_flops(w) == fwd
    assert schema.attention_flops(dataclasses.replace(w, pass_="bwd")) == 2.5 * fwd
    assert schema.attention_flops(dataclasses.replace(w, pass_="fwd_bwd")) == 3.5 * fwd
    c = dataclasses.replace(w, pass_="bwd", causal=True)
    assert schema.attention_flops(c) == 1.25 * fwd
    row = schema.kernel_record("v2", c, None, "ok", time_s=1e-3)
    assert row["tflops"] == 1.25 * fwd / 1e-3 / 1e12
    assert row["workload"]["pass_"] == "bwd"  # the schema records the pass


# -- run._measure_backward with the GPU parts mocked ------------------------------------


class _Sampler:
    def between(self, a, b):
        return [1980.0]


def test_measure_backward_records_parts_and_checks_first(monkeypatch, h200):
    torch = pytest.importorskip("torch")
    w = Workload(1, 2, 256, 256, 64, pass_="bwd")
    point = grid.GridPoint("v2", w, default_config("v2", w, h200), "bwd")
    calls = []
    grads = ("dq", "dk", "dv")
    runs = [("v2_bwd_preprocess", None), ("v2_bwd_dkdv", None), ("v2_bwd_dq", None)]
    monkeypatch.setattr(timing, "make_inputs", lambda w, seed: ("q", "k", "v", {}))
    monkeypatch.setattr(timing, "make_grad_output", lambda w, seed: "do")

    def backward_run(algo, q, k, v, do, causal, config):
        calls.append(("launches", algo, do, causal, config))
        return grads, "run", runs

    def check(run_, q, k, v, do, causal, g):
        calls.append(("check", run_, g))
        return errors.pop(0)

    def repeat(run_, warmup, rep):
        calls.append(("time", run_))
        return 2e-3, [2e-3, 2.1e-3]

    monkeypatch.setattr(timing, "backward_run", backward_run)
    monkeypatch.setattr(timing, "check_grads", check)

    def graph(run_, warmup, rep):
        calls.append(("graph", run_))
        return 1.5e-3

    monkeypatch.setattr(timing, "bench_repeat", repeat)
    monkeypatch.setattr(timing, "bench_graph_s", graph)
    monkeypatch.setattr(timing, "bench_parts", lambda r, a, b: {n: 1e-3 for n, _ in r})
    errors = [4e-4, 0.5]
    row = run._measure(point, 0, 10, 40, torch, _Sampler())
    # the gradients are checked before anything is timed, on the kernel's own buffers
    assert [c[0] for c in calls] == ["launches", "check", "time", "graph"]
    assert row["time_graph_s"] == 1.5e-3
    assert calls[0] == ("launches", "v2", "do", False, point.config)
    assert calls[1] == ("check", "run", grads)
    assert row["status"] == "ok" and row["time_s"] == 2e-3 and row["rel_error"] == 4e-4
    assert row["parts"] == {n: 1e-3 for n, _ in runs}
    assert row["workload"]["pass_"] == "bwd" and row["clock_sm_MHz"] == 1980.0
    assert row["tflops"] == schema.attention_flops(w) / 2e-3 / 1e12
    calls.clear()
    wrong = run._measure(point, 0, 10, 40, torch, _Sampler())
    assert wrong["status"] == "wrong" and "grad rel. error 0.5" in wrong["note"]
    assert [c[0] for c in calls] == ["launches", "check"]  # a wrong kernel is not timed


def test_backward_point_is_predicted_with_the_backward_schedule(h200):
    import tilesim

    w = Workload(1, 2, 512, 512, 128, causal=True, pass_="bwd")
    cfg = default_config("v2", w, h200)
    pred = predict_point("h200", "v2", w, cfg)
    direct = tilesim.predict(
        gpu="h200", algo="v2", batch=1, heads=2, seqlen=512, head_dim=128, causal=True, pass_="bwd"
    )
    assert pred.time_s == direct.time_s
    fwd = predict_point("h200", "v2", dataclasses.replace(w, pass_="fwd"), cfg)
    assert fwd.time_s < pred.time_s


# -- the real helpers, on the CPU (Triton interpreter) ------------------------------------


@needs_kernels
def test_backward_run_and_check_grads_on_the_cpu(h200):
    import torch

    w = Workload(1, 2, 96, 96, 64, causal=True, pass_="bwd")
    gen = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(1, 2, 96, 64, generator=gen).to(torch.float16) for _ in range(4))
    grads, run_, runs = timing.backward_run(
        "v2", q, k, v, do, True, default_config("v2", w, h200).replace(mma_path="mma_sync")
    )
    assert [n for n, _ in runs] == ["v2_bwd_preprocess", "v2_bwd_dkdv", "v2_bwd_dq"]
    err = timing.check_grads(run_, q, k, v, do, True, grads)
    assert err < timing.GRAD_TOLERANCE["fp16"] / 10
    # a backward that forgets dv: the NaN the check poisoned it with shows up
    calls = tuple(c for _, c in runs[:2])  # no dq launch: dq stays NaN

    def broken():
        for c in calls:
            c()
        return grads

    assert timing.check_grads(broken, q, k, v, do, True, grads) == float("inf")
    # and gradients of the wrong mask are far off
    assert timing.check_grads(run_, q, k, v, do, False, grads) > 0.05


@needs_kernels
def test_sdpa_backward_run_matches_autograd():
    import torch

    gen = torch.Generator().manual_seed(5)
    q, k, v, do = (torch.randn(1, 2, 64, 64, generator=gen) for _ in range(4))
    q, k, v, do = (t.to(torch.float32) for t in (q, k, v, do))
    run_, ctx = bench._sdpa_backward_run("math", q, k, v, do, True, torch)
    with ctx:
        err = timing.check_grads(run_, q, k, v, do, True)
        again = timing.check_grads(run_, q, k, v, do, True)  # the retained graph runs again
    assert err < 1e-4 and again == err
    assert timing.check_grads(run_, q, k, v, do, False) > 0.05


# -- report: per pass ---------------------------------------------------------------------

META = {"device": {"name": "NVIDIA H200", "sm_count": 132}, "date": "2026-11-30"}
FWD_ERRORS = {("standard", 512): 0.10, ("v2", 512): -0.20, ("v2", 256): 0.05}
BWD_ERRORS = {("standard", 512): -0.30, ("v2", 512): 0.12, ("v1", 256): 0.06}


@pytest.fixture(scope="module")
def results(tmp_path_factory, h200):
    root = tmp_path_factory.mktemp("bwd-results")
    doc = schema.new_results("validate", META)
    for pass_, errors in (("fwd", FWD_ERRORS), ("bwd", BWD_ERRORS)):
        for (algo, n), e in errors.items():
            w = Workload(1, 2, n, n, 64, pass_=pass_)
            cfg = default_config(algo, w, h200)
            p = predict_point("h200", algo, w, cfg, clock_hz=1980e6).time_s
            doc["measurements"].append(
                schema.kernel_record(
                    algo, w, cfg, "ok", time_s=p / (1 + e), clock_sm_MHz=1980.0, parts={}
                )
            )
    path = schema.save_results(doc, root / "2026-11-30-h200.json")
    return path


def _mape(errors):
    return 100 * sum(abs(e) for e in errors) / len(errors)


def test_report_groups_by_pass(results):
    rep = report.build_report([results], preset="h200")
    s = rep.summary()
    assert s["by_pass"]["fwd"]["mape_pct"] == pytest.approx(_mape(FWD_ERRORS.values()))
    assert s["by_pass"]["bwd"]["mape_pct"] == pytest.approx(_mape(BWD_ERRORS.values()))
    assert s["by_pass"]["bwd"]["n"] == 3
    # by_algo stays the forward's: what the accuracy guard holds per algorithm
    assert s["by_algo"]["v2"]["mape_pct"] == pytest.approx(_mape([-0.20, 0.05]))
    assert "v1" not in s["by_algo"]
    assert s["by_pass_algo"]["bwd"]["standard"]["signed_mean_pct"] == pytest.approx(-30)
    # a speed-up ratio compares one pass's points only (v2 / standard at N=512, per pass)
    r = s["ratios"]["v2/standard"]
    assert r["n"] == 2
    rows = dict(report.summary_rows(s))
    assert "target <= 15%" in rows["MAPE bwd"]
    groups = {(g, n) for g, n, *_ in report.group_rows(s)}
    assert ("algorithm (bwd)", "v1") in groups and ("pass", "bwd") in groups
    md = report.to_markdown(rep)
    assert "| v1 bwd | fp16 | 64 | 256 |" in md


def test_report_filters_and_baseline(results, tmp_path):
    fwd_only = report.build_report([results], preset="h200", algos=("v2",))
    assert [p.workload.pass_ for p in fwd_only.points] == ["fwd", "fwd"]
    bwd_only = report.build_report([results], preset="h200", passes=("bwd",))
    assert sorted(p.algo for p in bwd_only.points) == ["standard", "v1", "v2"]
    both = report.build_report([results], preset="h200", algos=("v2",), passes=("fwd", "bwd"))
    assert len(both.points) == 3
    doc = report.write_baseline(report.build_report([results], preset="h200"), tmp_path / "a.json")
    assert doc["by_algo"]["v2"]["n"] == 2  # forward only: test_accuracy's per-algo guard
    assert doc["by_pass"]["bwd"]["mape_pct"] == pytest.approx(_mape(BWD_ERRORS.values()), abs=1e-3)
    assert doc["by_pass_algo"]["bwd"]["v1"]["n"] == 1


def test_summary_and_table_name_the_pass(tmp_path):
    doc = schema.new_results("bench", META)
    w = Workload(2, 16, 8192, 8192, 128)
    b = dataclasses.replace(w, pass_="bwd")
    doc["measurements"] += [
        schema.kernel_record("v2", w, None, "ok", time_s=1e-3, impl="tilesim-v2"),
        schema.kernel_record("v2", b, None, "ok", time_s=2.5e-3, impl="tilesim-v2"),
    ]
    header, rows = bench.tflops_table(doc)
    assert header[0] == "pass" and [r[0] for r in rows] == ["fwd", "bwd"]
    assert rows[0][-1] == rows[1][-1]  # 2.5x the FLOPs in 2.5x the time
    lines = summary.summarize_bench(doc)
    assert any(line.startswith("  bwd d=128 N=8192 full") for line in lines)


# -- report: the backward's launches, each timed on its own -------------------------------


def test_launch_pairs_match_kernel_and_trace_names():
    def point(measured, predicted):
        w = Workload(1, 2, 256, 256, 64, pass_="bwd")
        return report.Point(
            "f", "v1", "v1", w, None, 1.0, parts_measured=measured, parts_predicted=predicted
        )

    # the kernel API names the launch "v1_bwd", the trace "flash_v1_bwd"
    assert report.launch_pairs(point({"v1_bwd": 2.0}, {"flash_v1_bwd": 3.0})) == [
        ("flash_v1_bwd", 3.0, 2.0)
    ]
    two = point({"v2_bwd_dq": 1.0, "v2_bwd_dkdv": 2.0}, {"bwd_dkdv": 4.0, "bwd_dq": 0.5})
    assert sorted(report.launch_pairs(two)) == [("bwd_dkdv", 4.0, 2.0), ("bwd_dq", 0.5, 1.0)]
    # a forward-and-backward point's "forward" part has no launch of its own: no pairs
    assert report.launch_pairs(point({"forward": 1.0, "v1_bwd": 2.0}, {"flash_v1_bwd": 3.0})) == []
    assert report.launch_pairs(point({}, {"flash_v1_bwd": 3.0})) == []


def test_report_errors_per_launch(tmp_path, h200):
    # v2's backward: each launch measured at a known error against its own prediction
    w = Workload(1, 2, 512, 512, 64, pass_="bwd")
    cfg = default_config("v2", w, h200)
    pred = predict_point("h200", "v2", w, cfg, clock_hz=1980e6)
    errors = {"bwd_preprocess": 0.5, "bwd_dkdv": -0.2, "bwd_dq": 0.1}
    launches = {launch.name: launch.time_s for launch in pred.launches}
    assert set(launches) == set(errors)
    parts = {f"v2_{k}": launches[k] / (1 + e) for k, e in errors.items()}
    doc = schema.new_results("validate", META)
    doc["measurements"].append(
        schema.kernel_record(
            "v2", w, cfg, "ok", time_s=sum(parts.values()), clock_sm_MHz=1980.0, parts=parts
        )
    )
    path = schema.save_results(doc, tmp_path / "2026-11-30-h200.json")
    s = report.build_report([path], preset="h200").summary()
    for launch, e in errors.items():
        got = s["by_launch"][f"v2 {launch}"]
        assert got["n"] == 1
        assert got["signed_mean_pct"] == pytest.approx(100 * e)
    rows = {(g, n): mape for g, n, _, mape, *_ in report.group_rows(s)}
    assert rows[("launch", "v2 bwd_dkdv")] == "20.0%"
