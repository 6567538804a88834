"""Reading preset files: every bad file is one TilesimError line naming file and key."""

from __future__ import annotations

import re

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import PRESETS_DIR, load_gpu
from tilesim.hwmodels.presets import read_comments

H100_TEXT = (PRESETS_DIR / "h100_sxm5_80gb.toml").read_text()


def with_line(key: str, new_line: str | None, text: str = H100_TEXT) -> str:
    """The H100 preset text with ``key``'s line replaced (or dropped when None)."""
    pattern = re.compile(rf"^{key} = .*$", re.M)
    assert pattern.search(text), key
    return pattern.sub("" if new_line is None else new_line, text)


def load_text(tmp_path, text: str, name: str = "mine.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_gpu(path)


def error_of(tmp_path, text: str) -> str:
    with pytest.raises(TilesimError) as err:
        load_text(tmp_path, text)
    message = str(err.value)
    assert "\n" not in message
    assert "mine.toml" in message  # names the file
    return message


def test_copy_of_a_preset_loads_equal_with_sources(tmp_path):
    gpu = load_text(tmp_path, H100_TEXT)
    assert gpu == load_gpu("h100_sxm5_80gb")
    assert gpu.sources == load_gpu("h100_sxm5_80gb").sources
    assert gpu.sources["hbm_bandwidth_Bps"] == "datasheet: 3.35 TB/s HBM3"


def test_malformed_toml_names_file_and_tomllib_message(tmp_path):
    message = error_of(tmp_path, H100_TEXT + "\nthis is not toml\n")
    assert "malformed TOML" in message and "line" in message


def test_missing_key_is_named(tmp_path):
    message = error_of(tmp_path, with_line("l2_bytes", None))
    assert "missing key 'l2_bytes'" in message


def test_several_missing_keys_are_all_named(tmp_path):
    text = with_line("l2_bytes", None, with_line("sm_count", None))
    assert "missing keys 'sm_count', 'l2_bytes'" in error_of(tmp_path, text)


def test_unknown_key_is_named_with_a_suggestion(tmp_path):
    message = error_of(tmp_path, H100_TEXT + "\nhbm_bandwidht_Bps = 1.0\n")
    assert "unknown key 'hbm_bandwidht_Bps'" in message
    assert "did you mean 'hbm_bandwidth_Bps'" in message
    message = error_of(tmp_path, H100_TEXT + "\nfrobnicate = 1\n")
    assert "unknown key 'frobnicate'" in message and "valid keys" in message
    # `sources` is filled from comments, never read from a key.
    assert "unknown key 'sources'" in error_of(tmp_path, H100_TEXT + "\nsources = 1\n")


@pytest.mark.parametrize(
    ("key", "line", "expected"),
    [
        ("sm_clock_hz", 'sm_clock_hz = "1.83e9"', "must be a number"),
        ("sm_count", "sm_count = 132.0", "must be an integer"),
        ("sm_count", "sm_count = true", "must be an integer"),
        ("has_tma", "has_tma = 1", "must be true or false"),
        ("display_name", "display_name = 7", "must be a non-empty string"),
        ("arch", 'arch = "volta"', "must be one of ampere, hopper"),
        ("l2_bandwidth_Bps", "l2_bandwidth_Bps = [1, 2]", "must be a number"),
        ("l2_bandwidth_Bps", "l2_bandwidth_Bps = nan", "must be a finite number"),
    ],
)
def test_wrong_type_names_file_and_key(tmp_path, key, line, expected):
    message = error_of(tmp_path, with_line(key, line))
    assert f"key {key!r}" in message and expected in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sm_count", "0"),
        ("hbm_bandwidth_Bps", "-3.35e12"),
        ("hbm_bandwidth_Bps", "0.0"),
        ("launch_overhead_s", "0.0"),
        ("tensor_fp16_mma_sync_flop_per_clk_per_sm", "0.0"),
    ],
)
def test_non_positive_is_rejected(tmp_path, key, value):
    message = error_of(tmp_path, with_line(key, f"{key} = {value}"))
    assert f"key {key!r}" in message and "positive" in message


