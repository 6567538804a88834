"""What-if variants: GPU.with_overrides and the --set syntax."""

from __future__ import annotations

import dataclasses

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import FLAG_FIELDS, NUMERIC_FIELDS, load_gpu, parse_set_options
from tilesim.hwmodels.fields import KINDS
from tilesim.hwmodels.schema import FRACTIONS


@pytest.fixture(scope="module")
def h100():
    return load_gpu("h100_sxm5_80gb")


@pytest.mark.parametrize("key", NUMERIC_FIELDS)
def test_multiplier_scales_every_numeric_field(h100, key):
    # an efficiency cannot double past 1, nor a CTA's shared memory past the SM's
    factor = 0.5 if key in FRACTIONS or key == "smem_bytes_per_cta_max" else 2
    old = getattr(h100, key)
    if old == 0:
        pytest.skip(f"{key} is 0 on the H100")
    new = h100.with_overrides({key: f"{factor}x"})
    assert getattr(new, key) == old * factor
    assert type(getattr(new, key)) is KINDS[key]
    # every other field is untouched
    for other in NUMERIC_FIELDS + FLAG_FIELDS:
        if other != key:
            assert getattr(new, other) == getattr(h100, other)


def test_2x_doubles_and_names_the_variant(h100):
    fast = h100.with_overrides({"hbm_bandwidth_Bps": "2x"})
    assert fast.hbm_bandwidth_Bps == 2 * 3.35e12
    assert fast.name == "h100_sxm5_80gb+hbm_bandwidth_Bps=2x"
    assert fast.sources["hbm_bandwidth_Bps"].startswith(
        "what-if: hbm_bandwidth_Bps=2x; was 3.35e12"
    )
    assert h100.hbm_bandwidth_Bps == 3.35e12  # the original is unchanged (frozen)


def test_absolute_values_as_numbers_or_strings(h100):
    assert h100.with_overrides({"hbm_bandwidth_Bps": "6.7e12"}).hbm_bandwidth_Bps == 6.7e12
    assert h100.with_overrides({"hbm_bandwidth_Bps": 6.7e12}).hbm_bandwidth_Bps == 6.7e12
    assert h100.with_overrides({"sm_count": "114"}).sm_count == 114
    assert h100.with_overrides({"sm_count": 114}).sm_count == 114
    assert h100.with_overrides({"l2_bytes": "40e6"}).l2_bytes == 40_000_000
    assert isinstance(h100.with_overrides({"l2_bytes": "40e6"}).l2_bytes, int)
    assert h100.with_overrides({"sm_clock_hz": 2_000_000_000}).sm_clock_hz == 2e9  # int: a float


def test_multiplier_of_a_count_rounds_and_stays_an_integer(h100):
    gpu = h100.with_overrides({"sm_count": "0.3x"})
    assert gpu.sm_count == round(132 * 0.3) and isinstance(gpu.sm_count, int)


def test_absolute_count_must_be_whole(h100):
    with pytest.raises(TilesimError, match="must be an integer"):
        h100.with_overrides({"sm_count": "131.5"})


def test_flags_take_true_or_false(h100):
    assert h100.with_overrides({"has_tma": "false"}).has_tma is False
    assert h100.with_overrides({"has_tma": "False"}).has_tma is False
    assert h100.with_overrides({"has_tma": False}).has_tma is False
    assert load_gpu("a100_sxm4_80gb").with_overrides({"has_tma": "true"}).has_tma is True
    for bad in ("2x", "1", 1, "yes"):
        with pytest.raises(TilesimError, match="true or false"):
            h100.with_overrides({"has_tma": bad})


def test_unknown_key_lists_the_valid_numeric_keys(h100):
    with pytest.raises(TilesimError) as err:
        h100.with_overrides({"bogus": 1})
    message = str(err.value)
    assert "'bogus'" in message and "\n" not in message
    # one short line: how many numeric keys, where they are listed, and every flag
    assert f"the {len(NUMERIC_FIELDS)} numeric fields `tilesim hw show` lists" in message
    for key in FLAG_FIELDS:
        assert key in message
    assert len(message) < 300
    with pytest.raises(TilesimError, match="did you mean 'hbm_bandwidth_Bps'"):
        h100.with_overrides({"hbm_bandwidht_Bps": "2x"})
    with pytest.raises(TilesimError, match="unknown hardware key 'name'"):
        h100.with_overrides({"name": "x"})  # identity is not a what-if


@pytest.mark.parametrize("value", [0, -1, "0", "-3e12", "0x", "-1x", 0.0])
def test_non_positive_is_rejected(h100, value):
    with pytest.raises(TilesimError, match="positive"):
        h100.with_overrides({"hbm_bandwidth_Bps": value})


@pytest.mark.parametrize("value", ["nan", "inf", "infx", "abc", "x", "2xx", "", True, None, [2]])
def test_unreadable_values_are_rejected(h100, value):
    with pytest.raises(TilesimError):
        h100.with_overrides({"hbm_bandwidth_Bps": value})


def test_efficiency_cannot_exceed_one(h100):
    with pytest.raises(TilesimError, match=r"\(0, 1\]"):
        h100.with_overrides({"hbm_read_efficiency": "2x"})


def test_overrides_are_checked_together(h100):
    with pytest.raises(TilesimError, match="exceeds smem_bytes_per_sm"):
        h100.with_overrides({"smem_bytes_per_sm": "0.5x"})
    both = h100.with_overrides({"smem_bytes_per_sm": "0.5x", "smem_bytes_per_cta_max": "0.5x"})
    assert both.smem_bytes_per_sm == 233472 // 2
    with pytest.raises(TilesimError, match="has_wgmma is true"):
        load_gpu("a100_sxm4_80gb").with_overrides({"has_wgmma": "true"})


