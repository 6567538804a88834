"""GPU presets: TOML files with a source comment beside every number.

A preset is a flat TOML file, one key per `GPU` field (units in the key names),
each line carrying where its number came from::

    hbm_bandwidth_Bps = 3.35e12  # datasheet: 3.35 TB/s HBM3

The comments are data: they are read (line by line, since tomllib drops them)
into ``GPU.sources`` so that ``tilesim hw show`` can say where each value came
from. A file may instead start from another preset and change a few fields —
``tilesim calibrate`` writes such an overlay beside the datasheet preset::

    base = "h200_sxm_141gb"
    hbm_bandwidth_Bps = 4.27e12  # micro-benchmark: ...

Names resolve in this order: an alias (``h100``: the best-founded preset of that
GPU), a preset in ``presets/`` (``h100_sxm5_80gb``, ``h200_sxm_141gb.calibrated``), a
what-if variant name (``h100_sxm5_80gb+hbm_bandwidth_Bps=2x``, as `GPU.with_overrides`
names it), or a path to a ``.toml`` file.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..errors import TilesimError
from ..inputs import read_text
from .fields import FIELDS, KINDS
from .gpu import GPU
from .overrides import parse_set_options
from .schema import (
    GROUPS,
    check_consistency,
    check_gpu,
    check_value,
    field_values,
    format_number,
    suggest,
)

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
MAX_PRESET_BYTES = 1 << 20  # a preset is a few KiB
CALIBRATED_SUFFIX = ".calibrated"

# Each short name is the best-founded preset of its GPU: measured on it, transferred
# from a measured sibling die, or from published measurements. The datasheet presets
# stay selectable by their full names.
ALIASES: dict[str, str] = {
    "a100": "a100_sxm4_80gb.published",
    "h100": "h100_sxm5_80gb.transferred",
    "h200": "h200_sxm_141gb" + CALIBRATED_SUFFIX,
    "h200-cal": "h200_sxm_141gb" + CALIBRATED_SUFFIX,
}

# Fragments of the name torch reports for a GPU -> its datasheet preset; each fragment is
# also that GPU's alias above.
DEVICE_PRESETS = (
    ("h200", "h200_sxm_141gb"),
    ("h100", "h100_sxm5_80gb"),
    ("a100", "a100_sxm4_80gb"),
)

# A base may name another overlay; a loop of bases must end somewhere.
_MAX_BASE_DEPTH = 8
_KEY_LINE = re.compile(r"\s*([A-Za-z0-9_-]+)\s*=(.*)")


def device_alias(device_name: str) -> str | None:
    """The alias of a GPU (h200, h100, a100) by the name torch reports, or None."""
    lowered = device_name.lower()
    return next((fragment for fragment, _ in DEVICE_PRESETS if fragment in lowered), None)


def base_preset_for(device_name: str) -> str:
    """The datasheet preset of a GPU by the name torch reports ("NVIDIA H200" -> h200_...)."""
    alias = device_alias(device_name)
    if alias is None:
        raise TilesimError(
            f"no datasheet preset for GPU {device_name!r}: pass --base with the closest preset"
        )
    return dict(DEVICE_PRESETS)[alias]


def calibrated_name(base_name: str) -> str:
    """The name of the preset `tilesim calibrate` writes over ``base_name``."""
    return base_name + CALIBRATED_SUFFIX


def list_presets() -> list[str]:
    """Names of the preset files present now (a calibrated one once it is written)."""
    return sorted(path.name.removesuffix(".toml") for path in PRESETS_DIR.glob("*.toml"))


def preset_path(name: str) -> Path:
    """Where the preset ``name`` (or alias) lives, whether or not it exists yet."""
    name = name.strip().lower()
    return PRESETS_DIR / f"{ALIASES.get(name, name)}.toml"


def load_gpu(name_or_path: str | os.PathLike) -> GPU:
    """The `GPU` of a preset name, alias, what-if variant name, or ``.toml`` path."""
    if isinstance(name_or_path, os.PathLike):
        return _load_file(Path(name_or_path), depth=0)
    text = str(name_or_path).strip()
    if not text:
        raise TilesimError("no GPU given (choose from " + _choices() + ")")
    if text.endswith(".toml") or "/" in text or os.sep in text:
        return _load_file(Path(text), depth=0)
    base, *variants = text.split("+")
    gpu = _load_preset(base.strip(), depth=0)
    if variants:
        gpu = gpu.with_overrides(parse_set_options(variants))
    return gpu


def _choices() -> str:
    return f"{', '.join(ALIASES)}, {', '.join(list_presets())}, or a path to a .toml file"


def _load_preset(name: str, depth: int) -> GPU:
    resolved = ALIASES.get(name.lower(), name.lower())
    path = PRESETS_DIR / f"{resolved}.toml"
    if path.is_file():
        return _load_file(path, depth)
    if (
        resolved.endswith(CALIBRATED_SUFFIX)
        and (PRESETS_DIR / f"{resolved.removesuffix(CALIBRATED_SUFFIX)}.toml").is_file()
    ):
        raise TilesimError(
            f"no calibrated preset {resolved!r} yet: run `tilesim calibrate` on that GPU "
            f"to measure it (it writes {path.name})"
        )
    hint = suggest(name.lower(), [*ALIASES, *list_presets()])
    raise TilesimError(f"unknown GPU {name!r}{hint} (choose from {_choices()})")


def _read_text(path: Path) -> str:
    return read_text(path, f"GPU file {str(path)!r}", MAX_PRESET_BYTES)


def _label(path: Path) -> str:
    """How errors name a file: a preset by its file name, a user's file as given."""
    return path.name if path.parent == PRESETS_DIR else str(path)


