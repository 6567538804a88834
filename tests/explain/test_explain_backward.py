"""`tilesim explain --pass bwd | fwd_bwd`: the recompute trade's figures against closed forms.

The closed forms are those of the backward generators' docstrings
(traces/standard_bwd.py, flash_v1_bwd.py, flash_v2_bwd.py) and of
``traces.kept_bytes``: non-causal, N_q = N_kv = N, exact for any N.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from tilesim.commands import explain, gantt, roofline, whatif
from tilesim.errors import TilesimError
from tilesim.explain_backward import build_backward_explanation
from tilesim.explain_render import render_markdown
from tilesim.hwmodels import load_gpu
from tilesim.traces import Workload
from tilesim.traces.standard import softmax_plan

B, H, N, D = 1, 2, 640, 64  # 640: partial tiles at block 128
runner = CliRunner()


@pytest.fixture(scope="module")
def h100():
    return load_gpu("h100")


@pytest.fixture(scope="module")
def bwd_expl(h100):
    return build_backward_explanation(h100, Workload(B, H, N, N, D, pass_="bwd"))


@pytest.fixture(scope="module")
def fwd_bwd_expl(h100):
    return build_backward_explanation(h100, Workload(B, H, N, N, D, pass_="fwd_bwd"))


def _algos(expl):
    return expl.section("bwd_flops").numbers


def test_flops_are_the_closed_forms(bwd_expl):
    a = _algos(bwd_expl)
    fwd = 4 * B * H * N * N * D
    # standard: four GEMMs (P read, not recomputed); v1: the paper's five; v2: five + S
    # and dP again in the separate dQ pass
    for algo, per_pair in (("standard", 8), ("v1", 10), ("v2", 14)):
        assert a[algo]["fwd_flops"] == fwd
        assert a[algo]["bwd_flops"] == per_pair * B * H * N * N * D
        assert a[algo]["flops_factor"] == per_pair / 4
        assert a[algo]["recomputed_flops"] == (per_pair - 8) * B * H * N * N * D
    assert bwd_expl.section("bwd_flops").numbers["v2"]["flops_factor"] == 3.5
    text = " ".join(bwd_expl.section("bwd_flops").paragraphs)
    assert "2.5x" in text and "3.50x" in text and "2.00x" in text


def test_bytes_avoided_are_standard_backwards_nxn_traffic(bwd_expl):
    a = _algos(bwd_expl)
    e = 2
    _, passes, _ = softmax_plan(N)
    # P read by dV and by the softmax backward (passes), dP written and read (passes),
    # dS written and read by dQ and dK
    nxn = B * H * N * N * e * ((3 + 2 * passes) + 2)
    assert a["standard"]["nxn_bytes"] == nxn
    for algo in ("v1", "v2"):
        assert a[algo]["nxn_bytes"] == 0
        assert a[algo]["nxn_bytes_avoided"] == nxn
        per = a[algo]["flops_per_byte_avoided"]
        assert per == a[algo]["recomputed_flops"] / nxn


def test_memory_kept_between_passes(bwd_expl):
    kept = bwd_expl.section("bwd_memory").numbers
    e = 2
    assert kept["standard"] == B * H * N * N * e  # P
    assert kept["v2"] == B * H * N * (D * e + 4)  # O + LSE
    assert kept["v1"] == B * H * N * (D * e + 8)  # O + l + m
    text = " ".join(bwd_expl.section("bwd_memory").paragraphs)
    assert "O + LSE" in text


def test_times_come_from_the_predictions(bwd_expl, fwd_bwd_expl, h100):
    import tilesim

    a, both = _algos(bwd_expl), _algos(fwd_bwd_expl)
    for algo in ("standard", "v1", "v2"):
        kw = dict(gpu=h100, algo=algo, batch=B, heads=H, seqlen=N, head_dim=D)
        bwd = tilesim.predict(**kw, pass_="bwd")
        fwd = tilesim.predict(**kw)
        assert a[algo]["bwd_time_s"] == bwd.time_s
        assert a[algo]["fwd_time_s"] == fwd.time_s
        # fwd_bwd: the backward is the pass minus the forward, each with its own config
        fb = tilesim.predict(**kw, pass_="fwd_bwd")
        assert both[algo]["pass_time_s"] == fb.time_s
        assert both[algo]["bwd_time_s"] == pytest.approx(fb.time_s - fwd.time_s)
        assert fb.time_s > fwd.time_s
    assert [r["algo"] for r in bwd_expl.table] == ["standard", "v1", "v2"]
    assert bwd_expl.table[2]["time_s"] == a["v2"]["bwd_time_s"]


def test_fwd_bwd_uses_each_passes_own_config(h100):
    import tilesim

    w = dict(gpu=h100, algo="v2", batch=B, heads=H, seqlen=N, head_dim=128)
    fb = tilesim.predict(**w, pass_="fwd_bwd")
    fwd = tilesim.predict(**w)
    bwd = tilesim.predict(**w, pass_="bwd")
    # the forward's 128-row tiles, the backward's 64-row tiles
    assert fwd.config["block_m"] == 128 and bwd.config["block_m"] == 64
    assert fb.config["block_m"] == 128 and fb.config["bwd"]["block_m"] == 64
    assert fb.matmul_flops == fwd.matmul_flops + bwd.matmul_flops
    assert [lp.ctas for lp in fb.launches] == [lp.ctas for lp in fwd.launches + bwd.launches]


def test_markdown_names_the_backwards_columns(bwd_expl):
    md = render_markdown(bwd_expl)
    assert "backward" in md.splitlines()[0]
    assert "kept from forward" in md and "N×N through HBM" in md


def test_fp8_and_forward_are_refused(h100):
    with pytest.raises(TilesimError, match="pass bwd or fwd_bwd"):
        build_backward_explanation(h100, Workload(B, H, N, N, D))
    with pytest.raises(TilesimError, match="fp8"):
        build_backward_explanation(h100, Workload(B, H, N, N, D, dtype="fp8", pass_="bwd"))


# -- the command line ---------------------------------------------------------------


@pytest.fixture(scope="module")
def app():
    app = typer.Typer(pretty_exceptions_enable=False)
    for module in (explain, roofline, gantt, whatif):
        module.register(app)
    return app


SMALL = ["-n", "512", "-d", "64", "-b", "1", "-H", "2", "--jobs", "1", "--gpu", "a100"]


def test_cli_explain_pass_bwd_json(app):
    result = runner.invoke(app, ["explain", *SMALL, "--pass", "bwd", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["workload"]["pass_"] == "bwd"
    assert [s["key"] for s in doc["sections"]] == [
        "bwd_flops",
        "bwd_bytes",
        "bwd_memory",
        "bwd_time",
    ]
    assert doc["sections"][0]["numbers"]["v2"]["flops_factor"] == 3.5


def test_cli_bad_pass_is_one_line(app):
    result = runner.invoke(app, ["explain", *SMALL, "--pass", "sideways"])
    assert result.exit_code != 0
    assert isinstance(result.exception, TilesimError)
    assert "unknown pass 'sideways'" in str(result.exception)


def test_cli_roofline_and_whatif_take_the_pass(app, tmp_path):
    out = tmp_path / "r.png"
    result = runner.invoke(
        app, ["roofline", "--out", str(out), *SMALL, "--pass", "bwd", "--algos", "v2", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["workload"]["pass_"] == "bwd" and out.exists()
    w = Workload(1, 2, 512, 512, 64, pass_="bwd")
    import tilesim

    p = tilesim.predict(
        gpu="a100", algo="v2", batch=1, heads=2, seqlen=512, head_dim=64, pass_="bwd"
    )
    assert doc["points"][0]["tflops"] == p.tflops
    assert w.to_dict() == doc["workload"]


def test_compare_grid_takes_the_pass(h100):
    from tilesim.commands.compare import compare_grid

    grid, notes = compare_grid(
        h100, [512, 1024], [64], ["standard", "v2", "v3"], 16384, 2048, False, "fp16", False, "bwd"
    )
    assert [a for a, _ in grid] == ["standard", "v2"] * 2
    assert all(w.pass_ == "bwd" for _, w in grid)
    assert any("v3 skipped" in n for n in notes)  # v3 has no backward schedule
