"""What `tilesim calibrate`, `bench` and `validate` share: their options, the checks of
those options (one line and exit 2 for a bad one) and where a results file goes by
default (``results/raw/<date>-<gpu><suffix>.json``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..errors import TilesimError, shown
from .common import (
    check_output,
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
SeedOpt = Annotated[int, typer.Option("--seed", help="--grid random: the draw's seed.")]
MaskOpt = Annotated[str, typer.Option("--mask", help="full, causal or both.")]
SERVING_POINTS = 12  # --grid serving's random decode shapes (bench and validate)
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


def check_out_json(path: Path | None) -> None:
    check_output(path, "--out", (".json",))


def default_out(suffix: str) -> Path:
    import torch

    from ..validate import paths
    from ..validate.gpu.metadata import gpu_slug, today

    slug = gpu_slug(torch.cuda.get_device_name(0))
    out = paths.raw()
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{today()}-{slug}{suffix}.json"
