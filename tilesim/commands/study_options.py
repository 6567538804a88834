"""What `explain`, `roofline`, `gantt` and `whatif` share: their options and the
workload they build from them. Workload defaults follow the FlashAttention papers'
benchmarks: 16k tokens per batch and H·d = 2048 (so ``-n 4096 -d 128`` is batch 4 x 16
heads); ``-b`` and ``-H`` override them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import TilesimError
from ..hwmodels import GPU
from ..runner import DEFAULT_CACHE_DIR
from ..simulator import FIDELITIES
from ..traces.config import check_algo
from ..traces.workload import ALGOS, Workload
from .common import (
    FIGURE_SUFFIXES,
    check_output,
)

NO_DEFAULT = {"show_default": False}
BatchOpt = Annotated[
    int | None,
    typer.Option("--batch", "-b", help="Batch size [default: 16k tokens / N].", **NO_DEFAULT),
]
HeadsOpt = Annotated[
    int | None,
    typer.Option("--heads", "-H", help="Attention heads [default: 2048 / d].", **NO_DEFAULT),
]
HeadDimOpt = Annotated[int, typer.Option("--head-dim", "-d", help="Head dimension (64, 128, 256).")]
JobsOpt = Annotated[
    int | None,
    typer.Option("--jobs", "-j", help="Worker processes [default: CPU cores].", **NO_DEFAULT),
]
FidelityOpt = Annotated[
    str, typer.Option("--fidelity", help=f"Simulation fidelity: {', '.join(FIDELITIES)}.")
]
CacheDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir", help=f"Prediction cache [default: {DEFAULT_CACHE_DIR}].", **NO_DEFAULT
    ),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
AlgosOpt = Annotated[
    str | None,
    typer.Option(
        "--algos", help="Comma-separated algorithms [default: all that apply].", **NO_DEFAULT
    ),
]


# -- helpers --------------------------------------------------------------------------


def workload_of(
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


def seqlens_text(row: dict) -> str:
    """A what-if row's N: ``N`` square, ``N_q/N_kv`` against a longer KV cache."""
    return f"{row['seqlen']}/{row['seqlen_kv']}" if "seqlen_kv" in row else str(row["seqlen"])


def algos_of(text: str | None, gpu: GPU, workload: Workload) -> list[str]:
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


def fidelity_of(fidelity: str) -> str:
    if fidelity not in FIDELITIES:
        raise TilesimError(f"unknown fidelity {fidelity!r} (choose from {', '.join(FIDELITIES)})")
    return fidelity


def out_path(out: Path, option: str = "--out") -> Path:
    return check_output(out, option, FIGURE_SUFFIXES)
