"""A validation set off the grid: shapes drawn by a fixed seed, as users run them.

The grid holds one family of shapes (16k tokens per batch, H·d = 2048, N a power
of two). These are drawn instead: batch and heads 1-64, N log-uniform from 128 to
32k (so almost never a power of two; small grids leave SMs idle or a last wave
partial), d 64 or 128, causal or not, fp16 or bf16 (and fp8 for v3), over the
forward of all four algorithms and the backward of standard attention and v2, in
turn. A draw is kept only if it fits the GPU's memory and its kernel runs for at
most ``MAX_KERNEL_S`` at a throughput floor per kernel (a bound on the run's
length taken from the measured grid's slowest points, never a prediction), so
that the set stays cheap to time whatever the seed. `random.Random(seed)` draws
the same shapes on every machine and Python.

`external_shapes` draws the same way for the external kernels `tilesim bench`
times (PyTorch SDPA's flash and math backends, forward), one kernel after the
other, each bounded by its own throughput floor and, for the math backend, its
N x N float32 scratch.
"""

from __future__ import annotations

import math
import random

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from ..traces.config import check_fits, default_config
from ..traces.workload import Workload
from .grid import BenchShape, GridPoint, runnable

# (algorithm, pass) of the set's points, drawn in turn
KINDS = (
    ("standard", "fwd"),
    ("v1", "fwd"),
    ("v2", "fwd"),
    ("v3", "fwd"),
    ("standard", "bwd"),
    ("v2", "bwd"),
)
MIN_SEQLEN, MAX_SEQLEN = 128, 32768
MAX_BATCH, MAX_HEADS = 64, 64
HEAD_DIMS = (64, 128)
# Matmul TFLOPS a full GPU of each kernel stays above (about half the slowest point of
# the H200 grid, results/raw/2026-11-30-h200*.json); a grid of fewer CTAs than SMs
# runs that share of it. Only bounds a point's run time.
FLOOR_TFLOPS = {
    ("standard", "fwd"): 40.0,
    ("v1", "fwd"): 30.0,
    ("v2", "fwd"): 100.0,
    ("v3", "fwd"): 100.0,
    ("standard", "bwd"): 50.0,
    ("v2", "bwd"): 80.0,
}
# The external kernels' floors, TFLOPS by the convention (causal: half the FLOPs): SDPA
# flash as tilesim's v2; the math backend about half its slowest grid point (causal d=64,
# 6.1 TFLOPS, results/raw/2026-11-30-h200-bench.json), whose GEMMs stay full when causal.
EXTERNAL_FLOOR_TFLOPS = {"sdpa-flash": 100.0, "sdpa-math": 3.0}
EXTERNAL_KINDS = tuple(EXTERNAL_FLOOR_TFLOPS)
MATH_SCRATCH_PER_SCORE = 10  # bytes per score the math backend holds at its peak (9.5-12.5)
MAX_KERNEL_S = 0.05  # longest kernel time (at the floor) a point may take
MAX_SCRATCH_BYTES = 40 * 2**30  # inputs, outputs and standard attention's N x N scratch
MAX_DRAWS = 10_000  # per point: a draw that never fits is a bug, not a long loop


def random_points(gpu: GPU, seed: int, count: int) -> list[GridPoint]:
    """``count`` points drawn by ``seed``, in run order (each kernel variant together, v3 last)."""
    _check_draw(seed, count)
    rng = random.Random(seed)
    kinds = [k for k in KINDS if runnable(k[0], Workload(1, 1, 128, 128, 64), gpu)]
    points = [_draw(rng, *kinds[i % len(kinds)], gpu) for i in range(count)]
    return sorted(points, key=_run_order)


def _check_draw(seed, count) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TilesimError(f"--seed must be a non-negative integer, got {seed!r}")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10_000:
        raise TilesimError(f"--points must be between 1 and 10000, got {count!r}")