def _load_file(path: Path, depth: int) -> GPU:
    return parse_preset(_read_text(path), path, depth)


def parse_preset(text: str, path: Path, depth: int = 0) -> GPU:
    """Build a `GPU` from preset TOML ``text`` that lives (or will live) at ``path``."""
    label = _label(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = " ".join(str(exc).split())
        raise TilesimError(f"{label}: malformed TOML: {message}") from None
    except RecursionError:
        raise TilesimError(f"{label}: TOML nested too deeply") from None
    except ValueError:  # an integer of thousands of digits (int_max_str_digits)
        raise TilesimError(f"{label}: malformed TOML: an integer of thousands of digits") from None
    sources = read_comments(text)

    values: dict[str, Any] = {}
    inherited: dict[str, str] = {}
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str) or not base.strip():
            raise TilesimError(f"{label}: key 'base' must name a preset, got {base!r}")
        if depth >= _MAX_BASE_DEPTH:
            raise TilesimError(f"{label}: too many nested bases (is there a loop of 'base' keys?)")
        base_gpu = _load_base(base.strip(), path, depth + 1)
        values = field_values(base_gpu)
        inherited = dict(base_gpu.sources)
        # An overlay is its own preset: named after its file unless it says otherwise.
        values["name"] = path.name.removesuffix(".toml")

    for key, value in data.items():
        if key not in FIELDS:
            hint = suggest(key, FIELDS) or " (valid keys: base, " + ", ".join(FIELDS) + ")"
            raise TilesimError(f"{label}: unknown key {key!r}{hint}")
        values[key] = check_value(key, value, f"{label}: key {key!r}", KINDS[key])
    missing = [key for key in FIELDS if key not in values]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise TilesimError(f"{label}: missing key{plural} {', '.join(map(repr, missing))}")
    check_consistency(values, label)

    merged = {k: v for k, v in inherited.items() if k not in data}
    merged.update({k: v for k, v in sources.items() if k in data})
    ordered_sources = {key: merged[key] for key in FIELDS if key in merged}
    return GPU(**values, sources=ordered_sources)


def _load_base(base: str, path: Path, depth: int) -> GPU:
    if base.endswith(".toml") or "/" in base:
        return _load_file((path.parent / base), depth)
    try:
        return _load_preset(base, depth)
    except TilesimError as exc:  # name the file that asked for it
        raise TilesimError(f"{_label(path)}: key 'base': {exc}") from None


