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
"""

from __future__ import annotations

import math
import random

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from ..traces.config import check_fits, default_config
from ..traces.workload import Workload
from .grid import GridPoint, runnable

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
# the H200 grid, validate/results/2026-11-30-h200*.json); a grid of fewer CTAs than SMs
# runs that share of it. Only bounds a point's run time.
FLOOR_TFLOPS = {
    ("standard", "fwd"): 40.0,
    ("v1", "fwd"): 30.0,
    ("v2", "fwd"): 100.0,
    ("v3", "fwd"): 100.0,
    ("standard", "bwd"): 50.0,
    ("v2", "bwd"): 80.0,
}
MAX_KERNEL_S = 0.05  # longest kernel time (at the floor) a point may take
MAX_SCRATCH_BYTES = 40 * 2**30  # inputs, outputs and standard attention's N x N scratch
MAX_DRAWS = 10_000  # per point: a draw that never fits is a bug, not a long loop


def random_points(gpu: GPU, seed: int, count: int) -> list[GridPoint]:
    """``count`` points drawn by ``seed``, in run order (each kernel variant together, v3 last)."""
    if not isinstance(seed, int) or seed < 0:
        raise TilesimError(f"--seed must be a non-negative integer, got {seed!r}")
    if not isinstance(count, int) or not 1 <= count <= 10_000:
        raise TilesimError(f"--points must be between 1 and 10000, got {count!r}")
    rng = random.Random(seed)
    kinds = [k for k in KINDS if runnable(k[0], Workload(1, 1, 128, 128, 64), gpu)]
    points = [_draw(rng, *kinds[i % len(kinds)], gpu) for i in range(count)]
    return sorted(points, key=_run_order)


def _draw(rng: random.Random, algo: str, pass_: str, gpu: GPU) -> GridPoint:
    for _ in range(MAX_DRAWS):
        d = rng.choice(HEAD_DIMS)
        causal = rng.random() < 0.5
        dtypes = ("fp16", "bf16", "fp8") if algo == "v3" and gpu.has_fp8 else ("fp16", "bf16")
        dtype = rng.choice(dtypes)
        n = round(math.exp(rng.uniform(math.log(MIN_SEQLEN), math.log(MAX_SEQLEN))))
        batch = _log_int(rng, MAX_BATCH)
        heads = _log_int(rng, MAX_HEADS)
        w = Workload(batch, heads, n, n, d, causal=causal, dtype=dtype, pass_=pass_)
        if not runnable(algo, w, gpu) or not _affordable(algo, w, gpu):
            continue
        config = default_config(algo, w, gpu)
        check_fits(algo, w, config, gpu)
        return GridPoint(algo, w, config, "bwd" if pass_ == "bwd" else dtype)
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
    flops = 4 * bh * n * n * d * (0.5 if w.causal else 1.0) * (2.5 if w.pass_ == "bwd" else 1.0)
    ctas = bh if algo == "v1" else bh * math.ceil(n / 128)
    rate = FLOOR_TFLOPS[(algo, w.pass_)] * 1e12 * min(1.0, ctas / gpu.sm_count)
    return flops / rate <= MAX_KERNEL_S


def _run_order(p: GridPoint) -> tuple:
    w = p.workload
    return (p.algo == "v3", w.pass_, p.algo, w.dtype, w.head_dim, w.causal, w.seqlen_q, w.batch)
