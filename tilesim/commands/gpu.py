"""`tilesim calibrate | bench | validate`: the commands that need a CUDA GPU.

Each checks for torch, triton and a GPU first (one line and exit 2 without
them), prints progress on stderr, a table on stdout, and writes a results file
(atomically, checkpointed during long runs) under ``results/raw/`` unless
told where.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import TilesimError, shown
from ..hwmodels.presets import base_preset_for, calibrated_name
from ..validate.calibrate import STEPS as CALIBRATION_STEPS
from .common import (
    JsonOpt,
    check_output,
    console,
    head_dim_list,
    int_list,
    print_json,
    workers_of,
)

OutOpt = Annotated[
    Path | None,
    typer.Option("--out", "-o", help="Results file to write [default: under results/raw/]."),
]
WarmupOpt = Annotated[float, typer.Option("--warmup-ms", help="do_bench warm-up per point (ms).")]
RepOpt = Annotated[float, typer.Option("--rep-ms", help="do_bench timing per point (ms).")]
BudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--time-budget-s",
        help="Stop timing new points after this many seconds (the rest are recorded as skipped).",
    ),
]
SeqlensOpt = Annotated[
    str | None, typer.Option("--seqlens", help="Comma-separated sequence lengths.")
]
HeadDimsOpt = Annotated[str | None, typer.Option("--head-dims", help="Comma-separated head dims.")]
MaskOpt = Annotated[str, typer.Option("--mask", help="full, causal or both.")]
# validate: "all" = the forward grid, then the backward grid (standard, v1, v2)
VALIDATE_PASSES = {
    "fwd": ("fwd",),
    "bwd": ("bwd",),
    "fwd_bwd": ("fwd_bwd",),
    "all": ("fwd", "bwd"),
}


def parse_validate_pass(text: str) -> tuple[str, ...]:
    key = text.strip().lower()
    if key not in VALIDATE_PASSES:
        raise TilesimError(f"--pass must be fwd, bwd, fwd_bwd or all, got {text!r}")
    return VALIDATE_PASSES[key]


def parse_bench_pass(text: str) -> str:
    key = text.strip().lower()
    if key not in ("fwd", "bwd"):
        raise TilesimError(f"--pass must be fwd or bwd, got {text!r}")
    return key


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
    app.command("bench")(bench)
    app.command("validate")(validate)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


MAX_TIMING_MS = 60_000  # a minute of do_bench per point is already days over a grid


def check_timing(warmup_ms: float, rep_ms: float, time_budget_s: float | None) -> None:
    """do_bench's warm-up and timing per point, and the run's budget: finite and in range."""
    if not 0 <= warmup_ms <= MAX_TIMING_MS:  # NaN fails too
        raise TilesimError(f"--warmup-ms must be within [0, {MAX_TIMING_MS}], got {warmup_ms}")
    if not 0 < rep_ms <= MAX_TIMING_MS:
        raise TilesimError(f"--rep-ms must be within (0, {MAX_TIMING_MS}], got {rep_ms}")
    if time_budget_s is not None and not 0 < time_budget_s < float("inf"):
        raise TilesimError(f"--time-budget-s must be a positive number, got {time_budget_s}")


def check_draw(seed: int, count: int, limit: int) -> None:
    """``--seed`` and ``--points`` of a random draw."""
    if not 0 <= seed < 2**63:
        raise TilesimError(f"--seed must be within [0, 2^63), got {shown(seed)}")
    if not 1 <= count <= limit:
        raise TilesimError(f"--points must be between 1 and {limit}, got {shown(count)}")


def parse_mask(text: str) -> tuple[bool, ...]:
    masks = {"full": (False,), "causal": (True,), "both": (False, True)}
    if text not in masks:
        raise TilesimError(f"--mask must be full, causal or both, got {text!r}")
    return masks[text]


def _check_out(path: Path | None) -> None:
    check_output(path, "--out", (".json",))


def _default_out(suffix: str) -> Path:
    import torch

    from ..validate import paths
    from ..validate.gpu.metadata import gpu_slug, today

    slug = gpu_slug(torch.cuda.get_device_name(0))
    out = paths.raw()
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{today()}-{slug}{suffix}.json"


# -- calibrate ----------------------------------------------------------------------------


def calibrate(
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Datasheet preset to calibrate [default: the one of the GPU at hand].",
            show_default=False,
        ),
    ] = None,
    preset_out: Annotated[
        Path | None,
        typer.Option(
            "--preset-out",
            help="Calibrated preset to write [default: hwmodels/presets/<base>.calibrated.toml].",
            show_default=False,
        ),
    ] = None,
    out: OutOpt = None,
    quick: Annotated[bool, typer.Option("--quick", help="Shorter runs (a smoke test).")] = False,
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help=f"Comma-separated steps: {', '.join(CALIBRATION_STEPS)} "
            "[default: all]; fields of steps not run keep the datasheet value.",
            show_default=False,
        ),
    ] = None,
    from_results: Annotated[
        list[Path] | None,
        typer.Option(
            "--from-results",
            help="Derive the preset from the raw figures of earlier calibrate results files "
            "instead of measuring (no GPU needed; repeat it to combine runs, a later "
            "file's figure replacing an earlier one of the same name).",
            show_default=False,
        ),
    ] = None,
    transfer_to: Annotated[
        str | None,
        typer.Option(
            "--transfer-to",
            help="With --from-results: write the preset of a sibling product of the measured "
            "die instead (h100: the H200's calibration carried to the H100 SXM; default "
            "output hwmodels/presets/<target>.transferred.toml).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Micro-benchmark this GPU and write a calibrated preset (never looks at attention)."""
    from ..validate.calibrate import check_steps
    from ..validate.gpu.timing import require_cuda

    steps = check_steps([s.strip() for s in only.split(",")] if only else None)
    _check_out(out)
    check_output(preset_out, "--preset-out", (".toml",))
    if transfer_to is not None and from_results is None:
        raise TilesimError("--transfer-to needs --from-results (the sibling's raw figures)")
    if from_results is not None:
        _derive_from(from_results, base, preset_out, json_out, transfer_to)
        return
    if base:
        from ..hwmodels import load_gpu

        load_gpu(base)  # a bad name fails before the GPU is looked for
    require_cuda("calibrate")
    import torch

    from ..hwmodels import preset_path, write_preset
    from ..validate import calibrate as cal
    from ..validate import schema
    from ..validate.gpu import metadata
    from ..validate.gpu.calibrate import run_calibration

    device = torch.cuda.get_device_name(0)
    base_gpu, base_name = _base_for(device, base)
    meta = metadata.collect(
        {"command": "calibrate", "base_preset": base_name, "quick": quick, "steps": list(steps)}
    )
    t0 = time.perf_counter()
    log(f"calibrating {device} against {base_name} ...")
    rows = run_calibration(quick=quick, log=log, only=steps)
    gpu, fields, notes = cal.derive_preset(rows, base_gpu, meta["date"])
    metadata.finish(meta)
    meta["derived"] = {
        f: {
            "datasheet": getattr(base_gpu, f),
            "calibrated": getattr(gpu, f),
            "source": gpu.sources.get(f, ""),
        }
        for f in fields
    }
    meta["notes"] = notes
    meta["wall_s"] = round(time.perf_counter() - t0, 1)
    doc = schema.new_results("calibrate", meta)
    doc["measurements"] = rows
    results = out or _default_out("-calibrate")
    schema.save_results(doc, results)
    target = preset_out or preset_path(calibrated_name(base_gpu.name))
    header = (
        f"{gpu.display_name}: measured by `tilesim calibrate` on {meta['date']} "
        f"({device}, {len(rows)} micro-benchmarks; raw figures in {results.name}).\n"
        "Only the fields below differ from the datasheet preset named by `base`;\n"
        "each comment says how its value was measured. No attention timing was used."
    )
    if base_name is None:  # a GPU with no preset: every field, the unmeasured ones named
        from ..validate.device import unmeasured

        missing = unmeasured(gpu)
        notes.append(f"not measured (still assumed): {', '.join(missing) or 'none'}")
        header = (
            f"{gpu.display_name}: built by `tilesim calibrate` on {meta['date']} from the "
            f"device's properties and {len(rows)} micro-benchmarks (raw figures in "
            f"{results.name}).\nFields marked assumed were not measured: {len(missing)} of "
            "them. No attention timing was used."
        )
        write_preset(gpu, target, header)
    else:
        write_preset(gpu, target, header, base=base_name, only=fields)
    if json_out:
        print_json({"preset": str(target), "results": str(results), "derived": meta["derived"]})
        return
    _print_derived(base_gpu, gpu, fields, notes, f"wrote {target} and {results}")


