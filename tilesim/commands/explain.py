"""`tilesim explain | roofline | gantt | whatif`: the story, the pictures and the sweeps.

Workload defaults follow the FlashAttention papers' benchmarks: 16k tokens per
batch and H·d = 2048 (so ``-n 4096 -d 128`` is batch 4 x 16 heads); ``-b`` and
``-H`` override them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from ..errors import TilesimError
from ..hwmodels import GPU
from ..runner import DEFAULT_CACHE_DIR, Job, run_jobs
from ..runner import predict as run_one
from ..simulator import FIDELITIES
from ..traces.config import check_algo
from ..traces.workload import ALGOS, Workload
from .common import (
    BOUND_HELP,
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    DEFAULT_HEAD_DIM,
    DEFAULT_SEQLEN,
    FIGURE_SUFFIXES,
    CausalOpt,
    DtypeOpt,
    GpuOpt,
    JsonOpt,
    KvHeadsOpt,
    PassOpt,
    SeqlenKvOpt,
    SeqlenOpt,
    SetOpt,
    check_output,
    console,
    err_console,
    gpu_from_options,
    int_list,
    print_json,
    workers_of,
)

_NO_DEFAULT = {"show_default": False}
BatchOpt = Annotated[
    int | None,
    typer.Option("--batch", "-b", help="Batch size [default: 16k tokens / N].", **_NO_DEFAULT),
]
HeadsOpt = Annotated[
    int | None,
    typer.Option("--heads", "-H", help="Attention heads [default: 2048 / d].", **_NO_DEFAULT),
]
HeadDimOpt = Annotated[int, typer.Option("--head-dim", "-d", help="Head dimension (64, 128, 256).")]
JobsOpt = Annotated[
    int | None,
    typer.Option("--jobs", "-j", help="Worker processes [default: CPU cores].", **_NO_DEFAULT),
]
FidelityOpt = Annotated[
    str, typer.Option("--fidelity", help=f"Simulation fidelity: {', '.join(FIDELITIES)}.")
]
CacheDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir", help=f"Prediction cache [default: {DEFAULT_CACHE_DIR}].", **_NO_DEFAULT
    ),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
AlgosOpt = Annotated[
    str | None,
    typer.Option(
        "--algos", help="Comma-separated algorithms [default: all that apply].", **_NO_DEFAULT
    ),
]


def register(app: typer.Typer) -> None:
    app.command("explain", epilog=BOUND_HELP)(explain)
    app.command("roofline", epilog=BOUND_HELP)(roofline)
    app.command("gantt", epilog=BOUND_HELP)(gantt)
    app.command("whatif", epilog=BOUND_HELP)(whatif)


# -- helpers --------------------------------------------------------------------------


def _workload(
    gpu: GPU,
    seqlen: int,
    seqlen_kv: int | None,
    head_dim: int,
    batch: int | None,
    heads: int | None,
    causal: bool,
    dtype: str,
    pass_: str = "fwd",
    kv_heads: int | None = None,
) -> Workload:
    from ..explain import main_workload

    return main_workload(
        gpu,
        seqlen,
        head_dim,
        batch,
        heads,
        causal,
        dtype.strip().lower(),
        seqlen_kv,
        pass_.strip().lower(),
        kv_heads=kv_heads,
    )


def _seqlens(row: dict) -> str:
    """A what-if row's N: ``N`` square, ``N_q/N_kv`` against a longer KV cache."""
    return f"{row['seqlen']}/{row['seqlen_kv']}" if "seqlen_kv" in row else str(row["seqlen"])


def _algos(text: str | None, gpu: GPU, workload: Workload) -> list[str]:
    """The algorithms asked for, or all that run on this GPU and dtype."""
    if text is None:
        out = []
        for a in ALGOS:
            try:
                check_algo(a, workload, gpu)
            except TilesimError:
                continue
            out.append(a)
        return out
    algos = [a.strip() for a in text.split(",") if a.strip()]
    for a in algos:
        if a not in ALGOS:
            raise TilesimError(f"unknown algorithm {a!r} (choose from {', '.join(ALGOS)})")
    if not algos:
        raise TilesimError("--algos lists no algorithm")
    return algos


