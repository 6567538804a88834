"""The fields of the `GPU` dataclass as tables: their names, kinds, what a what-if sets.

`schema` says what each field may hold; these are its tables for the `GPU` class, read
by the preset loader and writer, the CLI and the what-if sweeps.
"""

from __future__ import annotations

from .gpu import GPU
from .schema import field_kinds, settable_fields

KINDS: dict[str, type] = field_kinds(GPU)
# Every field a preset file holds, in the dataclass's order (not `sources`).
FIELDS: tuple[str, ...] = tuple(KINDS)
STRING_FIELDS = tuple(k for k in FIELDS if KINDS[k] is str)
NUMERIC_FIELDS, FLAG_FIELDS = settable_fields(KINDS)
# What a what-if override may change: numbers and feature flags, not identity.
SETTABLE_FIELDS = NUMERIC_FIELDS + FLAG_FIELDS
