"""`tilesim explain`: the story of attention on one GPU and shape, told with simulated numbers.

Standard attention writes the N x N score matrix to HBM and reads it back;
FlashAttention v1 keeps it on chip (tiling + online softmax) but re-reads its
output; v2 parallelises over the sequence and does less non-matmul work; v3
uses Hopper's TMA, warp specialisation and ping-pong to hide the exponentials,
and FP8. Then where the technique stops paying: decode, very short sequences,
wide heads. Every number comes from this shape's predictions (`simulate`), its
traces' analytic counters (`traces.counters`) or the GPU's figures — none is
written into the text.

The explanation is data first (`build_explanation` -> `Explanation`: sections,
each with its prose and the numbers the prose cites, plus the side-by-side
table; the types in `story`). This module gathers the runs and assembles the story;
the sections are written in `algorithms` (the shape, standard attention, v1, v2, v3)
and `limits` (decode, short sequences, wide heads, what FlashAttention is not);
`tilesim.explain_render` renders the result for the terminal and as Markdown, and
`Explanation.to_dict` is the ``--json`` output.
"""

from __future__ import annotations

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from ..runner import Job, run_jobs
from ..traces import default_config
from ..traces.config import check_algo, named_config
from ..traces.workload import Workload
from ..whatif import default_batch_heads
from . import algorithms, limits
from .story import (
    DECODE_KV,
    NAMES,
    SHORT_SEQLEN,
    WIDE_HEAD_DIM,
    Explanation,
    Run,
    Section,
    Story,
    extra_tensors,
    score_traffic,
    uses_tma,
)


def main_workload(
    gpu: GPU,
    seqlen: int,
    head_dim: int,
    batch: int | None,
    heads: int | None,
    causal: bool,
    dtype: str,
    seqlen_kv: int | None = None,
    pass_: str = "fwd",
    kv_heads: int | None = None,
) -> Workload:
    b, h = default_batch_heads(seqlen, head_dim)
    return Workload(
        b if batch is None else batch,
        h if heads is None else heads,
        seqlen,
        seqlen if seqlen_kv is None else seqlen_kv,
        head_dim,
        causal,
        dtype,
        pass_,
        kv_heads=kv_heads,
    )