def _base_for(device: str, base: str | None):
    """(GPU, preset name) to calibrate against: ``--base``, the datasheet preset of a GPU
    tilesim knows, or, for one it does not, a preset from its device properties (name
    None: it has no file to overlay)."""
    from ..hwmodels import load_gpu

    if base:
        gpu = load_gpu(base)
        return gpu, gpu.name
    try:
        gpu = load_gpu(base_preset_for(device))
        return gpu, gpu.name
    except TilesimError:
        import torch

        from ..validate.device import preset_from_properties

        log(f"no preset for {device}: starting from its device properties")
        return preset_from_properties(torch.cuda.get_device_properties(0)), None


def _print_derived(base_gpu, gpu, fields, notes, done: str) -> None:
    table = Table(title=f"calibrated {gpu.name}")
    for col in ("field", "datasheet", "calibrated", "ratio"):
        table.add_column(col, justify="left" if col == "field" else "right")
    for f in fields:
        a, b = getattr(base_gpu, f), getattr(gpu, f)
        ratio = f"{b / a:.3f}" if isinstance(a, int | float) and a else ""
        table.add_row(f, f"{a:.4g}", f"{b:.4g}", ratio)
    console.print(table)
    for note in notes:
        console.print(f"note: {note}")
    console.print(done)


