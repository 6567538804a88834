"""`tilesim predict | compare | trace replay`: the engine's commands.

* ``predict``: one algorithm on one workload, a table of the `Prediction`
  (``--json`` for the full record, ``--timeline t.json`` for Perfetto).
* ``compare``: the four algorithms over a grid of sequence lengths and head
  dims at a fixed number of tokens per batch and hidden size, with the speed-up
  over standard attention; the points run in parallel processes (``--jobs``).
* ``trace replay``: simulate a ``*.trace.json`` file (a hand-written schedule
  for a new kernel, or an exported one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from ..errors import TilesimError
from ..hwmodels import GPU
from ..profiles import load as load_profile
from ..runner import Job
from ..simulator import FIDELITIES, Prediction, simulate
from ..simulator.prediction import BOUNDS
from ..simulator.timeline import DEFAULT_MAX_SMS, parse_window
from ..traces.compiled import DEFAULT as DEFAULT_PROFILE
from ..traces.config import check_algo, describe_config
from ..traces.files import load
from ..traces.workload import (
    ALGOS,
    PAPER_HIDDEN,
    PAPER_TOKENS,
    Workload,
    paper_batch_heads,
)
from ..units import fmt_bytes
from .common import (
    BOUND_HELP,
    DEFAULT_BATCH,
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    DEFAULT_HEAD_DIM,
    DEFAULT_HEADS,
    DEFAULT_SEQLEN,
    FIGURE_SUFFIXES,
    BatchOpt,
    CausalOpt,
    DtypeOpt,
    GpuOpt,
    HeadDimOpt,
    HeadsOpt,
    JsonOpt,
    KvHeadsOpt,
    PageSizeOpt,
    PassOpt,
    SeqlenKvOpt,
    SeqlenOpt,
    SeqlensKvOpt,
    SetOpt,
    check_output,
    console,
    err_console,
    gpu_from_options,
    head_dim_list,
    int_list,
    print_json,
    serving_options,
    workers_of,
    workload_from_options,
)
from .trace import (
    AlgoOpt,
    BlockMOpt,
    BlockNOpt,
    ConfigOpt,
    PackGqaOpt,
    PathOpt,
    PersistentOpt,
    PingpongOpt,
    SpecializeOpt,
    SplitsOpt,
    StagesOpt,
    WarpsOpt,
    config_from_options,
    trace_app,
)

MAX_TIMELINE_SMS = 4096  # the most SMs a GPU preset may have
DEFAULT_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
DEFAULT_HEAD_DIMS = (64, 128)

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
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="Kernel profile (a JSON file or a packaged name; 'none': every launch estimated) "
        "[default: the GPU architecture's].",
        show_default=False,
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


def register(app: typer.Typer) -> None:
    app.command("predict", epilog=BOUND_HELP)(predict_cmd)
    app.command("compare", epilog=BOUND_HELP)(compare_cmd)
    trace_app.command("replay", epilog=BOUND_HELP)(replay_cmd)


# -- predict ------------------------------------------------------------------------


def predict_cmd(
    algo: AlgoOpt = "v2",
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    batch: BatchOpt = DEFAULT_BATCH,
    heads: HeadsOpt = DEFAULT_HEADS,
    seqlen: SeqlenOpt = DEFAULT_SEQLEN,
    seqlen_kv: SeqlenKvOpt = None,
    head_dim: HeadDimOpt = DEFAULT_HEAD_DIM,
    causal: CausalOpt = False,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    pass_: PassOpt = "fwd",
    kv_heads: KvHeadsOpt = None,
    seqlens_kv: SeqlensKvOpt = None,
    page_size: PageSizeOpt = 0,
    config_name: ConfigOpt = None,
    block_m: BlockMOpt = None,
    block_n: BlockNOpt = None,
    num_warps: WarpsOpt = None,
    num_stages: StagesOpt = None,
    mma_path: PathOpt = None,
    persistent: PersistentOpt = None,
    pingpong: PingpongOpt = None,
    warp_specialize: SpecializeOpt = None,
    num_splits: SplitsOpt = None,
    pack_gqa: PackGqaOpt = None,
    profile: ProfileOpt = None,
    fidelity: FidelityOpt = "fast",
    as_json: JsonOpt = False,
    timeline: TimelineOpt = None,
    timeline_sms: TimelineSmsOpt = None,
    timeline_window: TimelineWindowOpt = None,
    gantt: GanttOpt = None,
) -> None:
    """Predict the time, traffic and bottleneck (bound, below) of one attention kernel."""
    hw = gpu_from_options(gpu, sets)
    workload = workload_from_options(
        batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype, pass_,
        **serving_options(kv_heads, seqlens_kv, page_size),
    )  # fmt: skip
    check_algo(algo, workload, hw)
    config = config_from_options(
        algo,
        workload,
        hw,
        config_name,
        block_m=block_m,
        block_n=block_n,
        num_warps=num_warps,
        num_stages=num_stages,
        mma_path=mma_path,
        persistent=persistent,
        pingpong=pingpong,
        warp_specialize=warp_specialize,
        num_splits=num_splits,
        pack_gqa=pack_gqa,
    )
    trace = Job(hw, algo, workload, config, profile=_profile(profile)).trace()
    schedule = describe_config(algo, workload, hw, config)
    _run_and_show(
        trace, hw, fidelity, as_json, timeline, timeline_sms, timeline_window, gantt, schedule
    )


def replay_cmd(
    path: Annotated[Path, typer.Argument(help="A *.trace.json file.", show_default=False)],
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    fidelity: FidelityOpt = "fast",
    as_json: JsonOpt = False,
    timeline: TimelineOpt = None,
    timeline_sms: TimelineSmsOpt = None,
    timeline_window: TimelineWindowOpt = None,
    gantt: GanttOpt = None,
) -> None:
    """Simulate a trace file (written by `tilesim trace export` or by hand)."""
    hw = gpu_from_options(gpu, sets)
    trace = load(path)
    _run_and_show(trace, hw, fidelity, as_json, timeline, timeline_sms, timeline_window, gantt)


def _run_and_show(
    trace, hw: GPU, fidelity, as_json, timeline, timeline_sms, window, gantt=None, schedule=None
) -> None:
    """Simulate ``trace`` and show it; ``schedule``: which kernel runs its config."""
    _check_fidelity(fidelity)
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
    _show(pred, hw, schedule)
    if timeline is not None:
        console.print(f"timeline: {timeline} (open it at https://ui.perfetto.dev)")
    if gantt is not None:
        console.print(f"gantt: {gantt}")


def _profile(name: str | None):
    """``--profile``: the default (None), no profile ("none"), or the one named."""
    if name is None:
        return DEFAULT_PROFILE
    return None if name == "none" else load_profile(name)


def _check_fidelity(fidelity: str) -> None:
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


def _show(p: Prediction, hw: GPU, schedule: str | None = None) -> None:
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


# -- compare ---------------------------------------------------------------------------


def compare_cmd(
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    seqlens: Annotated[
        str, typer.Option("--seqlens", help="Sequence lengths, comma-separated.")
    ] = ",".join(map(str, DEFAULT_SEQLENS)),
    head_dims: Annotated[
        str, typer.Option("--head-dims", help="Head dims, comma-separated.")
    ] = ",".join(map(str, DEFAULT_HEAD_DIMS)),
    algos: Annotated[
        str | None,
        typer.Option(
            "--algos",
            help=f"Algorithms [default: {','.join(ALGOS)}, those the GPU can run].",
            show_default=False,
        ),
    ] = None,
    tokens: Annotated[
        int, typer.Option("--tokens", help="Tokens per batch: batch = tokens / N.")
    ] = PAPER_TOKENS,
    hidden: Annotated[
        int, typer.Option("--hidden", help="H x d: heads = hidden / d.")
    ] = PAPER_HIDDEN,
    causal: CausalOpt = False,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    pass_: PassOpt = "fwd",
    fidelity: FidelityOpt = "fast",
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", help="Parallel processes [default: CPUs].", show_default=False
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare standard attention and FlashAttention v1/v2/v3 over sequence lengths."""
    from ..runner import run_jobs

    _check_fidelity(fidelity)
    hw = gpu_from_options(gpu, sets)
    ns = int_list(seqlens, "--seqlens")
    ds = head_dim_list(head_dims)
    explicit = algos is not None
    names = [a.strip().lower() for a in algos.split(",") if a.strip()] if explicit else list(ALGOS)
    if not names:
        raise TilesimError("--algos: no algorithm given")
    grid, notes = compare_grid(
        hw, ns, ds, names, tokens, hidden, causal, dtype, explicit, pass_.strip().lower()
    )
    workers = workers_of(jobs)
    outcomes, _ = run_jobs(
        [Job(hw, a, w, None, fidelity) for a, w in grid], workers=workers, progress=not as_json
    )
    for (algo, w), out in zip(grid, outcomes, strict=True):
        if not out.ok:
            raise TilesimError(f"{algo} at N={w.seqlen_q} d={w.head_dim}: {out.error}")
    rows = compare_rows(grid, [o.prediction for o in outcomes])
    if as_json:
        print_json(
            {
                "gpu": hw.name,
                "tokens": tokens,
                "hidden": hidden,
                "causal": causal,
                "dtype": dtype,
                "pass": pass_,
                "fidelity": fidelity,
                "notes": notes,
                "rows": rows,
            }
        )
        return
    _show_compare(hw, rows, tokens, hidden, causal, dtype, pass_)
    for note in notes:
        err_console.print(f"note: {note}")


