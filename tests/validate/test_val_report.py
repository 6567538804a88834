"""`tilesim report` on synthetic results files whose errors are known by construction.

Measured times are made from the model's own predictions: measured = predicted /
(1 + e), so the report's recomputed error for that point must be exactly e.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tilesim import runner
from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate import merge, report, schema, summary


def predict_point(preset, algo, workload, config, clock_hz=None, counted=False):
    """The model's prediction of one measured point, as `report` makes it."""
    return runner.predict(
        runner.Job(load_gpu(preset), algo, workload, config, clock_hz=clock_hz, counted=counted)
    )


META = {"device": {"name": "NVIDIA H200", "sm_count": 132}, "date": "2026-11-30"}
SHAPES = {
    "a": Workload(1, 2, 256, 256, 64),
    "b": Workload(1, 2, 512, 512, 64, causal=True),
}
# the error each point is built to have, by (shape, algo)
ERRORS = {
    ("a", "standard"): 0.10,
    ("a", "v1"): -0.20,
    ("a", "v2"): 0.05,
    ("a", "v3"): -0.05,
    ("b", "standard"): 0.0,
    ("b", "v1"): 0.30,
    ("b", "v2"): -0.10,
    ("b", "v3"): 0.15,
}
FLASH_ERROR = -0.2


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    gpu = load_gpu("h200")
    root = tmp_path_factory.mktemp("results")
    doc = schema.new_results("validate", META)
    predicted = {}
    for (shape, algo), e in ERRORS.items():
        w = SHAPES[shape]
        cfg = default_config(algo, w, gpu)
        clock_mhz = 1980.0 if algo == "v1" else 1755.0
        # the report predicts each point at the clock read while it was timed
        p = predict_point("h200", algo, w, cfg, clock_hz=clock_mhz * 1e6).time_s
        predicted[(shape, algo)] = p
        # a stored prediction that is wrong on purpose: the report must not use it
        doc["measurements"].append(
            schema.kernel_record(
                algo,
                w,
                cfg,
                "ok",
                time_s=p / (1 + e),
                rel_error=1e-3,
                clock_sm_MHz=clock_mhz,
                predictions={"h200": {"time_s": 123.0}},
            )
        )
    doc["measurements"].append(
        schema.kernel_record(
            "v2",
            SHAPES["a"],
            default_config("v2", SHAPES["a"], gpu),
            "wrong",
            rel_error=0.5,
            note="wrong on purpose",
        )
    )
    vpath = schema.save_results(doc, root / "2026-11-30-h200.json")

    bench = schema.new_results("bench", META)
    w = SHAPES["b"]
    flash = predict_point("h200", "sdpa-flash", w, None).time_s
    bench["measurements"] += [
        schema.kernel_record(
            None, w, None, "ok", time_s=flash / (1 + FLASH_ERROR), impl="sdpa-flash"
        ),
        schema.kernel_record(None, w, None, "ok", time_s=1e-3, impl="sdpa-cudnn"),
        schema.kernel_record(
            "v2", w, default_config("v2", w, gpu), "ok", time_s=1e-3, impl="tilesim-v2"
        ),
    ]
    bpath = schema.save_results(bench, root / "2026-11-30-h200-bench.json")
    return {"validate": vpath, "bench": bpath, "predicted": predicted, "root": root}


@pytest.fixture(scope="module")
def rep(files):
    return report.build_report([files["validate"], files["bench"]], preset="h200")


def test_errors_are_recomputed_exactly(rep):
    assert rep.preset == "h200"
    got = {(p.workload.seqlen_q, p.algo): p.rel_error for p in rep.points}
    for (shape, algo), e in ERRORS.items():
        assert got[(SHAPES[shape].seqlen_q, algo)] == pytest.approx(e, rel=1e-9, abs=1e-12)
    s = rep.summary()
    errs = list(ERRORS.values())
    assert s["overall"]["n"] == len(errs) and s["points"] == len(errs)  # the wrong run is out
    assert s["overall"]["mape_pct"] == pytest.approx(100 * sum(map(abs, errs)) / len(errs))
    assert s["overall"]["signed_mean_pct"] == pytest.approx(100 * sum(errs) / len(errs))
    assert s["overall"]["max_abs_pct"] == pytest.approx(30.0)
    assert s["overall"]["max_abs_point"].startswith("v1 fp16 d=64 N=512 causal")
    assert s["by_algo"]["v1"]["signed_mean_pct"] == pytest.approx(5.0)
    assert s["by_algo"]["v1"]["mape_pct"] == pytest.approx(25.0)
    assert list(s["by_algo"]) == ["standard", "v1", "v2", "v3"]
    assert set(s["by_head_dim"]) == {"64"}
    assert s["by_mask"]["causal"]["n"] == 4
    assert s["clock_sm_MHz"] == {"median": 1755.0, "min": 1755.0, "max": 1980.0}