def test_zero_rate_is_allowed_only_for_absent_paths(tmp_path):
    text = with_line("has_fp8", "has_fp8 = false")
    text = with_line(
        "tensor_fp8_wgmma_flop_per_clk_per_sm", "tensor_fp8_wgmma_flop_per_clk_per_sm = 0.0", text
    )
    assert load_text(tmp_path, text).tensor_fp8_wgmma_flop_per_clk_per_sm == 0
    negative = with_line(
        "tensor_fp8_wgmma_flop_per_clk_per_sm", "tensor_fp8_wgmma_flop_per_clk_per_sm = -1.0", text
    )
    assert ">= 0" in error_of(tmp_path, negative)


def test_efficiency_above_one_is_rejected(tmp_path):
    message = error_of(tmp_path, with_line("hbm_read_efficiency", "hbm_read_efficiency = 1.2"))
    assert "(0, 1]" in message


def test_flag_without_its_rate_is_rejected(tmp_path):
    text = with_line(
        "tensor_fp8_wgmma_flop_per_clk_per_sm", "tensor_fp8_wgmma_flop_per_clk_per_sm = 0.0"
    )
    assert "has_fp8 is true" in error_of(tmp_path, text)


def test_cta_smem_above_sm_smem_is_rejected(tmp_path):
    text = with_line("smem_bytes_per_cta_max", "smem_bytes_per_cta_max = 300_000")
    assert "exceeds smem_bytes_per_sm" in error_of(tmp_path, text)


def test_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "bin.toml"
    path.write_bytes(b"name = \xff\xfe\n")
    with pytest.raises(TilesimError, match="not UTF-8 text"):
        load_gpu(path)


# -- overlays: `base = ...` plus a few fields ------------------------------------------


def test_overlay_inherits_everything_it_does_not_set(tmp_path):
    text = 'base = "h200"\nhbm_bandwidth_Bps = 4.27e12  # micro-benchmark: copy\n'
    gpu = load_text(tmp_path, text, "h200_measured.toml")
    base = load_gpu("h200")
    assert gpu.name == "h200_measured"  # named after its file
    assert gpu.hbm_bandwidth_Bps == 4.27e12
    assert gpu.sources["hbm_bandwidth_Bps"] == "micro-benchmark: copy"
    assert gpu.sources["sm_count"] == base.sources["sm_count"]
    for key in ("sm_count", "l2_bytes", "display_name", "hbm_read_efficiency"):
        assert getattr(gpu, key) == getattr(base, key)


def test_overlay_of_a_path_relative_to_the_file(tmp_path):
    (tmp_path / "mine.toml").write_text(H100_TEXT)
    (tmp_path / "fast.toml").write_text('base = "mine.toml"\nsm_count = 140\n')
    assert load_gpu(tmp_path / "fast.toml").sm_count == 140


def test_overlay_values_are_validated_and_consistent(tmp_path):
    with pytest.raises(TilesimError, match="must be a positive integer"):
        load_text(tmp_path, 'base = "h100"\nsm_count = -1\n')
    with pytest.raises(TilesimError, match="exceeds smem_bytes_per_sm"):
        load_text(tmp_path, 'base = "h100"\nsmem_bytes_per_sm = 1024\n')
    with pytest.raises(TilesimError, match="unknown GPU 'nope'"):
        load_text(tmp_path, 'base = "nope"\n')
    with pytest.raises(TilesimError, match="key 'base' must name a preset"):
        load_text(tmp_path, "base = 3\n")


def test_a_loop_of_bases_is_an_error_not_a_hang(tmp_path):
    (tmp_path / "a.toml").write_text('base = "b.toml"\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\n')
    with pytest.raises(TilesimError, match="nested bases"):
        load_gpu(tmp_path / "a.toml")


# -- comments ---------------------------------------------------------------------


def test_read_comments_ignores_hash_inside_strings():
    text = (
        'display_name = "GPU #1"  # datasheet: the # is quoted above\n'
        "name = 'lit#eral'\n"
        'arch = "a\\"#b"  # paper\n'
        "# a comment line = not a key\n"
        "sm_count = 3   #   spaced out  \n"
        "regs_per_sm = 4 #\n"
    )
    assert read_comments(text) == {
        "display_name": "datasheet: the # is quoted above",
        "arch": "paper",
        "sm_count": "spaced out",
    }
