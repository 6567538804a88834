"""Pictures: the roofline, Gantt charts of SM pipes over time, what-if speed-up curves.

matplotlib's object API with the Agg canvas only (no pyplot, no display, no
global state): safe in a server, a worker process or a test. Every writer saves
through a temp file renamed into place, so a failed plot never leaves half a
PNG, and returns the path it wrote.

* `roofline(gpu, points, path)`: log-log FLOP/byte against TFLOPS, with the
  GPU's bandwidth roofs (HBM, L2, shared memory; slanted), its compute roofs
  (tensor cores per dtype and instruction path, FP32, SFU; flat) and the ridge
  points, and one marker per algorithm (hollow: predicted; filled: measured).
* `gantt(sources, path, sms=4, window=None)`: per SM, the busy intervals of the
  tensor cores, the SFU, the FP32 pipe and shared-memory fills (tile loads
  landing), under a strip with the whole GPU's HBM and L2 throughput; one panel
  per source, so v2's serial GEMM -> softmax -> GEMM sits above v3's overlap.
  A source is a `Prediction` made with ``timeline=True``, a `Timeline`, its
  Perfetto JSON (dict) or a ``*.json`` file written by ``--timeline``.
* `whatif_plot(result, path)`: speed-up against each varied hardware factor.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .atomic import write_atomic
from .errors import TilesimError
from .hwmodels.gpu import GPU

DPI = 110
PIPE_COLOURS = {"tensor": "#4C72B0", "sfu": "#DD8452", "fp32": "#55A868", "smem": "#8172B3"}
PIPE_LABELS = {"tensor": "tensor", "sfu": "SFU (exp)", "fp32": "FP32", "smem": "smem fill"}
LANES = ("tensor", "sfu", "fp32", "smem")
MAX_GANTT_SMS = 32  # SM rows in one panel: more is unreadable (and an image of 10^6 rows)
AUTO_WINDOW_OPS = 24  # tensor-core intervals of SM 0 in an automatic Gantt window
ALGO_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3")


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Render ``fig`` to ``path`` (PNG, or what the suffix says) atomically."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    if fmt not in ("png", "svg", "pdf"):
        raise TilesimError(f"cannot write {str(path)!r}: choose a .png, .svg or .pdf file")
    FigureCanvasAgg(fig)

    def render(fh) -> None:
        # no timestamp, version or random id in the file: the same figure, the same bytes
        with rc_context({"svg.hashsalt": "tilesim"}):
            fig.savefig(fh, format=fmt, dpi=DPI, metadata=_metadata(fmt))

    return write_atomic(path, render)


def check_sms(sms: int) -> int:
    """The number of SMs a Gantt chart draws: 1 to MAX_GANTT_SMS."""
    if not 1 <= sms <= MAX_GANTT_SMS:
        raise TilesimError(f"--sms must be between 1 and {MAX_GANTT_SMS}, got {sms}")
    return sms


def _metadata(fmt: str) -> dict:
    if fmt == "png":
        return {"Software": None}
    if fmt == "pdf":
        return {"Creator": None, "Producer": None, "CreationDate": None}
    return {"Date": None, "Creator": None}


# -- roofline --------------------------------------------------------------------------


@dataclass(frozen=True)
class RooflinePoint:
    label: str  # e.g. "v2"
    intensity: float  # matmul FLOPs per HBM byte
    tflops: float
    measured: bool = False


def roofs(gpu: GPU) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(bandwidth roofs in B/s, compute roofs in FLOP/s or ops/s), labelled."""
    bandwidths = [
        ("HBM", gpu.hbm_bandwidth_Bps),
        ("L2", gpu.l2_bandwidth_Bps),
        ("shared memory", gpu.smem_bandwidth_Bps),
    ]
    computes = [("tensor fp16 mma.sync", gpu.peak_tensor_flops("fp16", "mma_sync"))]
    if gpu.has_wgmma:
        computes.append(("tensor fp16 wgmma", gpu.peak_tensor_flops("fp16", "wgmma")))
    if gpu.has_fp8:
        computes.append(("tensor fp8 wgmma", gpu.peak_tensor_flops("fp8", "wgmma")))
    computes.append(("FP32", gpu.peak_fp32_flops))
    computes.append(("SFU (exp/s)", gpu.peak_sfu_ops))
    return bandwidths, computes


