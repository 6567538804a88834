"""What a GPU description may hold: each field's kind, unit and allowed range.

One table, read by everything that turns outside text into a `GPU` — the TOML
loader (a preset file), the what-if overrides (``--set key=value``) and the
preset writer — so that a bad value gets the same one-line error wherever it
came from. The field list itself is the `GPU` dataclass; nothing here repeats it
except the units, which a test keeps in step. Nor does this module import the class:
a field's kind is read from the dataclass it is asked about (`field_kinds`), so that
`GPU.with_overrides` uses these rules without an import cycle; `fields` holds the
`GPU` class's own tables (FIELDS, KINDS, SETTABLE_FIELDS, ...).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from typing import Any

from ..errors import TilesimError

# Architectures the engine models (tensor-core paths, feature flags).
ARCHS = ("ampere", "hopper")

# `from __future__ import annotations` keeps the annotations as strings.
_KINDS = {"str": str, "int": int, "float": float, "bool": bool}

# The power model of the clock under load (GPU.clock_max_hz and the budget shares).
CLOCK_FIELDS = (
    "clock_max_hz",
    "clock_power_per_GHz",
    "clock_power_fp16_per_PFLOPs",
    "clock_power_bf16_per_PFLOPs",
    "clock_power_fp8_per_PFLOPs",
    "clock_power_l2_per_10TBps",
    "clock_power_hbm_per_10TBps",
    "clock_power_fp32_per_10Tops",
)

# The HBM's bandwidth under a mix of reads and writes (GPU.hbm_mix_curve).
HBM_MIX_FIELDS = (
    "hbm_mix_25_efficiency",
    "hbm_mix_50_efficiency",
    "hbm_mix_75_efficiency",
    "hbm_mix_90_efficiency",
)

# Zero means "this GPU has no such instruction path" (A100: no wgmma, no fp8), or (the
# CTA turnaround and dispatch, the tile latency beyond one load's, the SM's store port)
# "not modelled", or (the HBM mix points) "not measured".
ZERO_ALLOWED = frozenset(
    {
        "tensor_fp16_wgmma_flop_per_clk_per_sm",
        "tensor_fp8_wgmma_flop_per_clk_per_sm",
        "cta_turnaround_cycles",
        "cta_dispatch_cycles",
        "wgmma_latency_cycles",
        "hbm_tile_extra_cycles",
        "hbm_tile_extra_2KiB_cycles",
        "hbm_tile_extra_8KiB_cycles",
        "store_bandwidth_B_per_clk_per_sm",
        *HBM_MIX_FIELDS,
        *CLOCK_FIELDS,
    }
)
# Fractions of a peak: a value above 1 would beat the datasheet.
FRACTIONS = frozenset(
    {"hbm_read_efficiency", "hbm_write_efficiency", *HBM_MIX_FIELDS, "tensor_clock_ratio"}
)

UNITS: dict[str, str] = {
    "name": "",
    "display_name": "",
    "arch": "",
    "sm_count": "SMs",
    "sm_clock_hz": "Hz",
    "tensor_clock_ratio": "of sm_clock_hz",
    "max_ctas_per_sm": "CTAs",
    "max_warps_per_sm": "warps",
    "regs_per_sm": "regs",
    "smem_bytes_per_sm": "B",
    "smem_bytes_per_cta_max": "B",
    "smem_bandwidth_B_per_clk_per_sm": "B/clk/SM",
    "store_bandwidth_B_per_clk_per_sm": "B/clk/SM",
    "cta_turnaround_cycles": "SM cycles",
    "cta_dispatch_cycles": "SM cycles",
    "clock_max_hz": "Hz",
    "clock_power_per_GHz": "/GHz",
    "clock_power_fp16_per_PFLOPs": "/PFLOP/s",
    "clock_power_bf16_per_PFLOPs": "/PFLOP/s",
    "clock_power_fp8_per_PFLOPs": "/PFLOP/s",
    "clock_power_l2_per_10TBps": "/10TB/s",
    "clock_power_hbm_per_10TBps": "/10TB/s",
    "clock_power_fp32_per_10Tops": "/10Tops/s",
    "tensor_fp16_mma_sync_flop_per_clk_per_sm": "FLOP/clk/SM",
    "tensor_fp16_wgmma_flop_per_clk_per_sm": "FLOP/clk/SM",
    "tensor_fp8_wgmma_flop_per_clk_per_sm": "FLOP/clk/SM",
    "wgmma_latency_cycles": "SM cycles",
    "sfu_ops_per_clk_per_sm": "ops/clk/SM",
    "warp_schedulers_per_sm": "schedulers",
    "vector_warps_per_scheduler": "warps",
    "fp32_ops_per_clk_per_sm": "lanes/clk/SM",
    "l2_bytes": "B",
    "l2_bandwidth_Bps": "B/s",
    "l2_hit_latency_cycles": "SM cycles",
    "l2_hit_latency_50_cycles": "SM cycles",
    "l2_hit_latency_75_cycles": "SM cycles",
    "l2_hit_latency_95_cycles": "SM cycles",
    "hbm_bytes": "B",
    "hbm_bandwidth_Bps": "B/s",
    "hbm_read_efficiency": "of peak",
    "hbm_write_efficiency": "of peak",
    "hbm_mix_25_efficiency": "of peak",
    "hbm_mix_50_efficiency": "of peak",
    "hbm_mix_75_efficiency": "of peak",
    "hbm_mix_90_efficiency": "of peak",
    "hbm_latency_cycles": "SM cycles",
    "hbm_latency_50_cycles": "SM cycles",
    "hbm_latency_75_cycles": "SM cycles",
    "hbm_latency_95_cycles": "SM cycles",
    "hbm_tile_extra_cycles": "SM cycles",
    "hbm_tile_extra_2KiB_cycles": "SM cycles",
    "hbm_tile_extra_8KiB_cycles": "SM cycles",
    "launch_overhead_s": "s",
    "has_tma": "",
    "has_wgmma": "",
    "has_fp8": "",
}

# What the engine can simulate, by unit: beyond these a count exhausts memory (one
# object per SM) or a rate makes float time stop advancing. Each range holds
# every real GPU by a factor of 1000 or more, so a what-if study never meets it.
RANGES: dict[str, tuple[float, float]] = {
    "SMs": (1, 4096),
    "Hz": (1e6, 1e11),
    "of sm_clock_hz": (1e-3, 1),
    "of peak": (1e-3, 1),
    "CTAs": (1, 1024),
    "warps": (1, 1024),
    "regs": (1, 1 << 24),
    "schedulers": (1, 64),
    "B": (1, 1 << 50),
    "B/s": (1e6, 1e16),
    "B/clk/SM": (1e-3, 1e7),
    "FLOP/clk/SM": (1e-3, 1e7),
    "ops/clk/SM": (1e-3, 1e7),
    "lanes/clk/SM": (1e-3, 1e7),
    "SM cycles": (1e-3, 1e7),
    "s": (1e-12, 1.0),
    "/GHz": (1e-6, 100.0),
    "/PFLOP/s": (1e-6, 100.0),
    "/10TB/s": (1e-6, 100.0),
    "/10Tops/s": (1e-6, 100.0),
}

# How a preset file is laid out: one banner per group, in this order.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("identity", ("name", "display_name", "arch")),
    (
        "streaming multiprocessors",
        (
            "sm_count",
            "sm_clock_hz",
            "tensor_clock_ratio",
            "max_ctas_per_sm",
            "max_warps_per_sm",
            "regs_per_sm",
            "smem_bytes_per_sm",
            "smem_bytes_per_cta_max",
            "smem_bandwidth_B_per_clk_per_sm",
            "store_bandwidth_B_per_clk_per_sm",
            "cta_turnaround_cycles",
            "cta_dispatch_cycles",
        ),
    ),
    ("the clock under load", CLOCK_FIELDS),
    (
        "execution pipes, per SM per clock",
        (
            "tensor_fp16_mma_sync_flop_per_clk_per_sm",
            "tensor_fp16_wgmma_flop_per_clk_per_sm",
            "tensor_fp8_wgmma_flop_per_clk_per_sm",
            "wgmma_latency_cycles",
            "sfu_ops_per_clk_per_sm",
            "fp32_ops_per_clk_per_sm",
            "warp_schedulers_per_sm",
            "vector_warps_per_scheduler",
        ),
    ),
    (
        "L2",
        (
            "l2_bytes",
            "l2_bandwidth_Bps",
            "l2_hit_latency_cycles",
            "l2_hit_latency_50_cycles",
            "l2_hit_latency_75_cycles",
            "l2_hit_latency_95_cycles",
        ),
    ),
    (
        "HBM",
        (
            "hbm_bytes",
            "hbm_bandwidth_Bps",
            "hbm_read_efficiency",
            "hbm_write_efficiency",
            *HBM_MIX_FIELDS,
            "hbm_latency_cycles",
            "hbm_latency_50_cycles",
            "hbm_latency_75_cycles",
            "hbm_latency_95_cycles",
            "hbm_tile_extra_cycles",
            "hbm_tile_extra_2KiB_cycles",
            "hbm_tile_extra_8KiB_cycles",
        ),
    ),
    ("host side", ("launch_overhead_s",)),
    ("features", ("has_tma", "has_wgmma", "has_fp8")),
)


@functools.cache
def _field_kinds(cls: type) -> dict[str, type]:
    return {f.name: _KINDS[f.type] for f in dataclasses.fields(cls) if f.name != "sources"}


def field_kinds(gpu: Any) -> dict[str, type]:
    """Each field a preset file holds of the GPU dataclass (or instance) ``gpu`` -> its
    kind, in the dataclass's order; `sources` is filled from the file's comments instead."""
    return dict(_field_kinds(gpu if isinstance(gpu, type) else type(gpu)))


def settable_fields(kinds: dict[str, type]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(numeric fields, feature flags) of ``kinds``: what a what-if override may change
    (numbers and flags, not identity), each in field order."""
    numeric = tuple(k for k, kind in kinds.items() if kind in (int, float))
    return numeric, tuple(k for k, kind in kinds.items() if kind is bool)


