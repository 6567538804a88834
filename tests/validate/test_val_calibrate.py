"""Calibration: measured figures -> preset fields, by explicit arithmetic."""

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu, write_preset
from tilesim.hwmodels.presets import base_preset_for
from tilesim.units import MiB
from tilesim.validate import calibrate, calibration_figures
from tilesim.validate.schema import measurement

SMS = 132


def _rows(with_clock=True):
    rows = [
        measurement("device_sm_count", SMS, "SMs", "props"),
        measurement("hbm_read", 4.2e12, "B/s", "stream_read 2 GiB"),
        measurement("hbm_write", 4.08e12, "B/s", "stream_write 2 GiB"),
        measurement("hbm_copy", 4.0e12, "B/s", "copy"),
        measurement("hbm_mix_50", 3.6e12, "B/s", "stream of 1 reads : 1 writes"),
        measurement("hbm_mix_90", 3.5e12, "B/s", "stream of 1 reads : 9 writes", date="12-03"),
        measurement(
            "tensor_fp16_wgmma@128x128x64",
            800e12,
            "FLOP/s",
            "loop",
            dtype="fp16",
            path="wgmma",
            clock_MHz=1980.0,
        ),
        measurement(
            "tensor_bf16_wgmma@128x128x64",
            810e12,
            "FLOP/s",
            "loop",
            dtype="bf16",
            path="wgmma",
            clock_MHz=1980.0,
        ),
        measurement(
            "tensor_fp16_wgmma@128x64x128",
            700e12,
            "FLOP/s",
            "loop",
            dtype="fp16",
            path="wgmma",
            clock_MHz=1980.0,
        ),
        measurement(
            "tensor_fp8_wgmma@128x128x128",
            1600e12,
            "FLOP/s",
            "loop",
            dtype="fp8",
            path="wgmma",
            clock_MHz=1980.0,
        ),
        measurement(
            "tensor_fp16_mma_sync@128x128x64",
            500e12,
            "FLOP/s",
            "loop",
            dtype="fp16",
            path="mma_sync",
            clock_MHz=1900.0,
        ),
        measurement("exp2", 4.0e12, "ops/s", "exp2 loop", clock_MHz=1980.0),
        measurement("fp32_fma", 3.2e13, "ops/s", "fma loop"),
        measurement("l2_latency", 2.0e-7, "s", "chase"),
        measurement("hbm_latency", 4.0e-7, "s", "chase"),
        measurement("launch_do_bench", 3.1e-6, "s", "empty"),
    ]
    for mib, tbps in ((8, 13.0), (16, 12.0), (24, 10.8), (32, 8.0), (40, 5.8)):
        rows.append(
            measurement(f"l2_read@{mib}MiB", tbps * 1e12, "B/s", "stream", size_bytes=mib * MiB)
        )
    if with_clock:
        rows.append(measurement("sm_clock_sustained", 1.75e9, "Hz", "nvidia-smi", [1.75e9] * 9))
    return rows


