"""Gantt charts: the first SMs' pipes over time, one panel per run.

`gantt(sources, path, sms=4, window=None)`: per SM, the busy intervals of the
tensor cores, the SFU, the FP32 pipe and shared-memory fills (tile loads
landing), under a strip with the whole GPU's HBM and L2 throughput; one panel
per source, so v2's schedule sits above v3's. Every panel shows the same time
window on one shared time axis, and the throughput strips one scale. A source
is a `Prediction` made with ``timeline=True``, a `Timeline`, its Perfetto JSON
(dict) or a ``*.json`` file written by ``--timeline``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from ..errors import TilesimError
from ..simulator.timeline import parse_window
from .figure import save_figure

PIPE_COLOURS = {"tensor": "#4C72B0", "sfu": "#DD8452", "fp32": "#55A868", "smem": "#8172B3"}
PIPE_LABELS = {"tensor": "tensor", "sfu": "SFU (exp)", "fp32": "FP32", "smem": "smem fill"}
LANES = ("tensor", "sfu", "fp32", "smem")
MAX_GANTT_SMS = 32  # SM rows in one panel: more is unreadable (and an image of 10^6 rows)
AUTO_WINDOW_OPS = 24  # tensor-core intervals of SM 0 in an automatic Gantt window


def check_sms(sms: int) -> int:
    """The number of SMs a Gantt chart draws: 1 to MAX_GANTT_SMS."""
    if not 1 <= sms <= MAX_GANTT_SMS:
        raise TilesimError(f"--sms must be between 1 and {MAX_GANTT_SMS}, got {sms}")
    return sms


def perfetto_of(source) -> dict:
    """The Perfetto JSON of a Prediction (timeline=True), Timeline, dict or file path."""
    timeline = getattr(source, "timeline", None) if hasattr(source, "time_s") else source
    if timeline is None:
        raise TilesimError("this prediction has no timeline: simulate it with timeline=True")
    if hasattr(timeline, "to_perfetto"):
        return timeline.to_perfetto()
    if isinstance(timeline, dict):
        doc = timeline
    else:
        p = Path(timeline)
        try:
            doc = json.loads(p.read_text())
        except FileNotFoundError:
            raise TilesimError(f"{p}: no such file") from None
        except (OSError, ValueError) as exc:
            raise TilesimError(f"{p}: not a timeline JSON file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TilesimError("not a timeline: expected Perfetto JSON with 'traceEvents'")
    return doc


@dataclass
class _Lanes:
    """Busy intervals (µs) per (SM, pipe), CTA labels, and the memory counters."""

    busy: dict  # (sm, pipe) -> [(start, dur, label)]
    memory: dict  # "HBM" | "L2" -> [(ts, GB/s)]
    launches: list  # (name, start, dur)

    @classmethod
    def of(cls, doc: dict) -> _Lanes:
        busy: dict = {}
        memory: dict = {"HBM": [], "L2": []}
        launches = []
        for ev in doc["traceEvents"]:
            ph, pid = ev.get("ph"), ev.get("pid", 0)
            if ph == "X" and pid == 0:
                launches.append((ev.get("name", ""), ev["ts"], ev["dur"]))
            elif ph == "X" and ev.get("cat") in PIPE_COLOURS:
                busy.setdefault((pid - 1, ev["cat"]), []).append(
                    (ev["ts"], ev["dur"], ev.get("name", ""))
                )
            elif ph == "C" and ev.get("name") in memory:
                memory[ev["name"]].append((ev["ts"], sum(ev.get("args", {}).values())))
        for v in busy.values():
            v.sort()
        for v in memory.values():
            v.sort()
        return cls(busy, memory, launches)

    def span(self) -> tuple[float, float]:
        starts = [s for v in self.busy.values() for s, _, _ in v]
        ends = [s + d for v in self.busy.values() for s, d, _ in v]
        starts += [s for _, s, _ in self.launches]
        ends += [s + d for _, s, d in self.launches]
        if not starts:
            raise TilesimError("the timeline has no SM activity to draw")
        return min(starts), max(ends)

    def auto_window(self) -> tuple[float, float]:
        """A steady-state stretch: AUTO_WINDOW_OPS tensor intervals of SM 0 around its middle."""
        ops = self.busy.get((0, "tensor"), [])
        if len(ops) <= 2 * AUTO_WINDOW_OPS:
            return self.span()
        mid = len(ops) // 2
        a, b = ops[mid - AUTO_WINDOW_OPS // 2], ops[mid + AUTO_WINDOW_OPS // 2]
        return a[0], b[0] + b[1]


def gantt(
    sources,
    path: str | os.PathLike,
    sms: int = 4,
    window: tuple[float, float] | str | None = None,
    titles: Sequence[str] | None = None,
) -> Path:
    """Draw the first ``sms`` SMs' pipes over time, one panel per source (see module doc).

    ``window`` is (start, end) in µs, ``"START:END"``, or None for `shared_window`.
    ``sources`` may be one source or a list.
    """
    return save_figure(gantt_figure(sources, sms, window, titles), path)


def gantt_figure(
    sources,
    sms: int = 4,
    window: tuple[float, float] | str | None = None,
    titles: Sequence[str] | None = None,
) -> Figure:
    """The figure `gantt` writes: per source a throughput axes, then its SMs' axes."""
    check_sms(sms)
    if not isinstance(sources, list | tuple):
        sources = [sources]
    if isinstance(window, str):
        window = parse_window(window)
    docs = [_Lanes.of(perfetto_of(s)) for s in sources]
    titles = list(titles) if titles else [_default_title(s, i) for i, s in enumerate(sources)]
    n_lanes = sms * len(LANES)
    heights = []
    for _ in docs:
        heights += [1.0, 0.22 * n_lanes]
    fig = Figure(figsize=(11, sum(heights) * 0.8 + 0.5 * len(docs)), layout="constrained")
    axes = fig.subplots(
        len(heights), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights}
    )[:, 0]
    lo, hi = window if window is not None else shared_window(docs)
    top = 0.0
    for k, lanes in enumerate(docs):
        mem_ax, sm_ax = axes[2 * k], axes[2 * k + 1]
        top = max(top, _draw_memory(mem_ax, lanes, lo, hi))
        mem_ax.set_title(titles[k], fontsize=10, loc="left")
        _draw_lanes(sm_ax, lanes, sms, lo, hi)
    for mem_ax in axes[::2]:
        mem_ax.set_ylim(0, top * 1.25 if top > 0 else 1)  # one throughput scale
    axes[0].set_xlim(lo, hi)  # shared by every panel
    handles = [_patch(PIPE_COLOURS[p], PIPE_LABELS[p]) for p in LANES]
    fig.legend(
        handles=handles, loc="outside upper right", ncol=len(LANES), fontsize=8, frameon=False
    )
    return fig