def _fidelity(fidelity: str) -> str:
    if fidelity not in FIDELITIES:
        raise TilesimError(f"unknown fidelity {fidelity!r} (choose from {', '.join(FIDELITIES)})")
    return fidelity


def _out_path(out: Path, option: str = "--out") -> Path:
    return check_output(out, option, FIGURE_SUFFIXES)


# -- explain ------------------------------------------------------------------------------


def explain(
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    batch: BatchOpt = None,
    heads: HeadsOpt = None,
    seqlen: SeqlenOpt = DEFAULT_SEQLEN,
    seqlen_kv: SeqlenKvOpt = None,
    head_dim: HeadDimOpt = DEFAULT_HEAD_DIM,
    causal: CausalOpt = False,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    pass_: PassOpt = "fwd",
    kv_heads: KvHeadsOpt = None,
    as_json: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print Markdown.")] = False,
    jobs: JobsOpt = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="Reuse predictions cached in this folder.", **_NO_DEFAULT),
    ] = None,
    fidelity: FidelityOpt = "fast",
) -> None:
    """Why attention is bandwidth-bound and what FlashAttention v1, v2, v3 change.

    Every claim carries this GPU's and this shape's simulated numbers. With --pass
    bwd or fwd_bwd: the backward's trade of recomputed FLOPs for HBM bytes and memory.
    """
    from ..explain import build_explanation
    from ..explain_backward import build_backward_explanation
    from ..explain_render import render_markdown, render_rich

    if as_json and markdown:
        raise TilesimError("choose one of --json and --markdown")
    hw = gpu_from_options(gpu, sets)
    w = _workload(hw, seqlen, seqlen_kv, head_dim, batch, heads, causal, dtype, pass_, kv_heads)
    story = build_explanation if w.pass_ == "fwd" else build_backward_explanation
    expl = story(
        hw,
        w,
        workers=workers_of(jobs),
        cache_dir=cache_dir,
        progress=not (as_json or markdown),
        fidelity=_fidelity(fidelity),
    )
    if as_json:
        print_json(expl.to_dict())
    elif markdown:
        console.file.write(render_markdown(expl))
    else:
        render_rich(expl, console)


# -- roofline -----------------------------------------------------------------------------


