"""`tilesim validate`: time tilesim's kernels over a shape set on the GPU at hand, check
each output, predict every point with the same config, and write a results file."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ..errors import TilesimError
from ..hwmodels.presets import base_preset_for
from .common import (
    JsonOpt,
    console,
    head_dim_list,
    int_list,
    print_json,
    workers_of,
)
from .gpu_options import (
    SERVING_POINTS,
    BudgetOpt,
    HeadDimsOpt,
    MaskOpt,
    OutOpt,
    RepOpt,
    SeedOpt,
    SeqlensOpt,
    WarmupOpt,
    check_draw,
    check_out_json,
    check_timing,
    default_out,
    log,
    parse_mask,
    parse_validate_pass,
)

VALIDATE_RANDOM_POINTS = 150  # --grid random's draws


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
    seed: SeedOpt = 0,
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
    check_out_json(out)
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
    path = out or default_out(suffix)
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


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
