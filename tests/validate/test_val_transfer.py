"""The H100 SXM preset is derived from the H200's committed calibration, field by field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tilesim.hwmodels import FIELDS, PRESETS_DIR, load_gpu
from tilesim.hwmodels.provenance import source_kind
from tilesim.hwmodels.schema import HBM_MIX_FIELDS
from tilesim.validate import calibrate, schema, transfer

RESULTS = Path(__file__).resolve().parents[2] / "results" / "raw"
# The raw files of h200_sxm_141gb.calibrated.toml, in the order its header gives them
# (a later file's row replaces an earlier one of the same name).
H200_FILES = (
    "2026-11-30-h200-calibrate.json",
    "2026-12-01-h200-calibrate-tile.json",
    "2026-12-01-h200-calibrate-store.json",
    "2026-11-30-h200-calibrate-loaded-latency.json",
    "2026-11-30-h200-calibrate-turnaround.json",
    "2026-11-30-h200-calibrate-clock.json",
    "2026-11-30-h200-calibrate-tile.json",
    "2026-12-02-h200-calibrate-dispatch.json",
    "2026-12-02-h200-calibrate-mma.json",
    "2026-12-03-h200-calibrate-power.json",
    "2026-12-03-h200-calibrate-hbm-mix.json",
)
# The H100's own public figures, as its datasheet preset gives them.
PUBLIC = (
    "sm_count",
    "max_ctas_per_sm",
    "max_warps_per_sm",
    "regs_per_sm",
    "smem_bytes_per_sm",
    "smem_bytes_per_cta_max",
    "smem_bandwidth_B_per_clk_per_sm",
    "warp_schedulers_per_sm",
    "l2_bytes",
    "hbm_bytes",
    "hbm_bandwidth_Bps",
    "hbm_read_efficiency",
    "has_tma",
    "has_wgmma",
    "has_fp8",
)
DERIVED = (
    "hbm_write_efficiency",
    *HBM_MIX_FIELDS,
    "hbm_latency_cycles",
    "hbm_latency_50_cycles",
    "hbm_latency_75_cycles",
    "hbm_latency_95_cycles",
)


def h200_rows() -> list[dict]:
    by_name: dict = {}
    for name in H200_FILES:
        doc = schema.load_results(RESULTS / name)
        when = doc["metadata"]["date"]
        by_name.update({row["name"]: {"date": when, **row} for row in doc["measurements"]})
    return list(by_name.values())


@pytest.fixture(scope="module")
def derived():
    h200, _, _ = calibrate.derive_preset(h200_rows(), load_gpu("h200_sxm_141gb"), "2026-11-30")
    return h200, transfer.transfer_preset(h200, transfer.sibling_of("h100"), "2026-11-30")


def test_the_committed_h200_calibration_rederives_from_its_raw_files(derived):
    h200, _ = derived
    assert h200 == load_gpu("h200_sxm_141gb.calibrated")


def test_the_committed_h100_preset_is_the_derivation(derived):
    _, h100 = derived
    committed = load_gpu("h100_sxm5_80gb.transferred")
    assert committed == h100
    assert committed.sources == h100.sources
    assert load_gpu("h100") == committed  # the short name is the best-founded preset


def test_every_field_says_where_it_came_from(derived):
    _, h100 = derived
    sheet = load_gpu("h100_sxm5_80gb")
    groups = set(transfer.SM_SIDE) | set(PUBLIC) | set(DERIVED)
    assert groups == set(FIELDS) - {"name", "display_name", "arch"}
    for field in transfer.SM_SIDE:
        assert source_kind(h100.sources[field]) == "transferred", field
        assert "h200_sxm_141gb.calibrated" in h100.sources[field]
    for field in PUBLIC:
        assert h100.sources[field] == sheet.sources[field], field
        assert getattr(h100, field) == getattr(sheet, field), field
        assert source_kind(h100.sources[field]) in ("datasheet", "derived"), field
    for field in DERIVED:
        assert source_kind(h100.sources[field]) == "derived", field


def test_transferred_fields_equal_the_h200s_to_the_digit(derived):
    h200, h100 = derived
    committed_h200 = load_gpu("h200_sxm_141gb.calibrated")
    for field in transfer.SM_SIDE:
        assert getattr(h100, field) == getattr(h200, field) == getattr(committed_h200, field)
        assert h200.sources[field] in h100.sources[field]  # with how it was measured


def test_the_memory_derivations(derived):
    h200, h100 = derived
    sheet = load_gpu("h100_sxm5_80gb")
    ratio = h200.hbm_write_efficiency / h200.hbm_read_efficiency
    assert h100.hbm_write_efficiency == pytest.approx(0.949 * ratio, abs=1e-4)
    # the H100's public idle latency (345 ns) at the transferred clock; the H200 measured 342
    idle_ns = sheet.hbm_latency_cycles / sheet.sm_clock_hz * 1e9
    assert h100.hbm_latency_cycles / h100.sm_clock_hz * 1e9 == pytest.approx(idle_ns, abs=0.5)
    # queueing above idle: the H200's at the same busy fraction x 800/670 GB/s per stack
    per_stack = (4.8e12 / 6) / (3.35e12 / 5)
    for point in (50, 75, 95):
        wait = getattr(h200, f"hbm_latency_{point}_cycles") - h200.hbm_latency_cycles
        got = getattr(h100, f"hbm_latency_{point}_cycles") - h100.hbm_latency_cycles
        assert got == pytest.approx(wait * per_stack, abs=1.5)


def test_calibrate_transfer_to_writes_the_committed_preset(tmp_path):
    out = tmp_path / "h100.toml"
    args = [a for name in H200_FILES for a in ("--from-results", str(RESULTS / name))]
    r = subprocess.run(
        [sys.executable, "-m", "tilesim", "calibrate", *args, "--transfer-to", "h100",
         "--preset-out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.read_text() == (PRESETS_DIR / "h100_sxm5_80gb.transferred.toml").read_text()


def test_transfer_needs_the_sibling_die_and_a_known_target():
    from tilesim.errors import TilesimError

    with pytest.raises(TilesimError, match="no transfer to"):
        transfer.sibling_of("a100")
    with pytest.raises(TilesimError, match="not the same die"):
        transfer.transfer_preset(load_gpu("a100_sxm4_80gb"), transfer.sibling_of("h100"))