def test_speedup_ratio_errors(rep):
    # predicted/measured ratio of t_den/t_num is (1 + e_den) / (1 + e_num)
    r = rep.summary()["ratios"]
    for num, den in report.RATIOS:
        expect = [(1 + ERRORS[(s, den)]) / (1 + ERRORS[(s, num)]) - 1 for s in SHAPES]
        got = r[f"{num}/{den}"]
        assert got["n"] == 2
        assert got["signed_mean_pct"] == pytest.approx(100 * sum(expect) / 2)
        assert got["mean_abs_pct"] == pytest.approx(100 * sum(map(abs, expect)) / 2)


def test_fastest_algorithm_share(rep, files):
    agree = 0
    for s in SHAPES:
        algos = ["standard", "v1", "v2", "v3"]
        pred = [files["predicted"][(s, a)] for a in algos]
        meas = [files["predicted"][(s, a)] / (1 + ERRORS[(s, a)]) for a in algos]
        agree += algos[pred.index(min(pred))] == algos[meas.index(min(meas))]
    assert rep.summary()["fastest"] == {"agree": agree, "shapes": 2, "share": agree / 2}


def test_sdpa_flash_predicted_by_its_schedule(rep):
    ext = rep.summary()["external"]
    assert list(ext) == ["sdpa-flash"]  # cudnn has no schedule; tilesim-v2 rows are not external
    assert ext["sdpa-flash"]["n"] == 1
    assert ext["sdpa-flash"]["signed_mean_pct"] == pytest.approx(100 * FLASH_ERROR)
    assert list(rep.summary()["external_by_set"]) == ["grid"]


def test_spearman_is_perfect_when_errors_keep_the_order(files):
    # the same file, but every point off by the same factor: ranks agree exactly
    doc = schema.load_results(files["validate"])
    for row in schema.ok_rows(doc):
        row["time_s"] = 2.0 * files["predicted"][_key(row)]
    path = schema.save_results(doc, files["root"] / "scaled.json")
    s = report.build_report([path], preset="h200").summary()
    assert s["overall"]["spearman"] == pytest.approx(1.0)
    assert s["overall"]["mape_pct"] == pytest.approx(50.0)


def _key(row):
    shape = "a" if row["workload"]["seqlen_q"] == 256 else "b"
    return (shape, row["algo"])


def test_stored_predictions_only_on_request(files):
    rep = report.build_report([files["validate"]], stored=True, preset="h200")
    assert {p.predicted_s for p in rep.points} == {123.0}
    with pytest.raises(Exception, match="drop --stored"):
        report.write_baseline(rep, files["root"] / "acc.json")


def test_algos_filter(files):
    rep = report.build_report([files["validate"], files["bench"]], algos=("v1",))
    assert {p.algo for p in rep.points} == {"v1"} and rep.external == []


def test_png_and_markdown(rep, tmp_path):
    import matplotlib.image as mpimg
    import numpy as np

    png = report.write_png(rep, tmp_path / "acc.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    img = mpimg.imread(png)
    assert img.shape[0] > 400 and img.shape[1] > 400
    assert float(np.std(img[..., :3])) > 0.05  # not a blank canvas
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acc.png"]  # no temp file left

    md = report.to_markdown(rep)
    assert "| figure | value |" in md and "| MAPE |" in md
    assert "| algo | dtype | d | N | mask |" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "| fp16 | 64 |" in ln]
    assert len(rows) == len(ERRORS) + 1  # each point and the SDPA flash run


def test_baseline_round_trip(rep, tmp_path):
    doc = report.write_baseline(rep, tmp_path / "accuracy.json")
    back = report.load_baseline(tmp_path / "accuracy.json")
    assert back == doc
    assert back["mape_pct"] == pytest.approx(rep.summary()["overall"]["mape_pct"], abs=1e-3)
    assert back["by_algo"]["v1"] == {"n": 2, "mape_pct": 25.0}
    assert back["files"] == ["2026-11-30-h200.json", "2026-11-30-h200-bench.json"]
    assert report.load_baseline(tmp_path / "none.json") is None


