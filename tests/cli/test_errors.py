"""The CLI's one error path: every bad input is one line on stderr and exit 2, refused
before the work; Ctrl-C is "interrupted" and exit 130; no failure leaves a file."""

from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout

import pytest

from tilesim.cli import main

SMALL = ["-b", "1", "-H", "2", "-n", "512", "-d", "64"]


def run(*args: str) -> tuple[int, str, str]:
    """The CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def assert_one_line(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["predict", "-b", "abc"], "--batch"),
        (["predict", "-n", "nan"], "--seqlen"),
        (["predict", "--bogus"], "No such option: --bogus"),
        (["trace", "show", "--algo"], "--algo"),
        (["roofline"], "--out"),
        (["hw", "show", "a", "b"], "unexpected extra argument"),
        (["nosuchcommand"], "nosuchcommand"),
    ],
)
def test_parsing_errors_are_one_line_naming_the_option(args, fragment):
    code, _, err = run(*args)
    assert_one_line(code, err, fragment)
    assert "╭" not in err and "Usage:" not in err


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["predict", "--set", "sm_count=1e300"], "sm_count must be within [1, 4096]"),
        (["predict", "--set", "sm_count=" + "9" * 25], "sm_count must be within"),
        (["predict", "--set", "hbm_bandwidth_Bps=1e-300"], "hbm_bandwidth_Bps must be within"),
        (["predict", "--set", "hbm_read_efficiency=1e-300"], "hbm_read_efficiency"),
        (["predict", "-b", "1000000000"], "CUDA's grid limit"),
        (["predict", "-n", "1000000"], "seqlen_q must be at most 65536"),
        (["predict", "-n", "9" * 40], "40-digit"),
        (["gantt", "-o", "g.png", "--sms", "1000000"], "--sms"),
        (["whatif", "--vary", "sm_count=1x,1e300x"], "sm_count"),
        # serving shapes
        (["predict", "-H", "8", "--kv-heads", "3"], "heads (8) must be a multiple of kv_heads (3)"),
        (["predict", "-n", "2048", "--seqlen-kv", "1024", "--causal"], "would see no key"),
        (["predict", "--kv-heads", "2", "--algo", "v1"], "grouped-query heads"),
        (["predict", "-b", "2", "--seqlens-kv", "100"], "one KV length per sequence (2)"),
        (["predict", "--seqlens-kv", "1,x"], "--seqlens-kv: 'x' is not an integer"),
        (["predict", "--page-size", "24"], "page_size must be 0 (no pages) or a power of two"),
        (["predict", "--page-size", "16"], "paged (page_size) workloads have no schedule yet"),
        (["predict", "-n", "1", "--seqlen-kv", "4096", "--num-splits", "200"], "num_splits"),
        (["predict", "--algo", "v3", "--num-splits", "2"], "schedule of the v2 forward"),
        (["trace", "show", "--seqlen-kv", "2000000", "-n", "1"], "seqlen_kv must be at most"),
    ],
)
def test_limits_are_refused_before_any_work(args, fragment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    code, _, err = run(*args)
    assert_one_line(code, err, fragment)
    assert time.perf_counter() - start < 10
    assert list(tmp_path.iterdir()) == []


def _outputs(tmp_path, target: str):
    """(command, ...) with each output option pointed at ``target``."""
    return [
        ["roofline", "-o", target, *SMALL],
        ["gantt", "-o", target, "-b", "1", "-H", "1", "-n", "512", "-d", "64"],
        ["predict", "--gantt", target, *SMALL],
        ["predict", "--timeline", target, *SMALL],
        ["trace", "export", "-o", target, *SMALL],
        ["whatif", "--vary", "sm_count=1x,2x", "-n", "512", "-d", "64", "--plot", target,
         "--no-cache"],
        ["calibrate", "--from-results", "x.json", "--preset-out", target],
    ]  # fmt: skip


@pytest.mark.parametrize("where", ["directory", "proc", "missing", "suffix"])
def test_unwritable_outputs_are_refused_first_and_leave_nothing(where, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = {
        "directory": str(tmp_path),
        "proc": "/proc/tilesim-test.png",
        "missing": str(tmp_path / "no" / "out.png"),
        "suffix": str(tmp_path / "out.txt"),
    }[where]
    for args in _outputs(tmp_path, target):
        start = time.perf_counter()
        code, _, err = run(*args)
        assert_one_line(code, err)
        assert time.perf_counter() - start < 5, args  # refused before the work
        assert list(tmp_path.iterdir()) == [], args


def test_a_failing_write_leaves_no_temp_file(tmp_path, monkeypatch):
    from tilesim import atomic

    def boom(fh):
        fh.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic.write_atomic(tmp_path / "x.png", boom)
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_is_interrupted_and_exit_130(monkeypatch):
    import tilesim.commands.show as show

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(show, "simulate", interrupted)
    code, out, err = run("predict", *SMALL)
    assert code == 130 and err == "interrupted\n" and "Traceback" not in out + err


def test_a_newline_in_a_path_stays_on_one_line(tmp_path):
    code, _, err = run("trace", "replay", str(tmp_path / "a\nb.trace.json"))
    assert_one_line(code, err, "\\n")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("min(d)", "min() takes 2 to 64 arguments"),
        ("cdiv(d)", "cdiv() takes 2 arguments"),
        ("+".join(["d"] * 200_000), "characters long"),
        ("-" * 100_000 + "d", "characters long"),
        ("-" * 1000 + "d", "nests deeper"),
        ("9" * 40, "above 2^53"),
        ("d*d*d*d*d*d*d*d*d*d*d*d", "can exceed 2^62"),
    ],
)
def test_trace_expressions_are_bounded_and_exact(text, fragment, tmp_path):
    from tilesim.hwmodels import load_gpu
    from tilesim.traces import build
    from tilesim.traces.files import save
    from tilesim.traces.workload import Workload

    path = save(
        build("v2", Workload(1, 1, 256, 256, 64), load_gpu("h100")), tmp_path / "t.trace.json"
    )
    doc = json.loads(path.read_text())
    doc["params"]["d"] = 1 << 20
    ops = doc["launches"][0]["program"]["roles"][0]["ops"]
    load = next(op for op in ops if op["op"] == "load")
    load["nbytes"] = text
    path.write_text(json.dumps(doc))
    code, _, err = run("trace", "replay", str(path))
    assert_one_line(code, err, fragment, "t.trace.json")


@pytest.mark.parametrize(
    "change, fragment",
    [
        (("issue_per_cta", [1e16, 1e16, 1e16, 1e16]), "issue_per_cta[0]"),
        (("grid", [["m", 1 << 20], ["bh", 1 << 20]]), "CUDA's grid limit"),
    ],
)
def test_trace_sizes_beyond_the_limits_are_refused(change, fragment, tmp_path):
    from tilesim.hwmodels import load_gpu
    from tilesim.traces import build
    from tilesim.traces.files import save
    from tilesim.traces.workload import Workload

    path = save(
        build("v2", Workload(1, 1, 256, 256, 64), load_gpu("h100")), tmp_path / "t.trace.json"
    )
    doc = json.loads(path.read_text())
    doc["launches"][0][change[0]] = change[1]
    path.write_text(json.dumps(doc))
    start = time.perf_counter()
    code, _, err = run("trace", "replay", str(path))
    assert_one_line(code, err, fragment)
    assert time.perf_counter() - start < 10


def test_a_trillion_trips_is_refused_not_allocated(tmp_path):
    from tilesim.hwmodels import load_gpu
    from tilesim.traces import build
    from tilesim.traces.files import save
    from tilesim.traces.workload import Workload

    path = save(
        build("v2", Workload(1, 1, 256, 256, 64), load_gpu("h100")), tmp_path / "t.trace.json"
    )
    doc = json.loads(path.read_text())
    ops = doc["launches"][0]["program"]["roles"][0]["ops"]
    next(op for op in ops if op["op"] == "loop")["trips"] = 10**12
    path.write_text(json.dumps(doc))
    code, _, err = run("trace", "replay", str(path))
    assert_one_line(code, err, "iterations in one CTA")


def test_a_tiny_rate_finishes_instead_of_spinning_at_zero_delay():
    """Float time near 3e10 cycles cannot advance by a transfer's last few bytes."""
    code, out, err = run(
        "predict", "-b", "1", "-H", "1", "-n", "512", "-d", "128", "--json",
        "--set", "tensor_fp16_wgmma_flop_per_clk_per_sm=0.001",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["time_s"] > 10


def test_an_edited_cache_entry_is_recomputed_not_served(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["whatif", "--vary", "sm_count=1x,2x", "-n", "512", "-d", "64", "--algos", "v2",
            "-j", "1", "--json"]  # fmt: skip
    code, first, err = run(*args)
    assert code == 0, err
    entries = sorted((tmp_path / ".tilesim-cache").rglob("*.json"))
    assert entries
    for entry in entries:
        doc = json.loads(entry.read_text())
        doc["prediction"]["time_s"] = -1
        entry.write_text(json.dumps(doc))
    code, second, err = run(*args)
    assert code == 0, err
    assert json.loads(second)["rows"] == json.loads(first)["rows"]
    assert "0 from the cache" in err


def test_help_shows_the_defaults():
    code, out, _ = run("predict", "--help")
    assert code == 0
    for text in ("[default: 4]", "[default: h100]", "[default: fp16]"):
        assert text in " ".join(out.split()), text


@pytest.mark.parametrize(
    "command",
    [
        ("predict",),
        ("compare",),
        ("trace", "replay"),
        ("explain",),
        ("roofline",),
        ("gantt",),
        ("whatif",),
        ("report",),
    ],
)
def test_help_of_every_command_that_prints_bound_defines_each_label(command):
    from tilesim.simulator.prediction import BOUNDS

    code, out, _ = run(*command, "--help")
    assert code == 0
    flat = " ".join(out.split())
    for label, text in BOUNDS.items():
        assert f"{label} {text}" in flat, label


def test_ctrl_c_stops_a_parallel_sweep_at_once(tmp_path):
    """SIGINT to the process group (what a terminal sends): the parent says "interrupted"
    and exits 130 without waiting for the running simulations; workers print nothing."""
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "tilesim", "compare", "--gpu", "h100", "-j", "2"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    time.sleep(4)
    os.killpg(proc.pid, signal.SIGINT)
    start = time.perf_counter()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.decode() == "interrupted\n"
    assert time.perf_counter() - start < 10


def test_the_documented_example_trace_replays():
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "docs" / "example.trace.json"
    code, out, err = run("trace", "replay", str(example), "--json")
    assert code == 0, err
    assert json.loads(out)["time_s"] > 0
