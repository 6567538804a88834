"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..atomic import check_writable
from ..errors import TilesimError, shown
from ..hwmodels import GPU, load_gpu, parse_set_options
from ..simulator.prediction import BOUNDS
from ..traces.workload import HEAD_DIMS, Workload, default_seqlen_kv

console = Console()
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout (sorted keys, stable across runs)."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


# -- shared options ------------------------------------------------------------
# Declared once so every command spells and documents them the same way. Use them
# as annotations with the default beside them:
#
#     def predict(gpu: GpuOpt = DEFAULT_GPU, sets: SetOpt = None, batch: BatchOpt = 4, ...):
#         hw = gpu_from_options(gpu, sets)
#         workload = workload_from_options(batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype)
#
# (typer takes defaults from the signature, not from inside Annotated.) Values
# are checked by load_gpu / Workload, which raise a one-line TilesimError.

DEFAULT_GPU = "h100"
DEFAULT_BATCH = 4
DEFAULT_HEADS = 16
DEFAULT_SEQLEN = 4096
DEFAULT_HEAD_DIM = 128
DEFAULT_DTYPE = "fp16"

GpuOpt = Annotated[
    str,
    typer.Option(
        "--gpu",
        "-g",
        help="GPU preset (a100, h100, h200, h200-cal, a preset name) or a path to a .toml file.",
        show_default=True,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="What-if: change a hardware field, e.g. hbm_bandwidth_Bps=2x or sm_count=114 "
        "(repeatable; `tilesim hw show` lists the keys).",
        show_default=False,
    ),
]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", help="Batch size.")]
HeadsOpt = Annotated[int, typer.Option("--heads", "-H", help="Attention heads.")]
SeqlenOpt = Annotated[int, typer.Option("--seqlen", "-n", help="Sequence length (queries).")]
SeqlenKvOpt = Annotated[
    int | None,
    typer.Option(
        "--seqlen-kv", help="Key/value sequence length [default: --seqlen].", show_default=False
    ),
]
KvHeadsOpt = Annotated[
    int | None,
    typer.Option(
        "--kv-heads",
        help="K/V heads (grouped-query attention; 1: multi-query) [default: --heads].",
        show_default=False,
    ),
]
SeqlensKvOpt = Annotated[
    str | None,
    typer.Option(
        "--seqlens-kv",
        metavar="N1,N2,...",
        help="Varlen: each sequence's KV length, one per batch element "
        "[--seqlen-kv defaults to the longest].",
        show_default=False,
    ),
]
PageSizeOpt = Annotated[
    int,
    typer.Option("--page-size", help="Rows of K/V per page of a paged KV cache (0: not paged)."),
]
HeadDimOpt = Annotated[int, typer.Option("--head-dim", "-d", help="Head dimension (64, 128, 256).")]
CausalOpt = Annotated[
    bool,
    typer.Option("--causal", help="Causal masking (aligned bottom-right when the KV is longer)."),
]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Element type: fp16, bf16 or fp8.")]
PassOpt = Annotated[
    str, typer.Option("--pass", help="fwd, bwd (the backward pass) or fwd_bwd (both).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def bound_help() -> str:
    """`BOUNDS` as a --help epilog, for the commands that print ``bound`` (click keeps
    the lines of a paragraph that opens with ``\\b`` as they are)."""
    lines = ["\b", "bound (what limits the run):"]
    pad = max(map(len, BOUNDS)) + 1
    for label, text in BOUNDS.items():
        first, *rest = textwrap.wrap(text, width=74 - pad)
        lines.append(f"  {label:<{pad}}{first}")
        lines += [" " * (2 + pad) + line for line in rest]
    return "\n".join(lines)


BOUND_HELP = bound_help()


MAX_JOBS = 1024  # worker processes: more than any host here has cores, fewer than a pool breaks


def workers_of(jobs: int | None, option: str = "--jobs") -> int:
    """The worker processes of ``--jobs`` (None: every core), refused outside [1, MAX_JOBS]."""
    if jobs is None:
        return os.cpu_count() or 1
    if not 1 <= jobs <= MAX_JOBS:
        raise TilesimError(f"{option} must be within [1, {MAX_JOBS}], got {shown(jobs)}")
    return jobs


def int_list(
    text: str | None, option: str, default: tuple[int, ...] | None = None
) -> tuple[int, ...]:
    """``"512, 1024,"`` -> (512, 1024): positive integers, comma-separated (empty items
    skipped); one line naming the option otherwise. ``default`` when the option is unset
    (``text`` None)."""
    if text is None and default is not None:
        return default
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise TilesimError(f"{option}: {part[:40]!r} is not an integer") from None
        if value <= 0:
            raise TilesimError(f"{option}: {value} must be positive")
        values.append(value)
    if not values:
        raise TilesimError(f"{option}: no value given")
    return tuple(values)


def head_dim_list(text: str | None, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """``--head-dims``: `int_list`, each one a head dim the kernels support."""
    ds = int_list(text, "--head-dims", default)
    for d in ds:
        if d not in HEAD_DIMS:
            raise TilesimError(
                f"--head-dims: {d} is not supported (supported: {', '.join(map(str, HEAD_DIMS))})"
            )
    return ds


def check_output(path: Path | None, option: str, suffixes=None) -> Path | None:
    """``path`` checked writable before any long work (None passes: the option is unset)."""
    return None if path is None else check_writable(path, option, suffixes)


def gpu_from_options(gpu: str, sets: list[str] | None = None) -> GPU:
    """The GPU of ``--gpu`` with the what-if ``--set k=v`` overrides applied."""
    base = load_gpu(gpu)
    return base.with_overrides(parse_set_options(sets)) if sets else base


def workload_from_options(
    batch: int = DEFAULT_BATCH,
    heads: int = DEFAULT_HEADS,
    seqlen: int = DEFAULT_SEQLEN,
    seqlen_kv: int | None = None,
    head_dim: int = DEFAULT_HEAD_DIM,
    causal: bool = False,
    dtype: str = DEFAULT_DTYPE,
    pass_: str = "fwd",
    *,
    kv_heads: int | None = None,
    seqlens_kv: str | None = None,
    page_size: int = 0,
) -> Workload:
    """The `Workload` of the shared workload options (``--seqlen-kv`` defaults to ``-n``,
    or to the longest of ``--seqlens-kv``)."""
    lens = None if seqlens_kv is None else int_list(seqlens_kv, "--seqlens-kv")
    return Workload(
        batch=batch,
        heads=heads,
        seqlen_q=seqlen,
        seqlen_kv=default_seqlen_kv(seqlen, seqlen_kv, lens),
        head_dim=head_dim,
        causal=causal,
        dtype=dtype.strip().lower(),
        pass_=pass_.strip().lower(),
        kv_heads=kv_heads,
        seqlens_kv=lens,
        page_size=page_size,
    )


def serving_options(kv_heads: int | None, seqlens_kv: str | None, page_size: int) -> dict:
    """The serving options as `workload_from_options`' keywords."""
    return {"kv_heads": kv_heads, "seqlens_kv": seqlens_kv, "page_size": page_size}
