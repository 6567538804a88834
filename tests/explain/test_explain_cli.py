"""`tilesim explain | roofline | gantt` on the command line: outputs parse, errors are one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tilesim.commands import explain, gantt, roofline, whatif
from tilesim.explain import build_explanation, main_workload
from tilesim.hwmodels import load_gpu

runner = CliRunner()
SMALL = ["-n", "512", "-d", "64", "-b", "1", "-H", "4", "--jobs", "1"]


@pytest.fixture(scope="module")
def app():
    app = typer.Typer(pretty_exceptions_enable=False)
    for module in (explain, roofline, gantt, whatif):
        module.register(app)
    return app


def invoke(app, *args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def run_tilesim(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tilesim", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_explain_json_is_the_data(app):
    doc = json.loads(invoke(app, "explain", "--gpu", "h100", *SMALL, "--json"))
    gpu = load_gpu("h100")
    expected = build_explanation(gpu, main_workload(gpu, 512, 64, 1, 4, False, "fp16"))
    assert doc == json.loads(json.dumps(expected.to_dict()))
    assert [s["key"] for s in doc["sections"]][:2] == ["setup", "standard"]


def test_explain_markdown(app):
    md = invoke(app, "explain", "--gpu", "a100", *SMALL, "--markdown")
    assert md.startswith("# Attention on the NVIDIA A100")
    assert md.count("\n## ") == 10  # nine sections and the table
    assert "| algorithm | S/P through HBM |" in md
    assert "does not apply" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "algorithm" not in ln]
    assert [r.split("|")[1].strip() for r in rows] == ["standard", "v1", "v2"]


def test_explain_rich_has_every_section(app):
    out = invoke(app, "explain", "--gpu", "h200", *SMALL)
    for title in (
        "Standard attention",
        "FlashAttention v1",
        "FlashAttention-2",
        "FlashAttention-3",
        "decode",
        "launch-bound",
        "shared memory",
        "is not",
        "Side by side",
    ):
        assert title in out, title


def test_roofline_json_points(app, tmp_path):
    out = tmp_path / "roof.png"
    doc = json.loads(invoke(app, "roofline", "--gpu", "h100", *SMALL, "--out", str(out), "--json"))
    assert out.stat().st_size > 10_000
    algos = [p["algo"] for p in doc["points"]]
    assert algos == ["standard", "v1", "v2", "v3"]
    std, v2 = doc["points"][0], doc["points"][2]
    assert std["intensity_flop_per_byte"] < v2["intensity_flop_per_byte"]


def test_roofline_measured_points_from_results(tmp_path):
    """A validate results file for this GPU and shape gives a filled (measured) point."""
    gpu = load_gpu("h100")
    w = main_workload(gpu, 512, 64, 1, 4, False, "fp16")
    flops = 4 * 512 * 512 * 64 * 4
    doc = {
        "schema_version": 1,
        "kind": "validate",
        "metadata": {"device": {"name": "NVIDIA H100 80GB HBM3"}},
        "measurements": [
            {
                "algo": "v2",
                "workload": w.to_dict(),
                "config": None,
                "status": "ok",
                "time_s": 1e-5,
                "flops": flops,
            },
            {
                "algo": "v2",
                "workload": {**w.to_dict(), "seqlen_q": 1024, "seqlen_kv": 1024},
                "config": None,
                "status": "ok",
                "time_s": 1e-5,
                "flops": flops,
            },
        ],
    }
    for row in doc["measurements"]:
        row["config"] = {
            "block_m": 128,
            "block_n": 64,
            "num_warps": 8,
            "num_stages": 3,
            "mma_path": "wgmma",
        }
    path = tmp_path / "2026-01-01-h100.json"
    path.write_text(json.dumps(doc))
    got, note = roofline.measured_points(gpu, w, [path])
    tflops = pytest.approx(flops / 1e-5 / 1e12)
    assert got == {"v2": (tflops, tflops, tflops)}  # the other shape is ignored
    assert note is None
    got, note = roofline.measured_points(load_gpu("a100"), w, [path])  # another GPU
    assert got == {}
    assert "no a100_sxm4_80gb" in note and "NVIDIA H100 80GB HBM3" in note
    other = main_workload(gpu, 2048, 64, 1, 4, False, "fp16")
    got, note = roofline.measured_points(gpu, other, [path])  # this GPU, not this shape
    assert got == {} and "no measurement of this shape" in note


def test_a_roofline_without_measured_points_says_so(app, tmp_path):
    out = tmp_path / "roof.png"
    h200 = Path(__file__).resolve().parents[2] / "results/raw/2026-12-01-h200-run1.json"
    args = ["roofline", "--gpu", "h100", *SMALL, "--out", str(out), "--json", "--results"]
    result = runner.invoke(app, [*args, str(h200)])
    assert result.exit_code == 0, result.output
    assert "no measured points" in result.stderr and "NVIDIA H200" in result.stderr
    doc = json.loads(result.stdout)
    assert "no measured points" in doc["measured_note"]
    assert all(p["measured_tflops"] is None for p in doc["points"])


def test_gantt_cli(app, tmp_path):
    out = tmp_path / "g.png"
    text = invoke(
        app,
        "gantt",
        "--gpu",
        "h100",
        "--algo",
        "v2,v3",
        "-n",
        "512",
        "-H",
        "2",
        "--sms",
        "2",
        "--out",
        str(out),
    )
    assert "v2:" in text and "v3:" in text
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize(
    "args, words",
    [
        (["explain", "--gpu", "a100", "-d", "96"], "head_dim 96"),
        (["explain", "--gpu", "nope"], "nope"),
        (["roofline", "--gpu", "h100", "--out", "/no/such/dir/r.png"], "does not exist"),
        (
            [
                "roofline",
                "--gpu",
                "a100",
                "--algos",
                "v3",
                "--out",
                "r.png",
                "-n",
                "256",
                "-b",
                "1",
                "-H",
                "1",
            ],
            "v3 needs Hopper",
        ),
        (["gantt", "--gpu", "h100", "--window", "5:2", "--out", "g.png"], "--window"),
        (["explain", "--json", "--markdown"], "--json and --markdown"),
        (["explain", "--gpu", "a100", "--dtype", "fp8"], "v3 needs Hopper"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, words):
    r = run_tilesim(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not list(tmp_path.glob("*.png")) and not list(tmp_path.glob(".*.png"))
