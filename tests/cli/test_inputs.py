"""The classes of bad input the outside campaign found (experiments/2026-12-01-bad-input-
campaign): files that are not files, integers too long to read, ranges, options that
mean nothing without another, GPU commands' arguments checked before the GPU, and one
line on a log file or an ASCII terminal."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli.test_errors import SMALL, assert_one_line, run

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "raw"

# every command that reads a file a user names, with that file's place in its arguments
READERS = {
    "report": ["report", "{f}", "-j", "1"],
    "roofline": ["roofline", "-o", "r.png", *SMALL, "--results", "{f}"],
    "calibrate": ["calibrate", "--from-results", "{f}", "--preset-out", "p.toml"],
    "replay": ["trace", "replay", "{f}"],
    "gpu": ["predict", *SMALL, "--gpu", "{f}"],
    "profile": ["predict", *SMALL, "--profile", "{f}"],
    "hw": ["hw", "show", "{f}"],
}


@contextmanager
def deadline(seconds: int):
    """A read that blocks (a FIFO) fails the test instead of hanging it."""

    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _special(kind: str, tmp_path: Path) -> str:
    path = tmp_path / "input.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    else:  # a device: endless (/dev/zero) or empty (/dev/null)
        path.symlink_to(f"/dev/{kind}")
    return str(path)


@pytest.mark.parametrize("kind", ["fifo", "zero", "null", "dir"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_input_that_is_not_a_regular_file_is_refused_before_it_is_read(
    reader, kind, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    path = _special(kind, tmp_path)
    with deadline(20):
        code, _, err = run(*(a.replace("{f}", path) for a in READERS[reader]))
    assert_one_line(code, err, "input.json")
    assert "MemoryError" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.json"]


def _big_int(text: str) -> str:
    """``text`` with its first integer value replaced by one of 5000 digits."""
    return re.sub(r'": \d+([,\n}])', lambda m: '": ' + "9" * 5000 + m.group(1), text, count=1)


@pytest.mark.parametrize(
    "reader, source",
    [
        ("report", RESULTS / "2026-11-30-h200.json"),
        ("calibrate", RESULTS / "2026-11-30-h200-calibrate.json"),
        ("replay", ROOT / "docs" / "example.trace.json"),
        ("profile", ROOT / "profiles" / "sm90a-triton-3.6.json"),
    ],
)
def test_an_integer_of_thousands_of_digits_is_one_line(reader, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "input.json"
    path.write_text(_big_int(source.read_text()))
    code, _, err = run(*(a.replace("{f}", str(path)) for a in READERS[reader]))
    assert_one_line(code, err, "input.json", "thousands of digits")


def test_a_preset_integer_of_thousands_of_digits_is_one_line(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('base = "h100_sxm5_80gb"\nsm_count = ' + "9" * 5000 + "\n")
    code, _, err = run("hw", "show", str(path))
    assert_one_line(code, err, "p.toml", "thousands of digits")


@pytest.mark.parametrize(
    "doc, fragment",
    [
        ("", "not valid JSON"),
        ("[]", "a JSON object"),
        ('{"kind": "kernel-profile", "schema_version": 1}', "name must be a string"),
    ],
)
def test_a_malformed_profile_is_one_line(doc, fragment, tmp_path):
    path = tmp_path / "prof.json"
    path.write_text(doc)
    code, _, err = run("predict", *SMALL, "--profile", str(path))
    assert_one_line(code, err, fragment)


def _profile_doc() -> dict:
    doc = json.loads((ROOT / "profiles" / "sm90a-triton-3.6.json").read_text())
    doc["entries"] = doc["entries"][:2]
    return doc


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda e: e.update(registers_per_thread=10**9), "registers_per_thread"),
        (lambda e: e.update(registers_per_thread="64"), "registers_per_thread must be int"),
        (lambda e: e.update(issue_per_cta_cycles=[1e16, 1, 1, 1]), "issue_per_cta_cycles"),
        (lambda e: e["variant"].update(head_dim="64"), "variant.head_dim must be int"),
        (lambda e: e.pop("kernel"), "missing field 'kernel'"),
    ],
)
def test_a_profile_entry_of_the_wrong_type_or_range_names_its_field(edit, fragment):
    from tilesim.errors import TilesimError
    from tilesim.profiles.profile import from_dict

    doc = _profile_doc()
    edit(doc["entries"][1])
    with pytest.raises(TilesimError, match=r"entries\[1\]") as info:
        from_dict(doc)
    assert fragment in str(info.value)


# -- results files: ranges ----------------------------------------------------------------


def _results(tmp_path: Path, edit) -> str:
    doc = json.loads((RESULTS / "2026-11-30-h200.json").read_text())
    doc["measurements"] = [m for m in doc["measurements"] if m["status"] == "ok"][:2]
    edit(doc["measurements"][0])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda m: m.update(clock_sm_MHz=1e300), "clock_sm_MHz must be within"),
        (lambda m: m.update(time_s=1e-300), "time_s must be within"),
        (lambda m: m.update(time_medians_s=[1e9]), "time_medians_s[0] must be within"),
        (lambda m: m.update(algo="v9"), "algo is 'v9'"),
    ],
)
def test_a_results_value_out_of_range_names_its_field(edit, fragment, tmp_path):
    code, _, err = run("report", _results(tmp_path, edit), "--stored")
    assert_one_line(code, err, "measurements[0].", fragment)


def _calibration(tmp_path: Path, edit) -> str:
    doc = json.loads((RESULTS / "2026-11-30-h200-calibrate.json").read_text())
    edit(doc)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _set_figure(name, value):
    def edit(doc):
        next(r for r in doc["measurements"] if r["name"] == name)["value"] = value

    return edit


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (_set_figure("device_sm_count", 1e300), "must be within [1, 4096] SMs"),
        (_set_figure("hbm_read", 1e30), "B/s"),
        (_set_figure("hbm_latency", 1e-300), "value must be within"),
        (lambda d: d.update(measurements=[]), "no micro-benchmark figure"),
        (lambda d: d["metadata"].update(base_preset="x100"), "metadata.base_preset"),
        (lambda d: d["metadata"].update(base_preset=7), "metadata.base_preset"),
    ],
)
def test_calibrate_from_results_refuses_figures_it_cannot_derive_from(edit, fragment, tmp_path):
    path = _calibration(tmp_path, edit)
    code, _, err = run("calibrate", "--from-results", path, "--preset-out", str(tmp_path / "p.t"
                       "oml"))  # fmt: skip
    assert_one_line(code, err, fragment)
    assert not (tmp_path / "p.toml").exists()


def test_a_preset_based_on_an_unknown_preset_names_its_file(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('base = "x100"\nsm_count = 66\n')
    code, _, err = run("hw", "show", str(path))
    assert_one_line(code, err, "mine.toml: key 'base': unknown GPU 'x100'")


# -- options --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-3", "1025", "9" * 400])
@pytest.mark.parametrize(
    "command",
    [
        ["compare", "--seqlens", "256", "--head-dims", "64", "--tokens", "256", "--hidden", "64"],
        ["explain", "-n", "256", "-d", "64", "-b", "1", "-H", "1"],
        ["whatif", "--vary", "sm_count=1x,2x", "-n", "256", "-d", "64", "--no-cache"],
        ["roofline", "-o", "r.png", *SMALL],
        ["report", str(RESULTS / "2026-11-30-h200.json"), "--stored"],
    ],
)
def test_jobs_outside_one_to_1024_are_refused_by_every_command(
    command, value, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(*command, "-j", value)
    assert_one_line(code, err, "--jobs must be within [1, 1024]")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["whatif", "--vary", "sm_count=1x,2x", "-n", "256", "-b", "0", "--no-cache"], "batch"),
        (["whatif", "--vary", "sm_count=1x,2x", "-n", "256", "-H", "0", "--no-cache"], "heads"),
        (["explain", "-n", "256", "-d", "64", "-b", "0", "-j", "1"], "batch"),
        (["explain", "-n", "256", "-d", "64", "--seqlen-kv", "0", "-j", "1"], "seqlen_kv"),
    ],
)
def test_a_zero_size_is_refused_not_taken_for_the_default(args, fragment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(*args)
    assert_one_line(code, err, fragment, "positive")


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([*SMALL, "--timeline-window", "0:5"], "--timeline-window needs --timeline"),
        ([*SMALL, "--timeline-sms", "2"], "--timeline-sms needs --timeline"),
        ([*SMALL, "--timeline", "t.json", "--timeline-window", "0:1e999"], "--timeline-window"),
        ([*SMALL, "--persistent"], "--persistent is a v3 schedule"),
        ([*SMALL, "--algo", "v1", "--pingpong"], "--pingpong is a v3 schedule"),
        ([*SMALL, "--algo", "standard", "--warp-specialize"], "--warp-specialize"),
    ],
)
def test_an_option_that_would_change_nothing_is_refused(args, fragment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run("predict", *args)
    assert_one_line(code, err, fragment)
    assert list(tmp_path.iterdir()) == []


def test_the_two_window_options_read_windows_alike():
    code_a, _, err_a = run("predict", *SMALL, "--timeline", "t.json", "--timeline-window", "2:1")
    code_b, _, err_b = run("gantt", "-o", "g.png", *SMALL, "--window", "2:1")
    assert_one_line(code_a, err_a, "--timeline-window expects START:END")
    assert_one_line(code_b, err_b, "--window expects START:END")


def test_a_sweep_of_an_algorithm_the_gpu_cannot_run_is_refused_up_front(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run("whatif", "--gpu", "a100", "--vary", "sm_count=1x,2x", "--algos", "v3",
                       "-n", "256", "-d", "64", "--plot", "w.png")  # fmt: skip
    assert_one_line(code, err, "v3 needs Hopper")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["bench", "--warmup-ms", "nan"], "--warmup-ms"),
        (["bench", "--rep-ms", "-1"], "--rep-ms"),
        (["bench", "--time-budget-s", "inf"], "--time-budget-s"),
        (["bench", "--grid", "random", "--points", "-1"], "--points"),
        (["bench", "--head-dims", "96"], "--head-dims: 96"),
        (["validate", "--points", "9" * 400], "400-digit"),
        (["validate", "--seed", "-1"], "--seed"),
        (["validate", "--workers", "5000"], "--workers"),
        (["validate", "--presets", "nope"], "unknown GPU 'nope'"),
        (["validate", "--rep-ms", "0"], "--rep-ms"),
        (["calibrate", "--base", "x100"], "unknown GPU 'x100'"),
    ],
)
def test_gpu_commands_name_a_bad_argument_before_looking_for_the_gpu(args, fragment):
    code, _, err = run(*args)
    assert_one_line(code, err, fragment)
    assert "CUDA" not in err


def test_an_output_name_too_long_names_its_option(tmp_path):
    code, _, err = run("trace", "export", *SMALL, "-o", str(tmp_path / ("x" * 300 + ".trace.json")))
    assert_one_line(code, err, "--output: cannot write")


def test_a_very_long_message_is_cut_in_the_middle():
    code, _, err = run("predict", "--gpu", "x" * 100_000)
    assert_one_line(code, err, "characters ...]")
    assert len(err) < 1000


# -- the process: a log file, an ASCII terminal ----------------------------------------------


def _tilesim(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})}, cwd=cwd,
    )  # fmt: skip


def test_report_on_a_log_file_fails_in_exactly_one_line(tmp_path):
    """No progress bar on a stderr that is not a terminal, nor the blank line it leaves."""
    r = _tilesim("report", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and r.stderr == f"error: {tmp_path / 'missing.json'}: no such file\n"


def test_an_ascii_terminal_gets_escapes_not_a_crash(tmp_path):
    r = _tilesim("predict", *SMALL, env={"PYTHONIOENCODING": "ascii"}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "\\xb5s" in r.stdout  # µs