def test_default_paths_are_every_validate_file_and_the_bench_files_with_externals(tmp_path):
    """Bench files that timed an external kernel the model predicts (one of
    FlashAttention-4 and the API path only has nothing to predict)."""
    w = Workload(1, 16, 1024, 1024, 128)
    for name, kind, impls in (
        ("2026-01-01-h200.json", "validate", ()),
        ("2026-02-01-h200-random3.json", "validate", ()),
        ("2026-01-15-h200-bench.json", "bench", ("sdpa-flash",)),
        ("2026-01-16-h200-bench.json", "bench", ("sdpa-math", "sdpa-cudnn")),
        ("2026-01-17-h200-bench-fa4.json", "bench", ("tilesim-v3", "fa4")),
        ("2026-03-01-h200-calibrate.json", "calibrate", ()),
    ):
        doc = schema.new_results(kind, {})
        doc["measurements"] = [
            schema.kernel_record(None, w, None, "ok", time_s=1e-3, impl=i) for i in impls
        ]
        schema.save_results(doc, tmp_path / name)
    (tmp_path / "accuracy.json").write_text("{}")
    assert [p.name for p in report.default_paths(tmp_path)] == [
        "2026-01-01-h200.json",
        "2026-02-01-h200-random3.json",
        "2026-01-15-h200-bench.json",
        "2026-01-16-h200-bench.json",
    ]


def _rerun(path, out, scale, **meta):
    """The validate file at ``path`` as another run measured it: every time x ``scale``."""
    doc = schema.load_results(path)
    doc["metadata"].update(meta)
    for row in doc["measurements"]:
        if row["status"] == "ok":
            row["time_s"] *= scale
    return schema.save_results(doc, out)


def test_a_point_measured_in_two_runs_is_one_point_with_its_spread(files, rep, tmp_path):
    second = _rerun(files["validate"], tmp_path / "2026-12-01-h200.json", 1.10)
    two = report.build_report([files["validate"], second], preset="h200")
    assert len(two.points) == len(rep.points)  # one point per shape, not one per run
    first = {(p.algo, p.workload): p for p in rep.points}
    for p in two.points:
        one = first[(p.algo, p.workload)]
        assert len(p.runs) == 2
        assert p.measured_s == pytest.approx(one.measured_s * 1.05)  # the mean of the runs
        assert p.spread == pytest.approx(0.10 / 1.05)
        assert p.predicted_s == one.predicted_s  # the same clock in both runs
    sp = two.summary()["by_set"]["grid"]["spread"]
    assert sp["points"] == len(two.points) and sp["runs"] == 2
    assert sp["median_spread_pct"] == pytest.approx(100 * 0.10 / 1.05)
    assert sp["run_scatter_pct"] == pytest.approx(100 * 0.05 / 1.05)
    assert any(k.startswith("runs of grid") for k, _ in report.summary_rows(two.summary()))


def test_a_random_set_is_reported_apart_from_the_grid(files, rep, tmp_path):
    rnd = _rerun(files["validate"], tmp_path / "r.json", 2.0, grid="random", seed=5)
    both = report.build_report([files["validate"], rnd], preset="h200")
    assert len(both.points) == 2 * len(rep.points)  # another set: other points
    sets = both.summary()["by_set"]
    assert list(sets) == ["grid", "random (seed 5)"]
    grid_mape = rep.summary()["overall"]["mape_pct"]
    assert sets["grid"]["overall"]["mape_pct"] == pytest.approx(grid_mape)
    # measured twice as slow: every error e becomes (1 + e) / 2 - 1
    errs = [p.rel_error for p in rep.predicted()]
    want = 100 * sum(abs((1 + e) / 2 - 1) for e in errs) / len(errs)
    assert sets["random (seed 5)"]["overall"]["mape_pct"] == pytest.approx(want)
    assert sets["grid"]["spread"] is None  # one run each
    rows = dict(report.summary_rows(both.summary()))
    assert "MAPE random (seed 5)" in rows and "MAPE grid" in rows


def test_files_without_measurements_are_passed_over_with_a_note(files, tmp_path):
    cal = schema.save_results(schema.new_results("calibrate", {}), tmp_path / "c.json")
    (tmp_path / "regs.json").write_text('{"kind": "registers", "cases": []}')
    got = report.build_report([files["validate"], cal, tmp_path / "regs.json"], preset="h200")
    assert got.files == [files["validate"].name]
    assert got.skipped == ["c.json (kind 'calibrate')", "regs.json (kind 'registers')"]
    r = run_tilesim("report", files["validate"], tmp_path / "regs.json", "--gpu-preset", "h200")
    assert r.returncode == 0, r.stderr
    assert "note: passed over regs.json (kind 'registers'): no kernel measurement" in r.stderr


