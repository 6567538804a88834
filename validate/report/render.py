"""Presenting a report's figures: table rows, markdown and the predicted-vs-measured plot.

Everything here reads `Report.summary()` (or the report's points) and formats it; no
figure is computed here, so the CLI's table, the markdown and the plot agree.
"""

from __future__ import annotations

import math
from pathlib import Path

from .points import ALGO_ORDER, BACKWARD_TARGET_MAPE_PCT, PASS_ORDER, Report, seqlens

MARKERS = {"standard": "o", "v1": "s", "v2": "^", "v3": "D", "sdpa-flash": "x"}


def _fmt(x, spec: str = ".1f", none: str = "-") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    return format(x, spec)


def summary_rows(summary: dict) -> list[tuple[str, str]]:
    """The headline figures as (name, value) pairs."""
    o = summary["overall"]
    rows = [
        ("preset", summary["preset"]),
        ("points predicted", f"{o['n']} of {summary['points']}"),
        ("MAPE", f"{o['mape_pct']:.1f}%"),
        ("max |error|", f"{o['max_abs_pct']:+.1f}% ({o['max_abs_point']})"),
        ("signed mean error", f"{o['signed_mean_pct']:+.1f}%"),
        ("Spearman rank corr.", _fmt(o["spearman"], ".3f")),
    ]
    for name, r in summary["ratios"].items():
        rows.append(
            (
                f"speed-up {name} error",
                f"{r['mean_abs_pct']:.1f}% mean |err|, {r['signed_mean_pct']:+.1f}% signed "
                f"(n={r['n']}; measured {r['measured_mean']:.2f}x, predicted "
                f"{r['predicted_mean']:.2f}x)",
            )
        )
    by_pass = summary.get("by_pass") or {}
    if len(by_pass) > 1 or any(k != "fwd" for k in by_pass):
        for pass_, s in by_pass.items():
            target = f"; target <= {BACKWARD_TARGET_MAPE_PCT:.0f}%" if pass_ == "bwd" else ""
            rows.append(
                (
                    f"MAPE {pass_}",
                    f"{s['mape_pct']:.1f}% (n={s['n']}, signed {s['signed_mean_pct']:+.1f}%"
                    f"{target})",
                )
            )
    sets = summary.get("by_set") or {}
    if len(sets) > 1 or any(k != "grid" for k in sets):
        for name, group in sets.items():
            o = group["overall"]
            rows.append(
                (
                    f"MAPE {name}",
                    f"{o['mape_pct']:.1f}% (n={o['n']}, signed {o['signed_mean_pct']:+.1f}%, "
                    f"max {o['max_abs_pct']:+.1f}%)",
                )
            )
    for name, group in sets.items():
        sp = group.get("spread")
        if sp:
            clean = _fmt(sp["max_abs_pct_clean"], "+.1f")
            rows.append(
                (
                    f"runs of {name}",
                    f"{sp['points']} points in {sp['runs']} runs: spread median "
                    f"{sp['median_spread_pct']:.1f}%, max {sp['max_spread_pct']:.1f}%; one run "
                    f"scatters {sp['run_scatter_pct']:.1f}% about the mean; max |error| "
                    f"{clean}% without {sp['left_out_of_max']} short noisy points",
                )
            )
    c = summary.get("clock_sm_MHz")
    if c:
        rows.append(
            (
                "SM clock while timed",
                f"{c['median']:.0f} MHz median ({c['min']:.0f}-{c['max']:.0f})",
            )
        )
    rows.append(
        (
            "measured time",
            "CUDA-graph replay of the launches (the GPU's time alone)"
            if summary.get("timing") == "graph"
            else "do_bench of the launches as Python issues them",
        )
    )
    rows.append(("predicted at", _clock_basis(summary)))
    f = summary["fastest"]
    if f["shapes"]:
        rows.append(
            (
                "fastest algo right",
                f"{f['agree']} of {f['shapes']} shapes ({100 * f['share']:.0f}%)",
            )
        )
    for name, by_impl in (summary.get("external_by_set") or {}).items():
        for impl, s in by_impl.items():
            rows.append(
                (
                    f"{impl} (external), {name}",
                    f"MAPE {s['mape_pct']:.1f}%, signed {s['signed_mean_pct']:+.1f}%, "
                    f"max {s['max_abs_pct']:+.1f}%, n={s['n']}",
                )
            )
    return rows


def _clock_basis(summary: dict) -> str:
    """The clock the points were predicted at, in words (the counted share, and how far
    the counters ran below nvidia-smi's reading)."""
    if summary.get("sm_clock") != "measured":
        return "the preset's clock (its clock model where it has one: what predict uses)"
    counted = summary.get("clock_counted")
    if not counted:
        return "the SM clock nvidia-smi read while each point was timed"
    ratios = ", ".join(
        f"{k} {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})"
        for k, r in counted["counter_over_smi"].items()
    )
    rest = counted["of"] - counted["points"]
    return (
        f"the SM clock the SMs' cycle counters ran at ({counted['points']} points"
        + (f"; nvidia-smi's reading for {rest}" if rest else "")
        + f"); counters over nvidia-smi: {ratios}"
    )


