"""The `tilesim calibrate` steps ``tensor`` and ``mma_latency``: the tensor cores.

``tensor``: ``tl.dot`` in a register loop at the attention kernels' tile shapes (fp16,
bf16, fp8 e4m3; wgmma and, with Triton's ``DISABLE_MMA_V3``, mma.sync), for the pipe's
FLOP/s and the SM clock the CTAs' own counters saw. ``mma_latency``: dependent chains of
dots (each dot's A the last one's result), for what a dot costs when nothing covers it.
The PTX of each compiled kernel is checked for the matrix instructions asked for.
"""

from __future__ import annotations

import contextlib
import os

import torch
import triton
import triton.language as tl

from ....errors import TilesimError
from ...schema import measurement
from ..microbench import (
    Bench,
    _check_rel,
    _first_line,
    _stamp,
    _stamps,
    effective_clock_MHz,
)


def _mma_loop_src(
    a_ptr,  # [BM, BK] operand, loaded once
    b_ptr,  # [BK, BN] operand, loaded once
    c_ptr,  # *fp32 [grid, BM, BN] accumulators (keeps the dots alive)
    stamps_ptr,  # *int64 [grid, 4]: the CTA's clock stamps (`_stamp`)
    iters,  # dots per CTA
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pid = tl.program_id(0)
    _stamp(stamps_ptr, pid, 0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for _ in range(iters):
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + pid.to(tl.int64) * BM * BN + rm[:, None] * BN + rn[None, :], acc)
    _stamp(stamps_ptr, pid, 2)


# Two JIT objects of one source: the second is compiled with DISABLE_MMA_V3=1 (mma.sync
# on Hopper) and must not share the first's in-memory cache.
_mma_loop = triton.jit(_mma_loop_src)
_mma_loop_sync = triton.jit(_mma_loop_src)


def _mma_chain_src(
    b_ptr,  # [BK, BK] operand, loaded once (the identity: x stays x)
    x_ptr,  # [BM, BK] start of the chain
    out_ptr,  # [grid, BM, BK] where each CTA's chain ends
    stamps_ptr,  # *int64 [grid, 4]: the CTA's clock stamps (`_stamp`)
    iters,  # dots per CTA, each on the one before it
    BM: tl.constexpr,
    BK: tl.constexpr,
    PAIR: tl.constexpr,  # two dots a step, the second's A the first's result
):
    # x <- x @ B: every dot waits for the one before it, so a step is a dot's latency,
    # not the pipe's throughput. The loop-carried x reaches wgmma through shared memory
    # (Triton stores it there each step); with PAIR the second dot's A is the first's
    # result in registers, as P is in flash attention's P @ V
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    b = tl.load(b_ptr + rk[:, None] * BK + rk[None, :])
    x = tl.load(x_ptr + rm[:, None] * BK + rk[None, :])
    _stamp(stamps_ptr, pid, 0)
    for _ in range(iters):
        x = tl.dot(x, b).to(tl.float16)
        if PAIR:
            x = tl.dot(x, b).to(tl.float16)
    _stamp(stamps_ptr, pid, 2)
    tl.store(out_ptr + pid.to(tl.int64) * BM * BK + rm[:, None] * BK + rk[None, :], x)


_mma_chain = triton.jit(_mma_chain_src)
_mma_chain_sync = triton.jit(_mma_chain_src)


@contextlib.contextmanager
def _mma_v3_disabled(on: bool):
    """Triton's DISABLE_MMA_V3=1 (mma.sync on Hopper) while ``on``, for compiles and the
    launches that may compile again."""
    saved = os.environ.get("DISABLE_MMA_V3")
    if on:
        os.environ["DISABLE_MMA_V3"] = "1"
    try:
        yield
    finally:
        if on:
            if saved is None:
                os.environ.pop("DISABLE_MMA_V3", None)
            else:
                os.environ["DISABLE_MMA_V3"] = saved


def _emitted_path(compiled, path: str) -> str:
    """The matrix instructions Triton emitted for ``compiled`` ("wgmma", "mma_sync" or
    "unknown" where its PTX is not at hand); raises if they are not ``path``'s."""
    ptx = compiled.asm.get("ptx", "") if hasattr(compiled, "asm") else ""
    used = "wgmma" if "wgmma" in ptx else ("mma_sync" if "mma.sync" in ptx else "unknown")
    if used != path and used != "unknown":
        raise TilesimError(f"asked for {path} but Triton emitted {used}")
    return used


def tensor(bench: Bench, shapes=((128, 128, 64), (128, 64, 128), (128, 128, 128))) -> None:
    """FLOP/s of a ``tl.dot`` register loop per (dtype, matrix path, tile shape)."""
    cases = [("fp16", "wgmma", s) for s in shapes]
    cases += [("bf16", "wgmma", (128, 128, 64))]
    major, _ = torch.cuda.get_device_capability(0)
    if major >= 9:
        cases += [("fp8", "wgmma", (128, 128, 128)), ("fp8", "wgmma", (128, 64, 128))]
        cases += [("fp16", "mma_sync", s) for s in shapes]
    else:
        cases = [("fp16", "mma_sync", s) for s in shapes] + [("bf16", "mma_sync", shapes[0])]
    for dtype, path, shape in cases:
        try:
            bench.add(_mma_row(bench, dtype, path, shape))
        except Exception as exc:  # one failing variant must not end the calibration
            bench.log(f"  tensor {dtype} {path} {shape}: failed ({_first_line(exc)})")


def _mma_row(bench: Bench, dtype: str, path: str, shape, ctas_per_sm: int = 2, num_warps: int = 4):
    bm, bn, bk = shape
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dtype]
    a = (torch.rand(bm, bk, device="cuda") - 0.5).to(tdtype)
    b = (torch.rand(bk, bn, device="cuda") - 0.5).to(tdtype)
    grid = (bench.sm_count * ctas_per_sm,)
    c = torch.empty(grid[0], bm, bn, device="cuda")
    hopper = torch.cuda.get_device_capability(0)[0] >= 9
    sync = path == "mma_sync" and hopper
    kernel = _mma_loop_sync if sync else _mma_loop
    stamps = _stamps(grid)
    flop_per_iter = 2 * bm * bn * bk * grid[0]
    # size the loop for ~20 ms per launch at ~1 PFLOP/s; the check runs 3 dots, and
    # the timed count is kept off multiples of 16 (Triton specialises on them), so
    # both launches run one compiled kernel
    iters = max(100, int(2e13 / flop_per_iter))
    if bench.quick:
        iters //= 4
    iters += 1 if iters % 16 == 0 else 0
    with _mma_v3_disabled(sync):
        compiled = kernel[grid](a, b, c, stamps, 3, BM=bm, BN=bn, BK=bk, num_warps=num_warps)
        used = _emitted_path(compiled, path)
        want = 3 * (a.float() @ b.float())
        _check_rel(c[0], want, f"tl.dot loop {dtype} {path}")
        _check_rel(c[-1], want, f"tl.dot loop {dtype} {path}")
        t, s, clock = bench.timed(
            lambda: kernel[grid](a, b, c, stamps, iters, BM=bm, BN=bn, BK=bk, num_warps=num_warps)
        )
    tile = "x".join(map(str, shape))
    return measurement(
        f"tensor_{dtype}_{path}@{tile}",
        flop_per_iter * iters / t,
        "FLOP/s",
        f"tl.dot register loop {tile} ({used} in PTX), {ctas_per_sm} CTAs/SM, "
        f"{num_warps} warps, {iters} dots",
        s,
        dtype=dtype,
        path=path,
        tile=list(shape),
        ptx_path=used,
        clock_MHz=clock,
        clock_effective_MHz=effective_clock_MHz(stamps),
    )


