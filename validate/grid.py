"""The shapes validation and benchmarking run: one fixed budget of tokens per batch.

Every point of the grid has the same number of tokens per batch (16k) and the
same model width H·d (2048), as in the FlashAttention papers' benchmarks: so
batch = tokens // N and heads = hidden // d, and the FLOPs grow linearly in N
(4·tokens·hidden·N), which keeps every kernel long enough to time well.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from ..traces.config import NAMED_CONFIGS, check_algo, default_config
from ..traces.workload import (
    ALGOS,
    PAPER_HIDDEN,
    PAPER_TOKENS,
    KernelConfig,
    Workload,
    paper_batch_heads,
)

VALIDATE_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
BENCH_SEQLENS = (1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
CAUSAL = (False, True)
# The PyTorch SDPA backends `tilesim bench` times beside tilesim's own kernels.
SDPA_BACKENDS = ("math", "flash", "efficient", "cudnn")
# Spot checks beside the fp16 grid (few points: they cost GPU time, not insight).
BF16_SEQLENS = (1024, 8192)
FP8_SEQLENS = (1024, 4096, 16384)
# The backward grid (issue 7): the algorithms with backward kernels, fp16, every
# seqlen (v1's default, the released kernel's structure, spreads a head's K/V blocks
# over CTAs; `fa1-algorithm1`'s one CTA per head is not on the grid).
BACKWARD_ALGOS = ("v2", "standard", "v1")  # run order: v2 (the target) first
PASSES = ("fwd", "bwd", "fwd_bwd")  # what `tilesim validate` can time


def batch_heads(seqlen: int, head_dim: int, tokens: int = PAPER_TOKENS, hidden: int = PAPER_HIDDEN):
    """(batch, heads) for a sequence length and head dim at a fixed token budget and width."""
    if seqlen <= 0 or head_dim <= 0:
        raise TilesimError(f"seqlen and head_dim must be positive, got {seqlen} and {head_dim}")
    if seqlen > tokens:
        raise TilesimError(f"seqlen {seqlen} exceeds the {tokens} tokens per batch")
    if tokens % seqlen:
        raise TilesimError(f"{tokens} tokens per batch is not a multiple of seqlen {seqlen}")
    if hidden % head_dim:
        raise TilesimError(f"hidden size {hidden} is not a multiple of head_dim {head_dim}")
    return paper_batch_heads(seqlen, head_dim, tokens, hidden)


def workload(
    seqlen: int,
    head_dim: int,
    causal: bool = False,
    dtype: str = "fp16",
    tokens: int = PAPER_TOKENS,
    hidden: int = PAPER_HIDDEN,
    pass_: str = "fwd",
) -> Workload:
    batch, heads = batch_heads(seqlen, head_dim, tokens, hidden)
    return Workload(batch, heads, seqlen, seqlen, head_dim, causal=causal, dtype=dtype, pass_=pass_)


@dataclass(frozen=True)
class GridPoint:
    algo: str
    workload: Workload
    config: KernelConfig | None  # None: a fwd_bwd point, each pass its own default
    group: str  # "fp16" (main grid), "bf16"/"fp8" (spot checks), "bwd", "fwd_bwd"

    @property
    def label(self) -> str:
        w = self.workload
        mask = "causal" if w.causal else "full"
        algo = self.algo if w.pass_ == "fwd" else f"{self.algo} {w.pass_}"
        return f"{algo} {w.dtype} d={w.head_dim} N={w.seqlen_q} {mask} (B={w.batch} H={w.heads})"


def runnable(algo: str, w: Workload, gpu: GPU) -> bool:
    """Whether ``algo`` can run ``w`` on ``gpu`` (v3 needs Hopper, fp8 needs v3, ...)."""
    try:
        check_algo(algo, w, gpu)
    except TilesimError:
        return False
    return True


def validate_grid(
    gpu: GPU,
    algos: tuple[str, ...] = ALGOS,
    seqlens: tuple[int, ...] = VALIDATE_SEQLENS,
    head_dims: tuple[int, ...] = HEAD_DIMS,
    causal: tuple[bool, ...] = CAUSAL,
    spot_checks: bool = True,
    tokens: int = PAPER_TOKENS,
    hidden: int = PAPER_HIDDEN,
    passes: tuple[str, ...] = ("fwd",),
) -> list[GridPoint]:
    """The points of `tilesim validate`, in run order.

    The fp16 grid is every algorithm x head dim x seqlen x mask; then bf16 spot
    checks (each algorithm, d=128, two seqlens) and FP8 for v3 where the GPU has
    fp8 tensor cores. Points an algorithm cannot run on ``gpu`` (v3 off Hopper)
    are left out. Points are grouped by (algo, dtype, d, mask), seqlen innermost,
    so each kernel variant compiles once and then runs all its sizes; v3's
    points come last.

    ``passes`` with "bwd": the backward grid after the forward's, fp16 only,
    the algorithms of ``BACKWARD_ALGOS`` that are in ``algos`` (v2 first), every
    seqlen; the spot checks stay forward-only.
    With "fwd_bwd": the same shapes again, each timed as its forward's launches
    followed by its backward's (a training step's attention), config None: each
    pass runs its own default.
    """
    for algo in algos:
        if algo not in ALGOS:
            raise TilesimError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")
    for pass_ in passes:
        if pass_ not in PASSES:
            raise TilesimError(
                f"unknown pass {pass_!r} for validation (choose fwd, bwd or fwd_bwd)"
            )
    points = []
    if "fwd" in passes:
        points += _forward_points(
            gpu, algos, seqlens, head_dims, causal, spot_checks, tokens, hidden
        )
    for pass_ in (p for p in ("bwd", "fwd_bwd") if p in passes):
        for algo in (a for a in BACKWARD_ALGOS if a in algos):
            for d in head_dims:
                for c in causal:
                    for n in seqlens:
                        w = workload(n, d, c, "fp16", tokens, hidden, pass_)
                        if not runnable(algo, w, gpu):
                            continue
                        # fwd_bwd: each pass runs (and is predicted with) its own default
                        cfg = default_config(algo, w, gpu) if pass_ == "bwd" else None
                        points.append(GridPoint(algo, w, cfg, pass_))
    return points


def _forward_points(gpu, algos, seqlens, head_dims, causal, spot_checks, tokens, hidden):
    specs: list[tuple[str, str, int, bool, tuple[int, ...]]] = []
    for algo in algos:
        for d in head_dims:
            for c in causal:
                specs.append((algo, "fp16", d, c, seqlens))
    if spot_checks:
        for algo in algos:
            specs.append((algo, "bf16", 128, False, BF16_SEQLENS))
        if "v3" in algos:
            for d in head_dims:
                for c in causal:
                    specs.append(("v3", "fp8", d, c, FP8_SEQLENS))
    # v3 (warp specialisation, TMA: the newest code paths) runs last, so that a
    # failure there cannot cost the other algorithms' points
    specs.sort(key=lambda spec: spec[0] == "v3")
    points = []
    for algo, dtype, d, c, ns in specs:
        for n in ns:
            w = workload(n, d, c, dtype, tokens, hidden)
            if not runnable(algo, w, gpu):
                continue
            points.append(GridPoint(algo, w, default_config(algo, w, gpu), dtype))
    return points


@dataclass(frozen=True)
class BenchShape:
    workload: Workload
    impls: tuple[str, ...] | None = None  # the implementations it is for (None: every one)

    @property
    def label(self) -> str:
        w = self.workload
        mask = "causal" if w.causal else "full"
        what = "" if w.pass_ == "fwd" else f"{w.pass_} "
        return f"{what}{w.dtype} d={w.head_dim} N={w.seqlen_q} {mask} (B={w.batch} H={w.heads})"


def bench_shapes(
    seqlens: tuple[int, ...] = BENCH_SEQLENS,
    head_dims: tuple[int, ...] = (128, 64),
    causal: tuple[bool, ...] = CAUSAL,
    dtype: str = "fp16",
    tokens: int = PAPER_TOKENS,
    hidden: int = PAPER_HIDDEN,
    pass_: str = "fwd",
) -> list[BenchShape]:
    """The bench's shapes; ``pass_`` "bwd": time the backward of each."""
    return [
        BenchShape(workload(n, d, c, dtype, tokens, hidden, pass_))
        for d in head_dims
        for c in causal
        for n in seqlens
    ]


def sdpa_flash_config(workload: Workload) -> KernelConfig | None:
    """The tile schedule of PyTorch SDPA's `flash` backend: the `fa2` named config.

    That backend is FlashAttention-2's CUDA code (mma.sync also on Hopper, 4 warps,
    K/V double-buffered with cp.async). None where it does not run (fp8, backward).
    """
    named = NAMED_CONFIGS["fa2"]
    if workload.pass_ != "fwd" or not named.runs(workload):
        return None
    return named.make(workload, None)


def _sdpa_forward(workload: Workload) -> bool:
    """SDPA's schedules: the fp16/bf16 forward of multi-head shapes (tilesim has none of
    its grouped-query or shifted-diagonal runs)."""
    w = workload
    return (
        w.pass_ == "fwd"
        and w.dtype in ("fp16", "bf16")
        and w.group == 1
        and not (w.causal and w.causal_shift)
    )


# External kernels whose schedule tilesim predicts (traces.EXTERNAL): bench impl -> whether
# that schedule describes the kernel's run on a workload
EXTERNAL_SCHEDULES = {"sdpa-flash": _sdpa_forward, "sdpa-math": _sdpa_forward}