def test_measurements_become_preset_fields():
    base = load_gpu("h200_sxm_141gb")
    gpu, fields, notes = calibrate.derive_preset(_rows(), base, "2026-11-30")
    assert gpu.name == "h200_sxm_141gb.calibrated"
    assert gpu.sm_clock_hz == 1.75e9
    # best fp16-class shape (bf16 810 TFLOP/s) / (132 SMs x its 1980 MHz)
    assert gpu.tensor_fp16_wgmma_flop_per_clk_per_sm == pytest.approx(
        810e12 / (SMS * 1.98e9), rel=1e-3
    )
    assert gpu.tensor_fp8_wgmma_flop_per_clk_per_sm == pytest.approx(
        1600e12 / (SMS * 1.98e9), rel=1e-3
    )
    assert gpu.tensor_fp16_mma_sync_flop_per_clk_per_sm == pytest.approx(
        500e12 / (SMS * 1.9e9), rel=1e-3
    )
    assert gpu.sfu_ops_per_clk_per_sm == pytest.approx(4.0e12 / (SMS * 1.98e9), rel=1e-3)
    # no clock sampled during the FMA run: the sustained clock
    assert gpu.fp32_ops_per_clk_per_sm == pytest.approx(3.2e13 / (SMS * 1.75e9), rel=1e-3)
    assert gpu.hbm_read_efficiency == pytest.approx(4.2 / 4.8, rel=1e-3)
    assert gpu.hbm_write_efficiency == pytest.approx(4.08 / 4.8, rel=1e-3)
    # the mixed streams: those measured, over the peak, between the read and the write
    curve = gpu.hbm_mix_curve()
    assert [w for w, _ in curve] == [0.0, 0.5, 0.9, 1.0]
    assert [e for _, e in curve] == pytest.approx(
        [4.2 / 4.8, 3.6 / 4.8, 3.5 / 4.8, 4.08 / 4.8], rel=1e-3
    )
    assert gpu.hbm_mix_25_efficiency == 0.0
    assert gpu.sources["hbm_mix_90_efficiency"].startswith("micro-benchmark 12-03")
    # largest working set <= L2/2 (30 MiB of 60): 24 MiB
    assert gpu.l2_bandwidth_Bps == pytest.approx(10.8e12)
    assert gpu.l2_hit_latency_cycles == pytest.approx(2.0e-7 * 1.75e9, rel=1e-2)
    assert gpu.hbm_latency_cycles == pytest.approx(4.0e-7 * 1.75e9, rel=1e-2)
    assert gpu.launch_overhead_s == pytest.approx(3.1e-6)
    # untouched fields stay the datasheet's
    assert gpu.hbm_bandwidth_Bps == base.hbm_bandwidth_Bps
    assert gpu.smem_bytes_per_sm == base.smem_bytes_per_sm
    assert "sm_count" not in fields and "hbm_bandwidth_Bps" not in fields
    assert "hbm_read_efficiency" in fields and not notes
    # each changed field says how it was measured
    for f in fields:
        assert gpu.sources[f].startswith(
            "micro-benchmark 2026-11-30"
            if f != "hbm_mix_90_efficiency"
            else "micro-benchmark 12-03"
        ), f
    assert "24 MiB" in gpu.sources["l2_bandwidth_Bps"]


def test_clock_derived_from_flops_when_not_sampled():
    base = load_gpu("h200_sxm_141gb")
    gpu, _, notes = calibrate.derive_preset(_rows(with_clock=False), base, "2026-11-30")
    # best fp16 wgmma FLOP/s / (SMs x datasheet 4096 FLOP/clk/SM)
    assert gpu.sm_clock_hz == pytest.approx(810e12 / (SMS * 4096), rel=1e-3)
    assert "derived" in gpu.sources["sm_clock_hz"]
    assert notes


def test_efficiency_above_peak_is_clamped_with_a_note():
    rows = [measurement("hbm_read", 5.0e12, "B/s", "x")]
    gpu, fields, notes = calibrate.derive_preset(rows, load_gpu("h200_sxm_141gb"), "d")
    assert gpu.hbm_read_efficiency == 1.0 and fields == ["hbm_read_efficiency"]
    assert any("beats the datasheet" in n for n in notes)


def test_a_different_sm_count_is_taken_from_the_driver():
    rows = [
        measurement("device_sm_count", 114, "SMs", "props"),
        measurement("exp2", 4.0e12, "ops/s", "x", clock_MHz=1000.0),
    ]
    gpu, fields, _ = calibrate.derive_preset(rows, load_gpu("h200_sxm_141gb"), "d")
    assert gpu.sm_count == 114
    assert gpu.sfu_ops_per_clk_per_sm == pytest.approx(4.0e12 / (114 * 1e9), rel=1e-3)