def compare_grid(
    hw: GPU,
    ns,
    ds,
    algos,
    tokens: int,
    hidden: int,
    causal: bool,
    dtype: str,
    explicit: bool,
    pass_: str = "fwd",
) -> tuple[list, list]:
    """(algo, Workload) points of the compare grid, and notes on what was skipped."""
    for a in algos:
        if a not in ALGOS:
            raise TilesimError(f"unknown algorithm {a!r} (choose from {', '.join(ALGOS)})")
    points, notes, skipped = [], [], []
    for d in ds:
        if hidden % d or hidden < d:
            raise TilesimError(f"--hidden {hidden} is not a multiple of head dim {d}")
        for n in ns:
            if tokens % n or tokens < n:
                raise TilesimError(f"--tokens {tokens} is not a multiple of seqlen {n}")
            batch, heads = paper_batch_heads(n, d, tokens, hidden)
            w = Workload(batch, heads, n, n, d, causal=causal, dtype=dtype, pass_=pass_)
            for a in algos:
                try:
                    check_algo(a, w, hw)
                except TilesimError as exc:
                    if explicit:
                        raise
                    if a not in skipped:
                        skipped.append(a)
                        notes.append(f"{a} skipped: {exc}")
                    continue
                points.append((a, w))
    if not points:
        raise TilesimError("nothing to compare: no algorithm can run these shapes on " + hw.name)
    return points, notes


