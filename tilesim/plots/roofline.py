"""The hierarchical roofline: each memory level against its own arithmetic intensity.

`roofline(gpu, points, path)` draws two panels. The left one is log-log matmul
FLOP per byte against matmul TFLOPS: a slanted roof per memory level (HBM, L2,
shared memory) and a flat one per tensor-core path; each algorithm has a marker
per level, at its FLOPs over the bytes that level moved (hollow: predicted),
joined at its predicted TFLOPS, so the gaps between a kernel's markers are its
data reuse and the roof above each marker the level's limit. A measured point
(filled, with the spread of its repeated runs as an error bar) sits at the HBM
intensity, joined to the prediction by a line; the legend gives both figures and
the error in time, signed as `tilesim report` signs it. The right panel holds
what a matmul-FLOP axis cannot: the SFU and FP32 pipes as ceilings on this
kernel's matmul rate (its FLOPs over the time the pipe needs at peak for its
exponentials or FP32 ops). All names and figures are in legends outside the
plot, so no label lands on another.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..hwmodels.gpu import GPU
from .figure import ALGO_COLOURS, save_figure, si

LEVELS = ("HBM", "L2", "shared memory")
LEVEL_MARKERS = {"HBM": "o", "L2": "s", "shared memory": "^"}
LEVEL_STYLES = {"HBM": "-", "L2": "--", "shared memory": ":"}
ROOF_COLOUR = "0.3"


@dataclass(frozen=True)
class RooflinePoint:
    """One algorithm on the roofline; TFLOPS count matmul FLOPs only."""

    label: str  # e.g. "v2"
    intensity: float  # matmul FLOPs per HBM byte
    tflops: float  # predicted
    measured_tflops: float | None = None  # measured on a GPU, same shape (median of runs)
    measured_range: tuple[float, float] | None = None  # slowest and fastest run, TFLOPS
    l2_intensity: float | None = None  # matmul FLOPs per byte between the SMs and the L2
    smem_intensity: float | None = None  # matmul FLOPs per byte through shared memory
    sfu_ceiling_tflops: float | None = None  # matmul TFLOPS if the SFU alone set the pace
    fp32_ceiling_tflops: float | None = None  # the same for the FP32 pipe

    @classmethod
    def of(cls, prediction, gpu: GPU, label: str | None = None, **measured) -> RooflinePoint:
        """The point of a `Prediction` on ``gpu`` (``measured_tflops=``, ``measured_range=``)."""
        p = prediction
        flops = p.matmul_flops
        tera = 1e12
        sfu_s = p.exp_count / gpu.peak_sfu_ops
        fp32_s = p.fp32_ops / (gpu.fp32_ops_per_clk_per_sm * gpu.sm_count * gpu.sm_clock_hz)
        return cls(
            label or p.algo,
            flops / p.hbm_bytes if p.hbm_bytes else 0.0,
            p.tflops,
            l2_intensity=flops / p.l2_bytes if p.l2_bytes else None,
            smem_intensity=flops / p.smem_bytes if p.smem_bytes else None,
            sfu_ceiling_tflops=flops / sfu_s / tera if sfu_s > 0 else None,
            fp32_ceiling_tflops=flops / fp32_s / tera if fp32_s > 0 else None,
            **measured,
        )

    def at(self, level: str) -> float | None:
        """The point's intensity at a memory level (None: not known)."""
        return {
            "HBM": self.intensity,
            "L2": self.l2_intensity,
            "shared memory": self.smem_intensity,
        }[level]

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured time, as `tilesim report` counts it
        (positive: the model predicts the kernel slower than it ran)."""
        if not self.measured_tflops:
            return None
        return self.measured_tflops / self.tflops - 1.0


def roofs(gpu: GPU) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(bandwidth roofs in B/s per memory level, tensor-core roofs in FLOP/s), labelled."""
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
    return bandwidths, computes