def mma_latency(bench: Bench, shapes=((64, 16), (64, 32), (64, 64), (128, 16), (128, 64))) -> None:
    """SM cycles per step of a dependent chain of dots (each dot's A operand the last
    one's result), one CTA of 4 warps per SM, one and two dots a step, for wgmma and
    mma.sync: what a dot costs beyond the pipe's time when nothing else covers it."""
    hopper = torch.cuda.get_device_capability(0)[0] >= 9
    paths = ("wgmma", "mma_sync") if hopper else ("mma_sync",)
    for path in paths:
        for pair in (False, True):
            for bm, bk in shapes:
                try:
                    bench.add(_chain_row(bench, path, bm, bk, pair))
                except Exception as exc:  # one failing variant must not end the step
                    what = f"{path} {bm}x{bk}{' pair' if pair else ''}"
                    bench.log(f"  mma chain {what}: failed ({_first_line(exc)})")


def _chain_row(bench: Bench, path: str, bm: int, bk: int, pair: bool, num_warps: int = 4) -> dict:
    grid = (bench.sm_count,)
    b = torch.eye(bk, device="cuda", dtype=torch.float16)
    x = (torch.rand(bm, bk, device="cuda") - 0.5).half()
    out = torch.empty(grid[0], bm, bk, device="cuda", dtype=torch.float16)
    stamps = _stamps(grid)
    hopper = torch.cuda.get_device_capability(0)[0] >= 9
    sync = path == "mma_sync" and hopper
    kernel = _mma_chain_sync if sync else _mma_chain
    # one iteration count throughout: Triton specialises an integer argument on its
    # divisibility by 16, so another count would compile (and time) another kernel
    iters = 2000 if bench.quick else 8000

    def launch():
        return kernel[grid](b, x, out, stamps, iters, BM=bm, BK=bk, PAIR=pair, num_warps=num_warps)

    with _mma_v3_disabled(sync):
        compiled = launch()
        used = _emitted_path(compiled, path)
        if not (torch.equal(out[0], x) and torch.equal(out[-1], x)):
            raise TilesimError(f"micro-benchmark mma chain {path} {bm}x{bk}: wrong result")
        t, s, clock = bench.timed(launch)
    st = stamps.cpu().double()
    per_cta = sorted(((st[:, 2] - st[:, 0]) / iters).tolist())
    dots = 2 if pair else 1
    name = f"mma_chain{'2' if pair else ''}_{path}@{bm}x{bk}x{bk}"
    return measurement(
        name,
        per_cta[len(per_cta) // 2],
        "cycles",
        f"dependent tl.dot chain {bm}x{bk}x{bk}, {dots} a step ({used} in PTX), "
        f"1 CTA/SM, {num_warps} warps, {iters} steps, SM cycles a step (median CTA)",
        s,
        path=path,
        tile=[bm, bk, bk],
        dots=dots,
        ptx_path=used,
        iters=iters,
        clock_MHz=clock,
        clock_effective_MHz=effective_clock_MHz(stamps),
    )