def roofline(
    gpu: GPU, points: Sequence[RooflinePoint], path: str | os.PathLike, title: str | None = None
) -> Path:
    bandwidths, computes = roofs(gpu)
    top = max(c for _, c in computes)
    ridges = [c / bw for _, c in computes for _, bw in bandwidths]
    xs = [p.intensity for p in points if p.intensity > 0]
    ys = [p.tflops for p in points if p.tflops > 0]
    x_lo = min([0.25] + [x / 2 for x in xs])
    x_hi = max([4 * max(ridges)] + [x * 4 for x in xs])
    y_lo = min([gpu.peak_sfu_ops / 1e12 / 4] + [y / 3 for y in ys])
    y_hi = top / 1e12 * 2.5

    fig = Figure(figsize=(9, 6))
    ax = fig.add_subplot()
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    hbm = bandwidths[0][1]
    for i, (name, bw) in enumerate(bandwidths):
        x_end = top / bw
        ax.plot(
            [x_lo, x_end],
            [bw * x_lo / 1e12, top / 1e12],
            "-" if i == 0 else "--",
            color="0.25",
            lw=1.2,
        )
        # the label sits on its line, turned to its slope (in display coordinates)
        x_text = max(x_lo * 1.3, y_lo * 2.5e12 / bw)
        (x0, y0), (x1, y1) = ax.transData.transform(
            [(x_text, bw * x_text / 1e12), (x_text * 2, bw * x_text * 2 / 1e12)]
        )
        ax.annotate(
            f"{name} {bw / 1e12:.3g} TB/s",
            (x_text, bw * x_text / 1e12 * 1.15),
            rotation=math.degrees(math.atan2(y1 - y0, x1 - x0)),
            rotation_mode="anchor",
            fontsize=8,
            color="0.25",
            va="bottom",
        )
    for name, c in computes:
        knee = c / hbm
        ax.plot([knee, x_hi], [c / 1e12, c / 1e12], "-", color="0.45", lw=1.2)
        ax.annotate(
            f"{name} {c / 1e12:.4g} TFLOPS", (knee * 1.08, c / 1e12 * 1.07), fontsize=8, color="0.3"
        )
        if name.startswith("tensor"):
            ax.plot([knee], [c / 1e12], "o", color="0.45", ms=4)
            ax.annotate(
                f"ridge {knee:.0f}",
                (knee * 1.08, c / 1e12 / 1.3),
                fontsize=7,
                color="0.35",
                va="top",
            )
    colours: dict[str, str] = {}
    for p in points:
        if p.intensity <= 0 or p.tflops <= 0:
            continue
        colour = colours.setdefault(p.label, ALGO_COLOURS[len(colours) % len(ALGO_COLOURS)])
        ax.scatter(
            [p.intensity],
            [p.tflops],
            s=70,
            zorder=3,
            edgecolors=colour,
            linewidths=1.8,
            facecolors=colour if p.measured else "none",
        )
        if not p.measured:
            ax.annotate(
                p.label, (p.intensity * 1.15, p.tflops), fontsize=9, color=colour, va="center"
            )
    ax.scatter([], [], s=60, facecolors="none", edgecolors="0.3", label="predicted")
    if any(p.measured for p in points):
        ax.scatter([], [], s=60, facecolors="0.3", edgecolors="0.3", label="measured")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("arithmetic intensity (matmul FLOP per HBM byte)")
    ax.set_ylabel("TFLOPS (matmul)")
    ax.set_title(title or f"Roofline: {gpu.display_name}", fontsize=11)
    ax.grid(True, which="major", alpha=0.25)
    fig.tight_layout()
    return save_figure(fig, path)


# -- Gantt --------------------------------------------------------------------------------


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


def parse_window(text: str | None) -> tuple[float, float] | None:
    """``"10:25"`` (µs) -> (10.0, 25.0); None or ``"auto"`` -> None."""
    if text is None or text.strip().lower() == "auto":
        return None
    a, sep, b = text.partition(":")
    try:
        lo, hi = float(a.strip().removesuffix("us")), float(b.strip().removesuffix("us"))
    except ValueError:
        lo = hi = float("nan")
    if not sep or not (math.isfinite(lo) and math.isfinite(hi)) or not 0 <= lo < hi:
        raise TilesimError(f"--window expects START:END in µs with START < END, got {text!r}")
    return lo, hi