def roofline(
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG (or .svg/.pdf) to write.")],
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    batch: BatchOpt = None,
    heads: HeadsOpt = None,
    seqlen: SeqlenOpt = DEFAULT_SEQLEN,
    seqlen_kv: SeqlenKvOpt = None,
    head_dim: HeadDimOpt = DEFAULT_HEAD_DIM,
    causal: CausalOpt = False,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    pass_: PassOpt = "fwd",
    kv_heads: KvHeadsOpt = None,
    algos: AlgosOpt = None,
    results: Annotated[
        list[Path] | None,
        typer.Option(
            "--results",
            help="validate/bench results JSON with measured points "
            "[default: results/raw/*.json of this GPU].",
            **_NO_DEFAULT,
        ),
    ] = None,
    as_json: JsonOpt = False,
    jobs: JobsOpt = None,
    fidelity: FidelityOpt = "fast",
    more_results: Annotated[
        list[Path] | None,
        typer.Argument(
            help="More results files, so that --results results/raw/*.json works.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Hierarchical roofline: each algorithm at each memory level's intensity.

    Roofs: HBM, L2, shared memory (slanted, each against its own FLOP per byte);
    tensor cores (flat); the SFU and FP32 pipes as ceilings on a panel of their own.
    Hollow markers predicted, filled measured (with the error and the runs' spread).
    """
    from ..plots import RooflinePoint
    from ..plots import roofline as draw

    if more_results and results is None:
        raise TilesimError(f"unexpected argument {str(more_results[0])!r} (results files go "
                           "after --results)")  # fmt: skip
    if results is not None:
        results = [*results, *(more_results or [])]
    hw = gpu_from_options(gpu, sets)
    w = _workload(hw, seqlen, seqlen_kv, head_dim, batch, heads, causal, dtype, pass_, kv_heads)
    names = _algos(algos, hw, w)
    for a in names:
        check_algo(a, w, hw)  # asked for by name: say why it cannot run
    _out_path(out)
    outcomes, _ = run_jobs(
        [Job(hw, a, w, fidelity=_fidelity(fidelity)) for a in names],
        workers=workers_of(jobs),
        progress=not as_json,
    )
    measured, note = measured_points(hw, w, results)
    points, rows = [], []
    for algo, o in zip(names, outcomes, strict=True):
        if o.prediction is None:
            rows.append({"algo": algo, "error": o.error})
            continue
        m = measured.get(algo)
        point = RooflinePoint.of(
            o.prediction,
            hw,
            measured_tflops=m[0] if m else None,
            measured_range=m[1:] if m else None,
        )
        points.append(point)
        rows.append(
            {
                "algo": algo,
                "intensity_flop_per_byte": point.intensity,
                "l2_intensity_flop_per_byte": point.l2_intensity,
                "smem_intensity_flop_per_byte": point.smem_intensity,
                "tflops": point.tflops,
                "sfu_ceiling_tflops": point.sfu_ceiling_tflops,
                "fp32_ceiling_tflops": point.fp32_ceiling_tflops,
                "bound": o.prediction.bound,
                "measured_tflops": point.measured_tflops,
                "measured_range_tflops": list(point.measured_range or ()) or None,
            }
        )
    if note:
        err_console.print(f"note: {note}", highlight=False, markup=False)
    draw(
        hw,
        points,
        out,
        title=f"{hw.display_name}: B={w.batch} H={w.heads} N={w.seqlen_q} "
        f"d={w.head_dim} {w.dtype}{' causal' if w.causal else ''}"
        + ("" if w.pass_ == "fwd" else f" {w.pass_}"),
        note=note,
    )
    if as_json:
        print_json(
            {
                "gpu": hw.name,
                "workload": w.to_dict(),
                "points": rows,
                "measured_note": note,
                "out": str(out),
            }
        )
        return
    table = Table(box=box.SIMPLE)
    for col in ("algo", "FLOP/byte HBM", "L2", "smem", "TFLOPS", "measured", "bound"):
        table.add_column(col)
    for row in rows:
        if "error" in row:
            table.add_row(row["algo"], "-", "-", "-", "-", "-", row["error"])
            continue
        m = row["measured_tflops"]
        table.add_row(
            row["algo"],
            f"{row['intensity_flop_per_byte']:.1f}",
            _maybe(row["l2_intensity_flop_per_byte"]),
            _maybe(row["smem_intensity_flop_per_byte"]),
            f"{row['tflops']:.0f}",
            "-" if m is None else f"{m:.0f}",
            row["bound"],
        )
    console.print(table)
    console.print(f"wrote {out}")


def _maybe(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def measured_points(
    gpu: GPU, w: Workload, paths: list[Path] | None
) -> tuple[dict[str, tuple[float, float, float]], str | None]:
    """algo -> (median, slowest, fastest) measured TFLOPS of this shape on this GPU, from
    validate/bench results files, and a note when there is none (why: no measurement
    of this GPU in them, or none of this shape).

    Given paths are read (a bad file is an error); without them the committed
    ``results/raw/*.json`` are searched and unreadable ones skipped.
    """
    from ..hwmodels.presets import base_preset_for
    from ..validate import schema

    explicit = paths is not None
    if not explicit:
        from ..validate import paths as results_paths

        paths = sorted(results_paths.raw().glob("*.json"))
    base = gpu.name.split("+")[0].removesuffix(".calibrated")
    found: dict[str, list[float]] = {}
    docs = []
    for path in paths:
        try:
            docs += schema.load_measurement_files([path])[0]  # other JSON is passed over
        except TilesimError:
            if explicit:
                raise
    devices: set[str] = set()
    this_gpu = False
    for _, doc in docs:
        if doc["kind"] not in ("validate", "bench"):
            continue
        device = (doc["metadata"].get("device") or {}).get("name", "")
        devices.add(device or "an unnamed device")
        try:
            preset = base_preset_for(device)
        except TilesimError:
            continue
        if not base.startswith(preset):
            continue
        this_gpu = True
        for row in schema.ok_rows(doc):
            algo = row.get("algo")
            impl = row.get("impl")
            if impl is not None and not str(impl).startswith("tilesim-"):
                continue  # PyTorch's kernels are not our algorithms
            if algo not in ALGOS or row.get("workload") != w.to_dict():
                continue
            flops = row.get("flops") or schema.attention_flops(w)
            found.setdefault(algo, []).append(flops / row["time_s"] / 1e12)
    where = "the results files" if explicit else "results/raw/"
    note = None
    if not this_gpu:
        held = ", ".join(sorted(devices)) or "none"
        note = f"no measured points: {where} hold no {base} measurement (devices: {held})"
    elif not found:
        note = f"no measured points: {where} hold no measurement of this shape on this GPU"
    # the median of repeated measurements of one point, and their range
    out = {a: (sorted(v)[len(v) // 2], min(v), max(v)) for a, v in sorted(found.items())}
    return out, note


# -- gantt --------------------------------------------------------------------------------


def gantt(
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG (or .svg/.pdf) to write.")],
    algo: Annotated[
        list[str] | None,
        typer.Option(
            "--algo",
            "-a",
            help="Algorithm(s): repeat or comma-separate for one "
            "panel each, e.g. --algo v2,v3 [default: v2,v3 on Hopper, else v2].",
            **_NO_DEFAULT,
        ),
    ] = None,
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    batch: Annotated[int, typer.Option("--batch", "-b", help="Batch size.")] = 1,
    heads: Annotated[int, typer.Option("--heads", "-H", help="Attention heads.")] = 4,
    seqlen: Annotated[int, typer.Option("--seqlen", "-n", help="Sequence length.")] = 2048,
    seqlen_kv: SeqlenKvOpt = None,
    head_dim: HeadDimOpt = DEFAULT_HEAD_DIM,
    causal: CausalOpt = False,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    pass_: PassOpt = "fwd",
    kv_heads: KvHeadsOpt = None,
    sms: Annotated[int, typer.Option("--sms", help="SMs to draw.")] = 4,
    window: Annotated[
        str | None,
        typer.Option(
            "--window", help="START:END in µs [default: a steady-state stretch].", **_NO_DEFAULT
        ),
    ] = None,
    fidelity: Annotated[
        str, typer.Option("--fidelity", help="detailed draws every iteration; fast coalesces.")
    ] = "detailed",
) -> None:
    """Gantt chart of the first SMs' pipes over time, one panel per algorithm.

    v2's serial GEMM -> softmax -> GEMM against v3's overlap, under HBM/L2 throughput.
    """
    from ..plots import check_sms, parse_window
    from ..plots import gantt as draw

    check_sms(sms)
    hw = gpu_from_options(gpu, sets)
    w = _workload(hw, seqlen, seqlen_kv, head_dim, batch, heads, causal, dtype, pass_, kv_heads)
    names = [a.strip() for item in (algo or []) for a in item.split(",") if a.strip()]
    if not names:
        names = ["v2", "v3"] if hw.has_tma and hw.has_wgmma else ["v2"]
    span = parse_window(window)
    _out_path(out)
    preds = []
    for a in names:
        job = Job(hw, a, w, fidelity=_fidelity(fidelity))
        preds.append(run_one(job, timeline=True, timeline_sms=sms))
    draw(preds, out, sms=sms, window=span)
    for p in preds:
        console.print(
            f"{p.algo}: {p.time_s * 1e6:.1f} µs, {p.tflops:.0f} TFLOPS, bound: {p.bound_text()}"
        )
    console.print(f"wrote {out}")


# -- whatif -------------------------------------------------------------------------------


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
            **_NO_DEFAULT,
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
        Path | None, typer.Option("--plot", help="Write a speed-up plot (PNG).", **_NO_DEFAULT)
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
            **_NO_DEFAULT,
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
    names = _algos(algos, hw, Workload(1, 1, 1, 1, 64))
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
        _out_path(plot, "--plot")
    if no_cache and cache_dir is not None:
        raise TilesimError("choose one of --cache-dir and --no-cache")
    cache = None if no_cache else (cache_dir or Path(DEFAULT_CACHE_DIR))
    result = run_sweep(
        hw,
        varies,
        names,
        workloads,
        fidelity=_fidelity(fidelity),
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
                _seqlens(r),
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
            _seqlens(r),
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
