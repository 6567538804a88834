"""A GPU with no preset: one built from its device properties, then calibrated (CPU)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu, write_preset
from tilesim.hwmodels.provenance import source_kind
from tilesim.units import MiB
from tilesim.validate import calibrate, device
from tilesim.validate.schema import measurement

# What torch.cuda.get_device_properties reports for an L40S (Ada, compute capability 8.9).
L40S = SimpleNamespace(
    name="NVIDIA L40S",
    major=8,
    minor=9,
    multi_processor_count=142,
    L2_cache_size=96 * MiB,
    total_memory=47_697_362_944,
    regs_per_multiprocessor=65_536,
    max_threads_per_multi_processor=1536,
    shared_memory_per_multiprocessor=102_400,
    shared_memory_per_block_optin=101_376,
    clock_rate=2_520_000,
    memory_clock_rate=9_001_000,
    memory_bus_width=384,
)


def _measured_rows():
    return [
        measurement("device_sm_count", 142, "SMs", "props"),
        measurement("hbm_read", 0.78e12, "B/s", "stream_read 2 GiB"),
        measurement("hbm_write", 0.74e12, "B/s", "stream_write 2 GiB"),
        measurement(
            "tensor_fp16_mma_sync@128x128x64",
            170e12,
            "FLOP/s",
            "loop",
            dtype="fp16",
            path="mma_sync",
            clock_MHz=2400.0,
        ),
        measurement("exp2", 5.0e12, "ops/s", "exp2 loop", clock_MHz=2400.0),
        measurement("l2_latency", 1.2e-7, "s", "chase"),
        measurement("hbm_latency", 4.5e-7, "s", "chase"),
        measurement("sm_clock_sustained", 2.4e9, "Hz", "nvidia-smi", [2.4e9] * 9),
    ]


def test_the_device_properties_become_fields_and_the_rest_is_assumed():
    gpu = device.preset_from_properties(L40S)
    assert (gpu.name, gpu.display_name, gpu.arch) == ("nvidia_l40s", "NVIDIA L40S", "ampere")
    assert gpu.sm_count == 142 and gpu.l2_bytes == 96 * MiB
    assert gpu.smem_bytes_per_sm == 102_400 and gpu.smem_bytes_per_cta_max == 101_376
    assert gpu.max_warps_per_sm == 48 and gpu.sm_clock_hz == 2.52e9
    assert gpu.hbm_bandwidth_Bps == pytest.approx(864e9, rel=1e-3)  # 2 x 9001 MHz x 384 bit
    assert not (gpu.has_tma or gpu.has_wgmma or gpu.has_fp8)
    assert source_kind(gpu.sources["sm_count"]) == "reported"
    assert source_kind(gpu.sources["sfu_ops_per_clk_per_sm"]) == "assumed"
    assert "compute capability 8.9" in gpu.sources["sfu_ops_per_clk_per_sm"]


def test_calibrating_it_measures_what_the_benchmarks_reach_and_names_the_rest(tmp_path):
    base = device.preset_from_properties(L40S)
    gpu, fields, _ = calibrate.derive_preset(_measured_rows(), base, "2026-12-01")
    assert gpu.name == "nvidia_l40s.calibrated"
    assert gpu.tensor_fp16_mma_sync_flop_per_clk_per_sm == pytest.approx(
        170e12 / (142 * 2.4e9), rel=1e-3
    )
    assert gpu.hbm_read_Bps == pytest.approx(0.78e12, rel=1e-3)
    missing = device.unmeasured(gpu)
    assert "sfu_ops_per_clk_per_sm" not in missing  # measured (exp2)
    assert "fp32_ops_per_clk_per_sm" in missing and "sm_count" not in missing
    # a whole preset (no datasheet to overlay) that loads back as it was written
    path = write_preset(gpu, tmp_path / "nvidia_l40s.calibrated.toml", "test")
    assert load_gpu(path) == gpu


def test_a_hopper_device_gets_hopper_features():
    h100_pcie = SimpleNamespace(**{**vars(L40S), "name": "NVIDIA H100 PCIe", "major": 9})
    h100_pcie.minor, h100_pcie.multi_processor_count = 0, 114
    h100_pcie.shared_memory_per_multiprocessor = 233_472
    h100_pcie.shared_memory_per_block_optin = 232_448
    gpu = device.preset_from_properties(h100_pcie)
    assert gpu.arch == "hopper" and gpu.has_wgmma and gpu.has_fp8 and gpu.sm_count == 114


def test_validate_uses_the_preset_calibrate_built(monkeypatch):
    from tilesim.validate.gpu import run

    monkeypatch.setattr("tilesim.hwmodels.list_presets", lambda: ["nvidia_l40s.calibrated"])
    assert run.default_presets("NVIDIA L40S") == ["nvidia_l40s.calibrated"]
    monkeypatch.setattr("tilesim.hwmodels.list_presets", lambda: [])
    with pytest.raises(TilesimError, match="no datasheet preset"):
        run.default_presets("NVIDIA L40S")