def test_name_is_sorted_and_deterministic(h100):
    a = h100.with_overrides({"sm_count": "2x", "hbm_bandwidth_Bps": "6.70e12"})
    b = h100.with_overrides({"hbm_bandwidth_Bps": 6.7e12, "sm_count": "2.0x"})
    assert a == b
    assert a.name == b.name == "h100_sxm5_80gb+hbm_bandwidth_Bps=6.7e12+sm_count=2x"


def test_variant_name_loads_back_as_the_same_gpu(h100):
    variant = h100.with_overrides({"sm_count": "0.5x", "has_fp8": False, "l2_bytes": 12345})
    again = load_gpu(variant.name)
    assert again == variant and again.name == variant.name


def test_chained_overrides_multiply_the_current_value(h100):
    twice = h100.with_overrides({"hbm_bandwidth_Bps": "2x"}).with_overrides(
        {"hbm_bandwidth_Bps": "2x"}
    )
    assert twice.hbm_bandwidth_Bps == 4 * 3.35e12
    assert twice.name.count("+hbm_bandwidth_Bps=2x") == 2


def test_empty_mapping_is_the_same_gpu(h100):
    assert h100.with_overrides({}) is h100


def test_explicit_sources_and_name_for_measured_values(h100):
    gpu = h100.with_overrides(
        {"hbm_bandwidth_Bps": 3.0e12},
        sources={"hbm_bandwidth_Bps": "micro-benchmark: copy"},
        name="h100_sxm5_80gb.calibrated",
    )
    assert gpu.name == "h100_sxm5_80gb.calibrated"
    assert gpu.sources["hbm_bandwidth_Bps"] == "micro-benchmark: copy"
    with pytest.raises(TilesimError, match="not overridden"):
        h100.with_overrides({"sm_count": 2}, sources={"l2_bytes": "x"})


def test_with_overrides_does_not_touch_the_source_dict_of_the_original(h100):
    before = dict(h100.sources)
    h100.with_overrides({"sm_count": "2x"})
    assert h100.sources == before
    assert dataclasses.replace(h100) == h100


# -- the --set syntax -----------------------------------------------------------------


def test_parse_set_options():
    assert parse_set_options(["hbm_bandwidth_Bps=2x", " sm_count = 114 "]) == {
        "hbm_bandwidth_Bps": "2x",
        "sm_count": "114",
    }
    assert parse_set_options(None) == {} == parse_set_options([])
    assert parse_set_options(["k=a=b"]) == {"k": "a=b"}  # the first '=' splits


@pytest.mark.parametrize(
    "item", ["hbm_bandwidth_Bps", "=2x", "hbm_bandwidth_Bps=", "a b=1", "1k=2"]
)
def test_parse_set_options_bad_syntax(item):
    with pytest.raises(TilesimError, match="KEY=VALUE"):
        parse_set_options([item])


def test_parse_set_options_twice_is_an_error():
    with pytest.raises(TilesimError, match="given twice"):
        parse_set_options(["sm_count=1", "sm_count=2"])


def test_at_clock_keeps_per_clock_rates_and_latency_in_ns():
    gpu = load_gpu("h100_sxm5_80gb")
    fast = gpu.at_clock(1.98e9)
    assert fast.sm_clock_hz == 1.98e9
    assert fast.name == "h100_sxm5_80gb@1980MHz"
    assert fast.tensor_fp16_wgmma_flop_per_clk_per_sm == gpu.tensor_fp16_wgmma_flop_per_clk_per_sm
    assert fast.hbm_bandwidth_Bps == gpu.hbm_bandwidth_Bps
    for key in ("hbm_latency_cycles", "l2_hit_latency_cycles"):
        ns = getattr(gpu, key) / gpu.sm_clock_hz
        assert getattr(fast, key) / fast.sm_clock_hz == pytest.approx(ns, rel=1e-12)
    assert fast.peak_tensor_flops() == pytest.approx(gpu.peak_tensor_flops() * 1.98 / 1.83)


def test_the_tensor_peak_is_at_the_tensor_clock():
    # a tensor-core kernel runs at tensor_clock_ratio x sm_clock_hz: so does its peak
    gpu = load_gpu("h100_sxm5_80gb")
    slow = gpu.with_overrides({"tensor_clock_ratio": 0.9})
    assert slow.peak_tensor_flops("fp8") == pytest.approx(0.9 * gpu.peak_tensor_flops("fp8"))
    assert slow.peak_fp32_flops == gpu.peak_fp32_flops


def test_a_counted_clock_is_every_launch_s_clock():
    # a clock the SMs' cycle counters measured already holds what tensor_clock_ratio
    # stands for: MMA launches run at it too
    gpu = load_gpu("h200-cal")
    assert gpu.tensor_clock_ratio < 1
    counted = gpu.at_counted_clock(1.6e9)
    assert counted.sm_clock_hz == 1.6e9
    assert counted.tensor_clock_ratio == 1.0
    assert counted.name.endswith("@1600MHz-counted")
    read = gpu.at_clock(1.6e9)
    assert counted.hbm_latency_cycles == read.hbm_latency_cycles
    assert counted.peak_tensor_flops() == pytest.approx(
        read.peak_tensor_flops() / read.tensor_clock_ratio
    )