def test_the_default_preset_is_the_calibrated_one_where_it_exists(files):
    docs = [("v.json", schema.load_results(files["validate"]))]
    assert report.best_preset(docs) == "h200_sxm_141gb.calibrated"
    a100 = {"metadata": {"device": {"name": "NVIDIA A100-SXM4-80GB"}}}
    assert report.best_preset([("a.json", a100)]) == "a100_sxm4_80gb"  # no calibration


def test_merge_keeps_every_measurement(files, tmp_path):
    a = schema.load_results(files["validate"])
    b = json.loads(json.dumps(a))
    b["metadata"]["nvidia_smi_after"] = {"clocks_sm_MHz": 1980.0}
    merged = merge.merge([a, b])
    assert len(merged["measurements"]) == 2 * len(a["measurements"])
    assert merged["metadata"]["nvidia_smi_after"] == {"clocks_sm_MHz": 1980.0}
    schema.check_results(merged, "merged")
    with pytest.raises(Exception, match="different kinds"):
        merge.merge([a, schema.new_results("bench", {})])
    pa = schema.save_results(a, tmp_path / "a.json")
    assert merge.main([str(tmp_path / "m.json"), str(pa), str(tmp_path / "absent.json")]) == 0
    assert not pa.exists() and len(schema.load_results(tmp_path / "m.json")["measurements"]) == 9


def test_run_summary_lines(files, capsys):
    assert summary.main([str(files["root"])]) == 0
    out = capsys.readouterr().out
    assert "validate: 9 points (8 ok, 1 wrong)" in out
    assert "wrong: v2 fp16 d=64 N=256" in out
    assert "bench: 3 runs (3 ok)" in out


# -- the CLI, end to end ------------------------------------------------------------------