def roofline(
    gpu: GPU,
    points: Sequence[RooflinePoint],
    path: str | os.PathLike,
    title: str | None = None,
    note: str | None = None,
) -> Path:
    """Write the roofline of ``points`` on ``gpu`` (module doc); ``note`` is printed on it
    (e.g. why no measured point is shown)."""
    return save_figure(roofline_figure(gpu, points, title, note), path)


def roofline_figure(
    gpu: GPU, points: Sequence[RooflinePoint], title: str | None = None, note: str | None = None
) -> Figure:
    """The figure `roofline` writes: the hierarchy axes first, the pipes' second."""
    points = [p for p in points if p.intensity > 0 and p.tflops > 0]
    pipes = any(p.sfu_ceiling_tflops or p.fp32_ceiling_tflops for p in points)
    fig = Figure(figsize=(14 if pipes else 11, 6.5), layout="constrained")
    if pipes:
        ax, pipe_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.4, 1]})
    else:
        ax, pipe_ax = fig.subplots(), None
    colours = {}
    for p in points:
        colours.setdefault(p.label, ALGO_COLOURS[len(colours) % len(ALGO_COLOURS)])
    _hierarchy(ax, gpu, points, colours)
    fig.suptitle(textwrap.fill(title or f"Roofline: {gpu.display_name}", 110), fontsize=11)
    if note:
        ax.set_title(textwrap.fill(note, 100), fontsize=8, color="#C44E52", loc="left")
    if pipe_ax is not None:
        _pipe_ceilings(pipe_ax, gpu, points, colours)
    return fig


def _hierarchy(ax, gpu: GPU, points: Sequence[RooflinePoint], colours: dict) -> None:
    bandwidths, computes = roofs(gpu)
    top = max(c for _, c in computes)
    xs = [x for p in points for x in (p.at(level) for level in LEVELS) if x]
    ys = [y for p in points for y in (p.tflops, p.measured_tflops) if y]
    ys += [lo for p in points if p.measured_range for lo in p.measured_range[:1]]
    x_lo = min([0.25] + [x / 2 for x in xs])
    x_hi = max([4 * top / min(bw for _, bw in bandwidths)] + [x * 4 for x in xs])
    y_lo = min([top / 1e12 / 1e3] + [y / 3 for y in ys])
    y_hi = top / 1e12 * 2.5
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    roof_handles = []
    for name, bw in bandwidths:
        (line,) = ax.plot(
            [x_lo, top / bw],
            [bw * x_lo / 1e12, top / 1e12],
            LEVEL_STYLES[name],
            color=ROOF_COLOUR,
            lw=1.2,
            label=f"{name} roof {si(bw, 'B/s')}",
        )
        roof_handles.append(line)
    for i, (name, c) in enumerate(computes):
        ridge = c / gpu.hbm_bandwidth_Bps
        (line,) = ax.plot(
            [x_lo, x_hi],
            [c / 1e12, c / 1e12],
            "-",
            color=str(0.2 + 0.2 * i),
            lw=1.0,
            label=f"{name} {c / 1e12:.0f} TFLOPS (HBM ridge {ridge:.0f} FLOP/B)",
        )
        roof_handles.append(line)

    algo_handles = []
    for p in points:
        colour = colours[p.label]
        levels = [(level, p.at(level)) for level in LEVELS if p.at(level)]
        ax.plot([x for _, x in levels], [p.tflops] * len(levels), "-", color=colour, lw=0.8)
        for level, x in levels:
            ax.scatter(
                [x],
                [p.tflops],
                s=60,
                marker=LEVEL_MARKERS[level],
                zorder=3,
                edgecolors=colour,
                linewidths=1.6,
                facecolors="none",
            )
        text = f"{p.label}: {p.tflops:.0f} TFLOPS predicted"
        if p.measured_tflops:
            _measured(ax, p, colour)
            text += f", {p.measured_tflops:.0f} measured (time {100 * p.error:+.1f}%)"
        algo_handles.append(Line2D([], [], color=colour, marker="o", lw=0, label=text))

    key_handles = [
        Line2D([], [], color="0.3", marker=LEVEL_MARKERS[level], lw=0, mfc="none",
               label=f"predicted, FLOPs per {level} byte")
        for level in LEVELS
    ]  # fmt: skip
    if any(p.measured_tflops for p in points):
        key_handles.append(
            Line2D([], [], color="0.3", marker="o", lw=0, label="measured (runs' spread)")
        )
    first = ax.legend(
        handles=algo_handles + key_handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        title="algorithms"
        + (
            " (error: predicted vs measured TFLOPS)"
            if any(p.error is not None for p in points)
            else ""
        ),
        title_fontsize=8,
    )
    ax.add_artist(first)
    ax.legend(
        handles=roof_handles,
        loc="lower left",
        bbox_to_anchor=(1.01, 0.0),
        fontsize=8,
        title="roofs",
        title_fontsize=8,
    )
    ax.set_xlabel("arithmetic intensity (matmul FLOP per byte moved at each memory level)")
    ax.set_ylabel("TFLOPS (matmul)")
    ax.grid(True, which="major", alpha=0.25)


