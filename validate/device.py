"""A starting preset for a CUDA GPU that has none, from what its driver reports.

``torch.cuda.get_device_properties`` gives the SM count, shared memory, registers,
L2, memory size and (where the driver reports them) the clocks and memory bus; the
rest starts from the preset of the nearest architecture tilesim models, each such
field marked "assumed". `tilesim calibrate` then measures what its micro-benchmarks
cover; :func:`unmeasured` names what is still assumed afterwards.
"""

from __future__ import annotations

import dataclasses
import re

from ..hwmodels.gpu import GPU
from ..hwmodels.presets import load_gpu
from ..hwmodels.provenance import source_kind

# Compute capability major -> the preset whose per-clock figures stand in until measured.
FAMILY = {9: "h100_sxm5_80gb", 8: "a100_sxm4_80gb"}


def device_slug(device_name: str) -> str:
    """A preset name for a device: "NVIDIA L40S" -> "nvidia_l40s"."""
    return re.sub(r"[^a-z0-9]+", "_", device_name.lower()).strip("_") or "gpu"


def preset_from_properties(props) -> GPU:
    """The `GPU` of a device from its torch properties (any object with their names)."""
    major, minor = int(props.major), int(getattr(props, "minor", 0))
    family = load_gpu(FAMILY.get(major, FAMILY[8] if major < 9 else FAMILY[9]))
    cc = f"{major}.{minor}"
    hopper = major >= 9
    values: dict = {}
    sources = {
        key: f"assumed: {family.name}'s figure (compute capability {cc} has no preset; "
        f"`tilesim calibrate` replaces it where a micro-benchmark measures it): {text}"
        for key, text in family.sources.items()
    }

    def report(field: str, value, what: str) -> None:
        values[field] = value
        sources[field] = f"device properties: {what}"

    report("sm_count", int(props.multi_processor_count), "multi_processor_count")
    report("l2_bytes", int(props.L2_cache_size), "L2_cache_size")
    report("hbm_bytes", int(props.total_memory), "total_memory")
    report("regs_per_sm", int(props.regs_per_multiprocessor), "regs_per_multiprocessor")
    threads = int(props.max_threads_per_multi_processor)
    report("max_warps_per_sm", threads // 32, f"max_threads_per_multi_processor {threads} / 32")
    smem = int(props.shared_memory_per_multiprocessor)
    report("smem_bytes_per_sm", smem, "shared_memory_per_multiprocessor")
    optin = int(getattr(props, "shared_memory_per_block_optin", 0) or smem)
    report("smem_bytes_per_cta_max", min(optin, smem), "shared_memory_per_block_optin")
    clock_khz = getattr(props, "clock_rate", 0)
    if clock_khz:
        report("sm_clock_hz", clock_khz * 1e3, f"clock_rate {clock_khz} kHz (the boost clock)")
    mem_khz, bus = getattr(props, "memory_clock_rate", 0), getattr(props, "memory_bus_width", 0)
    if mem_khz and bus:
        report(
            "hbm_bandwidth_Bps",
            2 * mem_khz * 1e3 * bus / 8,
            f"2 x memory_clock_rate {mem_khz} kHz x memory_bus_width {bus} bit / 8",
        )
    for flag in ("has_tma", "has_wgmma", "has_fp8"):
        values[flag] = hopper
        sources[flag] = (
            f"derived: compute capability {cc} "
            f"{'>= 9.0: Hopper features' if hopper else '< 9.0: no TMA, wgmma or wgmma fp8'}"
        )
    if not hopper:
        values["tensor_fp16_wgmma_flop_per_clk_per_sm"] = 0.0
        values["tensor_fp8_wgmma_flop_per_clk_per_sm"] = 0.0
    slug = device_slug(props.name)
    return dataclasses.replace(
        family,
        **values,
        name=slug,
        display_name=str(props.name),
        arch="hopper" if hopper else "ampere",
        sources=sources,
    )


def unmeasured(gpu: GPU) -> list[str]:
    """The fields of ``gpu`` still "assumed" (the micro-benchmarks did not reach them)."""
    return [key for key, text in gpu.sources.items() if source_kind(text) == "assumed"]