def _derive_from(
    files: list[Path],
    base: str | None,
    preset_out: Path | None,
    json_out: bool,
    transfer_to: str | None = None,
):
    """`calibrate --from-results`: the preset from results files' raw rows (CPU); with
    ``transfer_to``, that of the sibling product it is carried to."""
    from ..hwmodels import load_gpu, preset_path, write_preset
    from ..validate import calibrate as cal
    from ..validate import schema

    by_name: dict = {}
    meta: dict = {}
    first = files[0]
    for path in files:
        doc = schema.load_results(path)
        if doc.get("kind") != "calibrate":
            raise TilesimError(f"{path}: not a calibrate results file ({doc.get('kind')!r})")
        meta = meta or doc.get("metadata", {})
        when = doc.get("metadata", {}).get("date", "")
        # each row keeps the date of its run (a field derived from a later run says so)
        by_name.update({row["name"]: {"date": when, **row} for row in doc["measurements"]})
    rows = list(by_name.values())
    if not rows:
        names = ", ".join(map(str, files))
        raise TilesimError(f"{names}: no micro-benchmark figure to derive from")
    device = (meta.get("device") or {}).get("name", "")
    if base:
        base_gpu = load_gpu(base)
    else:
        recorded = meta.get("base_preset")
        if recorded is not None and not isinstance(recorded, str):
            raise TilesimError(f"{first}: metadata.base_preset must be a preset name")
        try:
            base_gpu = load_gpu(recorded or base_preset_for(device))
        except TilesimError as exc:
            raise TilesimError(f"{first}: metadata.base_preset: {exc}") from None
    gpu, fields, notes = cal.derive_preset(rows, base_gpu, meta.get("date", ""))
    names = ", ".join(p.name for p in files)
    if transfer_to is not None:
        _write_transferred(gpu, transfer_to, meta.get("date", ""), names, preset_out, json_out)
        return
    target = preset_out or preset_path(calibrated_name(base_gpu.name))
    header = (
        f"{gpu.display_name}: measured by `tilesim calibrate` on {meta.get('date', '?')} "
        f"({device or '?'}, {len(rows)} micro-benchmarks; raw figures in {names}).\n"
        "Only the fields below differ from the datasheet preset named by `base`;\n"
        "each comment says how its value was measured. No attention timing was used."
    )
    write_preset(gpu, target, header, base=base_gpu.name, only=fields)
    if json_out:
        print_json({"preset": str(target), "results": [str(p) for p in files], "fields": fields})
        return
    _print_derived(base_gpu, gpu, fields, notes, f"wrote {target} from {names}")


