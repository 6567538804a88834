"""`tilesim compare`: the four algorithms over a grid of sequence lengths and head dims at
a fixed number of tokens per batch and hidden size, with the speed-up over standard
attention; the points run in parallel processes (``--jobs``)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table

from ..errors import TilesimError
from ..hwmodels import GPU
from ..runner import Job
from ..traces.config import check_algo
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
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    CausalOpt,
    DtypeOpt,
    GpuOpt,
    JsonOpt,
    PassOpt,
    SetOpt,
    console,
    err_console,
    gpu_from_options,
    head_dim_list,
    int_list,
    print_json,
    workers_of,
)
from .show import (
    FidelityOpt,
    check_fidelity,
    fmt_time,
)

DEFAULT_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
DEFAULT_HEAD_DIMS = (64, 128)


def register(app: typer.Typer) -> None:
    app.command("compare", epilog=BOUND_HELP)(compare_cmd)


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

    check_fidelity(fidelity)
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


__all__ = ["compare_grid", "compare_rows", "register"]