def test_calibrated_preset_round_trips_through_write_preset(tmp_path):
    base = load_gpu("h200_sxm_141gb")
    gpu, fields, _ = calibrate.derive_preset(_rows(), base, "2026-11-30")
    path = tmp_path / "h200_sxm_141gb.calibrated.toml"
    write_preset(gpu, path, "calibrated by a test", base=base.name, only=fields)
    text = path.read_text()
    assert 'base = "h200_sxm_141gb"' in text
    assert load_gpu(str(path)) == gpu


def test_pick_l2_point():
    curve = [{"size_bytes": s * MiB, "value": v} for s, v in ((8, 3), (16, 2), (48, 1))]
    assert calibration_figures.pick_l2_bandwidth(curve, 40 * MiB)["size_bytes"] == 16 * MiB
    assert calibration_figures.pick_l2_bandwidth(curve, 8 * MiB) is None


def test_base_preset_for_device_names():
    assert base_preset_for("NVIDIA H200") == "h200_sxm_141gb"
    assert base_preset_for("NVIDIA H100 80GB HBM3") == "h100_sxm5_80gb"
    assert base_preset_for("NVIDIA A100-SXM4-80GB") == "a100_sxm4_80gb"
    with pytest.raises(TilesimError, match="--base"):
        base_preset_for("NVIDIA GeForce RTX 4090")


def _vector_row(warps, ctas, seconds, rows=64, cols=64):
    return measurement(
        f"vector_step_{warps}w_{ctas}cta",
        seconds,
        "s/step",
        "softmax tile loop",
        clock_MHz=2000.0,
        warps=warps,
        ctas_per_sm=ctas,
        rows=rows,
        cols=cols,
    )


def test_vector_warps_per_scheduler_is_measured_over_pipe_time():
    from tilesim.traces.tiles import FLASH_FP32_PER_ROW_STEP, FLASH_FP32_PER_SCORE

    base = load_gpu("h200_sxm_141gb")
    sfu = 4.0e12 / (SMS * 1.98e9)  # the exp2 row of _rows()
    fp32 = 3.2e13 / (SMS * 1.75e9)
    exp, fp32_ops = 64 * 64 + 64, 64 * 64 * FLASH_FP32_PER_SCORE + 64 * FLASH_FP32_PER_ROW_STEP
    pipe = exp / sfu + fp32_ops / fp32  # the vector pipe: SFU then FP32 work
    # one warp per scheduler: 2.5x the pipe time; two CTAs of 16 warps: the pipe rate
    rows = _rows() + [
        _vector_row(4, 1, 2.5 * pipe / 2.0e9),
        _vector_row(16, 2, 2 * pipe / 2.0e9),
    ]
    gpu, fields, _ = calibrate.derive_preset(rows, base, "2026-11-30")
    assert gpu.vector_warps_per_scheduler == pytest.approx(2.5, rel=1e-3)
    assert "4 warps x 1 CTA/SM 2.50" in gpu.sources["vector_warps_per_scheduler"]
    assert "16 warps x 2 CTA/SM 1.00" in gpu.sources["vector_warps_per_scheduler"]
    # faster than the pipes at one warp per scheduler: never below 1
    fast = _rows() + [_vector_row(4, 1, 0.5 * pipe / 2.0e9)]
    assert calibrate.derive_preset(fast, base, "d")[0].vector_warps_per_scheduler == 1.0
    # not measured: the datasheet preset's value stays
    assert calibrate.derive_preset(_rows(), base, "d")[0].vector_warps_per_scheduler == (
        base.vector_warps_per_scheduler
    )


def _loaded(level, points):
    return [
        measurement(f"{level}_latency_loaded@{k}", lat, "s", "chase under load", stream_Bps=bw)
        for k, (bw, lat) in enumerate(points)
    ]