def _write_transferred(measured, transfer_to, date, names, preset_out, json_out) -> None:
    from ..hwmodels import FIELDS, preset_path, write_preset
    from ..validate import transfer as tr

    sibling = tr.sibling_of(transfer_to)
    if measured.name.removesuffix(".calibrated") != sibling.measured:
        raise TilesimError(
            f"--transfer-to {transfer_to}: the results are of {measured.name}, not of "
            f"{sibling.measured} (the die it transfers from)"
        )
    gpu = tr.transfer_preset(measured, sibling, date)
    target = preset_out or preset_path(tr.transferred_name(sibling.target))
    write_preset(
        gpu, target, tr.header(gpu, measured, sibling, names), base=sibling.target, only=FIELDS
    )
    if json_out:
        print_json({"preset": str(target), "from": measured.name, "transferred": tr.SM_SIDE})
        return
    console.print(f"wrote {target}: {gpu.display_name}")


# -- bench --------------------------------------------------------------------------------


BENCH_RANDOM_POINTS = 60  # --grid random's draws, bench and validate
VALIDATE_RANDOM_POINTS = 150
SERVING_POINTS = 12  # --grid serving's random decode shapes


def bench(
    seqlens: SeqlensOpt = None,
    head_dims: HeadDimsOpt = None,
    mask: MaskOpt = "both",
    impls: Annotated[
        str | None,
        typer.Option(
            "--impls",
            help="Comma-separated: standard,v1,v2,v3 (tilesim's) and sdpa-math, sdpa-flash, "
            "sdpa-efficient, sdpa-cudnn, and fa4 (FlashAttention-4, forward) [default: all].",
            show_default=False,
        ),
    ] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="fp16 or bf16.")] = "fp16",
    pass_: Annotated[
        str,
        typer.Option(
            "--pass",
            help="fwd, or bwd: time only the backward (tilesim's backward launches; SDPA's "
            "autograd backward of one forward).",
        ),
    ] = "fwd",
    out: OutOpt = None,
    warmup_ms: WarmupOpt = 10,
    rep_ms: RepOpt = 30,
    time_budget_s: BudgetOpt = None,
    grid_name: Annotated[
        str,
        typer.Option(
            "--grid",
            help="grid (16k tokens per batch, H·d = 2048), random: forward shapes drawn by "
            "--seed as `validate --grid random` draws them, for the external kernels with a "
            "schedule (sdpa-flash, sdpa-math), one after the other, or serving: the shapes of "
            "`validate --grid serving` for SDPA's flash, cuDNN and efficient backends.",
        ),
    ] = "grid",
    seed: Annotated[int, typer.Option("--seed", help="--grid random: the draw's seed.")] = 0,
    count: Annotated[
        int | None,
        typer.Option(
            "--points",
            help="--grid random: how many shapes to draw [60]; serving: how many random "
            "decode shapes [12].",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Time tilesim's kernels and PyTorch SDPA's backends on the same shapes (TFLOPS table)."""
    from ..validate import grid
    from ..validate.gpu import bench as b
    from ..validate.gpu.timing import require_cuda

    ns = int_list(seqlens, "--seqlens", grid.BENCH_SEQLENS)
    ds = head_dim_list(head_dims, (128, 64))
    masks = parse_mask(mask)
    which = parse_bench_pass(pass_)
    check_timing(warmup_ms, rep_ms, time_budget_s)
    if dtype not in ("fp16", "bf16"):
        raise TilesimError(f"--dtype must be fp16 or bf16 for bench, got {dtype!r}")
    if grid_name not in ("grid", "random", "serving"):
        raise TilesimError(f"--grid must be grid, random or serving, got {grid_name!r}")
    if count is None:
        count = SERVING_POINTS if grid_name == "serving" else BENCH_RANDOM_POINTS
    check_draw(seed, count, 10_000)
    meta_extra = {"grid": grid_name}
    if grid_name == "random":
        from ..validate.random_set import EXTERNAL_KINDS

        if which != "fwd":
            raise TilesimError("--grid random draws forward shapes: leave --pass at fwd")
        chosen = tuple(i for i in b.parse_impls(impls or ",".join(EXTERNAL_KINDS)))
        if any(i not in EXTERNAL_KINDS for i in chosen):
            raise TilesimError(
                f"--grid random times the external kernels with a schedule "
                f"({', '.join(EXTERNAL_KINDS)}); tilesim's own: `tilesim validate --grid random`"
            )
        meta_extra.update(seed=seed, points_drawn=count)
    elif grid_name == "serving":
        from ..validate.serving_set import PEERS, serving_bench_shapes

        if which != "fwd":
            raise TilesimError("--grid serving times forward shapes: leave --pass at fwd")
        chosen = b.parse_impls(impls or ",".join(PEERS))
        shapes = serving_bench_shapes(seed, count)
        meta_extra.update(seed=seed, points_drawn=len(shapes))
    else:
        chosen = b.parse_impls(impls, which)
        shapes = grid.bench_shapes(ns, ds, masks, dtype, pass_=which)
    _check_out(out)
    require_cuda("bench")
    if grid_name == "random":
        import torch

        from ..hwmodels import load_gpu
        from ..validate.random_set import external_shapes

        gpu = load_gpu(base_preset_for(torch.cuda.get_device_name(0)))
        shapes = external_shapes(gpu, seed, count, chosen)
    suffix = {"random": f"-bench-random{seed}", "serving": f"-bench-serving{seed}"}
    path = out or _default_out(suffix.get(grid_name, "-bench"))
    doc = b.run_bench(
        shapes,
        path,
        chosen,
        warmup_ms=warmup_ms,
        rep_ms=rep_ms,
        time_budget_s=time_budget_s,
        log=log,
        meta_extra=meta_extra,
    )
    if json_out:
        print_json(doc)
        return
    header, body = b.tflops_table(doc)
    what = "forward" if which == "fwd" else "backward (2.5x the forward's FLOPs)"
    table = Table(title=f"{what} TFLOPS, {dtype} ({doc['metadata'].get('device', {}).get('name')})")
    for col in header:
        table.add_column(col, justify="right")
    for row in body:
        table.add_row(*row)
    console.print(table)
    console.print(f"wrote {path}")


# -- validate -------------------------------------------------------------------------------


def validate(
    algos: Annotated[
        str | None, typer.Option("--algos", help="Comma-separated algorithms [default: all].")
    ] = None,
    seqlens: SeqlensOpt = None,
    head_dims: HeadDimsOpt = None,
    mask: MaskOpt = "both",
    spot_checks: Annotated[
        bool, typer.Option("--spot-checks/--no-spot-checks", help="bf16 and fp8 points too.")
    ] = True,
    presets: Annotated[
        str | None,
        typer.Option(
            "--presets",
            help="Presets to predict with [default: the GPU's datasheet preset and its "
            "calibrated one if present].",
            show_default=False,
        ),
    ] = None,
    out: OutOpt = None,
    warmup_ms: WarmupOpt = 10,
    rep_ms: RepOpt = 40,
    time_budget_s: BudgetOpt = None,
    workers: Annotated[
        int, typer.Option("--workers", help="Processes predicting while the GPU times (0: none).")
    ] = max(1, min(8, (os.cpu_count() or 2) - 2)),
    quick: Annotated[
        bool, typer.Option("--quick", help="A smoke run: N=1024,4096, d=128, no spot checks.")
    ] = False,
    pass_: Annotated[
        str,
        typer.Option(
            "--pass",
            help="fwd (the forward grid), bwd (the backward grid: standard, v1, v2, fp16; "
            "only the backward launches timed), fwd_bwd (those shapes, forward and "
            "backward launches timed together) or all (fwd and bwd).",
        ),
    ] = "all",
    grid_name: Annotated[
        str,
        typer.Option(
            "--grid",
            help="grid (16k tokens per batch, H·d = 2048, N a power of two), random "
            "(shapes drawn by --seed: batch, heads 1-64, N 128-32k, d 64/128, causal or not, "
            "fp16/bf16/fp8; the forward of every algorithm, standard's and v2's backward) or "
            "serving (decode against KV caches of 1k-128k, batch 1-256, GQA groups 1/4/8, "
            "--points more drawn by --seed; grouped-query prefill of v2 and v3).",
        ),
    ] = "grid",
    seed: Annotated[int, typer.Option("--seed", help="--grid random: the draw's seed.")] = 0,
    count: Annotated[
        int | None,
        typer.Option(
            "--points",
            help="--grid random: how many shapes to draw [150]; serving: how many random "
            "decode shapes [12].",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Check, time and predict tilesim's kernels over the validation grid (or a random set)."""
    from ..traces.workload import ALGOS
    from ..validate import grid
    from ..validate.gpu import run
    from ..validate.gpu.timing import require_cuda

    chosen = tuple(a.strip() for a in algos.split(",")) if algos else ALGOS
    for a in chosen:
        if a not in ALGOS:
            raise TilesimError(f"unknown algorithm {a!r} (choose from {', '.join(ALGOS)})")
    ns = int_list(seqlens, "--seqlens", (1024, 4096) if quick else grid.VALIDATE_SEQLENS)
    ds = head_dim_list(head_dims, (128,) if quick else grid.HEAD_DIMS)
    masks = parse_mask(mask)
    passes = parse_validate_pass(pass_)
    if grid_name not in ("grid", "random", "serving"):
        raise TilesimError(f"--grid must be grid, random or serving, got {grid_name!r}")
    if count is None:
        count = SERVING_POINTS if grid_name == "serving" else VALIDATE_RANDOM_POINTS
    check_draw(seed, count, 10_000)
    check_timing(warmup_ms, rep_ms, time_budget_s)
    if workers != 0:
        workers_of(workers, "--workers")
    from ..hwmodels import load_gpu

    named = [p.strip() for p in presets.split(",")] if presets else []
    for name in named:
        load_gpu(name)  # a bad preset name fails now, not after the run
    _check_out(out)
    require_cuda("validate")
    import torch

    device = torch.cuda.get_device_name(0)
    gpu = load_gpu(base_preset_for(device))
    names = named or run.default_presets(device)
    if grid_name == "random":
        from ..validate.random_set import random_points

        points = [
            p
            for p in random_points(gpu, seed, count)
            if p.algo in chosen and p.workload.pass_ in passes
        ]
        meta_extra = {"grid": "random", "seed": seed, "points_drawn": count}
    elif grid_name == "serving":
        from ..validate.serving_set import serving_points

        points = [p for p in serving_points(gpu, seed, count) if p.algo in chosen]
        meta_extra = {"grid": "serving", "seed": seed, "points_drawn": count}
    else:
        points = grid.validate_grid(
            gpu, chosen, ns, ds, masks, spot_checks and not quick, passes=passes
        )
        meta_extra = {"grid": "grid"}
    if not points:
        raise TilesimError(
            f"no point to validate: {', '.join(chosen)} with --pass {pass_} (the backward "
            f"grid has {', '.join(grid.BACKWARD_ALGOS)})"
        )
    suffix = {"random": f"-random{seed}", "serving": f"-serving{seed}"}.get(grid_name, "")
    path = out or _default_out(suffix)
    log(f"validating {len(points)} points on {device}; predicting with {', '.join(names)}")
    doc = run.run_validate(
        points,
        path,
        names,
        warmup_ms=warmup_ms,
        rep_ms=rep_ms,
        time_budget_s=time_budget_s,
        predict_workers=workers,
        log=log,
        meta_extra=meta_extra,
    )
    if json_out:
        print_json(doc)
        return
    counts: dict[str, int] = {}
    for row in doc["measurements"]:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    console.print(
        "points: "
        + ", ".join(f"{counts[s]} {s}" for s in ("ok", "wrong", "skipped", "error") if s in counts)
    )
    console.print(f"wrote {path}; `tilesim report {path}` gives the accuracy")