def _measured(ax, p: RooflinePoint, colour: str) -> None:
    """The measured point, its runs' spread and the line from the prediction to it."""
    x = p.intensity
    ax.plot([x, x], [p.tflops, p.measured_tflops], ":", color=colour, lw=1.4)
    if p.measured_range:
        lo, hi = p.measured_range
        ax.errorbar(
            [x],
            [p.measured_tflops],
            yerr=[[p.measured_tflops - lo], [hi - p.measured_tflops]],
            fmt="none",
            ecolor=colour,
            elinewidth=1.2,
            capsize=3,
            zorder=4,
        )
    ax.scatter([x], [p.measured_tflops], s=45, marker="o", zorder=5, color=colour)


def _pipe_ceilings(ax, gpu: GPU, points: Sequence[RooflinePoint], colours: dict) -> None:
    names = list(dict.fromkeys(p.label for p in points))
    rows = {p.label: p for p in points}
    height = 0.36
    for i, name in enumerate(names):
        p = rows[name]
        y = len(names) - 1 - i
        for offset, value, hatch, what in (
            (height / 2, p.sfu_ceiling_tflops, "", "SFU"),
            (-height / 2, p.fp32_ceiling_tflops, "//", "FP32"),
        ):
            if value:
                ax.barh(
                    y + offset,
                    value,
                    height=height,
                    color=colours[name],
                    alpha=0.35 if hatch else 0.7,
                    hatch=hatch,
                    edgecolor=colours[name],
                    label=what,
                )
        ax.plot([p.tflops], [y], "k|", ms=16, mew=2)
    ax.set_yticks(range(len(names)), list(reversed(names)), fontsize=9)
    ax.set_xscale("log")
    _, computes = roofs(gpu)
    peak = max(c for _, c in computes) / 1e12
    ax.axvline(peak, color=ROOF_COLOUR, lw=1.0, ls="-")
    values = [v for p in points for v in (p.sfu_ceiling_tflops, p.fp32_ceiling_tflops) if v]
    ax.set_xlim(min(values + [p.tflops for p in points]) / 2, max(values + [peak]) * 2)
    handles = [
        _bar("0.3", 0.7, "", "SFU ceiling: matmul FLOPs / exponentials' time at the SFU peak"),
        _bar("0.3", 0.35, "//", "FP32 ceiling: matmul FLOPs / FP32 ops' time at the FP32 peak"),
        Line2D([], [], color="k", marker="|", ms=12, mew=2, lw=0, label="predicted TFLOPS"),
        Line2D([], [], color=ROOF_COLOUR, lw=1.0, label=f"top tensor roof {peak:.0f} TFLOPS"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=7)
    ax.set_xlabel("matmul TFLOPS the pipe alone would allow")
    ax.set_title("SFU and FP32 pipes as ceilings", fontsize=10)
    ax.grid(True, axis="x", which="major", alpha=0.25)


def _bar(colour: str, alpha: float, hatch: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, alpha=alpha, hatch=hatch, edgecolor=colour, label=label)