def shared_window(docs: Sequence[_Lanes]) -> tuple[float, float]:
    """One window (µs) for every panel: as long as the shortest steady-state stretch
    (`_Lanes.auto_window`), starting where every run is past its own start, unless
    that runs past the end of the first run to finish."""
    autos = [lanes.auto_window() for lanes in docs]
    width = min(b - a for a, b in autos)
    lo = max(a for a, _ in autos)
    end = min(lanes.span()[1] for lanes in docs)
    lo = max(min(lo, end - width), 0.0)
    return lo, lo + width


def _default_title(source, i: int) -> str:
    algo = getattr(source, "algo", None)
    if algo and hasattr(source, "time_s"):
        return f"{algo} on {source.gpu}: {source.time_s * 1e6:.1f} µs, bound: {source.bound_text()}"
    return f"timeline {i + 1}"


def _patch(colour: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, label=label)


def _draw_memory(ax, lanes: _Lanes, lo: float, hi: float) -> float:
    """The HBM and L2 throughput strip over [lo, hi]; returns its highest value."""
    top = 0.0
    for name, colour in (("HBM", "#C44E52"), ("L2", "#937860")):
        series = lanes.memory[name]
        before = [(t, v) for t, v in series if t < lo]
        pts = before[-1:] + [(t, v) for t, v in series if lo <= t <= hi]
        if pts:
            xs = [max(t, lo) for t, _ in pts] + [hi]
            ys = [v for _, v in pts] + [pts[-1][1]]
            ax.step(xs, ys, where="post", color=colour, lw=1.2, label=f"{name} GB/s (whole GPU)")
            top = max(top, max(ys))
    ax.set_ylabel("GB/s", fontsize=8)
    ax.tick_params(labelsize=7, labelbottom=False)
    if ax.lines:
        ax.legend(loc="lower left", fontsize=7, frameon=True, ncol=2)
    ax.grid(True, alpha=0.2)
    return top


def _draw_lanes(ax, lanes: _Lanes, sms: int, lo: float, hi: float) -> None:
    labels, ticks = [], []
    row = 0
    for sm in range(sms):
        shade: dict[str, int] = {}  # CTA -> order of first appearance on this SM: two tones
        for pipe in LANES:
            y = -(row + 1)
            ticks.append(y + 0.4)
            labels.append(f"SM{sm} {PIPE_LABELS[pipe]}")
            spans, alphas = [], []
            for start, dur, label in lanes.busy.get((sm, pipe), []):
                if start + dur < lo or start > hi:
                    continue
                spans.append((start, max(dur, (hi - lo) * 1e-4)))
                idx = shade.setdefault(label, len(shade)) if label else 0
                alphas.append(1.0 if idx % 2 == 0 else 0.55)
            for alpha in (1.0, 0.55):
                group = [s for s, a in zip(spans, alphas, strict=True) if a == alpha]
                if group:
                    ax.broken_barh(
                        group, (y, 0.8), facecolors=PIPE_COLOURS[pipe], alpha=alpha, linewidth=0
                    )
            row += 1
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_ylim(-(row + 0.2), 0.2)
    ax.set_xlabel("time (µs)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7, labelbottom=True)
    for k in range(1, sms):
        ax.axhline(-k * len(LANES) + 0.1, color="0.8", lw=0.6)
