"""What-if variants of a GPU: ``--set hbm_bandwidth_Bps=2x`` and friends.

A variant is the preset with a few fields changed, named so a reader sees what
changed (``h100_sxm5_80gb+hbm_bandwidth_Bps=2x``); the same name given to
`load_gpu` builds the same variant again. A value is either absolute
(``6.7e12``, ``132``, ``true``) or a multiplier of the value it replaces
(``2x``, ``0.5x``). The result is checked like a preset file: a non-positive
bandwidth or a flag without its rate is an error, not a silent NaN later.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar

from ..errors import TilesimError
from .schema import (
    check_consistency,
    check_value,
    field_kinds,
    field_values,
    format_number,
    settable_fields,
    suggest,
)


class _Preset(Protocol):
    """What an override needs of a preset: a name and a source per field (`GPU` is one)."""

    name: str
    sources: dict[str, str]


P = TypeVar("P", bound=_Preset)

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_set_options(items: Iterable[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (the CLI's repeated ``--set``) -> ``{"k": "v"}``, in the given order.

    Only the syntax is checked here; keys and values are checked by
    `apply_overrides`, which knows the GPU.
    """
    result: dict[str, str] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value or not _KEY.fullmatch(key):
            raise TilesimError(
                f"--set expects KEY=VALUE (e.g. hbm_bandwidth_Bps=2x or sm_count=114), got {item!r}"
            )
        if key in result:
            raise TilesimError(f"--set {key} is given twice ({result[key]} and {value})")
        result[key] = value
    return result


def apply_overrides(
    gpu: P,
    mapping: Mapping[str, Any],
    *,
    sources: Mapping[str, str] | None = None,
    name: str | None = None,
) -> P:
    """``gpu`` with the fields in ``mapping`` replaced; see `GPU.with_overrides`."""
    if not mapping:
        return gpu if name is None else dataclasses.replace(gpu, name=name)
    changes: dict[str, Any] = {}
    labels: list[str] = []
    new_sources = dict(gpu.sources)
    kinds = field_kinds(gpu)
    numeric, flags = settable_fields(kinds)
    settable = numeric + flags
    # Sorted, so the variant's name does not depend on the order options were typed.
    for key in sorted(mapping):
        if key not in settable:
            raise TilesimError(
                f"unknown hardware key {key!r}{suggest(key, settable)}; settable keys: the "
                f"{len(numeric)} numeric fields `tilesim hw show` lists (e.g. sm_count, "
                f"hbm_bandwidth_Bps, l2_bytes) and the flags {', '.join(flags)}"
            )
        value, label = _new_value(gpu, key, kinds[key], mapping[key])
        changes[key] = value
        labels.append(f"{key}={label}")
        if sources and key in sources:
            new_sources[key] = sources[key]
        else:
            old = format_number(getattr(gpu, key))
            was = f"; was {old}" + (f" ({gpu.sources[key]})" if key in gpu.sources else "")
            new_sources[key] = f"what-if: {key}={label}{was}"
    if sources:
        unused = sorted(set(sources) - set(mapping))
        if unused:
            raise TilesimError(f"sources given for keys not overridden: {', '.join(unused)}")
    variant = name if name is not None else gpu.name + "".join(f"+{label}" for label in labels)
    check_consistency({**field_values(gpu), **changes}, f"GPU {variant}")
    return dataclasses.replace(gpu, name=variant, sources=new_sources, **changes)


def _new_value(gpu: _Preset, key: str, kind: type, raw: Any) -> tuple[Any, str]:
    """(validated value, short label for the variant name) of one override of kind ``kind``."""
    if kind is bool:
        if isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            value = raw.strip().lower() == "true"
        else:
            raise TilesimError(f"{key} is a flag: set it to true or false, got {raw!r}")
        return value, format_number(value)

    old = getattr(gpu, key)
    multiplier = None
    if isinstance(raw, bool):
        raise TilesimError(f"{key} takes a number, got {raw!r}")
    if isinstance(raw, int | float):
        number = raw
    elif isinstance(raw, str):
        text = raw.strip().lower()
        try:
            if text.endswith("x"):
                multiplier = float(text[:-1])
                number = old * multiplier
            else:
                number = float(text) if any(c in text for c in ".en") else int(text, 10)
        except ValueError:
            raise TilesimError(
                f"cannot read {raw!r} as a value for {key}: give a number (6.7e12) "
                "or a multiplier of the current value (2x, 0.5x)"
            ) from None
    else:
        raise TilesimError(f"{key} takes a number or a multiplier like '2x', got {raw!r}")
    if isinstance(number, float) and not math.isfinite(number):
        raise TilesimError(f"{key} must be a finite number, got {raw!r}")

    if kind is int and isinstance(number, float):
        # A multiplier of a count rounds (0.7x of 50 MiB is a byte count); an
        # absolute count must be whole: 131.5 SMs is a typo, not a GPU.
        if multiplier is not None:
            number = round(number)
        elif number.is_integer():
            number = int(number)
    where = key if multiplier is None else f"{key} ({_times(multiplier)} of {old})"
    value = check_value(key, number, where, kind)
    return value, (_times(multiplier) if multiplier is not None else format_number(value))


def _times(multiplier: float) -> str:
    """``2x``, ``0.5x``: a multiplier as typed, without format_number's float ``.0``."""
    return format_number(multiplier).removesuffix(".0") + "x"
