"""`tilesim predict | compare | trace replay`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import tilesim

runner = CliRunner()
SMALL = ["-b", "1", "-H", "2", "-n", "512", "-d", "64"]


@pytest.fixture(scope="module")
def app():
    from tilesim import cli

    if not any(c.name == "predict" for c in cli.app.registered_commands):
        cli._register()
    return cli.app


def invoke(app, *args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def run_tilesim(*args):
    return subprocess.run(
        [sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=300
    )


def test_predict_table(app):
    out = invoke(app, "predict", "--gpu", "a100", "--algo", "v2", *SMALL).stdout
    for text in ("v2 on NVIDIA A100", "TFLOPS", "bound", "HBM read", "utilisation", "B=1 H=2"):
        assert text in out


def test_predict_table_names_its_clock(app):
    # the time holds at the clock the preset assumes: with a clock model, each launch's
    # own (below the MMA ceiling for a busy v2); without one, the fixed clock, MMA
    # launches at the tensor-core clock, and the what-if clock replaces it
    out = invoke(app, "predict", "--gpu", "h200-cal", "--algo", "v2", *SMALL).stdout
    assert "the clock model's" in out and "at most 1.98 GHz, 1.79 with MMAs" in out
    p = tilesim.predict(gpu="h200-cal", algo="v2", batch=1, heads=2, seqlen=512, head_dim=64)
    assert f"flash_v2 {p.launches[0].clock_hz / 1e9:.2f} GHz" in out
    out = invoke(
        app, "predict", "--gpu", "h200-cal", "--set", "clock_max_hz=0", "--algo", "v2", *SMALL
    ).stdout
    assert "1.68 GHz SM, 1.52 GHz in launches with MMAs (x 0.907)" in out
    out = invoke(app, "predict", "--gpu", "a100", "--algo", "v2", *SMALL).stdout
    assert "1.41 GHz SM" in out


def test_predict_json_is_the_api_prediction(app):
    doc = json.loads(
        invoke(app, "predict", "--algo", "standard", "--causal", *SMALL, "--json").stdout
    )
    p = tilesim.predict(
        gpu="h100", algo="standard", batch=1, heads=2, seqlen=512, head_dim=64, causal=True
    )
    assert doc["time_s"] == p.time_s and doc["hbm_read_bytes"] == p.hbm_read_bytes
    assert doc["workload"]["causal"] is True
    assert [lp["name"] for lp in doc["launches"]] == ["qk", "softmax", "pv"]


def test_predict_what_if_and_config_options(app):
    base = json.loads(invoke(app, "predict", *SMALL, "--json").stdout)
    doc = json.loads(
        invoke(
            app,
            "predict",
            *SMALL,
            "--set",
            "hbm_bandwidth_Bps=2x",
            "--block-n",
            "64",
            "--fidelity",
            "detailed",
            "--json",
        ).stdout
    )
    assert doc["gpu"].startswith("h100_sxm5_80gb.transferred+")
    assert doc["config"]["block_n"] == 64 and doc["fidelity"] == "detailed"
    assert doc["time_s"] != base["time_s"]


def test_predict_writes_a_timeline(app, tmp_path):
    path = tmp_path / "t.json"
    out = invoke(app, "predict", *SMALL, "--timeline", str(path), "--timeline-sms", "2").stdout
    assert "timeline:" in out
    events = json.loads(path.read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1, 2}


def test_compare_grid_json(app):
    doc = json.loads(
        invoke(
            app,
            "compare",
            "--gpu",
            "h100",
            "--seqlens",
            "512,1024",
            "--head-dims",
            "64",
            "--tokens",
            "2048",
            "--jobs",
            "1",
            "--json",
        ).stdout
    )
    rows = doc["rows"]
    assert [(r["seqlen"], r["algo"]) for r in rows] == [
        (n, a) for n in (512, 1024) for a in ("standard", "v1", "v2", "v3")
    ]
    assert {(r["batch"], r["heads"]) for r in rows} == {(4, 32), (2, 32)}
    for r in rows:
        std = next(x for x in rows if x["seqlen"] == r["seqlen"] and x["algo"] == "standard")
        assert r["speedup_vs_standard"] == pytest.approx(std["time_s"] / r["time_s"])
        assert r["time_s"] > 0 and r["hbm_bytes"] > 0 and r["bound"]
    assert doc["notes"] == []


def test_compare_table_skips_what_the_gpu_cannot_run(app):
    result = invoke(
        app,
        "compare",
        "--gpu",
        "a100",
        "--seqlens",
        "512",
        "--head-dims",
        "64",
        "--tokens",
        "1024",
        "--jobs",
        "1",
    )
    assert "standard" in result.stdout and "v2" in result.stdout
    assert " v3 " not in result.stdout
    assert "v3 skipped" in result.output


def test_trace_export_then_replay(app, tmp_path):
    path = tmp_path / "v2.trace.json"
    invoke(app, "trace", "export", "--algo", "v2", *SMALL, "-o", str(path))
    replayed = json.loads(invoke(app, "trace", "replay", str(path), "--json").stdout)
    predicted = json.loads(invoke(app, "predict", "--algo", "v2", *SMALL, "--json").stdout)
    assert replayed["time_s"] == predicted["time_s"]
    assert replayed["algo"] == "v2"
    table = invoke(app, "trace", "replay", str(path), "--gpu", "h200").stdout
    assert "TFLOPS" in table and "H200" in table
    res = runner.invoke(app, ["trace", "replay", str(path), "--gpu", "a100"])
    assert res.exit_code != 0 and "wgmma" in str(res.exception)  # an H100 schedule


@pytest.mark.parametrize(
    "args,needle",
    [
        (["predict", "--fidelity", "rough"], "fidelity"),
        (["predict", "-n", "0"], "seqlen"),
        (["predict", "--algo", "v9"], "v9"),
        (["predict", "--gpu", "a100", "--algo", "v3"], "v3"),
        (["predict", "--timeline", "/nonexistent-dir/t.json"], "does not exist"),
        (["predict", "--timeline-window", "5:1", "--timeline", "t.json"], "timeline-window"),
        (["compare", "--seqlens", "512,abc"], "abc"),
        (["compare", "--gpu", "a100", "--algos", "v2,v3"], "v3"),
        (["compare", "--tokens", "1000"], "multiple"),
        (["trace", "replay", "/nonexistent.trace.json"], "nonexistent"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    res = run_tilesim(*args)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert needle in lines[0]
    assert not (tmp_path / "t.json").exists()


def test_malformed_trace_file_is_rejected(tmp_path):
    path = tmp_path / "bad.trace.json"
    path.write_text(
        json.dumps(
            {
                "format": "tilesim-trace",
                "version": 1,
                "algo": "x",
                "tensors": [],
                "launches": [{"name": "k"}],
            }
        )
    )
    res = run_tilesim("trace", "replay", str(path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error:") and "launches[0]" in res.stderr


def test_predict_gantt_png(app, tmp_path):
    from tests.explain.test_plots import load_png

    out = tmp_path / "g.png"
    invoke(app, "predict", "--gpu", "h100", "--algo", "v3", "--fidelity", "detailed",
           "--gantt", str(out), *SMALL)  # fmt: skip
    load_png(out)  # a real, non-blank picture


def test_predict_gantt_bad_directory_writes_nothing(tmp_path):
    result = run_tilesim("predict", "--gantt", str(tmp_path / "no" / "g.png"), *SMALL)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: --gantt: directory")
    assert list(tmp_path.iterdir()) == []


def test_predict_backward_pass(app):
    def flops(pass_):
        out = invoke(app, "predict", "--algo", "v2", "--pass", pass_, "--json", *SMALL).stdout
        doc = json.loads(out)
        return doc["matmul_flops"], [launch["name"] for launch in doc["launches"]]

    fwd, fwd_launches = flops("fwd")
    bwd, bwd_launches = flops("bwd")
    both, both_launches = flops("fwd_bwd")
    assert bwd_launches == ["bwd_preprocess", "bwd_dkdv", "bwd_dq"]
    assert bwd == 3.5 * fwd  # 5 GEMMs of dK/dV and dQ + S and dP recomputed by the dQ pass
    assert both_launches == fwd_launches + bwd_launches and both == fwd + bwd
    table = invoke(app, "predict", "--algo", "v2", "--pass", "bwd", *SMALL).stdout
    assert "bwd" in table


def test_predict_backward_errors_are_one_line():
    for args, text in (
        (("--algo", "v3", "--pass", "bwd"), "v3 backward is not modelled yet"),
        (("--pass", "sideways"), "unknown pass 'sideways'"),
    ):
        result = run_tilesim("predict", *args, *SMALL)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert text in result.stderr and result.stderr.count("\n") == 1


def test_predict_says_which_launches_were_estimated(app):
    """A config the kernel profile does not hold is estimated, in the JSON and the table."""
    covered = json.loads(invoke(app, "predict", "--gpu", "h200", *SMALL, "--json").stdout)
    assert covered["estimated_launches"] == []
    custom = ["--gpu", "h200", *SMALL, "--block-n", "32"]
    doc = json.loads(invoke(app, "predict", *custom, "--json").stdout)
    assert doc["estimated_launches"] == [
        {"launch": "flash_v2", "why": "no profile entry for this variant"}
    ]
    assert "estimated" in invoke(app, "predict", *custom).stdout
    assert "estimated" not in invoke(app, "predict", "--gpu", "h200", *SMALL).stdout
    ampere = json.loads(invoke(app, "predict", "--gpu", "a100", *SMALL, "--json").stdout)
    assert ampere["estimated_launches"][0]["why"] == "no kernel profile for ampere GPUs"
    none = ["--gpu", "h200", *SMALL, "--profile", "none", "--json"]
    assert json.loads(invoke(app, "predict", *none).stdout)["estimated_launches"]
    named = ["--gpu", "h200", *SMALL, "--profile", "sm90a-triton-3.6", "--json"]
    assert json.loads(invoke(app, "predict", *named).stdout)["time_s"] == covered["time_s"]


def test_predict_names_the_schedule_and_the_kernel_that_runs_it(app):
    args = ("predict", "--gpu", "h200", "--algo", "v3", *SMALL)
    default = json.loads(invoke(app, *args, "--json").stdout)
    assert default["schedule"].startswith("default:")
    assert default["config"]["pingpong"] is False
    fa3 = json.loads(invoke(app, *args, "--config", "fa3", "--json").stdout)
    assert fa3["schedule"].startswith("fa3:") and fa3["config"]["pingpong"] is True
    assert fa3["time_s"] != default["time_s"]
    table = invoke(app, *args, "--config", "fa3", "--num-stages", "4").stdout
    assert "custom: no kernel has run" in table


def test_predict_unknown_config_name_is_one_line():
    result = run_tilesim("predict", "--algo", "v2", "--config", "fa9", *SMALL)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: unknown config 'fa9' (choose from default, fa3, fa2, fa1, fa1-algorithm1, "
        "sdpa-flash)"
    ]
