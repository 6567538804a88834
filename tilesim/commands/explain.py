"""`tilesim explain`: the story of standard attention and FlashAttention v1, v2 and v3
on this GPU and shape, every claim with its simulated numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import TilesimError
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
    gpu_from_options,
    print_json,
    workers_of,
)
from .study_options import (
    NO_DEFAULT,
    BatchOpt,
    FidelityOpt,
    HeadDimOpt,
    HeadsOpt,
    JobsOpt,
    fidelity_of,
    workload_of,
)


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
        typer.Option("--cache-dir", help="Reuse predictions cached in this folder.", **NO_DEFAULT),
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
    w = workload_of(hw, seqlen, seqlen_kv, head_dim, batch, heads, causal, dtype, pass_, kv_heads)
    story = build_explanation if w.pass_ == "fwd" else build_backward_explanation
    expl = story(
        hw,
        w,
        workers=workers_of(jobs),
        cache_dir=cache_dir,
        progress=not (as_json or markdown),
        fidelity=fidelity_of(fidelity),
    )
    if as_json:
        print_json(expl.to_dict())
    elif markdown:
        console.file.write(render_markdown(expl))
    else:
        render_rich(expl, console)


def register(app: typer.Typer) -> None:
    app.command("explain", epilog=BOUND_HELP)(explain)