def run_tilesim(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tilesim", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_cli_report_writes_json_png_markdown(files, tmp_path):
    r = run_tilesim(
        "report",
        files["validate"],
        files["bench"],
        "--json",
        "--png",
        tmp_path / "p.png",
        "--markdown",
        tmp_path / "r.md",
        "--update-baseline",
        "--baseline",
        tmp_path / "acc.json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["overall"]["n"] == len(ERRORS)
    assert out["baseline"]["mape_pct"] == pytest.approx(out["overall"]["mape_pct"], abs=1e-3)
    assert len(out["points_detail"]) == len(ERRORS) + 1
    for name in ("p.png", "r.md", "acc.json"):
        assert (tmp_path / name).stat().st_size > 0


def test_a_bench_file_alone_reports_its_external_kernels(files):
    alone = report.build_report([files["bench"]], preset="h200")
    assert alone.points == [] and [p.algo for p in alone.external] == ["sdpa-flash"]
    s = alone.summary()
    assert s["overall"]["n"] == 1 and list(s["by_algo"]) == ["sdpa-flash"]
    assert s["overall"]["signed_mean_pct"] == pytest.approx(100 * FLASH_ERROR)


def test_cli_report_table(files):
    r = run_tilesim("report", files["validate"], "--gpu-preset", "h200")
    assert r.returncode == 0, r.stderr
    assert "MAPE" in r.stdout and "Spearman" in r.stdout and "v2/standard" in r.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["report", "/nonexistent/x.json"], "no such file"),
        (["report", "FILE", "--gpu-preset", "h999"], "unknown GPU"),
        (["report", "FILE", "--fidelity", "slow"], "unknown fidelity"),
        (["report", "BENCH", "--timing", "graph"], "no successful measurement"),
        (["report", "FILE", "--png", "/nonexistent/dir/x.png"], "does not exist"),
        (["bench"], "needs a CUDA GPU"),
        (["calibrate"], "needs a CUDA GPU"),
        (["validate", "--quick"], "needs a CUDA GPU"),
        (["bench", "--seqlens", "1k"], "--seqlens: '1k' is not an integer"),
        (["bench", "--impls", "v9"], "unknown implementation"),
        (["bench", "--grid", "random", "--impls", "v2"], "tilesim validate --grid random"),
        (["bench", "--grid", "random", "--pass", "bwd"], "draws forward shapes"),
        (["validate", "--algos", "v9"], "unknown algorithm"),
        (["calibrate", "--only", "disk"], "unknown calibration step"),
        (["calibrate", "--from-results", "BENCH"], "not a calibrate results file"),
        (["calibrate", "--from-results", "/nonexistent/c.json"], "no such file"),
    ],
)
def test_cli_errors_are_one_line_exit_2(files, args, needle):
    subst = {"FILE": files["validate"], "BENCH": files["bench"]}
    r = run_tilesim(*[subst.get(a, a) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_predicting_at_the_preset_clock_changes_the_prediction(files, rep):
    at_preset = report.build_report(
        [files["validate"], files["bench"]], preset="h200", measured_clock=False
    )
    by_key = {(p.workload.seqlen_q, p.algo): p.predicted_s for p in at_preset.points}
    for p in rep.points:
        # every synthetic point was timed at 1755 or 1980 MHz, not the preset's 1830
        assert by_key[(p.workload.seqlen_q, p.algo)] != p.predicted_s
    assert rep.summary()["sm_clock"] == "measured"
    assert at_preset.summary()["sm_clock"] == "preset"


def test_the_accuracy_baseline_beside_the_results_is_passed_over(files, rep, tmp_path):
    baseline = tmp_path / "accuracy.json"
    report.write_baseline(rep, baseline)
    again = report.build_report([files["validate"], files["bench"], baseline], preset="h200")
    assert again.files == rep.files
    assert [p.predicted_s for p in again.points] == [p.predicted_s for p in rep.points]


def test_graph_timing_compares_with_the_graph_replay_and_leaves_out_points_without_it(
    files, rep, tmp_path
):
    doc = schema.load_results(files["validate"])
    ok = [r for r in doc["measurements"] if r["status"] == "ok"]
    for r in ok[:3]:
        r["time_graph_s"] = r["time_s"] / 2  # the host's launch cost gone
    path = schema.save_results(doc, tmp_path / "g.json")
    graph = report.build_report([path], preset="h200", timing="graph")
    assert len(graph.points) == 3
    eager = {(p.algo, p.workload): p for p in rep.points}
    for p in graph.points:
        assert p.measured_s == eager[(p.algo, p.workload)].measured_s / 2
        assert p.predicted_s == eager[(p.algo, p.workload)].predicted_s
    assert graph.summary()["timing"] == "graph"
    with pytest.raises(TilesimError, match="unknown timing"):
        report.build_report([path], preset="h200", timing="lazy")
    with pytest.raises(TilesimError, match="with a CUDA-graph time"):
        report.build_report([files["validate"]], preset="h200", timing="graph")


def test_a_counted_clock_is_predicted_at_where_every_run_counted_one(files, tmp_path):
    doc = schema.load_results(files["validate"])
    ok = [r for r in doc["measurements"] if r["status"] == "ok"]
    for r in ok:
        r["time_graph_s"] = r["time_s"]
    for r in ok[:2]:
        r["clock_counter_MHz"] = 0.8 * r["clock_sm_MHz"]
    one = schema.save_results(doc, tmp_path / "2026-11-30-h200-one.json")
    graph = report.build_report([one], preset="h200", timing="graph")
    counted = [p for p in graph.points if p.counter_MHz]
    assert len(counted) == 2
    for p in counted:
        direct = predict_point(
            "h200", p.algo, p.workload, p.config, clock_hz=p.counter_MHz * 1e6, counted=True
        )
        assert p.predicted_s == direct.time_s
        read = predict_point("h200", p.algo, p.workload, p.config, clock_hz=p.clock_MHz * 1e6)
        assert p.predicted_s != read.time_s
    s = graph.summary()
    assert s["clock_counted"]["points"] == 2
    assert s["clock_counted"]["of"] == len(graph.points)
    for r in s["clock_counted"]["counter_over_smi"].values():
        assert r["median"] == pytest.approx(0.8)
    basis = dict(report.summary_rows(s))["predicted at"]
    assert "cycle counters ran at (2 points; nvidia-smi's reading for" in basis
    # eager times were not taken at the counted clock: they keep nvidia-smi's reading
    eager = report.build_report([one], preset="h200")
    assert not any(p.counter_MHz for p in eager.points)
    assert eager.summary()["clock_counted"] is None
    # a second run of the same points without counters: their mean has no counted clock
    for r in ok:
        r.pop("clock_counter_MHz", None)
    two = schema.save_results(doc, tmp_path / "2026-11-30-h200-two.json")
    both = report.build_report([one, two], preset="h200", timing="graph")
    assert not any(p.counter_MHz for p in both.points)
