"""`tilesim trace show | export`, through the real entry point (tilesim.cli.main)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tilesim.cli import main
from tilesim.hwmodels import load_gpu
from tilesim.traces import Workload, build
from tilesim.traces.counters import counters
from tilesim.traces.files import load

SMALL = ["-b", "1", "-H", "2", "-n", "1000"]


def run(capsys, *args):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_error(code, out, err, *fragments):
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err + out
    for fragment in fragments:
        assert fragment in err


@pytest.mark.parametrize("gpu", ["a100", "h100", "h200"])
@pytest.mark.parametrize("algo", ["standard", "v1", "v2", "v3"])
def test_show_every_algorithm_on_every_gpu(gpu, algo, capsys):
    code, out, err = run(capsys, "trace", "show", "--gpu", gpu, "--algo", algo, *SMALL)
    if gpu == "a100" and algo == "v3":
        assert_one_line_error(code, out, err, "v3 needs Hopper", "a100")
        return
    assert code == 0, err
    trace = build(algo, Workload(1, 2, 1000, 1000, 128), load_gpu(gpu))
    for launch in trace.launches:
        assert f"launch {launch.name}" in out  # the program tree of each launch
        assert str(launch.num_ctas) in out
        for role in launch.program.roles:
            assert f"role {role.name}" in out
    assert "min(block_m, N_q - block_m*" in out  # expressions shown as written
    assert f"{counters(trace).matmul_flops:.4g}" in out
    assert "occupancy inputs" in out


def test_show_json_is_complete_and_stable(capsys):
    args = ["trace", "show", "--gpu", "h100", "--algo", "v2", "--causal", *SMALL, "--json"]
    code, out, _ = run(capsys, *args)
    assert code == 0
    doc = json.loads(out)
    trace = build("v2", Workload(1, 2, 1000, 1000, 128, causal=True), load_gpu("h100"))
    c = counters(trace)
    assert doc["counters"]["matmul_flops"] == c.matmul_flops
    assert doc["counters"]["no_reuse_hbm_bytes"] == c.no_reuse_hbm_bytes
    (launch,) = doc["launches"]
    assert launch["ctas"] == 16 and launch["grid"] == {"m": 8, "bh": 2}
    assert launch["occupancy"]["ctas_per_sm"] >= 1
    assert doc["trace"]["format"] == "tilesim-trace"
    assert run(capsys, *args)[1] == out  # same input, same bytes


def test_show_config_options_and_cta_unrolling(capsys):
    code, out, err = run(
        capsys, "trace", "show", "--gpu", "h100", "--algo", "v3", *SMALL,
        "--block-n", "64", "--num-stages", "3", "--pingpong", "--cta", "7", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["config"]["block_n"] == 64 and doc["config"]["num_stages"] == 3
    assert doc["config"]["pingpong"] is True
    # CTA 7 is Q block 7 of head 0: the last, partial block of 1000 - 7*128 = 104 rows
    q = [e for e in doc["expanded"] if e["op"].startswith("load q")]
    assert q == [{"role": "producer", "iters": {}, "op": "load q <- Q[0, 7] (TMA): 26624 B"}]


@pytest.mark.parametrize(
    "args,fragments",
    [
        (["--algo", "v9"], ["unknown algorithm 'v9'"]),
        (["-d", "96"], ["head_dim 96 is not supported"]),
        (["-n", "0"], ["seqlen_q must be a positive integer, got 0"]),
        (["-b", "-1"], ["batch must be a positive integer, got -1"]),
        (["--gpu", "b200"], ["b200"]),
        (["--gpu", "a100", "--algo", "v2", "--dtype", "fp8"], ["fp8 is supported by v3 only"]),
        (["--gpu", "a100", "--algo", "v3", "--dtype", "fp8"], ["v3 needs Hopper"]),
        (["-d", "256", "--block-m", "256", "--block-n", "128"], ["need", "allows 227 KiB"]),
        (["--algo", "v2", "--block-m", "96"], ["block_m must be a power of two"]),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args, fragments, capsys):
    code, out, err = run(capsys, "trace", "show", *args)
    assert_one_line_error(code, out, err, *fragments)


def test_export_writes_a_loadable_trace(tmp_path, capsys):
    path = tmp_path / "v3.trace.json"
    args = ["--gpu", "h200", "--algo", "v3", "--causal", "--dtype", "fp8", *SMALL]
    code, out, err = run(capsys, "trace", "export", *args, "-o", str(path))
    assert code == 0, err
    assert str(path) in out
    expected = build("v3", Workload(1, 2, 1000, 1000, 128, True, "fp8"), load_gpu("h200"))
    assert load(path) == expected


@pytest.mark.parametrize(
    "args",
    [
        ["--gpu", "a100", "--algo", "v3"],
        ["--algo", "v2", "-d", "256", "--block-m", "256", "--block-n", "128"],
        ["--algo", "nope"],
    ],
)
def test_export_writes_nothing_on_error(args, tmp_path, capsys):
    path = tmp_path / "x.trace.json"
    code, out, err = run(capsys, "trace", "export", *args, "-o", str(path))
    assert_one_line_error(code, out, err)
    assert list(tmp_path.iterdir()) == []


def test_export_needs_the_trace_suffix(tmp_path, capsys):
    code, out, err = run(capsys, "trace", "export", "-o", str(tmp_path / "x.json"))
    assert_one_line_error(code, out, err, ".trace.json")
    assert list(tmp_path.iterdir()) == []


def test_end_to_end_through_python_m_tilesim(tmp_path):
    """The console entry point, in a fresh interpreter: output, and a clean error."""
    ok = subprocess.run(
        [sys.executable, "-m", "tilesim", "trace", "show", "--algo", "v1", *SMALL],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "launch flash_v1" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "tilesim", "trace", "export", "--gpu", "a100", "--algo", "v3",
         "-o", str(tmp_path / "x.trace.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: v3 needs Hopper") and bad.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_trace_show_backward_pass(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tilesim", "trace", "show", "--algo", "v2", "--pass", "bwd",
         *SMALL, "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["workload"]["pass_"] == "bwd"
    assert [launch["name"] for launch in doc["launches"]] == [
        "bwd_preprocess",
        "bwd_dkdv",
        "bwd_dq",
    ]
