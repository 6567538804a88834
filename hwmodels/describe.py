"""Figures a reader compares against a datasheet, derived from a GPU's fields.

A preset stores per-SM, per-clock rates because that is what the engine
simulates; a datasheet quotes whole-chip peaks. These are the bridge (and the
numbers `tilesim hw show` prints and the tests check against the datasheets).
"""

from __future__ import annotations

from .gpu import GPU


def derived_figures(gpu: GPU) -> dict[str, dict]:
    """``{key: {"value", "unit", "how"}}``: peaks at ``sm_clock_hz`` and the roofline ridge.

    Keys carry their unit; instruction paths a GPU lacks are left out.
    """
    tera, giga = 1e12, 1e9
    per_clock = f"x {gpu.sm_count} SMs x {gpu.sm_clock_hz / giga:g} GHz"
    figures: dict[str, dict] = {}

    def add(key: str, value: float, unit: str, how: str) -> None:
        figures[key] = {"value": value, "unit": unit, "how": how}

    ratio = f" x {gpu.tensor_clock_ratio:g}" if gpu.tensor_clock_ratio != 1 else ""
    tensor_paths = [("fp16", "mma_sync")]
    if gpu.has_wgmma:
        tensor_paths.append(("fp16", "wgmma"))
    if gpu.has_fp8:
        tensor_paths.append(("fp8", "wgmma"))
    for dtype, path in tensor_paths:
        rate = gpu.tensor_flop_per_clk_per_sm(dtype, path)
        add(
            f"tensor_{dtype}_{path}_TFLOPS",
            gpu.peak_tensor_flops(dtype, path) / tera,
            "TFLOPS",
            f"{rate:g} FLOP/clk/SM {per_clock}{ratio} (dense"
            f"{'; bf16 = fp16' if dtype == 'fp16' else ''})",
        )
    add(
        "fp32_TFLOPS",
        gpu.peak_fp32_flops / tera,
        "TFLOPS",
        f"2 x {gpu.fp32_ops_per_clk_per_sm:g} lanes {per_clock} (FMA = 2 FLOPs)",
    )
    add(
        "sfu_Tops",
        gpu.peak_sfu_ops / tera,
        "Tops/s",
        f"{gpu.sfu_ops_per_clk_per_sm:g}/clk/SM {per_clock}",
    )
    add("hbm_peak_GBps", gpu.hbm_bandwidth_Bps / giga, "GB/s", "hbm_bandwidth_Bps")
    add(
        "hbm_read_GBps",
        gpu.hbm_read_Bps / giga,
        "GB/s",
        f"peak x read efficiency {gpu.hbm_read_efficiency:g}",
    )
    add(
        "hbm_write_GBps",
        gpu.hbm_write_Bps / giga,
        "GB/s",
        f"peak x write efficiency {gpu.hbm_write_efficiency:g}",
    )
    add("l2_GBps", gpu.l2_bandwidth_Bps / giga, "GB/s", "l2_bandwidth_Bps")
    add(
        "smem_GBps",
        gpu.smem_bandwidth_Bps / giga,
        "GB/s",
        f"{gpu.smem_bandwidth_B_per_clk_per_sm:g} B/clk/SM {per_clock}",
    )
    for dtype, path in tensor_paths:
        add(
            f"ridge_{dtype}_{path}_flop_per_byte",
            gpu.ridge_point_flop_per_byte(dtype, path),
            "FLOP/B",
            f"tensor_{dtype}_{path} peak / HBM peak (lower intensity: HBM-bound)",
        )
    add("l2_MiB", gpu.l2_bytes / 2**20, "MiB", "l2_bytes / 2^20")
    add("smem_KiB_per_sm", gpu.smem_bytes_per_sm / 1024, "KiB", "smem_bytes_per_sm / 1024")
    add("hbm_GiB", gpu.hbm_bytes / 2**30, "GiB", "hbm_bytes / 2^30")
    return figures
