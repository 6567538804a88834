"""`tilesim bench`: time tilesim's kernels beside PyTorch's SDPA backends on the GPU at
hand (each output checked first) and write a results file."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..errors import TilesimError
from ..hwmodels.presets import base_preset_for
from .common import (
    JsonOpt,
    console,
    head_dim_list,
    int_list,
    print_json,
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
    parse_bench_pass,
    parse_mask,
)

BENCH_RANDOM_POINTS = 60  # --grid random's draws


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
    seed: SeedOpt = 0,
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
    check_out_json(out)
    require_cuda("bench")
    if grid_name == "random":
        import torch

        from ..hwmodels import load_gpu
        from ..validate.random_set import external_shapes

        gpu = load_gpu(base_preset_for(torch.cuda.get_device_name(0)))
        shapes = external_shapes(gpu, seed, count, chosen)
    suffix = {"random": f"-bench-random{seed}", "serving": f"-bench-serving{seed}"}
    path = out or default_out(suffix.get(grid_name, "-bench"))
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


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
