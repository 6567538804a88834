"""Where a preset's numbers came from, and how far to trust the preset.

Every value's source comment opens with its kind: ``micro-benchmark 2026-11-30:``
(measured by ``tilesim calibrate`` on this GPU), ``device properties:`` (what its
driver reports), ``transferred from ...`` (measured
on a sibling die), ``paper`` / ``published`` / an undated ``micro-benchmark:`` (a
public study), ``datasheet`` / ``whitepaper`` / ``CUDA programming guide``,
``derived`` (arithmetic on the others) or ``assumed``. A preset's class is the
suffix of its name (``.calibrated``, ``.transferred``, ``.published``; none: the
datasheet one), and its file may carry one ``# confidence: ...`` header line.
"""

from __future__ import annotations

import re
from pathlib import Path

SOURCE_KINDS = (
    "measured",
    "reported",
    "transferred",
    "published",
    "datasheet",
    "derived",
    "assumed",
    "what-if",
)
_PATTERNS = (
    ("measured", re.compile(r"micro-benchmark \d{4}-\d{2}-\d{2}\b", re.I)),
    ("reported", re.compile(r"device properties\b", re.I)),
    ("transferred", re.compile(r"transferred\b", re.I)),
    ("published", re.compile(r"(paper|published|micro-benchmark)\b", re.I)),
    ("datasheet", re.compile(r"(datasheet|whitepaper|CUDA programming guide)\b", re.I)),
    ("derived", re.compile(r"derived\b", re.I)),
    ("assumed", re.compile(r"assumed\b", re.I)),
    ("what-if", re.compile(r"what-if\b", re.I)),
)

PRESET_CLASSES = ("calibrated", "transferred", "published", "datasheet")
# What each class of preset is worth when its file says nothing more.
DEFAULT_CONFIDENCE = {
    "calibrated": "measured on this GPU by `tilesim calibrate`; validated against its kernels",
    "transferred": "SM-side figures measured on a sibling die, memory from public figures",
    "published": "figures from published micro-benchmark studies; not validated here",
    "datasheet": "datasheet peaks and assumptions: expect it to predict compute-bound "
    "kernels faster than they run",
    "file": "a user's file: as good as its sources",
}
_CONFIDENCE = re.compile(r"#\s*confidence:\s*(.+)", re.I)


def source_kind(source: str) -> str:
    """The kind of a source comment (one of :data:`SOURCE_KINDS`), or "unknown"."""
    text = source.strip()
    for kind, pattern in _PATTERNS:
        if pattern.match(text):
            return kind
    return "unknown"


def preset_class(name: str) -> str:
    """calibrated / transferred / published / datasheet, from a preset (or variant) name."""
    base = name.split("+")[0]
    for kind in PRESET_CLASSES[:-1]:
        if base.endswith(f".{kind}"):
            return kind
    return "datasheet"


def confidence(name: str, presets_dir: Path) -> str:
    """The preset's one-line confidence note: its ``# confidence:`` header line if it
    has one, else its class's default (a what-if variant: its preset's, and says so)."""
    base = name.split("+")[0]
    path = presets_dir / f"{base}.toml"
    note = ""
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            match = _CONFIDENCE.match(line.strip())
            if match:
                note = match.group(1).strip()
                break
        note = note or DEFAULT_CONFIDENCE[preset_class(base)]
    else:
        note = DEFAULT_CONFIDENCE["file"]
    return note + ("; with what-if changes" if "+" in name else "")
