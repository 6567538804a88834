"""`tilesim hw list | show` and the shared CLI option helpers of commands/common.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from tilesim.commands import common, hw
from tilesim.errors import TilesimError
from tilesim.hwmodels import FIELDS, list_presets, load_gpu

runner = CliRunner()


@pytest.fixture(scope="module")
def app():
    """The hw commands on an app of their own (the real one is tested end to end below)."""
    app = typer.Typer(pretty_exceptions_enable=False)
    hw.register(app)
    return app


def invoke(app, *args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def run_tilesim(*args):
    return subprocess.run(
        [sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=120
    )


def test_hw_list_table_names_every_preset(app):
    out = invoke(app, "hw", "list")
    for name in list_presets():
        assert name in out
    assert "989" in out and "312" in out and "1979" in out  # fp16/fp8 TFLOPS columns


def test_hw_list_json(app):
    rows = json.loads(invoke(app, "hw", "list", "--json"))
    by_name = {row["name"]: row for row in rows}
    assert [row["name"] for row in rows] == list_presets()
    h100 = by_name["h100_sxm5_80gb"]
    assert h100["aliases"] == [] and h100["class"] == "datasheet"
    assert by_name["h100_sxm5_80gb.transferred"]["aliases"] == ["h100"]
    assert by_name["h200_sxm_141gb.calibrated"]["aliases"] == ["h200", "h200-cal"]
    assert {row["class"] for row in rows} == {"calibrated", "transferred", "published", "datasheet"}
    assert all(row["confidence"] for row in rows)
    assert h100["tensor_fp16_TFLOPS"] == pytest.approx(989.4, rel=1e-3)
    assert h100["hbm_TBps"] == pytest.approx(3.35)
    assert h100["features"] == ["tma", "wgmma", "fp8"]
    assert by_name["a100_sxm4_80gb"]["tensor_fp8_TFLOPS"] is None


def test_hw_show_table_has_every_field_and_source(app):
    out = invoke(app, "hw", "show", "h100")
    for key in FIELDS[3:]:
        assert key in out
    assert "NVIDIA H100 SXM5 80GB" in out and "h100_sxm5_80gb.transferred" in out
    assert "confidence:" in out and "transferred" in out and "datasheet" in out
    assert "ridge" in out


def test_hw_show_json_gives_each_field_its_kind_and_the_preset_its_confidence(app):
    info = json.loads(invoke(app, "hw", "show", "h100", "--json"))
    assert info["class"] == "transferred" and "H200" in info["confidence"]
    kinds = {key: field["kind"] for key, field in info["fields"].items()}
    assert kinds["tensor_fp16_wgmma_flop_per_clk_per_sm"] == "transferred"
    assert kinds["hbm_bandwidth_Bps"] == "datasheet"
    assert kinds["hbm_latency_50_cycles"] == "derived"
    sheet = json.loads(invoke(app, "hw", "show", "h100_sxm5_80gb", "--json"))
    assert sheet["class"] == "datasheet" and "faster than they run" in sheet["confidence"]


def test_hw_show_set_json_doubles_the_value(app):
    base = json.loads(invoke(app, "hw", "show", "h100", "--json"))
    fast = json.loads(invoke(app, "hw", "show", "h100", "--set", "hbm_bandwidth_Bps=2x", "--json"))
    field = fast["fields"]["hbm_bandwidth_Bps"]
    assert field["value"] == 2 * base["fields"]["hbm_bandwidth_Bps"]["value"] == 6.7e12
    assert field["unit"] == "B/s" and field["source"].startswith("what-if")
    assert fast["name"] == "h100_sxm5_80gb.transferred+hbm_bandwidth_Bps=2x"
    assert fast["confidence"].endswith("with what-if changes")
    assert fast["derived"]["hbm_peak_GBps"]["value"] == pytest.approx(6700)
    # the ridge point halves when HBM doubles
    ridge = "ridge_fp16_wgmma_flop_per_byte"
    assert fast["derived"][ridge]["value"] == pytest.approx(base["derived"][ridge]["value"] / 2)


def test_hw_show_several_sets_and_a_path(app):
    from tilesim.hwmodels import PRESETS_DIR

    path = str(PRESETS_DIR / "a100_sxm4_80gb.toml")
    info = json.loads(
        invoke(app, "hw", "show", path, "--set", "sm_count=54", "--set", "has_tma=true", "--json")
    )
    assert info["fields"]["sm_count"]["value"] == 54
    assert info["fields"]["has_tma"]["value"] is True
    assert info["derived"]["tensor_fp16_mma_sync_TFLOPS"]["value"] == pytest.approx(
        312 / 2, rel=0.01
    )


# -- end to end through `python -m tilesim`: exit codes and one-line errors ------------


def test_end_to_end_show_works():
    result = run_tilesim("hw", "show", "h200", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["fields"]["hbm_bandwidth_Bps"]["value"] == 4.8e12


def test_unknown_gpu_exits_2_with_one_line():
    result = run_tilesim("hw", "show", "h1000")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: unknown GPU 'h1000'")


def test_bogus_set_exits_2_listing_valid_keys():
    result = run_tilesim("hw", "show", "h100", "--set", "bogus=1")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "'bogus'" in result.stderr and "hbm_bandwidth_Bps" in result.stderr


# -- shared option helpers ------------------------------------------------------------


def test_gpu_from_options():
    assert common.gpu_from_options("h100", None) == load_gpu("h100")
    gpu = common.gpu_from_options("a100", ["sm_count=2x", "hbm_bandwidth_Bps=4e12"])
    assert (gpu.sm_count, gpu.hbm_bandwidth_Bps) == (216, 4e12)
    with pytest.raises(TilesimError, match="KEY=VALUE"):
        common.gpu_from_options("a100", ["sm_count"])


def test_workload_from_options_defaults_and_seqlen_kv():
    w = common.workload_from_options()
    assert (w.batch, w.heads, w.seqlen_q, w.seqlen_kv, w.head_dim) == (4, 16, 4096, 4096, 128)
    assert (w.causal, w.dtype) == (False, "fp16")
    w = common.workload_from_options(seqlen=1024, seqlen_kv=2048, dtype="BF16")
    assert (w.seqlen_q, w.seqlen_kv, w.dtype) == (1024, 2048, "bf16")
    with pytest.raises(TilesimError, match="head_dim"):
        common.workload_from_options(head_dim=96)


def test_the_option_aliases_parse_into_a_command():
    """A command written with the shared Annotated options gets every flag and default."""
    seen = {}
    app = typer.Typer()

    @app.command()
    def demo(
        gpu: common.GpuOpt = common.DEFAULT_GPU,
        sets: common.SetOpt = None,
        batch: common.BatchOpt = common.DEFAULT_BATCH,
        heads: common.HeadsOpt = common.DEFAULT_HEADS,
        seqlen: common.SeqlenOpt = common.DEFAULT_SEQLEN,
        seqlen_kv: common.SeqlenKvOpt = None,
        head_dim: common.HeadDimOpt = common.DEFAULT_HEAD_DIM,
        causal: common.CausalOpt = False,
        dtype: common.DtypeOpt = common.DEFAULT_DTYPE,
        as_json: common.JsonOpt = False,
    ) -> None:
        seen["gpu"] = common.gpu_from_options(gpu, sets)
        seen["workload"] = common.workload_from_options(
            batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype
        )
        seen["json"] = as_json

    args = "--gpu a100 --set sm_count=0.5x --set l2_bytes=2x -b 2 -H 8 -n 512 --seqlen-kv 1024"
    result = runner.invoke(
        app, [*args.split(), "-d", "64", "--causal", "--dtype", "bf16", "--json"]
    )
    assert result.exit_code == 0, result.output
    gpu, w = seen["gpu"], seen["workload"]
    assert gpu.name == "a100_sxm4_80gb.published+l2_bytes=2x+sm_count=0.5x" and gpu.sm_count == 54
    assert (w.batch, w.heads, w.seqlen_q, w.seqlen_kv, w.head_dim) == (2, 8, 512, 1024, 64)
    assert (w.causal, w.dtype, seen["json"]) == (True, "bf16", True)

    assert runner.invoke(app, []).exit_code == 0
    assert seen["gpu"] == load_gpu("h100")
    assert seen["workload"] == common.workload_from_options()
    assert seen["json"] is False
