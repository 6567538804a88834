"""Byte units: the binary sizes code counts in, and the one text a byte count is shown as."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