def gantt(
    sources,
    path: str | os.PathLike,
    sms: int = 4,
    window: tuple[float, float] | str | None = None,
    titles: Sequence[str] | None = None,
) -> Path:
    """Draw the first ``sms`` SMs' pipes over time, one panel per source (see module doc).

    ``window`` is (start, end) in µs, ``"START:END"``, or None for a steady-state
    stretch of each panel (all panels the same length of time). ``sources`` may be
    one source or a list.
    """
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
    axes = fig.subplots(len(heights), 1, gridspec_kw={"height_ratios": heights})
    if window is None:
        # one time scale for every panel (the shortest steady-state stretch), so that
        # side by side a serial schedule and an overlapped one compare at a glance
        autos = [lanes.auto_window() for lanes in docs]
        width = min(b - a for a, b in autos)
        spans = [(a, a + width) for a, _ in autos]
    else:
        spans = [window] * len(docs)
    for k, lanes in enumerate(docs):
        mem_ax, sm_ax = axes[2 * k], axes[2 * k + 1]
        lo, hi = spans[k]
        _draw_memory(mem_ax, lanes, lo, hi)
        mem_ax.set_title(titles[k], fontsize=10, loc="left")
        _draw_lanes(sm_ax, lanes, sms, lo, hi)
    handles = [_patch(PIPE_COLOURS[p], PIPE_LABELS[p]) for p in LANES]
    fig.legend(
        handles=handles, loc="outside upper right", ncol=len(LANES), fontsize=8, frameon=False
    )
    return save_figure(fig, path)


def _default_title(source, i: int) -> str:
    algo = getattr(source, "algo", None)
    if algo and hasattr(source, "time_s"):
        return f"{algo} on {source.gpu}: {source.time_s * 1e6:.1f} µs, bound: {source.bound_text()}"
    return f"timeline {i + 1}"


def _patch(colour: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, label=label)


def _draw_memory(ax, lanes: _Lanes, lo: float, hi: float) -> None:
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
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, top * 1.25 if top > 0 else 1)
    ax.set_ylabel("GB/s", fontsize=8)
    ax.tick_params(labelsize=7, labelbottom=False)
    if ax.lines:
        ax.legend(loc="lower left", fontsize=7, frameon=True, ncol=2)
    ax.grid(True, alpha=0.2)


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
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time (µs)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    for k in range(1, sms):
        ax.axhline(-k * len(LANES) + 0.1, color="0.8", lw=0.6)


# -- what-if -------------------------------------------------------------------------------


def whatif_plot(result, path: str | os.PathLike) -> Path:
    """Speed-up vs the factor of each varied key (one panel per key; see `tilesim.whatif`)."""
    varies = list(result.varies)
    if not varies:
        raise TilesimError("nothing was varied: give --vary KEY=V1,V2,...")
    fig = Figure(figsize=(6.5 * len(varies), 4.5))
    axes = fig.subplots(1, len(varies), squeeze=False)[0]
    for ax, vary in zip(axes, varies, strict=True):
        lines: dict[tuple, list] = {}
        for row in result.rows:
            others = tuple((k, v) for k, v in row["settings"].items() if k != vary.key)
            label = f"{row['algo']} N={row['seqlen']} d={row['head_dim']}" + "".join(
                f" {k}={v}" for k, v in others
            )
            lines.setdefault(label, [])
            if row["speedup"] is not None:
                x = row["factors"].get(vary.key)
                pos = vary.values.index(row["settings"][vary.key])
                lines[label].append((x if x is not None else pos, row["speedup"]))
        numeric = all(
            r["factors"].get(vary.key) is not None for r in result.rows if r["speedup"] is not None
        )
        for i, (label, pts) in enumerate(lines.items()):
            if not pts:
                continue
            pts.sort()
            ax.plot(
                [x for x, _ in pts],
                [y for _, y in pts],
                "o-",
                label=label,
                color=ALGO_COLOURS[i % len(ALGO_COLOURS)],
                ms=4,
            )
        if numeric:
            ax.set_xscale("log", base=2)
            ticks = sorted({x for pts in lines.values() for x, _ in pts})
            ax.set_xticks(ticks, [f"{t:.3g}x" for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel(f"{vary.key} (x preset)")
        else:
            ax.set_xticks(range(len(vary.values)), list(vary.values))
            ax.set_xlabel(vary.key)
        ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
        ax.set_ylabel("speed-up vs the preset")
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=7)
        ax.set_title(f"What if {vary.key} changed? ({result.gpu})", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)
