"""Showing one simulated prediction: the simulation with its timeline and Gantt options,
the table of the `Prediction` (or its JSON), shared by `predict` and `trace replay`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from ..errors import TilesimError
from ..hwmodels import GPU
from ..simulator import FIDELITIES, Prediction, simulate
from ..simulator.prediction import BOUNDS
from ..simulator.timeline import DEFAULT_MAX_SMS, parse_window
from ..units import fmt_bytes
from .common import (
    FIGURE_SUFFIXES,
    check_output,
    console,
    err_console,
    print_json,
)

MAX_TIMELINE_SMS = 4096  # the most SMs a GPU preset may have
FidelityOpt = Annotated[
    str, typer.Option("--fidelity", help="fast (coalesced steady state) or detailed (every step).")
]
TimelineOpt = Annotated[
    Path | None,
    typer.Option(
        "--timeline",
        help="Write a Perfetto / Chrome trace JSON of the run here.",
        show_default=False,
        dir_okay=False,
    ),
]
TimelineSmsOpt = Annotated[
    int | None,
    typer.Option(
        "--timeline-sms",
        help=f"SMs drawn in the timeline [default: {DEFAULT_MAX_SMS}].",
        show_default=False,
    ),
]
GanttOpt = Annotated[
    Path | None,
    typer.Option(
        "--gantt",
        help="Draw the first SMs' pipes over time into this PNG (what the "
        "engine ran: with --fidelity fast, coalesced iterations show as longer bars; "
        "--fidelity detailed shows every iteration).",
        show_default=False,
    ),
]
TimelineWindowOpt = Annotated[
    str | None,
    typer.Option(
        "--timeline-window",
        metavar="START_US:END_US",
        help="Only this time window (µs) in the timeline.",
        show_default=False,
    ),
]


def run_and_show(
    trace, hw: GPU, fidelity, as_json, timeline, timeline_sms, window, gantt=None, schedule=None
) -> None:
    """Simulate ``trace`` and show it; ``schedule``: which kernel runs its config."""
    check_fidelity(fidelity)
    check_output(timeline, "--timeline", (".json",))
    check_output(gantt, "--gantt", FIGURE_SUFFIXES)
    if timeline is None and gantt is None:
        for option, value in (("--timeline-sms", timeline_sms), ("--timeline-window", window)):
            if value is not None:
                raise TilesimError(f"{option} needs --timeline (or --gantt): nothing is drawn")
    timeline_sms = DEFAULT_MAX_SMS if timeline_sms is None else timeline_sms
    if not 0 <= timeline_sms <= MAX_TIMELINE_SMS:
        raise TilesimError(
            f"--timeline-sms must be between 0 and {MAX_TIMELINE_SMS}, got {timeline_sms}"
        )
    record = timeline is not None or gantt is not None
    pred = simulate(
        trace,
        hw,
        fidelity,
        record,
        timeline_sms=max(timeline_sms, 1) if gantt else timeline_sms,
        timeline_window_s=_window(window),
    )
    if timeline is not None:
        pred.timeline.write(timeline)
        if pred.timeline.truncated:
            err_console.print(
                f"note: the timeline holds {pred.timeline.truncated}; draw fewer SMs "
                "(--timeline-sms) or a --timeline-window",
                soft_wrap=True,
            )
        if pred.timeline.sampled:
            err_console.print(
                f"note: the timeline is sampled ({pred.timeline.sampled}); "
                "--fidelity detailed draws every CTA and iteration",
                soft_wrap=True,
            )
    if gantt is not None:
        from ..plots import gantt as draw_gantt

        draw_gantt(pred, gantt, sms=min(4, max(timeline_sms, 1)))
    if as_json:
        print_json({**pred.to_dict(), **({"schedule": schedule} if schedule else {})})
        return
    show(pred, hw, schedule)
    if timeline is not None:
        console.print(f"timeline: {timeline} (open it at https://ui.perfetto.dev)")
    if gantt is not None:
        console.print(f"gantt: {gantt}")


def check_fidelity(fidelity: str) -> None:
    if fidelity not in FIDELITIES:
        raise TilesimError(f"unknown fidelity {fidelity!r} (choose from {', '.join(FIDELITIES)})")


def _window(text: str | None) -> tuple[float, float] | None:
    """``--timeline-window`` in seconds."""
    span = parse_window(text, "--timeline-window")
    return None if span is None else (span[0] * 1e-6, span[1] * 1e-6)


def _clock(hw: GPU, p: Prediction) -> str:
    """The SM clock a prediction assumed, in words: a kernel's own clock moves with its
    power draw (simulator/clock.py), so the time holds at this clock only."""
    if hw.clock_max_hz > 0:
        mma = hw.clock_max_hz * hw.tensor_clock_ratio
        each = ", ".join(f"{lp.name} {lp.clock_hz / 1e9:.2f}" for lp in p.launches[:4])
        more = f" (+{len(p.launches) - 4} launches)" if len(p.launches) > 4 else ""
        return (
            f"{each} GHz{more}: the clock model's, from each launch's work per second (at "
            f"most {hw.clock_max_hz / 1e9:.2f} GHz, {mma / 1e9:.2f}"
            f" with MMAs); --set clock_max_hz=0 predicts at a fixed {hw.sm_clock_hz / 1e9:.2f} GHz"
        )
    text = f"{hw.sm_clock_hz / 1e9:.2f} GHz SM"
    if hw.tensor_clock_ratio != 1:
        mma = hw.sm_clock_hz * hw.tensor_clock_ratio
        text += f", {mma / 1e9:.2f} GHz in launches with MMAs (x {hw.tensor_clock_ratio:g})"
    return text + "; --set sm_clock_hz=... predicts at another"


def show(p: Prediction, hw: GPU, schedule: str | None = None) -> None:
    w = p.workload
    shape = (
        (
            f"B={w.get('batch')} H={w.get('heads')} N={w.get('seqlen_q')}"
            + (f"/{w.get('seqlen_kv')}" if w.get("seqlen_kv") != w.get("seqlen_q") else "")
            + f" d={w.get('head_dim')} {w.get('dtype')}"
            + (" causal" if w.get("causal") else "")
            + (f" {w['pass_']}" if w.get("pass_", "fwd") != "fwd" else "")
        )
        if w
        else "(hand-written trace)"
    )
    table = Table(
        title=f"{p.algo} on {hw.display_name} ({p.gpu})", box=box.SIMPLE_HEAD, show_header=False
    )
    table.add_column("quantity", style="bold")
    table.add_column("value")
    table.add_row("workload", shape)
    if p.config:
        table.add_row("config", ", ".join(f"{k}={v}" for k, v in p.config.items()))
    if schedule:
        table.add_row("schedule", schedule)
    table.add_row("time", f"{fmt_time(p.time_s)}  ({p.cycles:,.0f} SM cycles)")
    table.add_row("clock", _clock(hw, p))
    table.add_row("throughput", f"{p.tflops:.1f} TFLOPS (matmul FLOPs {p.matmul_flops:.3g})")
    rw = f"{fmt_bytes(p.hbm_read_bytes)} / {fmt_bytes(p.hbm_write_bytes)}"
    table.add_row("HBM read / write", f"{rw}  (compulsory {fmt_bytes(p.compulsory_hbm_bytes)})")
    table.add_row("L2 hit rate", f"{p.l2_hit_rate:.1%}")
    table.add_row("bound", f"[bold]{p.bound}[/bold]  ({BOUNDS[p.bound]})")
    table.add_row("utilisation", "  ".join(f"{k} {v:.0%}" for k, v in p.utilisation.items()))
    waves = f"{p.waves} wave" + ("" if p.waves == 1 else "s")
    table.add_row(
        "grid",
        f"{waves}, {p.ctas_per_sm} CTAs/SM (longest launch), "
        f"{p.slot_fill:.0%} of the CTA slots held",
    )
    table.add_row("simulation", f"{p.fidelity}: {p.sim_events:,} events in {p.sim_wall_s:.2f} s")
    console.print(table)
    note = estimated_note(p)
    if note:
        console.print(note)
    if len(p.launches) > 1 or p.launches[0].simulated_ctas != p.launches[0].ctas:
        lt = Table(
            title="launches",
            box=None,
            padding=(0, 1),
            pad_edge=False,
            header_style="bold underline",
        )
        # simulated: CTAs the engine ran (fewer than CTAs where waves were sampled)
        for col in (
            "launch",
            "time",
            "CTAs",
            "waves",
            "per SM",
            "HBM rd",
            "HBM wr",
            "bound",
            "simulated",
        ):
            lt.add_column(
                col, justify="left" if col in ("launch", "bound") else "right", no_wrap=True
            )
        for lp in p.launches:
            lt.add_row(
                lp.name,
                fmt_time(lp.time_s),
                f"{lp.ctas:,}",
                str(lp.waves),
                str(lp.ctas_per_sm),
                fmt_bytes(lp.hbm_read_bytes),
                fmt_bytes(lp.hbm_write_bytes),
                lp.bound,
                f"{lp.simulated_ctas:,}",
            )
        console.print(lt)


def estimated_note(p: Prediction) -> str:
    """One line naming the launches whose compiled facts are estimated, and why; "" if none."""
    if not p.estimated_launches:
        return ""
    why: dict[str, list[str]] = {}
    for x in p.estimated_launches:
        why.setdefault(x["why"], []).append(x["launch"])
    parts = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in why.items())
    return f"[yellow]estimated[/yellow] registers, spills and issue cycles: {parts}"


# -- formatting --------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"