def read_comments(text: str) -> dict[str, str]:
    """``{key: comment}`` for each ``key = value  # comment`` line of a TOML text.

    Only single-line top-level keys carry sources, which is all a preset holds;
    a ``#`` inside a quoted value is not a comment.
    """
    comments: dict[str, str] = {}
    for line in text.splitlines():
        match = _KEY_LINE.match(line)
        if not match:
            continue
        start = _comment_start(match.group(2))
        if start >= 0:
            comment = match.group(2)[start + 1 :].strip()
            if comment:
                comments[match.group(1)] = comment
    return comments


def _comment_start(rest: str) -> int:
    """Index of the ``#`` that opens a comment in ``rest``, or -1."""
    quote = ""
    i = 0
    while i < len(rest):
        char = rest[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 1  # skip the escaped character
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return i
        i += 1
    return -1


# -- writing ------------------------------------------------------------------


def write_preset(
    gpu: GPU,
    path: str | os.PathLike,
    header_comment: str,
    *,
    base: str | None = None,
    only: list[str] | tuple[str, ...] | None = None,
) -> Path:
    """Write ``gpu`` as a preset TOML at ``path``, each value with its source comment.

    With ``base`` (a preset name, e.g. ``"h200_sxm_141gb"``) the file is an overlay:
    ``base = ...`` plus the fields in ``only``, or, by default, those whose value or
    source differs from the base. The text is checked by reading it back before it
    replaces ``path`` (temp file + rename), so an error leaves no file half-written.
    """
    path = Path(path)
    check_gpu(gpu, f"cannot write {path.name}")
    if only is not None:
        unknown = [key for key in only if key not in FIELDS]
        if unknown:
            raise TilesimError(f"write_preset: unknown field(s) {', '.join(map(repr, unknown))}")
    keys: tuple[str, ...] = FIELDS
    if base is not None:
        base_gpu = _load_preset(base, depth=0)
        if only is None:
            keys = tuple(
                key
                for key in FIELDS
                if getattr(gpu, key) != getattr(base_gpu, key)
                or gpu.sources.get(key) != base_gpu.sources.get(key)
            )
        else:
            keys = tuple(key for key in FIELDS if key in only)
        keys = tuple(dict.fromkeys(("name", "display_name", *keys)))  # always say who it is
    text = render_preset(gpu, header_comment, base=base, keys=keys)

    # Read the text back the way load_gpu will: what is written must load as `gpu`.
    back = parse_preset(text, path)
    written = {key: _one_line(gpu.sources.get(key, "")) for key in keys}
    written = {key: source for key, source in written.items() if source}
    if back != gpu or any(back.sources.get(k) != src for k, src in written.items()):
        raise TilesimError(f"cannot write {path.name}: the preset does not read back as written")
    write_atomic(path, text, fsync=True)
    return path


def render_preset(
    gpu: GPU, header_comment: str, *, base: str | None = None, keys: tuple[str, ...] = FIELDS
) -> str:
    """The TOML text of ``gpu``'s ``keys``, grouped under banners, sources as comments."""
    lines = [f"# {line}".rstrip() for line in header_comment.strip().splitlines()]
    if lines:
        lines.append("")
    if base is not None:
        lines += [f"base = {_toml_value(base)}", ""]
    width = max((len(key) + 3 + len(_toml_value(getattr(gpu, key))) for key in keys), default=0)
    for title, group in GROUPS:
        chosen = [key for key in group if key in keys]
        if not chosen:
            continue
        lines.append(f"# -- {title} " + "-" * max(3, 72 - len(title)))
        for key in chosen:
            entry = f"{key} = {_toml_value(getattr(gpu, key))}"
            source = _one_line(gpu.sources.get(key, ""))
            lines.append(f"{entry:<{width}}  # {source}" if source else entry)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        # A TOML basic string: JSON's escaping is valid TOML for these characters.
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped) + '"'
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"{value:_}"
    return format_number(value)
