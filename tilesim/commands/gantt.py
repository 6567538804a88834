"""`tilesim gantt`: the first SMs' pipes over time, one panel per algorithm."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..runner import Job
from ..runner import predict as run_one
from .common import (
    BOUND_HELP,
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    DEFAULT_HEAD_DIM,
    CausalOpt,
    DtypeOpt,
    GpuOpt,
    KvHeadsOpt,
    PassOpt,
    SeqlenKvOpt,
    SetOpt,
    console,
    gpu_from_options,
)
from .study_options import (
    NO_DEFAULT,
    HeadDimOpt,
    fidelity_of,
    out_path,
    workload_of,
)


def gantt(
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG (or .svg/.pdf) to write.")],
    algo: Annotated[
        list[str] | None,
        typer.Option(
            "--algo",
            "-a",
            help="Algorithm(s): repeat or comma-separate for one "
            "panel each, e.g. --algo v2,v3 [default: v2,v3 on Hopper, else v2].",
            **NO_DEFAULT,
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
            "--window", help="START:END in µs [default: a steady-state stretch].", **NO_DEFAULT
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
    w = workload_of(hw, seqlen, seqlen_kv, head_dim, batch, heads, causal, dtype, pass_, kv_heads)
    names = [a.strip() for item in (algo or []) for a in item.split(",") if a.strip()]
    if not names:
        names = ["v2", "v3"] if hw.has_tma and hw.has_wgmma else ["v2"]
    span = parse_window(window)
    out_path(out)
    preds = []
    for a in names:
        job = Job(hw, a, w, fidelity=fidelity_of(fidelity))
        preds.append(run_one(job, timeline=True, timeline_sms=sms))
    draw(preds, out, sms=sms, window=span)
    for p in preds:
        console.print(
            f"{p.algo}: {p.time_s * 1e6:.1f} µs, {p.tflops:.0f} TFLOPS, bound: {p.bound_text()}"
        )
    console.print(f"wrote {out}")


def register(app: typer.Typer) -> None:
    app.command("gantt", epilog=BOUND_HELP)(gantt)
