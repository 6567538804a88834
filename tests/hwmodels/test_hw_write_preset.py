"""write_preset: what it writes loads back equal, sources included; failures leave no file."""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilesim.errors import TilesimError
from tilesim.hwmodels import PRESETS_DIR, format_number, list_presets, load_gpu, write_preset

DATASHEET_PRESETS = ("a100_sxm4_80gb", "h100_sxm5_80gb", "h200_sxm_141gb")


@pytest.mark.parametrize("name", DATASHEET_PRESETS)
def test_full_preset_round_trips(tmp_path, name):
    gpu = load_gpu(name)
    path = write_preset(gpu, tmp_path / f"{name}.toml", "copy of a preset\nsecond line")
    back = load_gpu(path)
    assert back == gpu
    assert back.sources == gpu.sources
    text = path.read_text()
    assert text.startswith("# copy of a preset\n# second line\n")
    assert "# -- HBM" in text
    assert os.listdir(tmp_path) == [f"{name}.toml"]  # no temp file left behind


def test_awkward_values_and_sources_round_trip_exactly(tmp_path):
    gpu = load_gpu("h100_sxm5_80gb").with_overrides(
        {"sm_clock_hz": 1 / 3 * 1e9, "hbm_read_efficiency": 0.1 + 0.2, "l2_bytes": 123_456_789},
        sources={
            "sm_clock_hz": 'micro-benchmark: "quoted" # not a comment \\ backslash',
            "hbm_read_efficiency": "multi\nline  source",
            "l2_bytes": "",
        },
    )
    gpu = dataclasses.replace(gpu, display_name='GPU "#1" \\ tab\there')
    back = load_gpu(write_preset(gpu, tmp_path / "odd.toml", ""))
    assert back == gpu
    assert back.sm_clock_hz == 1 / 3 * 1e9
    assert back.display_name == gpu.display_name
    assert back.sources["sm_clock_hz"] == gpu.sources["sm_clock_hz"]
    assert back.sources["hbm_read_efficiency"] == "multi line source"  # one line per field
    assert "l2_bytes" not in back.sources


def test_overlay_writes_only_what_differs_from_the_base(tmp_path):
    measured = load_gpu("h200_sxm_141gb").with_overrides(
        {"hbm_bandwidth_Bps": 4.27e12, "sm_clock_hz": 1.98e9},
        sources={
            "hbm_bandwidth_Bps": "micro-benchmark: copy 4.27 TB/s",
            "sm_clock_hz": "micro-benchmark: nvidia-smi",
        },
        name="h200_measured",
    )
    path = write_preset(
        measured, tmp_path / "h200_measured.toml", "measured", base="h200_sxm_141gb"
    )
    data = tomllib.loads(path.read_text())
    assert set(data) == {"base", "name", "display_name", "hbm_bandwidth_Bps", "sm_clock_hz"}
    back = load_gpu(path)
    assert back == measured
    assert back.sources["hbm_bandwidth_Bps"] == "micro-benchmark: copy 4.27 TB/s"
    assert back.sources["sm_count"] == load_gpu("h200_sxm_141gb").sources["sm_count"]


def test_calibrated_overlay_is_loadable_by_name_and_alias(tmp_path, monkeypatch):
    for name in DATASHEET_PRESETS:
        (tmp_path / f"{name}.toml").write_text((PRESETS_DIR / f"{name}.toml").read_text())
    monkeypatch.setattr("tilesim.hwmodels.presets.PRESETS_DIR", tmp_path)
    measured = load_gpu("h200_sxm_141gb").with_overrides(
        {"hbm_bandwidth_Bps": 4.27e12},
        sources={"hbm_bandwidth_Bps": "micro-benchmark: copy"},
        name="h200_sxm_141gb.calibrated",
    )
    write_preset(
        measured, tmp_path / "h200_sxm_141gb.calibrated.toml", "calibrated", base="h200_sxm_141gb"
    )
    assert "h200_sxm_141gb.calibrated" in list_presets()
    assert load_gpu("h200-cal") == load_gpu("h200_sxm_141gb.calibrated") == measured
    assert load_gpu("h200-cal").name == "h200_sxm_141gb.calibrated"


def test_only_restricts_the_overlay_and_must_cover_the_differences(tmp_path):
    gpu = load_gpu("h100_sxm5_80gb").with_overrides({"sm_count": 100, "l2_bytes": 1_000_000})
    with pytest.raises(TilesimError, match="does not read back"):
        write_preset(gpu, tmp_path / "x.toml", "", base="h100_sxm5_80gb", only=["sm_count"])
    assert not (tmp_path / "x.toml").exists()
    named = dataclasses.replace(gpu, name="x")
    path = write_preset(
        named, tmp_path / "x.toml", "", base="h100_sxm5_80gb", only=["sm_count", "l2_bytes"]
    )
    assert load_gpu(path) == named
    with pytest.raises(TilesimError, match="unknown field"):
        write_preset(named, tmp_path / "y.toml", "", base="h100_sxm5_80gb", only=["bogus"])


def test_invalid_gpu_writes_nothing_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "keep.toml"
    path.write_text("old contents\n")
    bad = dataclasses.replace(load_gpu("h100_sxm5_80gb"), sm_count=0)
    with pytest.raises(TilesimError, match="sm_count"):
        write_preset(bad, path, "header")
    assert path.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["keep.toml"]
    nan = dataclasses.replace(load_gpu("h100_sxm5_80gb"), l2_bandwidth_Bps=math.nan)
    with pytest.raises(TilesimError, match="finite"):
        write_preset(nan, tmp_path / "nan.toml", "header")
    assert os.listdir(tmp_path) == ["keep.toml"]


def test_failure_while_writing_removes_the_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "keep.toml"
    path.write_text("old contents\n")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(TilesimError, match="No space left"):
        write_preset(load_gpu("h100_sxm5_80gb"), path, "header")
    assert path.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["keep.toml"]


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(TilesimError, match="does not exist"):
        write_preset(load_gpu("h100_sxm5_80gb"), tmp_path / "no" / "such.toml", "")


@given(st.floats(min_value=1e-12, max_value=1e18, allow_nan=False, allow_infinity=False))
def test_format_number_reads_back_exactly_as_toml_and_python(value):
    text = format_number(value)
    assert tomllib.loads(f"x = {text}")["x"] == value
    assert isinstance(tomllib.loads(f"x = {text}")["x"], float)
    assert float(text) == value


def test_format_number_is_short():
    assert format_number(1.83e9) == "1.83e9"
    assert format_number(3e-6) == "3e-6"
    assert format_number(16.0) == "16.0"
    assert format_number(0.938) == "0.938"
    assert format_number(132) == "132"
    assert format_number(True) == "true"
