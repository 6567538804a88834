"""The `tilesim calibrate` step ``clock``: the SM clock under a long tensor-core run.

A few seconds of back-to-back ``tl.dot`` loops (the ``tensor`` step's kernel) while
nvidia-smi is sampled: the steady-state clock that attention's GEMMs see, from the
second half of the run (the first is ramp-up).
"""

from __future__ import annotations

import time

import torch

from ...schema import measurement
from ...stats import median
from ..microbench import Bench, _stamps, effective_clock_MHz, time_calls
from .tensor import _mma_loop


def sustained_clock(bench: Bench, seconds: float = 3.0) -> None:
    """Clock under a long tensor-core run: what attention's GEMMs see."""
    bm, bn, bk = 128, 128, 64
    a = (torch.rand(bm, bk, device="cuda") - 0.5).half()
    b = (torch.rand(bk, bn, device="cuda") - 0.5).half()
    grid = (bench.sm_count * 2,)
    c = torch.empty(grid[0], bm, bn, device="cuda")
    iters = 30000
    if bench.quick:
        seconds /= 3
    stamps = _stamps(grid)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    t, s = time_calls(
        lambda: _mma_loop[grid](a, b, c, stamps, iters, BM=bm, BN=bn, BK=bk, num_warps=4),
        seconds,
    )
    t1 = time.perf_counter()
    # the first half second is ramp-up; the steady state is what kernels run at
    clocks = bench.sampler.between(t0 + 0.5 * (t1 - t0), t1) or bench.sampler.between(t0, t1)
    if not clocks:
        bench.log("  sm_clock_sustained: no nvidia-smi samples (clock will be derived)")
        return
    bench.add(
        measurement(
            "sm_clock_sustained",
            median(clocks) * 1e6,
            "Hz",
            f"nvidia-smi clocks.sm during {t1 - t0:.1f} s of tl.dot 128x128x64 loops "
            f"(second half, {len(clocks)} samples)",
            [c * 1e6 for c in clocks],
            interval_ms=bench.sampler.interval_ms,
            duration_s=round(t1 - t0, 2),
            kernel_flops=2 * bm * bn * bk * grid[0] * iters / t,
            clock_effective_MHz=effective_clock_MHz(stamps),
        )
    )