def group_rows(summary: dict) -> list[tuple[str, str, int, str, str, str]]:
    """(grouping, group, n, MAPE, signed mean, max |err|) for the by-algo/d/mask/dtype/launch
    tables."""
    out = []
    groups = [("algorithm", summary["by_algo"])]
    if any(k != "fwd" for k in summary.get("by_pass") or {}):
        # the forward's algorithms, the passes, then each backward pass's algorithms
        groups = [("algorithm (fwd)", summary["by_algo"]), ("pass", summary["by_pass"])]
        groups += [(f"algorithm ({k})", v) for k, v in summary["by_pass_algo"].items()]
    groups += [
        ("head dim", summary["by_head_dim"]),
        ("mask", summary["by_mask"]),
        ("dtype", summary["by_dtype"]),
        # the kernels of multi-launch points, each timed on its own (the backward's)
        ("launch", summary.get("by_launch") or {}),
    ]
    sets = summary.get("by_set") or {}
    if len(sets) > 1 or any(k != "grid" for k in sets):
        groups += [(f"set: {name}", group["by_algo"]) for name, group in sets.items()]
    for title, group in groups:
        for name, s in group.items():
            out.append(
                (
                    title,
                    name,
                    s["n"],
                    f"{s['mape_pct']:.1f}%",
                    f"{s['signed_mean_pct']:+.1f}%",
                    f"{s['max_abs_pct']:+.1f}%",
                )
            )
    return out


def to_markdown(report: Report) -> str:
    summary = report.summary()
    lines = [
        f"# tilesim accuracy: {summary['preset']}",
        "",
        f"Predictions recomputed with the current model ({summary['fidelity']} fidelity)"
        if not report.stored
        else "Predictions as stored in the results files",
        f"from {', '.join(summary['files'])}. Error = (predicted - measured) / measured:",
        "positive means the model predicts the kernel slower than it ran.",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    lines += [f"| {_md(k)} | {_md(v)} |" for k, v in summary_rows(summary)]
    lines += ["", "| by | group | n | MAPE | signed mean | max abs |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_md(x) for x in r) + " |" for r in group_rows(summary)]
    lines += [
        "",
        "| set | algo | dtype | d | N | mask | B | H | measured ms | runs' spread | predicted ms "
        "| error | bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in report.points + report.external:
        w = p.workload
        algo = p.algo if w.pass_ == "fwd" else f"{p.algo} {w.pass_}"
        spread = "-" if p.spread is None else f"{100 * p.spread:.1f}% ({len(p.runs)})"
        lines.append(
            f"| {p.set_name} | {algo} | {w.dtype} | {w.head_dim} | {seqlens(w)} | "
            f"{'causal' if w.causal else 'full'} | {w.batch} | {w.heads} | "
            f"{p.measured_s * 1e3:.3f} | {spread} | "
            f"{_fmt(p.predicted_s and p.predicted_s * 1e3, '.3f')} | "
            f"{_fmt(p.predicted_s and 100 * p.rel_error, '+.1f')}{'%' if p.predicted_s else ''} | "
            f"{p.bound or (p.error or '-')} |"
        )
    return "\n".join(lines) + "\n"


def _md(x) -> str:
    """A markdown table cell: a literal ``|`` would split the cell."""
    return str(x).replace("|", "\\|")


def write_png(report: Report, path: str | Path) -> Path:
    """Predicted vs measured time, log-log, one marker per algorithm, y = x and ±10%."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = report.predicted() + report.predicted(report.external)
    summary = report.summary()
    fig, ax = plt.subplots(figsize=(6.5, 6), dpi=120)
    lo = min(min(p.measured_s, p.predicted_s) for p in pts) * 1e3 / 1.5
    hi = max(max(p.measured_s, p.predicted_s) for p in pts) * 1e3 * 1.5
    xs = [lo, hi]
    ax.fill_between(xs, [x * 0.9 for x in xs], [x * 1.1 for x in xs], color="0.85", label="±10%")
    ax.plot(xs, xs, color="0.3", lw=1, label="y = x")
    names = [*ALGO_ORDER, *sorted({p.algo for p in report.external})]
    for pass_ in PASS_ORDER:
        for name in names:
            sel = [p for p in pts if p.algo == name and p.pass_ == pass_]
            if not sel:
                continue
            # the backward: the same marker, hollow
            ax.scatter(
                [p.measured_s * 1e3 for p in sel],
                [p.predicted_s * 1e3 for p in sel],
                marker=MARKERS.get(name, "o"),
                s=28,
                label=f"{name}{'' if pass_ == 'fwd' else ' ' + pass_} ({len(sel)})",
                alpha=0.85,
                **(
                    {}
                    if pass_ == "fwd"
                    else {"facecolors": "none", "edgecolors": f"C{names.index(name)}"}
                ),
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured time (ms)")
    ax.set_ylabel("predicted time (ms)")
    o = summary["overall"]
    ax.set_title(
        f"tilesim vs measured, {summary['preset']}\nMAPE {o['mape_pct']:.1f}%, "
        f"Spearman {_fmt(o['spearman'], '.3f')}, n={o['n']}",
        fontsize=10,
    )
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    from ...atomic import write_atomic

    try:
        return write_atomic(path, lambda fh: fig.savefig(fh, format="png"), option="--png")
    finally:
        plt.close(fig)
