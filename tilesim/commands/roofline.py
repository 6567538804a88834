"""`tilesim roofline`: each algorithm at each memory level's roofline, with the measured
points of results files for this GPU and shape."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from ..errors import TilesimError
from ..hwmodels import GPU
from ..runner import Job, run_jobs
from ..traces.config import check_algo
from ..traces.workload import ALGOS, Workload
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
    SeqlenKvOpt,
    SeqlenOpt,
    SetOpt,
    console,
    err_console,
    gpu_from_options,
    print_json,
    workers_of,
)
from .study_options import (
    NO_DEFAULT,
    AlgosOpt,
    BatchOpt,
    FidelityOpt,
    HeadDimOpt,
    HeadsOpt,
    JobsOpt,
    algos_of,
    fidelity_of,
    out_path,
    workload_of,
)


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
            **NO_DEFAULT,
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
    w = workload_of(hw, seqlen, seqlen_kv, head_dim, batch, heads, causal, dtype, pass_, kv_heads)
    names = algos_of(algos, hw, w)
    for a in names:
        check_algo(a, w, hw)  # asked for by name: say why it cannot run
    out_path(out)
    outcomes, _ = run_jobs(
        [Job(hw, a, w, fidelity=fidelity_of(fidelity)) for a in names],
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


def register(app: typer.Typer) -> None:
    app.command("roofline", epilog=BOUND_HELP)(roofline)
