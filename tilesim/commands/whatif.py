"""`tilesim whatif`: sweep GPU fields against algorithms and shapes (what if the
hardware changed), in parallel and cached."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from ..errors import TilesimError
from ..runner import DEFAULT_CACHE_DIR
from ..traces.config import check_algo
from ..traces.workload import Workload
from .common import (
    BOUND_HELP,
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    DEFAULT_HEAD_DIM,
    DEFAULT_SEQLEN,
    CausalOpt,
    DtypeOpt,
    GpuOpt,
    JsonOpt,
    KvHeadsOpt,
    PassOpt,
    SetOpt,
    console,
    err_console,
    gpu_from_options,
    int_list,
    print_json,
    workers_of,
)
from .study_options import (
    NO_DEFAULT,
    BatchOpt,
    CacheDirOpt,
    FidelityOpt,
    HeadsOpt,
    JobsOpt,
    NoCacheOpt,
    algos_of,
    fidelity_of,
    out_path,
    seqlens_text,
)


def whatif(
    vary: Annotated[
        list[str],
        typer.Option(
            "--vary",
            help="KEY=V1,V2,... a hardware field and its values, e.g. "
            "hbm_bandwidth_Bps=0.5x,1x,2x (repeatable: the product is swept).",
        ),
    ],
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    algos: Annotated[str, typer.Option("--algos", help="Comma-separated algorithms.")] = (
        "standard,v2"
    ),
    seqlens: Annotated[
        str, typer.Option("--seqlens", "-n", help="Comma-separated sequence lengths.")
    ] = str(DEFAULT_SEQLEN),
    head_dims: Annotated[
        str, typer.Option("--head-dim", "-d", help="Comma-separated head dims.")
    ] = str(DEFAULT_HEAD_DIM),
    seqlens_kv: Annotated[
        str | None,
        typer.Option(
            "--seqlens-kv",
            help="Comma-separated KV-cache lengths: serving shapes, --seqlens queries "
            "(1: decode) against each [default: --seqlens, square].",
            **NO_DEFAULT,
        ),
    ] = None,
    batch: BatchOpt = None,
    heads: HeadsOpt = None,
    causal: CausalOpt = False,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    pass_: PassOpt = "fwd",
    kv_heads: KvHeadsOpt = None,
    as_json: JsonOpt = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a speed-up plot (PNG).", **NO_DEFAULT)
    ] = None,
    jobs: JobsOpt = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="Dask: tcp://host:8786 (a running scheduler) or "
            "local-dask (a local cluster); needs tilesim[cluster].",
            **NO_DEFAULT,
        ),
    ] = None,
    fidelity: FidelityOpt = "fast",
) -> None:
    """What if the hardware changed? Sweep hardware fields x algorithms x shapes.

    Speed-ups vs the unmodified GPU; runs on local processes or Dask; cached, so it resumes.
    """
    from ..plots import whatif_plot
    from ..whatif import parse_vary, run_sweep, shapes

    hw = gpu_from_options(gpu, sets)
    varies = parse_vary(vary, hw)
    names = algos_of(algos, hw, Workload(1, 1, 1, 1, 64))
    workloads = shapes(
        int_list(seqlens, "--seqlens"),
        int_list(head_dims, "--head-dim"),
        batch=batch,
        heads=heads,
        causal=causal,
        dtype=dtype.strip().lower(),
        seqlens_kv=None if seqlens_kv is None else int_list(seqlens_kv, "--seqlens-kv"),
        kv_heads=kv_heads,
    )
    # every shape at the pass asked for (Workload checks the name)
    workloads = [dataclasses.replace(w, pass_=pass_.strip().lower()) for w in workloads]
    for a in names:  # what the unmodified GPU cannot run has no speed-up to sweep
        for w in workloads:
            check_algo(a, w, hw)
    if plot is not None:
        out_path(plot, "--plot")
    if no_cache and cache_dir is not None:
        raise TilesimError("choose one of --cache-dir and --no-cache")
    cache = None if no_cache else (cache_dir or Path(DEFAULT_CACHE_DIR))
    result = run_sweep(
        hw,
        varies,
        names,
        workloads,
        fidelity=fidelity_of(fidelity),
        workers=workers_of(jobs),
        scheduler=scheduler,
        cache_dir=cache,
        progress=True,
    )
    st = result.stats
    if st.jobs and st.failed == st.jobs:
        first = next(row["error"] for row in result.rows if row["error"])
        raise TilesimError(f"every prediction of the sweep failed, the first: {first}")
    err_console.print(
        f"{st.jobs} predictions: {st.simulated} simulated, {st.cached} from the cache"
        + (f" ({cache})" if cache is not None else "")
        + f", {st.failed} failed",
        highlight=False,
    )
    if plot is not None:
        whatif_plot(result, plot)
    if as_json:
        print_json(result.to_dict())
        return
    _print_sweep(result)
    if plot is not None:
        console.print(f"wrote {plot}")


def _print_sweep(result) -> None:
    from ..explain.fmt import fmt_time

    table = Table(title=f"What if: {result.gpu}", box=box.SIMPLE)
    keys = [v.key for v in result.varies]
    for col in ["N", "d", "algo", *keys, "time", "TFLOPS", "bound", "speed-up"]:
        # a long field name folds in its header (at its underscores); the figures never wrap
        vary = next((v for v in result.varies if v.key == col), None)
        table.add_column(
            col.replace("_", " ") if vary else col,
            justify="left" if col in ("algo", "bound") else "right",
            no_wrap=vary is None,
            overflow="fold",
            min_width=max(map(len, vary.values)) if vary else None,
        )
    notes: list[str] = []  # failed points' messages, numbered below the table
    for r in result.rows:
        settings = [r["settings"][k] for k in keys]
        if r["error"]:
            if r["error"] not in notes:
                notes.append(r["error"])
            table.add_row(
                seqlens_text(r),
                str(r["head_dim"]),
                r["algo"],
                *settings,
                "-",
                "-",
                f"failed [{notes.index(r['error']) + 1}]",
                "-",
            )
            continue
        speed = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        table.add_row(
            seqlens_text(r),
            str(r["head_dim"]),
            r["algo"],
            *settings,
            fmt_time(r["time_s"]),
            f"{r['tflops']:.0f}",
            r["bound"],
            speed,
        )
    console.print(table)
    for i, note in enumerate(notes, 1):
        console.print(f"[{i}] {note}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("whatif", epilog=BOUND_HELP)(whatif)