def _plan(gpu: GPU, w: Workload) -> dict[str, tuple[str, Workload, object]]:
    hopper = gpu.has_tma and gpu.has_wgmma
    plan: dict[str, tuple[str, Workload, object]] = {}
    base = Workload(
        w.batch,
        w.heads,
        w.seqlen_q,
        w.seqlen_kv,
        w.head_dim,
        w.causal,
        "fp16" if w.dtype == "fp8" else w.dtype,
    )
    for algo in ("standard", "v1", "v2"):
        plan[algo] = (algo, base, None)
    if hopper:
        plan["v3"] = ("v3", base, None)
        if base.head_dim <= 128:
            # FlashAttention-3's ping-pong schedule, which the Gluon kernel runs when asked
            plan["v3_fa3"] = ("v3", base, named_config("fa3", "v3", base, gpu))
        if gpu.has_fp8:
            plan["v3_fp8"] = ("v3", _with(base, dtype="fp8"), None)
    fast = ("standard", "v2") + (("v3",) if hopper else ())
    for kv in DECODE_KV:
        dec = _with(base, seqlen_q=1, seqlen_kv=kv, causal=False)
        for algo in fast:
            plan[f"decode{kv}_{algo}"] = (algo, dec, None)
        # v2's grid of one CTA per (batch, head), not split: what the split-KV schedule beats
        whole = default_config("v2", dec, gpu).replace(num_splits=1, pack_gqa=False)
        plan[f"decode{kv}_v2_whole"] = ("v2", dec, whole)
        # grouped-query heads: the user's, or 8 query heads per K/V head
        plan[f"decode{kv}_v2_gqa"] = ("v2", _with(dec, kv_heads=decode_kv_heads(w)), None)
    for algo in fast:
        plan[f"short_{algo}"] = (
            algo,
            _with(base, batch=1, seqlen_q=SHORT_SEQLEN, seqlen_kv=SHORT_SEQLEN),
            None,
        )
    other = WIDE_HEAD_DIM if base.head_dim != WIDE_HEAD_DIM else 64
    for algo in ("v2",) + (("v3",) if hopper else ()):
        heads = max(1, base.heads * base.head_dim // other)  # same H*d: same FLOPs
        plan[f"wide_{algo}"] = (algo, _with(base, head_dim=other, heads=heads), None)
    return plan


DECODE_GROUP = 8  # query heads per K/V head of the decode section's GQA run (Llama-style)


def decode_kv_heads(w: Workload) -> int:
    """K/V heads of the decode section's grouped-query run: the workload's own when it
    groups its heads, else heads / 8 (the largest divisor of heads at most that)."""
    if w.group > 1:
        return w.num_kv_heads
    group = max(g for g in range(1, DECODE_GROUP + 1) if w.heads % g == 0)
    return w.heads // group


def _with(w: Workload, **changes) -> Workload:
    d = w.to_dict()
    d.update(changes)
    return Workload(**d)


def gather(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> dict[str, Run]:
    """Every prediction the story needs, with its trace and counters."""
    from ..traces.counters import counters  # numpy: imported where counters are counted

    plan = _plan(gpu, w)
    runs: dict[str, Run] = {}
    jobs, names = [], []
    for name, (algo, wl, config) in plan.items():
        run, job = Run(algo, wl), Job(gpu, algo, wl, config, fidelity)
        try:
            run.trace = job.trace()
            run.counters = counters(run.trace)
        except TilesimError as exc:
            run.error = str(exc)
        runs[name] = run
        if run.error is None:
            jobs.append(job)
            names.append(name)
    outcomes, _ = run_jobs(jobs, workers=workers, cache_dir=cache_dir, progress=progress)
    for name, out in zip(names, outcomes, strict=True):
        runs[name].pred = out.prediction
        runs[name].error = out.error
    return runs


# -- the story -------------------------------------------------------------------------------


def build_explanation(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> Explanation:
    """Predict everything the story cites and write it (see the module docstring).

    With ``w.dtype == "fp8"`` the story runs at fp16 and adds v3's fp8 variant (only v3
    takes fp8); on a GPU without fp8 that is an error, not a silent fp16 story.
    """
    if w.dtype == "fp8":
        check_algo("v3", w, gpu)
    runs = gather(
        gpu, w, workers=workers, cache_dir=cache_dir, progress=progress, fidelity=fidelity
    )
    for key in ("standard", "v2"):
        if runs[key].pred is None:
            raise TilesimError(f"cannot explain this shape: {key} fails: {runs[key].error}")
    story = Story(gpu, runs)
    sections = [
        algorithms.setup(story),
        algorithms.standard(story),
        algorithms.v1(story),
        algorithms.v2(story),
        algorithms.v3(story),
        limits.decode(story),
        limits.short(story),
        limits.wide(story),
        limits.is_not(story),
    ]
    return Explanation(
        gpu=gpu.name,
        gpu_display=gpu.display_name,
        workload=runs["standard"].workload.to_dict(),
        sections=sections,
        table=_table(story),
        errors={k: r.error for k, r in sorted(runs.items()) if r.error},
    )


# -- the side-by-side table ------------------------------------------------------------


def _table(st: Story) -> list[dict]:
    rows = []
    for name in ("standard", "v1", "v2", "v3", "v3_fp8"):
        run = st.runs.get(name)
        if run is None:
            continue
        row = {"algo": name, "name": NAMES[name], "error": run.error}
        if run.pred is None:
            rows.append(row)
            continue
        p, trace = run.pred, run.trace
        cfg = trace.config
        extra = extra_tensors(trace)
        features = [cfg["mma_path"]]
        if uses_tma(trace):
            features.append("TMA")
        if cfg.get("warp_specialize"):
            features.append("warp-spec")
        if cfg.get("pingpong"):
            features.append("ping-pong")
        if cfg.get("persistent"):
            features.append("persistent")
        out_dtype = next(t.dtype for t in trace.tensors if t.name == "O")
        in_dtype = run.workload.dtype
        row.update(
            score_hbm_bytes=score_traffic(run.counters),
            extra_bytes=sum(extra.values()),
            extra_tensors=sorted(extra),
            ctas=[lp.ctas for lp in p.launches],
            launches=[lp.name for lp in p.launches],
            waves=p.waves,
            features=features,
            precision=in_dtype if in_dtype == out_dtype else f"{in_dtype}→{out_dtype}",
            time_s=p.time_s,
            tflops=p.tflops,
            hbm_bytes=p.hbm_bytes,
            bound=p.bound,
        )
        rows.append(row)
    return rows


__all__ = [
    "DECODE_KV",
    "SHORT_SEQLEN",
    "Explanation",
    "Run",
    "Section",
    "Story",
    "build_explanation",
    "gather",
    "main_workload",
]