def compare_rows(grid, preds) -> list[dict]:
    """One row per point, with the speed-up over standard attention at the same shape."""
    standard = {
        (w.seqlen_q, w.head_dim): p.time_s
        for (a, w), p in zip(grid, preds, strict=True)
        if a == "standard"
    }
    rows = []
    for (a, w), p in zip(grid, preds, strict=True):
        base = standard.get((w.seqlen_q, w.head_dim))
        rows.append(
            {
                "seqlen": w.seqlen_q,
                "head_dim": w.head_dim,
                "batch": w.batch,
                "heads": w.heads,
                "algo": a,
                "time_s": p.time_s,
                "tflops": p.tflops,
                "hbm_bytes": p.hbm_read_bytes + p.hbm_write_bytes,
                "speedup_vs_standard": base / p.time_s if base else None,
                "bound": p.bound,
                "config": p.config,
            }
        )
    return rows


def _show_compare(hw: GPU, rows, tokens, hidden, causal, dtype, pass_="fwd") -> None:
    console.print(
        f"[bold]{hw.display_name}[/bold] ({hw.name}): {tokens} tokens per batch, "
        f"H*d = {hidden}, {dtype}"
        + (", causal" if causal else "")
        + ("" if pass_ == "fwd" else f", {pass_}")
    )
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, show_edge=False)
    for col in ("N", "d", "B×H", "algo", "time", "TFLOPS", "HBM", "vs std", "bound"):
        table.add_column(col, justify="left" if col in ("algo", "bound") else "right", no_wrap=True)
    last = None
    for r in rows:
        key = (r["head_dim"], r["seqlen"])
        if last is not None and key != last:
            table.add_section()
        last = key
        speed = r["speedup_vs_standard"]
        table.add_row(
            str(r["seqlen"]),
            str(r["head_dim"]),
            f"{r['batch']}×{r['heads']}",
            r["algo"],
            fmt_time(r["time_s"]),
            f"{r['tflops']:.0f}",
            fmt_bytes(r["hbm_bytes"]),
            "" if speed is None else f"{speed:.2f}x",
            r["bound"],
        )
    console.print(table)


# -- formatting --------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


__all__ = ["compare_grid", "compare_rows", "register"]
