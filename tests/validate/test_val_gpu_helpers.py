"""The CPU-side logic of the GPU commands: option parsing, repeated timing, tables."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tilesim.commands import gpu_options as gpu_cmd
from tilesim.commands.common import int_list
from tilesim.errors import TilesimError
from tilesim.traces.workload import Workload
from tilesim.validate import calibrate, schema
from tilesim.validate.gpu import bench, timing


def test_parse_impls():
    assert bench.parse_impls(None) == bench.IMPLS
    assert bench.parse_impls("v2, sdpa-flash,v2") == ("tilesim-v2", "sdpa-flash")
    with pytest.raises(TilesimError, match="unknown implementation 'flash'"):
        bench.parse_impls("flash")
    assert bench.parse_impls("v3,sdpa-cudnn,fa4") == ("tilesim-v3", "sdpa-cudnn", "fa4")
    assert "fa4" not in bench.BACKWARD_IMPLS
    with pytest.raises(TilesimError, match="fa4 is benched forward only"):
        bench.parse_impls("fa4", "bwd")


def test_parse_options():
    assert int_list("512, 1024", "--seqlens", ()) == (512, 1024)
    assert int_list(None, "--seqlens", (7,)) == (7,)
    for bad in ("", "0", "a,b", "-4"):
        with pytest.raises(TilesimError, match="--seqlens"):
            int_list(bad, "--seqlens", ())
    assert gpu_cmd.parse_mask("both") == (False, True)
    with pytest.raises(TilesimError, match="--mask"):
        gpu_cmd.parse_mask("half")


def test_calibration_steps():
    assert calibrate.check_steps(None) == calibrate.STEPS
    assert calibrate.check_steps(["launch", "hbm"]) == ("hbm", "launch")  # run order kept
    with pytest.raises(TilesimError, match="unknown calibration step"):
        calibrate.check_steps(["disk"])


def test_every_calibration_step_has_its_function_in_run_order():
    pytest.importorskip("triton")
    from tilesim.validate.gpu.calibrate import STEP_FUNCTIONS

    assert tuple(key for key, _, _ in STEP_FUNCTIONS) == calibrate.STEPS


def test_repeated_timing_keeps_the_fastest_median(monkeypatch):
    times = iter([2e-3, 1.5e-3])
    monkeypatch.setattr(timing, "bench_s", lambda fn, w, r: next(times))
    assert timing.bench_repeat(None, 10, 40) == (1.5e-3, [2e-3, 1.5e-3])
    # a long kernel is timed once: its one median already spans many runs
    times = iter([0.5, 0.1])
    assert timing.bench_repeat(None, 10, 40) == (0.5, [0.5])


def test_scratch_sizes():
    w = Workload(1, 16, 16384, 16384, 128)
    assert timing.standard_scratch_bytes(w) == 2 * 16 * 16384 * 16384 * 2
    assert timing.TOLERANCE["fp16"] < timing.TOLERANCE["bf16"] < timing.TOLERANCE["fp8"]


def test_tflops_table():
    doc = schema.new_results("bench", {})
    w = Workload(4, 16, 4096, 4096, 128)
    doc["measurements"] += [
        schema.kernel_record("v2", w, None, "ok", time_s=1e-3, impl="tilesim-v2"),
        schema.kernel_record(None, w, None, "error", impl="sdpa-cudnn", note="x"),
    ]
    header, rows = bench.tflops_table(doc)
    assert header == ["d", "mask", "N", "tilesim-v2", "sdpa-cudnn"]
    # 4·B·H·N²·d / 1 ms
    assert rows == [
        ["128", "full", "4096", f"{4 * 4 * 16 * 4096**2 * 128 / 1e-3 / 1e12:.0f}", "error"]
    ]


def test_tflops_table_shows_the_api_path_beside_the_launches():
    doc = schema.new_results("bench", {})
    w = Workload(4, 16, 4096, 4096, 128)
    api = {"api_time_s": 2e-3, "api_tflops": 17.2, "api_host_s": 12.3e-6, "launch_host_s": 8e-6}
    doc["measurements"] += [
        schema.kernel_record("v3", w, None, "ok", time_s=1e-3, impl="tilesim-v3", **api),
        schema.kernel_record(None, w, None, "skipped", impl="fa4", note="not installed"),
    ]
    header, rows = bench.tflops_table(doc)
    assert header[-4:] == ["tilesim-v3", "fa4", "tilesim-v3 API", "tilesim-v3 API µs"]
    assert rows[0][-3:] == ["skipped", "17", "12.3"]


def test_host_time_is_per_call(monkeypatch):
    import sys
    import types

    calls = []
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert timing.host_s(lambda: calls.append(1), calls=10, rounds=3) >= 0
    assert len(calls) == 1 + 10 * 3


VALIDATE_DIR = Path(__file__).resolve().parents[2] / "validate" / "gpu"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("name", ["run.sh", "validate.sh", "steps.sh"])
def test_gpu_scripts_parse(name):
    r = subprocess.run(["bash", "-n", str(VALIDATE_DIR / name)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(shutil.which("timeout") is None, reason="no timeout(1)")
def test_a_failed_or_killed_step_is_logged_and_the_run_goes_on(tmp_path):
    log = tmp_path / "log"
    script = (
        f'source {VALIDATE_DIR / "steps.sh"}; : >"$LOG"; '
        'run 5 bash -c "echo hi; exit 3"; run 1 sleep 5; say done'
    )
    r = subprocess.run(
        ["bash", "-c", script], env={"LOG": str(log), "PATH": os.environ["PATH"]},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    assert lines == [
        "+ bash -c echo hi; exit 3 (limit 5s)",
        "hi",
        "step exited with 3",
        "+ sleep 5 (limit 1s)",
        "step exited with 124",
        "done",
    ]


def test_watchdog_records_and_exits(tmp_path):
    """A point that never returns: the watchdog's handler runs, then the process exits 3."""
    import sys

    marker = tmp_path / "hung.txt"
    code = (
        "import time\n"
        "from tilesim.validate.gpu.timing import Watchdog\n"
        f"w = Watchdog(0.2, lambda what: open({str(marker)!r}, 'w').write(str(what)))\n"
        "w.arm('point 7')\n"
        "time.sleep(30)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == timing.Watchdog.EXIT_CODE
    assert marker.read_text() == "point 7"


def test_disarmed_watchdog_stays_quiet():
    fired = []
    w = timing.Watchdog(0.05, fired.append)
    w.arm("x")
    w.disarm()
    import time

    time.sleep(0.15)
    assert fired == []
