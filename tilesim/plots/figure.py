"""What every picture shares: the atomic, byte-stable writer and the colours.

matplotlib's object API with the Agg canvas only (no pyplot, no display, no
global state): safe in a server, a worker process or a test. A figure is saved
through a temp file renamed into place, so a failed plot never leaves half a
PNG, and with no timestamp, version or random id in it, so the same figure is
the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..atomic import write_atomic
from ..errors import TilesimError

DPI = 110
ALGO_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3")


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Render ``fig`` to ``path`` (PNG, or what the suffix says) atomically."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    if fmt not in ("png", "svg", "pdf"):
        raise TilesimError(f"cannot write {str(path)!r}: choose a .png, .svg or .pdf file")
    FigureCanvasAgg(fig)

    def render(fh) -> None:
        with rc_context({"svg.hashsalt": "tilesim"}):
            fig.savefig(fh, format=fmt, dpi=DPI, metadata=_metadata(fmt))

    return write_atomic(path, render)


def _metadata(fmt: str) -> dict:
    if fmt == "png":
        return {"Software": None}
    if fmt == "pdf":
        return {"Creator": None, "Producer": None, "CreationDate": None}
    return {"Date": None, "Creator": None}


def si(value: float, unit: str = "") -> str:
    """``3.35e12, "B/s"`` -> ``"3.35 TB/s"``: three significant digits and an SI prefix."""
    if value == 0 or not 1e-15 < abs(value) < 1e18:
        return f"{value:.3g} {unit}".strip()
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}".strip()
    for prefix, scale in (("", 1.0), ("m", 1e-3), ("µ", 1e-6), ("n", 1e-9), ("p", 1e-12)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}".strip()
    return f"{value:.3g} {unit}".strip()