def test_loaded_latency_curve_stops_before_saturation():
    # streams of 0, 2, 3.5, 4.4 and 4.5 TB/s: the last is the top (saturated), the one
    # before it 97.8% of it (kept); latency 350 ns idle rising to 600 ns, then 1 us
    points = [(0, 350e-9), (2e12, 360e-9), (3.5e12, 400e-9), (4.4e12, 600e-9), (4.5e12, 1e-6)]
    rows = _loaded("hbm", points)
    curve = calibration_figures.loaded_latency_curve(rows)
    assert [u for u, _ in curve] == pytest.approx([0.0, 2 / 4.5, 3.5 / 4.5, 4.4 / 4.5])
    assert curve[-1][1] == 600e-9  # the saturated 1 us is the bandwidth queue: left out
    base = load_gpu("h200_sxm_141gb")
    gpu, fields, _ = calibrate.derive_preset(_rows() + rows, base, "d")
    clock = 1.75e9
    want50 = 360e-9 + 40e-9 * (0.5 - 2 / 4.5) / (1.5 / 4.5)
    assert gpu.hbm_latency_50_cycles == pytest.approx(want50 * clock, rel=2e-3)
    want95 = 400e-9 + 200e-9 * (0.95 - 3.5 / 4.5) / (0.9 / 4.5)
    assert gpu.hbm_latency_95_cycles == pytest.approx(want95 * clock, rel=2e-3)
    assert gpu.hbm_latency_cycles == pytest.approx(400e-9 * clock, rel=2e-3)  # `hbm_latency`
    assert "at 95% busy" in gpu.sources["hbm_latency_95_cycles"]
    # no L2 rows: the L2's loaded latencies stay the datasheet's
    assert "l2_hit_latency_50_cycles" not in fields
    assert gpu.l2_hit_latency_50_cycles == base.l2_hit_latency_50_cycles


def _tile(w, nbytes, seconds):
    return measurement(
        f"hbm_tile_{w}w_{nbytes // 1024}k", seconds, "s", "tiles", warps=w, tile_bytes=nbytes
    )


def test_tile_extra_latency_is_the_zero_byte_intercept_less_the_chase():
    # 8 warps: 16 KB 800 ns, 32 KB 850 ns -> 750 ns at zero bytes; 4 warps: 870 / 930
    # -> 810 ns; the chase (``hbm_latency`` in _rows) is 400 ns: 350 and 410, median 380
    tiles = [_tile(8, 16384, 800e-9), _tile(8, 32768, 850e-9)]
    tiles += [_tile(4, 16384, 870e-9), _tile(4, 32768, 930e-9)]
    base = load_gpu("h200_sxm_141gb")
    gpu, fields, _ = calibrate.derive_preset(_rows() + tiles, base, "d")
    assert gpu.hbm_tile_extra_cycles == pytest.approx(380e-9 * 1.75e9, rel=2e-3)
    assert "4 warps 410 ns" in gpu.sources["hbm_tile_extra_cycles"]
    # without the tile rows (or without the chase) the datasheet's 0 stays
    assert calibrate.derive_preset(_rows(), base, "d")[0].hbm_tile_extra_cycles == 0.0
    no_chase = [r for r in _rows() if r["name"] != "hbm_latency"] + tiles
    assert calibrate.derive_preset(no_chase, base, "d")[0].hbm_tile_extra_cycles == 0.0


def _chase_tile(w, nbytes, seconds, **extra):
    return measurement(
        f"hbm_tile_chase_{w}w_{nbytes}B", seconds, "s", "walk", warps=w, tile_bytes=nbytes, **extra
    )