def suggest(key: str, choices: tuple[str, ...] | list[str]) -> str:
    """`` (did you mean 'x'?)`` when ``key`` is a near miss of one of ``choices``, else ``""``."""
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_value(key: str, value: Any, where: str, kind: type) -> Any:
    """Return ``value`` as a value of field ``key`` of kind ``kind`` (str, int, float or
    bool), or raise one line ``"{where} must be ..."``.

    ``where`` names the origin, e.g. ``"h100.toml: key 'sm_count'"``. Integers are
    accepted for float fields (TOML writes ``16`` for sixteen); nothing else is
    converted: a string where a number belongs is an error, not a guess.
    """
    if kind is str:
        if not isinstance(value, str) or not value.strip():
            raise TilesimError(f"{where} must be a non-empty string, got {value!r}")
        if key == "arch" and value not in ARCHS:
            raise TilesimError(f"{where} must be one of {', '.join(ARCHS)}, got {value!r}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise TilesimError(f"{where} must be true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TilesimError(f"{where} must be an integer, got {value!r}")
        if value <= 0:
            raise TilesimError(f"{where} must be a positive integer, got {value}")
        _check_range(key, value, where)
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TilesimError(f"{where} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise TilesimError(f"{where} must be a finite number, got {value!r}")
    if key in ZERO_ALLOWED:
        if number < 0:
            raise TilesimError(f"{where} must be >= 0 (0: absent), got {value!r}")
    elif number <= 0:
        raise TilesimError(f"{where} must be a positive number, got {value!r}")
    if key in FRACTIONS and number > 1:
        raise TilesimError(f"{where} must be a fraction of peak in (0, 1], got {value!r}")
    if number > 0 or key not in ZERO_ALLOWED:
        _check_range(key, number, where)
    return number


def _check_range(key: str, number: float, where: str) -> None:
    lo, hi = RANGES[UNITS[key]]
    if not lo <= number <= hi:
        unit = f" {UNITS[key]}" if UNITS[key] else ""
        shown = f"{number:.3g}" if isinstance(number, float) else short_int(number)
        raise TilesimError(
            f"{where} must be within [{lo:g}, {hi:g}]{unit} (the range tilesim can "
            f"simulate), got {shown}"
        )


def short_int(value: int) -> str:
    """An int for a message: in full up to 15 digits, else its magnitude (``~1e+24``)."""
    if abs(value) < 10**15:
        return str(value)
    digits = value.bit_length() * 0.30103
    return f"~1e+{int(digits)}" if digits < 4000 else f"a {int(digits)}-digit number"


def check_consistency(values: dict[str, Any], where: str) -> None:
    """Cross-field rules: limits that contradict each other, flags without a rate."""
    if values["smem_bytes_per_cta_max"] > values["smem_bytes_per_sm"]:
        raise TilesimError(
            f"{where}: smem_bytes_per_cta_max ({values['smem_bytes_per_cta_max']}) exceeds "
            f"smem_bytes_per_sm ({values['smem_bytes_per_sm']}); change both together"
        )
    if values["has_wgmma"] and values["tensor_fp16_wgmma_flop_per_clk_per_sm"] <= 0:
        raise TilesimError(
            f"{where}: has_wgmma is true but tensor_fp16_wgmma_flop_per_clk_per_sm is 0; "
            "give the wgmma rate too"
        )
    if values["has_fp8"] and values["tensor_fp8_wgmma_flop_per_clk_per_sm"] <= 0:
        raise TilesimError(
            f"{where}: has_fp8 is true but tensor_fp8_wgmma_flop_per_clk_per_sm is 0; "
            "give the fp8 rate too"
        )


def field_values(gpu: Any) -> dict[str, Any]:
    """The preset fields of ``gpu`` as a dict, in field order (no `sources`)."""
    return {key: getattr(gpu, key) for key in _field_kinds(type(gpu))}


def check_gpu(gpu: Any, where: str) -> None:
    """Validate a `GPU` built in Python (dataclasses.replace, a test) like a loaded one."""
    for key, kind in _field_kinds(type(gpu)).items():
        check_value(key, getattr(gpu, key), f"{where}: {key}", kind)
    check_consistency(field_values(gpu), where)


def format_number(value: int | float | bool) -> str:
    """The shortest text that reads back as exactly ``value`` (TOML and ``--set`` syntax).

    ``1.83e9`` rather than ``1830000000.0``; floats keep a ``.`` or exponent so
    TOML reads them back as floats.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = repr(value)
    for digits in range(1, 18):
        candidate = f"{value:.{digits}g}"
        if float(candidate) == value:
            text = candidate
            break
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    elif "." not in text and text.lstrip("-").isdigit():
        text += ".0"
    return text
