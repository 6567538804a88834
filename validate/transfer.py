"""Carry one die's calibration to a sibling product: the H200's to the H100 SXM.

The H100 SXM and the H200 are the same GH100 die (132 SMs, the same SM, crossbar
and L2 slices) under the same 700 W cap; they differ in their memory (five HBM3
stacks at 3.35 TB/s and 50 MB of L2 against six HBM3e stacks at 4.8 TB/s and 60 MB).
So a transferred preset takes, from the measured sibling, every figure that
`tilesim calibrate` gives per SM per clock or in SM cycles, to the digit, and from
the target's own datasheet preset its memory system, with three derivations:

* ``hbm_write_efficiency`` = the target's public read fraction x the sibling's
  measured write/read ratio (same memory controllers; a public copy figure
  mixes both directions with their turnarounds, so it is not used for writes);
  ``hbm_mix_*_efficiency`` likewise, from the sibling's mixed/read ratios.
* ``hbm_latency_cycles`` = the target's public idle pointer-chase latency in ns
  x the transferred SM clock.
* ``hbm_latency_{50,75,95}_cycles`` = that idle latency plus the sibling's measured
  queueing (loaded minus idle, in ns, at the same busy fraction) x the ratio of
  their per-stack bandwidths: at a given busy fraction every channel is that busy,
  and a request's wait in a channel's queue scales with the time the channel takes
  per byte.

Nothing here looks at an attention timing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import TilesimError
from ..hwmodels.gpu import GPU, LOADED_LATENCY_POINTS
from ..hwmodels.presets import load_gpu
from ..hwmodels.schema import CLOCK_FIELDS, HBM_MIX_FIELDS

TRANSFERRED_SUFFIX = ".transferred"

# Figures per SM per clock or in SM cycles (and the clock they are counted at):
# properties of the die, equal on both products.
SM_SIDE = (
    "sm_clock_hz",
    "tensor_clock_ratio",
    "tensor_fp16_mma_sync_flop_per_clk_per_sm",
    "tensor_fp16_wgmma_flop_per_clk_per_sm",
    "tensor_fp8_wgmma_flop_per_clk_per_sm",
    "wgmma_latency_cycles",
    "sfu_ops_per_clk_per_sm",
    "fp32_ops_per_clk_per_sm",
    "vector_warps_per_scheduler",
    "cta_turnaround_cycles",
    "cta_dispatch_cycles",
    "store_bandwidth_B_per_clk_per_sm",
    "hbm_tile_extra_cycles",
    "hbm_tile_extra_2KiB_cycles",
    "hbm_tile_extra_8KiB_cycles",
    "l2_hit_latency_cycles",
    "l2_hit_latency_50_cycles",
    "l2_hit_latency_75_cycles",
    "l2_hit_latency_95_cycles",
    "l2_bandwidth_Bps",
    "launch_overhead_s",
    *CLOCK_FIELDS,  # the die's power model, its HBM share assumed (WHY)
)
# Why each transferred figure carries over, where it needs more than "same SM".
WHY = {
    "sm_clock_hz": "same die under the same 700 W cap, and the tensor-core loop it was "
    "sustained in draws no HBM power; no public H100 SXM figure of the same kind found",
    "l2_bandwidth_Bps": "same SMs, crossbar and L2 slices; measured at 24 MiB, within the "
    "H100's half L2 (25 MiB); the H100 has 50 of the die's 60 MB of L2 enabled, so if "
    "hit bandwidth scales with enabled slices this errs fast by up to 17%",
    "launch_overhead_s": "host side: the same driver and do_bench path",
    "clock_max_hz": "same die: the H100 SXM's boost clock is the same 1980 MHz",
    "clock_power_hbm_per_10TBps": "assumed: the H200's HBM3e cost per byte for the "
    "H100's HBM3, under the same 700 W cap; if HBM3 costs more per byte its MMA launches "
    "that stream from HBM run slower than this says",
    "hbm_tile_extra_cycles": "the SM-side cost of a CTA's many requests; the H100's "
    "HBM3 may add a little (errs fast)",
}
WHY.update(
    {
        f"l2_hit_latency{point}_cycles": "same crossbar and L2 slices, at the same busy fraction"
        for point in ("", "_50", "_75", "_95")
    }
)


@dataclass(frozen=True)
class Sibling:
    """A product to model from a measured sibling die."""

    target: str  # the product's datasheet preset
    measured: str  # the datasheet preset of the sibling that `tilesim calibrate` measured
    hbm_stacks: tuple[int, int]  # (measured, target)
    stacks_source: str
    confidence: str


SIBLINGS = {
    "h100_sxm5_80gb": Sibling(
        target="h100_sxm5_80gb",
        measured="h200_sxm_141gb",
        hbm_stacks=(6, 5),
        stacks_source="H100 whitepaper: five HBM3 stacks (5120-bit) on the SXM5; H200: six "
        "24 GB HBM3e stacks on a 6144-bit bus (hwcooling.net, 2023-11)",
        confidence="SM side measured on the H200 (same GH100 die), memory from the H100's "
        "public figures: expect the H200's accuracy (MAPE ~7%) on compute-bound kernels and "
        "~10-15% on memory-bound ones; unvalidated on an H100",
    ),
}
ALIASES = {"h100": "h100_sxm5_80gb"}


def sibling_of(target: str) -> Sibling:
    """The transfer recipe for ``target`` (a datasheet preset name or short alias)."""
    key = ALIASES.get(target.strip().lower(), target.strip().lower())
    if key not in SIBLINGS:
        raise TilesimError(
            f"--transfer-to: no transfer to {target!r} (choose from "
            f"{', '.join([*ALIASES, *SIBLINGS])})"
        )
    return SIBLINGS[key]


def transferred_name(target: str) -> str:
    return target + TRANSFERRED_SUFFIX


def transfer_preset(measured: GPU, sibling: Sibling, date: str = "") -> GPU:
    """The target product's `GPU`: ``measured`` (a calibrated preset of the sibling
    die) for the SM side, the target's datasheet preset for the memory system."""
    target = load_gpu(sibling.target)
    if measured.sm_count != target.sm_count or measured.arch != target.arch:
        raise TilesimError(
            f"cannot transfer {measured.name} to {target.name}: different SM count or "
            "architecture (not the same die)"
        )
    values: dict = {}
    sources = dict(target.sources)
    origin = f"transferred from {measured.name}"

    for field in SM_SIDE:
        values[field] = getattr(measured, field)
        why = WHY.get(field, "same die, same SM")
        sources[field] = f"{origin} ({why}): {measured.sources.get(field, 'no source')}"

    clock = values["sm_clock_hz"]
    ns = 1e-9
    # -- HBM efficiency: the target's public read, the sibling's measured write/read --------
    ratio = measured.hbm_write_efficiency / measured.hbm_read_efficiency
    values["hbm_write_efficiency"] = round(target.hbm_read_efficiency * ratio, 4)
    sources["hbm_write_efficiency"] = (
        f"derived: {target.name}'s public read fraction {target.hbm_read_efficiency:g} x "
        f"{measured.name}'s measured write/read {ratio:.4f} (same memory controllers); the "
        f"read fraction: {target.sources.get('hbm_read_efficiency', '')}"
    )

    for field in HBM_MIX_FIELDS:  # the mixed streams likewise, where the sibling has them
        mix = getattr(measured, field) / measured.hbm_read_efficiency
        if mix > 0:
            values[field] = round(min(1.0, target.hbm_read_efficiency * mix), 4)
            sources[field] = (
                f"derived: {target.name}'s public read fraction {target.hbm_read_efficiency:g} "
                f"x {measured.name}'s measured mixed/read {mix:.4f} (same memory controllers; "
                f"HBM3 against HBM3e turnarounds assumed alike, errs either way)"
            )

    # -- HBM latency: the target's public idle figure, the sibling's queueing ---------------
    idle_s = target.hbm_latency_cycles / target.sm_clock_hz
    values["hbm_latency_cycles"] = float(round(idle_s * clock))
    sources["hbm_latency_cycles"] = (
        f"derived: {target.name}'s public idle latency {idle_s / ns:.0f} ns "
        f"({target.sources.get('hbm_latency_cycles', '')}) x {clock / 1e6:.0f} MHz; "
        f"{measured.name} measured {measured.hbm_latency_cycles / measured.sm_clock_hz / ns:.0f} ns"
    )
    (m_stacks, t_stacks) = sibling.hbm_stacks
    per_stack = (measured.hbm_bandwidth_Bps / m_stacks) / (target.hbm_bandwidth_Bps / t_stacks)
    m_idle_s = measured.hbm_latency_cycles / measured.sm_clock_hz
    for u in LOADED_LATENCY_POINTS:
        field = f"hbm_latency_{round(100 * u)}_cycles"
        queue_s = getattr(measured, field) / measured.sm_clock_hz - m_idle_s
        values[field] = float(round((idle_s + queue_s * per_stack) * clock))
        sources[field] = (
            f"derived: idle {idle_s / ns:.0f} ns + {measured.name}'s measured queueing at "
            f"{100 * u:.0f}% busy ({queue_s / ns:.0f} ns) x its per-stack bandwidth over the "
            f"target's ({measured.hbm_bandwidth_Bps / m_stacks / 1e9:.0f} / "
            f"{target.hbm_bandwidth_Bps / t_stacks / 1e9:.0f} GB/s = {per_stack:.3f}; "
            f"{sibling.stacks_source}) x {clock / 1e6:.0f} MHz"
        )

    sibling_name = measured.display_name.split(" (")[0]
    when = f", calibrated {date}" if date else ""
    return dataclasses.replace(
        target,
        **values,
        name=transferred_name(target.name),
        display_name=f"{target.display_name} (transferred from {sibling_name}{when})",
        sources=sources,
    )


def header(gpu: GPU, measured: GPU, sibling: Sibling, files: str) -> str:
    """The comment block a transferred preset file opens with."""
    return (
        f"{gpu.display_name}: written by `tilesim calibrate --from-results ... "
        f"--transfer-to {sibling.target}`\n"
        f"from {measured.name}'s raw figures ({files}).\n"
        "Every field is written; each comment says whether it was measured on the sibling\n"
        "and transferred, is the target's own public figure, derived, or assumed.\n"
        "No attention timing was used.\n"
        f"confidence: {sibling.confidence}"
    )