def test_small_load_extra_is_over_a_256_byte_tile_of_the_same_walk():
    # 4 warps: 256 B 450 ns, 2 KiB 510, 8 KiB 640; 8 warps: 460 / 530 / 650 -> 2 KiB
    # 60 and 70 ns (median 65), 8 KiB 190 and 190; the chase rows do not enter the
    # streamed tiles' intercept
    rows = [_tile(8, 16384, 800e-9), _tile(8, 32768, 850e-9)]
    for w, times in ((4, (450e-9, 510e-9, 640e-9)), (8, (460e-9, 530e-9, 650e-9))):
        rows += [_chase_tile(w, b, t) for b, t in zip((256, 2048, 8192), times, strict=True)]
    base = load_gpu("h200_sxm_141gb")
    gpu, fields, _ = calibrate.derive_preset(_rows() + rows, base, "d")
    assert gpu.hbm_tile_extra_2KiB_cycles == pytest.approx(65e-9 * 1.75e9, abs=0.5)  # 3 digits
    assert gpu.hbm_tile_extra_8KiB_cycles == pytest.approx(190e-9 * 1.75e9, rel=2e-3)
    assert gpu.hbm_tile_extra_cycles == pytest.approx(350e-9 * 1.75e9, rel=2e-3)
    assert "4 warps 60 ns, 8 warps 70 ns" in gpu.sources["hbm_tile_extra_2KiB_cycles"]
    assert gpu.sources["hbm_tile_extra_2KiB_cycles"].startswith("micro-benchmark d:")
    # rows from a later run (their date stamped by --from-results) say so
    later = [{**r, "date": "e"} if r["name"].startswith("hbm_tile_chase_") else r for r in rows]
    gpu = calibrate.derive_preset(_rows() + later, base, "d")[0]
    assert gpu.sources["hbm_tile_extra_8KiB_cycles"].startswith("micro-benchmark e:")
    assert gpu.sources["hbm_tile_extra_cycles"].startswith("micro-benchmark d:")
    # without the 256 B walk there is nothing to take the walk's own cost out of
    no_base = [r for r in rows if r.get("tile_bytes") != 256 or "chase" not in r["name"]]
    assert (
        "hbm_tile_extra_2KiB_cycles" not in calibrate.derive_preset(_rows() + no_base, base, "d")[1]
    )


def _store_chain(w, nbytes, seconds, **extra):
    return measurement(
        f"hbm_store_chain_{w}w_{nbytes}B",
        seconds,
        "s",
        "chain",
        warps=w,
        tile_bytes=nbytes,
        **extra,
    )


def test_store_port_rate_is_bytes_over_seconds_between_the_two_largest_tiles():
    # 4 warps: 16 -> 32 KiB in 300 ns (54.6 GB/s), at 1820 MHz: 30.0 B/clk; 8 warps:
    # 400 ns (41.0 GB/s) at 2048 MHz: 20.0 B/clk; the smaller tiles (fixed costs) do not
    # enter; the 32 KiB row without a clock sample takes its partner's
    rows = [_store_chain(4, 256, 270e-9, clock_MHz=1820.0)]
    rows += [_store_chain(4, 16384, 700e-9, clock_MHz=1820.0), _store_chain(4, 32768, 1000e-9)]
    rows += [_store_chain(8, 2048, 9e-6, clock_MHz=2048.0)]
    rows += [_store_chain(8, b, t, clock_MHz=2048.0) for b, t in ((16384, 7e-7), (32768, 11e-7))]
    base = load_gpu("h200_sxm_141gb")
    gpu, fields, _ = calibrate.derive_preset(_rows() + rows, base, "d")
    assert gpu.store_bandwidth_B_per_clk_per_sm == pytest.approx(25.0, rel=2e-3)  # median
    assert "4 warps 54.6 GB/s at 1820 MHz" in gpu.sources["store_bandwidth_B_per_clk_per_sm"]
    # without the chains the datasheet's 0 (no port) stays
    assert "store_bandwidth_B_per_clk_per_sm" not in calibrate.derive_preset(_rows(), base, "d")[1]
    assert base.store_bandwidth_B_per_clk_per_sm == 0.0


def test_loaded_latency_needs_the_idle_point():
    rows = _loaded("l2", [(5e12, 3.5e-7), (9e12, 3.6e-7)])  # no 0-stream chase: no curve
    assert calibration_figures.loaded_latency_curve(rows) == []