def _shape(rng: random.Random, dtypes: tuple[str, ...], pass_: str) -> Workload:
    """One draw: d, mask, dtype, N (log-uniform), batch and heads (log-uniform integers)."""
    d = rng.choice(HEAD_DIMS)
    causal = rng.random() < 0.5
    dtype = rng.choice(dtypes)
    n = round(math.exp(rng.uniform(math.log(MIN_SEQLEN), math.log(MAX_SEQLEN))))
    batch = _log_int(rng, MAX_BATCH)
    heads = _log_int(rng, MAX_HEADS)
    return Workload(batch, heads, n, n, d, causal=causal, dtype=dtype, pass_=pass_)


def _draw(rng: random.Random, algo: str, pass_: str, gpu: GPU) -> GridPoint:
    for _ in range(MAX_DRAWS):
        dtypes = ("fp16", "bf16", "fp8") if algo == "v3" and gpu.has_fp8 else ("fp16", "bf16")
        w = _shape(rng, dtypes, pass_)
        if not runnable(algo, w, gpu) or not _affordable(algo, w, gpu):
            continue
        config = default_config(algo, w, gpu)
        check_fits(algo, w, config, gpu)
        return GridPoint(algo, w, config, "bwd" if pass_ == "bwd" else w.dtype)
    raise TilesimError(f"no {algo} {pass_} shape fits {gpu.name} in {MAX_DRAWS} draws")


def _log_int(rng: random.Random, top: int) -> int:
    """An integer in 1..top, log-uniform (small counts as likely as large ones)."""
    return min(top, int(math.exp(rng.uniform(0.0, math.log(top + 1)))))


def _affordable(algo: str, w: Workload, gpu: GPU) -> bool:
    """Whether the point fits ``MAX_SCRATCH_BYTES`` and runs under ``MAX_KERNEL_S``."""
    bh, n, d = w.batch * w.heads, w.seqlen_q, w.head_dim
    scratch = 4 * bh * n * d * w.elem_bytes * (2 if w.pass_ == "bwd" else 1)
    if algo == "standard":
        scratch += bh * n * n * (12 if w.pass_ == "bwd" else 6)  # S, P (and dP, dS) per head
    if scratch > MAX_SCRATCH_BYTES:
        return False
    flops = w.flops()
    ctas = bh if algo == "v1" else bh * math.ceil(n / 128)
    rate = FLOOR_TFLOPS[(algo, w.pass_)] * 1e12 * min(1.0, ctas / gpu.sm_count)
    return flops / rate <= MAX_KERNEL_S


def external_shapes(gpu: GPU, seed: int, count: int, impls=EXTERNAL_KINDS) -> list[BenchShape]:
    """``count`` forward shapes drawn by ``seed`` for the external kernels ``impls``, in
    turn; each shape names the one kernel it was drawn for."""
    _check_draw(seed, count)
    for impl in impls:
        if impl not in EXTERNAL_FLOOR_TFLOPS:
            raise TilesimError(
                f"no random set for {impl!r} (choose from {', '.join(EXTERNAL_KINDS)})"
            )
    rng = random.Random(seed)
    shapes = []
    for i in range(count):
        impl = impls[i % len(impls)]
        for _ in range(MAX_DRAWS):
            w = _shape(rng, ("fp16", "bf16"), "fwd")
            if _external_affordable(impl, w, gpu):
                shapes.append(BenchShape(w, (impl,)))
                break
        else:
            raise TilesimError(f"no {impl} shape fits {gpu.name} in {MAX_DRAWS} draws")
    return shapes


def _external_affordable(impl: str, w: Workload, gpu: GPU) -> bool:
    bh, n, d = w.batch * w.heads, w.seqlen_q, w.head_dim
    scratch = 4 * bh * n * d * w.elem_bytes
    if impl == "sdpa-math":
        scratch += bh * n * (n * MATH_SCRATCH_PER_SCORE + 4 * 4 * d)  # + fp32 Q, K, V, O
    if scratch > MAX_SCRATCH_BYTES:
        return False
    flops = w.flops()
    ctas = bh * math.ceil(n / 128)
    rate = EXTERNAL_FLOOR_TFLOPS[impl] * 1e12 * min(1.0, ctas / gpu.sm_count)
    return flops / rate <= MAX_KERNEL_S


def _run_order(p: GridPoint) -> tuple:
    w = p.workload
    return (p.algo == "v3", w.pass_, p.algo, w.dtype, w.head_dim, w.causal, w.seqlen_q, w.batch)
