"""How the story of `tilesim explain` writes its numbers: times, ratios, shares, counts
(bytes: `tilesim.units.fmt_bytes`, as every command)."""

from __future__ import annotations


def fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_x(r: float) -> str:
    return f"{r:.2f}x" if r < 10 else f"{r:.0f}x"


def fmt_speed(time_s: float, other_s: float, other: str) -> str:
    """``1.46x faster than v2`` / ``1.10x slower than v2`` / ``as fast as v2``."""
    r = other_s / time_s
    if abs(r - 1) < 0.005:
        return f"as fast as {other}"
    return f"{fmt_x(r)} faster than {other}" if r > 1 else f"{fmt_x(1 / r)} slower than {other}"


def fmt_pct(r: float) -> str:
    if 0 < r < 0.005:
        return "<1%"
    return f"{100 * r:.0f}%"


def fmt_si(n: float) -> str:
    """A count with an SI prefix, 3 significant digits: 83.9 M, 1.07 G."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"