def test_the_sm_cycle_counter_clock_wins_over_nvidia_smi():
    # a kernel's own %clock64 / %globaltimer is what its SMs ran at: per-clock rates use
    # it where a row has it, and tensor_clock_ratio is its median ratio to nvidia-smi's
    # reading over the tensor-core rows; nvidia-smi's clock stays sm_clock_hz
    rows = _rows()
    for row in rows:
        if row["name"] == "tensor_bf16_wgmma@128x128x64":  # the best fp16-class FLOP/s
            row["clock_effective_MHz"] = 1782.0  # 0.90 x 1980
        if row["name"] == "tensor_fp8_wgmma@128x128x128":
            row["clock_effective_MHz"] = 1801.8  # 0.91 x 1980
        if row["name"] == "tensor_fp16_mma_sync@128x128x64":
            row["clock_effective_MHz"] = 1748.0  # 0.92 x 1900
        if row["name"] == "exp2":
            row["clock_effective_MHz"] = 1960.0  # not a tensor row: no part in the ratio
    gpu, fields, _ = calibrate.derive_preset(rows, load_gpu("h200_sxm_141gb"), "2026-11-30")
    assert gpu.sm_clock_hz == 1.75e9
    assert gpu.tensor_clock_ratio == pytest.approx(0.91)
    assert "median of 3 (0.900-0.920)" in gpu.sources["tensor_clock_ratio"]
    assert gpu.tensor_fp16_wgmma_flop_per_clk_per_sm == pytest.approx(
        810e12 / (SMS * 1.782e9), rel=1e-3
    )
    assert "SM cycle counter" in gpu.sources["tensor_fp16_wgmma_flop_per_clk_per_sm"]
    assert gpu.sfu_ops_per_clk_per_sm == pytest.approx(4.0e12 / (SMS * 1.96e9), rel=1e-3)
    assert "nvidia-smi" in gpu.sources["fp32_ops_per_clk_per_sm"]


def test_without_cycle_counters_tensor_kernels_keep_the_clock():
    gpu, fields, _ = calibrate.derive_preset(_rows(), load_gpu("h200_sxm_141gb"), "2026-11-30")
    assert "tensor_clock_ratio" not in fields and gpu.tensor_clock_ratio == 1.0


def test_cta_turnaround_pairs_each_freed_slot_with_the_next_start():
    from tilesim.validate.gpu.steps.turnaround import turnaround_gaps

    # two slots on SM 0: CTAs end at 100 and 120; the next two start at 130 and 150;
    # SM 1 has one slot: end 200, next start 260
    stamps = [(0, 0, 100), (0, 5, 120), (0, 130, 300), (0, 150, 320)]
    stamps += [(1, 0, 200), (1, 260, 400)]
    assert sorted(turnaround_gaps(stamps[:4], 2)) == [30, 30]
    assert turnaround_gaps(stamps[4:], 1) == [60]


def test_cta_turnaround_comes_from_the_8_warp_row():
    rows = _rows() + [
        measurement("cta_turnaround_8w", 350.0, "cycles", "spin", [350.0] * 7, warps=8),
        measurement("cta_turnaround_32w", 341.0, "cycles", "spin", [341.0] * 7, warps=32),
    ]
    gpu, fields, _ = calibrate.derive_preset(rows, load_gpu("h200_sxm_141gb"), "2026-11-30")
    assert gpu.cta_turnaround_cycles == 350.0
    assert "32 warps 341" in gpu.sources["cta_turnaround_cycles"]


def test_cta_dispatch_comes_from_the_4_warp_row_with_its_own_date():
    rows = _rows() + [
        {**measurement("cta_dispatch_1w", 1.21, "cycles", "empty grids", warps=1), "date": "d2"},
        {**measurement("cta_dispatch_4w", 1.19, "cycles", "empty grids", warps=4), "date": "d2"},
    ]
    gpu, fields, _ = calibrate.derive_preset(rows, load_gpu("h200_sxm_141gb"), "d1")
    assert gpu.cta_dispatch_cycles == 1.19 and "cta_dispatch_cycles" in fields
    assert gpu.sources["cta_dispatch_cycles"].startswith("micro-benchmark d2: empty grids")
    assert "1 warps 1.21" in gpu.sources["cta_dispatch_cycles"]


