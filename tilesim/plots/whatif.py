"""What-if plots: speed-up against the value of each varied hardware field.

`whatif_plot(result, path)` draws one facet per varied field of a
`tilesim.whatif.SweepResult`, its x axis the field's values in its own unit (a
dotted line at the preset's), one line per algorithm and shape, and the ideal
scaling of a run bound by that field alone (`tilesim.whatif.ideal_speedup`; none
for a capacity or a flag). In a product of several fields, a facet holds the
others at the preset's value where the sweep has it, else at their first value,
and its title says which.
"""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ..errors import TilesimError
from ..hwmodels import UNITS
from ..whatif import ideal_speedup
from .figure import ALGO_COLOURS, save_figure, si

PREFIXED_UNITS = ("B", "B/s", "Hz", "s")  # units that take an SI prefix (3.35 TB/s)


def whatif_plot(result, path: str | os.PathLike) -> Path:
    """Write the facets of ``result`` (module doc) to ``path``."""
    return save_figure(whatif_figure(result), path)


def whatif_figure(result) -> Figure:
    """The figure `whatif_plot` writes: one axes per varied field, in order."""
    varies = list(result.varies)
    if not varies:
        raise TilesimError("nothing was varied: give --vary KEY=V1,V2,...")
    fig = Figure(figsize=(6.5 * len(varies), 4.8), layout="constrained")
    axes = fig.subplots(1, len(varies), squeeze=False)[0]
    held = {v.key: _held_value(result, v) for v in varies}
    for ax, vary in zip(axes, varies, strict=True):
        _facet(ax, result, vary, held)
    return fig


def _held_value(result, vary) -> str:
    """The value a facet of another field holds ``vary`` at: the preset's, else the first."""
    for row in result.rows:
        if row["factors"].get(vary.key) == 1.0:
            return row["settings"][vary.key]
    return vary.values[0]


def _facet(ax, result, vary, held: dict) -> None:
    key = vary.key
    others = {k: v for k, v in held.items() if k != key}
    rows = [
        r
        for r in result.rows
        if all(r["settings"][k] == v for k, v in others.items()) and r["speedup"] is not None
    ]
    numeric = bool(rows) and all(r["factors"].get(key) is not None for r in rows)
    lines: dict[str, list] = {}
    for r in rows:
        label = f"{r['algo']} N={r['seqlen']} d={r['head_dim']}"
        x = r["values"][key] if numeric else vary.values.index(r["settings"][key])
        lines.setdefault(label, []).append((x, r["speedup"]))
    for i, (label, pts) in enumerate(lines.items()):
        pts.sort()
        ax.plot(
            [x for x, _ in pts],
            [y for _, y in pts],
            "o-",
            label=label,
            color=ALGO_COLOURS[i % len(ALGO_COLOURS)],
            ms=4,
        )
    unit = UNITS.get(key, "")
    if numeric:
        base = rows[0]["values"][key] / rows[0]["factors"][key]  # the preset's value
        xs = sorted({x for pts in lines.values() for x, _ in pts} | {base})
        ideal = [ideal_speedup(key, x / base) for x in xs]
        if None not in ideal:
            ax.plot(xs, ideal, "--", color="0.2", lw=1.0, label="ideal: bound by this field alone")
        ax.axvline(base, color="0.5", lw=0.8, ls=":", label=f"preset: {_fmt(base, unit)}")
        ax.set_xscale("log", base=2)
        ticks = sorted({x for pts in lines.values() for x, _ in pts})
        ax.set_xticks(ticks, [_fmt(t, unit) for t in ticks], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel(f"{key} ({unit})" if unit else key)
    else:
        ax.set_xticks(range(len(vary.values)), list(vary.values))
        ax.set_xlabel(key)
    ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set_yscale("log", base=2)  # log-log: ideal scaling is a straight line
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}x"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_ylabel("speed-up vs the preset")
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=7)
    held_text = ", ".join(f"{k}={v}" for k, v in others.items())
    ax.set_title(
        f"What if {key} changed? ({result.gpu})" + (f"\nothers at {held_text}" if others else ""),
        fontsize=10,
    )


def _fmt(value: float, unit: str) -> str:
    """A tick label: SI-prefixed where the unit takes one, else the number."""
    if unit in PREFIXED_UNITS:
        return si(value, unit)
    return f"{value:.4g}"
