"""The shipped presets: complete, sourced, and consistent with the datasheets.

The cross-checks recompute whole-chip datasheet figures from the per-SM,
per-clock fields, so a wrong lane count or clock fails here, not in a
prediction three layers later.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import (
    ALIASES,
    FIELDS,
    GPU,
    NUMERIC_FIELDS,
    PRESETS_DIR,
    UNITS,
    list_presets,
    load_gpu,
    provenance,
)
from tilesim.hwmodels.provenance import preset_class, source_kind
from tilesim.hwmodels.schema import FRACTIONS, ZERO_ALLOWED

DATASHEET_PRESETS = ("a100_sxm4_80gb", "h100_sxm5_80gb", "h200_sxm_141gb")
# The best-founded preset of each GPU, which its short name loads.
BEST = {
    "a100": "a100_sxm4_80gb.published",
    "h100": "h100_sxm5_80gb.transferred",
    "h200": "h200_sxm_141gb.calibrated",
}
SOURCE_KINDS = re.compile(
    r"^(datasheet|whitepaper|paper|micro-benchmark|derived|assumed|CUDA programming guide)", re.I
)


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def test_the_three_datasheet_presets_ship():
    assert set(DATASHEET_PRESETS) <= set(list_presets())
    assert list_presets() == sorted(list_presets())


@pytest.mark.parametrize("name", DATASHEET_PRESETS)
def test_preset_loads_with_every_field_and_its_own_name(name):
    gpu = load_gpu(name)
    assert isinstance(gpu, GPU)
    assert gpu.name == name
    # The file holds every field of the dataclass (a missing one would not load).
    assert set(FIELDS) == {f.name for f in dataclasses.fields(GPU)} - {"sources"}
    for key in NUMERIC_FIELDS:
        value = getattr(gpu, key)
        assert value >= 0 if key in ZERO_ALLOWED else value > 0, key
        if key in FRACTIONS:
            assert value <= 1, key


@pytest.mark.parametrize("name", DATASHEET_PRESETS)
def test_every_number_and_flag_has_a_source_of_a_known_kind(name):
    gpu = load_gpu(name)
    for key in FIELDS:
        if key in ("name", "display_name", "arch"):
            continue
        assert SOURCE_KINDS.match(gpu.sources.get(key, "")), (key, gpu.sources.get(key))


@pytest.mark.parametrize(("alias", "name"), sorted(BEST.items()))
def test_short_names_load_the_best_founded_preset(alias, name):
    gpu = load_gpu(alias)
    assert gpu.name == name and preset_class(name) in ("calibrated", "transferred", "published")
    datasheet = load_gpu(name.split(".")[0])  # still selectable by its full name
    assert preset_class(datasheet.name) == "datasheet" and datasheet != gpu


@pytest.mark.parametrize("name", sorted(BEST.values()))
def test_every_field_of_a_best_founded_preset_has_a_provenance(name):
    gpu = load_gpu(name)
    for key in FIELDS[3:]:
        kind = source_kind(gpu.sources.get(key, ""))
        assert kind in provenance.SOURCE_KINDS and kind != "what-if", (key, gpu.sources.get(key))
        if kind == "assumed" and preset_class(name) == "published":
            assert "errs" in gpu.sources[key], key  # and says which way it likely errs
    assert provenance.confidence(name, PRESETS_DIR)


@pytest.mark.parametrize("name", ["a100_sxm4_80gb.published", "h100_sxm5_80gb.transferred"])
def test_an_unmeasured_preset_says_what_to_expect_of_it(name):
    note = provenance.confidence(name, PRESETS_DIR)
    assert note != provenance.DEFAULT_CONFIDENCE[preset_class(name)]
    assert "%" in note and "unvalidated" in note


def test_the_a100_preset_cites_its_studies():
    gpu = load_gpu("a100")
    text = " ".join(gpu.sources.values())
    for study in ("Chips and Cheese", "Jia", "Abdelkhalik", "whitepaper", "glennklockwood"):
        assert study in text
    assert gpu.peak_tensor_flops("fp16") / 1e12 == pytest.approx(312 * 1305 / 1410, rel=0.002)


def test_every_field_has_a_unit_entry():
    assert set(UNITS) == set(FIELDS)


@pytest.mark.parametrize(("alias", "name"), sorted(ALIASES.items()))
def test_alias_loads_the_same_gpu(alias, name):
    if not (PRESETS_DIR / f"{name}.toml").exists():
        pytest.skip(f"{name} is written by `tilesim calibrate`")
    assert load_gpu(alias) == load_gpu(name)
    assert load_gpu(alias.upper()).name == name  # names are case-insensitive


def test_load_by_path_gives_the_preset():
    path = PRESETS_DIR / "h100_sxm5_80gb.toml"
    assert load_gpu(path) == load_gpu("h100_sxm5_80gb")
    assert load_gpu(str(path)) == load_gpu("h100_sxm5_80gb")


# -- datasheet cross-checks, computed from the fields -------------------------------


@pytest.mark.parametrize(
    ("name", "dtype", "path", "tflops"),
    [
        ("a100_sxm4_80gb", "fp16", "mma_sync", 312),  # A100 datasheet, dense
        ("h100_sxm5_80gb", "fp16", "wgmma", 989),  # H100 SXM datasheet, dense
        ("h100_sxm5_80gb", "fp8", "wgmma", 1979),
        ("h200_sxm_141gb", "fp16", "wgmma", 989),  # H200 datasheet: same tensor cores
        ("h200_sxm_141gb", "fp8", "wgmma", 1979),
    ],
)
def test_tensor_peak_matches_datasheet(name, dtype, path, tflops):
    gpu = load_gpu(name)
    assert rel(gpu.peak_tensor_flops(dtype, path), tflops * 1e12) < 0.005
    # The default path is the best one the GPU has.
    if dtype == "fp16":
        assert gpu.peak_tensor_flops(dtype) == gpu.peak_tensor_flops(dtype, path)


@pytest.mark.parametrize("name", ["h100_sxm5_80gb", "h200_sxm_141gb"])
def test_mma_sync_on_hopper_is_about_two_thirds_of_wgmma(name):
    gpu = load_gpu(name)
    ratio = gpu.peak_tensor_flops("fp16", "mma_sync") / gpu.peak_tensor_flops("fp16", "wgmma")
    assert ratio == pytest.approx(2 / 3, rel=0.01)


@pytest.mark.parametrize(
    ("name", "boost_hz", "tflops"),
    [
        ("a100_sxm4_80gb", 1.41e9, 19.5),  # quoted at the 1410 MHz boost, which is the preset clock
        (
            "h100_sxm5_80gb",
            1.98e9,
            67.0,
        ),  # quoted at the 1980 MHz max boost (the preset runs at 1.83)
        ("h200_sxm_141gb", 1.98e9, 67.0),
    ],
)
def test_fp32_lanes_match_datasheet_fp32_tflops(name, boost_hz, tflops):
    gpu = load_gpu(name)
    at_boost = 2 * gpu.fp32_ops_per_clk_per_sm * gpu.sm_count * boost_hz
    assert rel(at_boost, tflops * 1e12) < 0.01
    assert gpu.peak_fp32_flops == pytest.approx(at_boost * gpu.sm_clock_hz / boost_hz)


@pytest.mark.parametrize(
    ("name", "tbps", "l2_mib", "smem_kib", "cta_kib", "sms"),
    [
        ("a100_sxm4_80gb", 2.039, 40, 164, 163, 108),
        ("h100_sxm5_80gb", 3.35, 50, 228, 227, 132),
        ("h200_sxm_141gb", 4.8, 60, 228, 227, 132),
    ],
)
def test_memory_sizes_and_bandwidths(name, tbps, l2_mib, smem_kib, cta_kib, sms):
    gpu = load_gpu(name)
    assert gpu.hbm_bandwidth_Bps == pytest.approx(tbps * 1e12)
    assert gpu.l2_bytes == l2_mib * 2**20
    assert gpu.smem_bytes_per_sm == smem_kib * 1024
    assert gpu.smem_bytes_per_cta_max == cta_kib * 1024
    assert gpu.sm_count == sms


def test_hbm_efficiencies_reproduce_the_measurements_they_came_from():
    a100, h100, h200 = (
        load_gpu("a100_sxm4_80gb"),
        load_gpu("h100_sxm5_80gb"),
        load_gpu("h200_sxm_141gb"),
    )
    assert a100.hbm_read_Bps / 1e12 == pytest.approx(1.78, rel=0.005)
    assert h100.hbm_read_Bps / 1e12 == pytest.approx(3.18, rel=0.005)  # read-only "dot"

    def copy(gpu):  # equal bytes read and written, each at its own rate
        return 2 / (1 / gpu.hbm_read_Bps + 1 / gpu.hbm_write_Bps)

    assert copy(h100) / 1e12 == pytest.approx(2.90, rel=0.005)
    assert 1.61 <= copy(a100) / 1e12 <= 1.82
    assert (h200.hbm_read_efficiency, h200.hbm_write_efficiency) == (0.938, 0.893)


def test_sfu_and_features_by_architecture():
    a100, h100, h200 = (
        load_gpu("a100_sxm4_80gb"),
        load_gpu("h100_sxm5_80gb"),
        load_gpu("h200_sxm_141gb"),
    )
    assert h100.peak_sfu_ops / 1e12 == pytest.approx(3.9, abs=0.05)  # FlashAttention-3 paper
    assert a100.peak_sfu_ops / 1e12 == pytest.approx(2.4, abs=0.05)
    assert (a100.arch, a100.has_tma, a100.has_wgmma, a100.has_fp8) == (
        "ampere",
        False,
        False,
        False,
    )
    for gpu in (h100, h200):
        assert (gpu.arch, gpu.has_tma, gpu.has_wgmma, gpu.has_fp8) == ("hopper", True, True, True)
    assert a100.tensor_fp16_wgmma_flop_per_clk_per_sm == 0
    assert a100.tensor_fp8_wgmma_flop_per_clk_per_sm == 0


def test_h200_datasheet_preset_runs_at_the_h100_tensor_clock():
    assert (
        load_gpu("h200_sxm_141gb").sm_clock_hz == load_gpu("h100_sxm5_80gb").sm_clock_hz == 1.83e9
    )


def test_ridge_point_is_tensor_peak_over_hbm_peak():
    gpu = load_gpu("h100_sxm5_80gb")
    assert gpu.ridge_point_flop_per_byte() == pytest.approx(989.4e12 / 3.35e12, rel=0.001)


def test_launch_overhead_is_a_few_microseconds():
    for name in DATASHEET_PRESETS:
        assert 2e-6 <= load_gpu(name).launch_overhead_s <= 4e-6


# -- names that do not resolve ------------------------------------------------------


def test_unknown_gpu_is_one_line_listing_the_choices():
    with pytest.raises(TilesimError) as err:
        load_gpu("h1000")
    message = str(err.value)
    assert "\n" not in message and "'h1000'" in message
    assert "did you mean 'h100'" in message and "a100" in message


def test_missing_calibrated_preset_says_how_to_make_it(monkeypatch, tmp_path):
    for name in DATASHEET_PRESETS:
        (tmp_path / f"{name}.toml").write_text((PRESETS_DIR / f"{name}.toml").read_text())
    monkeypatch.setattr("tilesim.hwmodels.presets.PRESETS_DIR", tmp_path)
    for name in ("h200-cal", "h200_sxm_141gb.calibrated"):
        with pytest.raises(TilesimError, match="tilesim calibrate"):
            load_gpu(name)


def test_empty_name_and_missing_file_are_errors(tmp_path):
    with pytest.raises(TilesimError, match="no GPU given"):
        load_gpu("  ")
    with pytest.raises(TilesimError, match="no such file"):
        load_gpu(tmp_path / "nope.toml")
    with pytest.raises(TilesimError, match="is a directory"):
        load_gpu(str(tmp_path) + "/")  # a folder is not a preset