def _chain(m, k, dots, cycles):
    name = f"mma_chain{'2' if dots == 2 else ''}_wgmma@{m}x{k}x{k}"
    return {**measurement(name, cycles, "cycles", "chain", tile=[m, k, k], dots=dots), "date": "d2"}


def test_wgmma_latency_is_the_second_dot_less_its_pipe_time_at_zero_elements():
    # the second dot of a pair: latency 40 + 0.01 cycles per A element + its pipe time
    # (2 m k k / 4000); the one-dot step's own cost (store, fence, barrier) cancels
    rows = []
    for m, k in ((64, 16), (64, 64), (128, 32), (128, 64)):
        one = 150.0 + 0.03 * m * k
        rows += [_chain(m, k, 1, one), _chain(m, k, 2, one + 40 + 0.01 * m * k + m * k * k / 2000)]
    cycles, seen, when = calibration_figures.wgmma_latency(rows, 4000.0)
    assert cycles == pytest.approx(40.0, rel=1e-9) and when == "d2"
    assert "64x16 50" in seen and "0.0100 cycles an element" in seen
    assert calibration_figures.wgmma_latency(rows[:2], 4000.0) is None  # one shape: no line
    base = load_gpu("h200_sxm_141gb")
    gpu, fields, _ = calibrate.derive_preset(_rows() + rows, base, "d1")
    assert "wgmma_latency_cycles" in fields and gpu.wgmma_latency_cycles > 0
    assert gpu.sources["wgmma_latency_cycles"].startswith("micro-benchmark d2: dependent")


def test_from_results_rederives_the_preset_on_the_cpu(tmp_path):
    # `calibrate --from-results` writes the preset derive_preset gives for the file's rows
    import subprocess
    import sys

    from tilesim.validate import schema

    doc = schema.new_results("calibrate", {"date": "2026-11-30", "base_preset": "h200_sxm_141gb"})
    doc["measurements"] = _rows()
    schema.save_results(doc, tmp_path / "cal.json")
    out = tmp_path / "h200.calibrated.toml"
    r = subprocess.run(
        [sys.executable, "-m", "tilesim", "calibrate", "--from-results", str(tmp_path / "cal.json"),
         "--preset-out", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    want, _, _ = calibrate.derive_preset(_rows(), load_gpu("h200_sxm_141gb"), "2026-11-30")
    got = load_gpu(out)
    assert got.sm_clock_hz == want.sm_clock_hz == 1.75e9
    assert got.l2_bandwidth_Bps == want.l2_bandwidth_Bps
    # a later run's file adds the small loads: their fields carry its date, the rest the first's
    later = schema.new_results("calibrate", {"date": "2026-12-01", "base_preset": "h200_sxm_141gb"})
    later["measurements"] = [
        _chase_tile(w, b, t)
        for w in (4, 8)
        for b, t in ((256, 450e-9), (2048, 520e-9), (8192, 640e-9))
    ]
    schema.save_results(later, tmp_path / "tile.json")
    r = subprocess.run(
        [sys.executable, "-m", "tilesim", "calibrate", "--from-results", str(tmp_path / "cal.json"),
         "--from-results", str(tmp_path / "tile.json"), "--preset-out", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = load_gpu(out)
    assert got.hbm_tile_extra_2KiB_cycles == pytest.approx(70e-9 * 1.75e9, abs=0.5)
    assert got.sources["hbm_tile_extra_2KiB_cycles"].startswith("micro-benchmark 2026-12-01:")
    assert got.sources["sm_clock_hz"].startswith("micro-benchmark 2026-11-30:")
