"""Byte units: the binary sizes code counts in, and the one text a byte count is shown as."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def fmt_bytes(n: float) -> str:
    """A byte count in decimal units to 3 significant digits: 68.2 MB, 1.61 TB, 512 B; from
    100 of a unit on, whole (999.6 KB reads 1000 KB, not 1e+03 KB)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if abs(value) < 100 else f"{value:.0f} {unit}"
    return f"{n:.0f} B"
