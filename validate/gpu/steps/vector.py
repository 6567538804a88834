"""The `tilesim calibrate` steps ``exp2``, ``fp32`` and ``vector``: the SM's vector pipes.

``exp2`` and ``fp32`` time chains of ``tl.math.exp2`` (SFU) and of FMAs (FP32 pipe) over
many CTAs, for each pipe's rate. ``vector`` times the flash kernels' online-softmax step
on a register tile at 1 to 8 warps per scheduler, for how much of the pipes' time
latency leaves uncovered when few warps are resident. Every output is checked first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...schema import measurement
from ..microbench import Bench, _check_close, _stamp, _stamps, effective_clock_MHz


@triton.jit
def _exp2_loop(x_ptr, out_ptr, stamps_ptr, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    _stamp(stamps_ptr, pid, 0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # in [0, 1): exp2(-x) stays in (0.5, 1]
    for _ in range(iters):
        x = tl.math.exp2(-x)
    tl.store(out_ptr + pid * BLOCK + offs, x)
    _stamp(stamps_ptr, pid, 2)


@triton.jit
def _fma_loop(x_ptr, out_ptr, stamps_ptr, iters, a, b, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    _stamp(stamps_ptr, pid, 0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(iters):
        # four dependent FMAs per trip: loop bookkeeping stays a small share of issue slots
        x = x * a + b
        x = x * a + b
        x = x * a + b
        x = x * a + b
    tl.store(out_ptr + pid * BLOCK + offs, x)
    _stamp(stamps_ptr, pid, 2)


@triton.jit
def _softmax_tile_loop(x_ptr, out_ptr, iters, scale, ROWS: tl.constexpr, COLS: tl.constexpr):
    # The online-softmax step of the flash kernels on a register tile, nothing else:
    # row max, scale-and-subtract, exp2, row sum, the running max/sum update. P feeds
    # the next step, so no step can be hoisted or overlapped with the one before.
    pid = tl.program_id(0)
    r = tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    x = tl.load(x_ptr + r[:, None] * COLS + c[None, :])
    m = tl.zeros([ROWS], dtype=tl.float32) - 1.0e30
    l_run = tl.zeros([ROWS], dtype=tl.float32)
    for _ in range(iters):
        m_new = tl.maximum(m, tl.max(x, 1) * scale)
        p = tl.math.exp2(x * scale - m_new[:, None])
        l_run = l_run * tl.math.exp2(m - m_new) + tl.sum(p, 1)
        m = m_new
        x = p
    tl.store(out_ptr + pid * ROWS + r, l_run + m)


def exp2(bench: Bench) -> None:
    """exp2/s of dependent chains of ``tl.math.exp2`` (the SFU)."""
    block, grid = 4096, (bench.sm_count * 4,)
    x = torch.rand(block, device="cuda")
    out = torch.empty(grid[0] * block, device="cuda")
    stamps = _stamps(grid)
    _exp2_loop[grid](x, out, stamps, 3, BLOCK=block)
    want = x.double()
    for _ in range(3):
        want = torch.exp2(-want)
    _check_close(out[:block].double().norm(), want.norm(), "exp2 loop", tol=1e-4)
    iters = 2000 if bench.quick else 8000
    t, s, clock = bench.timed(lambda: _exp2_loop[grid](x, out, stamps, iters, BLOCK=block))
    bench.add(
        measurement(
            "exp2",
            grid[0] * block * iters / t,
            "ops/s",
            f"chains of tl.math.exp2, {grid[0]} CTAs x {block} lanes x {iters}",
            s,
            clock_MHz=clock,
            clock_effective_MHz=effective_clock_MHz(stamps),
        )
    )


def fp32(bench: Bench) -> None:
    """FMA lane-ops/s of dependent chains of FMAs (the FP32 pipe)."""
    block, grid = 8192, (bench.sm_count * 4,)
    x = torch.rand(block, device="cuda")
    out = torch.empty(grid[0] * block, device="cuda")
    a, b = 0.999, 0.001
    stamps = _stamps(grid)
    _fma_loop[grid](x, out, stamps, 2, a, b, BLOCK=block)
    want = x.double()
    for _ in range(8):
        want = want * a + b
    _check_close(out[:block].double().norm(), want.norm(), "fma loop", tol=1e-5)
    iters = 1000 if bench.quick else 4000
    t, s, clock = bench.timed(lambda: _fma_loop[grid](x, out, stamps, iters, a, b, BLOCK=block))
    bench.add(
        measurement(
            "fp32_fma",
            grid[0] * block * iters * 4 / t,
            "ops/s",
            f"chains of FMAs (lane-ops), {grid[0]} CTAs x {block} lanes x {4 * iters}",
            s,
            clock_MHz=clock,
            clock_effective_MHz=effective_clock_MHz(stamps),
        )
    )


def vector_latency(bench: Bench) -> None:
    """The flash kernels' softmax step on a register tile, one CTA per SM of 4, 8
    and 16 warps (1, 2, 4 warps per scheduler), and two CTAs of 16 warps per SM
    (8 per scheduler: latency hidden). Each row: seconds per step and the SM
    clock; `calibrate` sets them against the exp2 and FMA rates."""
    scale = 0.75
    for warps, rows, cols, per_sm in (
        (4, 64, 64, 1),
        (8, 128, 128, 1),
        (16, 128, 128, 1),
        (16, 128, 128, 2),
    ):
        grid = (bench.sm_count * per_sm,)
        x = torch.rand(rows * cols, device="cuda")
        out = torch.empty(grid[0] * rows, device="cuda")

        def run(n, x=x, out=out, rows=rows, cols=cols, warps=warps, grid=grid):
            _softmax_tile_loop[grid](x, out, n, scale, ROWS=rows, COLS=cols, num_warps=warps)

        run(3)
        _check_close(
            out[:rows].double().norm(),
            _softmax_tile_ref(x, rows, cols, scale, 3),
            f"softmax tile loop {rows}x{cols}",
            tol=1e-4,
        )
        iters = 2000 if bench.quick else 8000
        t, s, clock = bench.timed(lambda run=run, iters=iters: run(iters))
        bench.add(
            measurement(
                f"vector_step_{warps}w_{per_sm}cta",
                t / iters,
                "s/step",
                f"online-softmax step on a {rows}x{cols} fp32 register tile, {grid[0]} CTAs "
                f"of {warps} warps ({per_sm} per SM) x {iters} steps",
                s,
                clock_MHz=clock,
                warps=warps,
                ctas_per_sm=per_sm,
                rows=rows,
                cols=cols,
            )
        )


def _softmax_tile_ref(x: torch.Tensor, rows: int, cols: int, scale: float, iters: int):
    """‖l + m‖ of `_softmax_tile_loop` after ``iters`` steps, in float64."""
    x = x.double().view(rows, cols)
    m = torch.full((rows,), -1.0e30, dtype=torch.float64, device=x.device)
    l_run = torch.zeros(rows, dtype=torch.float64, device=x.device)
    for _ in range(iters):
        m_new = torch.maximum(m, x.max(1).values * scale)
        p = torch.exp2(x * scale - m_new[:, None])
        l_run = l_run * torch.exp2(m - m_new) + p.sum(1)
        m, x = m_new, p
    return (l_run + m).norm()
