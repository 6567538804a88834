"""Micro-benchmark kernels for `tilesim calibrate` (needs torch, triton and a CUDA GPU).

Each benchmark isolates one figure the model needs and returns a calibration row
(see :func:`tilesim.validate.schema.measurement`):

* streaming read / write / copy over a buffer far larger than L2 (HBM), and
  streaming reads of working sets below L2 size, many passes in one launch (L2);
* ``tl.dot`` in a register loop at the attention kernels' tile shapes (tensor
  cores; fp16, bf16, fp8 e4m3; wgmma and, with Triton's ``DISABLE_MMA_V3``, mma.sync);
* chains of exp2 (SFU) and of FMAs (FP32 pipe);
* pointer chases through L2 and through HBM (latency);
* an empty kernel, through do_bench and inside a CUDA graph (launch overhead).

Loads use ``cache_modifier=".cg"`` (cache in L2, not L1) so that re-reads
measure L2, and pass r of a multi-pass read starts each CTA on another block, so
no compiler can hoist a load out of the loop. Every kernel's output is checked
against torch before it is timed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from ...errors import TilesimError
from ...units import GiB, KiB, MiB
from ..schema import measurement, summary_lines
from ..stats import median
from .metadata import ClockSampler

READ_BLOCK = 2048  # fp32 elements per CTA per step: 8 KiB, 16 B vector loads
# Offsets are int32: buffers stay under 2^31 elements (8 GiB of fp32).
CTAS_PER_SM_STREAM = 8  # enough loads in flight to cover L2 and HBM latency


# -- kernels ---------------------------------------------------------------------------


@triton.jit
def _stream_read(
    x_ptr,  # *fp32 buffer of n_blocks * BLOCK elements
    out_ptr,  # *fp32 [grid * BLOCK] partial sums (keeps the loads alive)
    n_blocks,  # blocks in the buffer
    passes,  # times the whole buffer is read
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in range(passes):
        # -- pass r: CTA p reads blocks (p + r) mod nprog, + nprog, ... ----------------
        start = (pid + r) % nprog
        for j in range(start, n_blocks, nprog):
            acc += tl.load(x_ptr + j * BLOCK + offs, cache_modifier=".cg")
    tl.store(out_ptr + pid * BLOCK + offs, acc)


@triton.jit
def _stream_write(y_ptr, n_blocks, value, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    v = tl.zeros([BLOCK], dtype=tl.float32) + value
    for j in range(pid, n_blocks, nprog):
        tl.store(y_ptr + j * BLOCK + offs, v)


@triton.jit
def _stream_copy(x_ptr, y_ptr, n_blocks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    for j in range(pid, n_blocks, nprog):
        o = j * BLOCK + offs
        tl.store(y_ptr + o, tl.load(x_ptr + o, cache_modifier=".cg"))


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


@triton.jit
def _stream_tiles(src, out, n_tiles, ROWS: tl.constexpr, COLS: tl.constexpr):
    # one CTA streams its own tiles (never reused: nothing hits in L2), one in flight:
    # tile t + 1's loads issue only after tile t arrived and was added in (the plain-load
    # loop of v1 and of the standard GEMMs, num_stages = 1)
    pid = tl.program_id(0)
    r = tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    base = src + pid.to(tl.int64) * n_tiles * ROWS * COLS
    acc = tl.zeros([ROWS, COLS], dtype=tl.float32)
    for t in range(n_tiles):
        acc += tl.load(base + t * ROWS * COLS + r[:, None] * COLS + c[None, :]).to(tl.float32)
    tl.store(out + pid * ROWS + r, tl.sum(acc, 1))


@triton.jit
def _chase_tiles(src, out, n_tiles, SIZE: tl.constexpr):
    # one CTA walks its own int32 tiles, one in flight: every element of tile k holds
    # k + 1 and the next tile's address is the max over the whole tile just loaded, so
    # tile k + 1's loads issue only after the slowest request of tile k is back (a
    # streaming loop of small tiles gets unrolled: several in flight). Up to 16 elements
    # per thread: at 32 the H200 build took twice as long per tile (loads serialised)
    pid = tl.program_id(0)
    base = src + pid.to(tl.int64) * n_tiles * SIZE
    offs = tl.arange(0, SIZE)
    nxt = pid * 0
    for _ in range(n_tiles):
        nxt = tl.max(tl.load(base + nxt.to(tl.int64) * SIZE + offs), 0)
    tl.store(out + pid, nxt)


@triton.jit
def _store_chain(dst, n_tiles, SIZE: tl.constexpr):
    # one CTA writes its own int32 tiles (tile t holds t + its offsets), one in flight:
    # after a tile's stores every thread fences (waits until its writes are acknowledged,
    # as a CTA's retirement waits for its stores) and the next tile's addresses depend on
    # the fence's result, so tile t + 1 issues only once tile t is acknowledged
    pid = tl.program_id(0)
    base = dst + pid.to(tl.int64) * n_tiles * SIZE
    offs = tl.arange(0, SIZE)
    zero = pid * 0
    for t in range(n_tiles):
        tl.store(base + (t + zero) * SIZE + offs, offs + t)  # (t + zero) * SIZE: 16 B stores
        zero = tl.inline_asm_elementwise(
            "fence.acq_rel.gpu;\n\tmov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
        )
        tl.debug_barrier()


@triton.jit
def _chase(next_ptr, pos_ptr, steps):
    # start where the previous launch stopped: a chase through HBM never revisits
    # (and so never hits in L2) until it has gone round the whole cycle
    idx = tl.load(pos_ptr)
    for _ in range(steps):
        idx = tl.load(next_ptr + idx, cache_modifier=".cg")
    tl.store(pos_ptr, idx)


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _clock64():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _stamp(stamps_ptr, pid, slot: tl.constexpr):
    # the SM's cycle counter and the GPU's ns timer, side by side: their ratio over a
    # run is the SM clock the kernel really ran at (nvidia-smi's clocks.sm is a sample
    # of what the driver asked for, and read 1980 MHz where these counters gave ~1.75
    # GHz for tensor-core kernels under Nsight Compute)
    base = stamps_ptr + pid.to(tl.int64) * 4 + slot
    tl.store(base, _clock64())
    tl.store(base + 1, _globaltimer())


@triton.jit
def _chase_under_load(
    next_ptr,  # int64 pointer-chase cycle (as `_chase`)
    pos_ptr,  # *int64 [1]: where the chase starts and stops
    ns_ptr,  # *int64 [2]: %globaltimer before and after the chase
    steps,  # dependent loads of the chase
    x_ptr,  # *fp32 streamed buffer of n_blocks * BLOCK elements
    out_ptr,  # *fp32 [grid * BLOCK] partial sums of the streamers
    n_blocks,
    passes,  # times the streamers read the buffer
    BLOCK: tl.constexpr,
):
    # program 0 chases pointers and times itself; the others stream reads meanwhile
    pid = tl.program_id(0)
    if pid == 0:
        idx = tl.load(pos_ptr)
        t0 = _globaltimer()
        for _ in range(steps):
            idx = tl.load(next_ptr + idx, cache_modifier=".cg")
        t1 = _globaltimer()
        tl.store(pos_ptr, idx)
        tl.store(ns_ptr, t0)
        tl.store(ns_ptr + 1, t1)
    else:
        nprog = tl.num_programs(0) - 1
        me = pid - 1
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r in range(passes):
            start = (me + r) % nprog
            for j in range(start, n_blocks, nprog):
                acc += tl.load(x_ptr + j * BLOCK + offs, cache_modifier=".cg")
        tl.store(out_ptr + me * BLOCK + offs, acc)


@triton.jit
def _empty(x_ptr):
    pass


@triton.jit
def _spin_cta(stamps_ptr, spin_cycles):
    # one CTA: its SM, its first and last SM cycle, a fixed spin between them; the
    # gap from one CTA's end to the next CTA's start on the same SM slot is the cost
    # of retiring a CTA and launching the next one
    pid = tl.program_id(0)
    t0 = _clock64()
    end = t0 + spin_cycles
    t = t0
    while t < end:
        t = _clock64()
    base = stamps_ptr + pid.to(tl.int64) * 3
    tl.store(base, _smid().to(tl.int64))
    tl.store(base + 1, t0)
    tl.store(base + 2, _clock64())


@triton.jit
def _sm_clock_stamp(out_ptr):
    # one row per CTA: its SM, that SM's cycle counter and the GPU's ns timer; two
    # launches of it around a kernel give each SM's cycles over the ns between them
    pid = tl.program_id(0)
    base = out_ptr + pid.to(tl.int64) * 3
    tl.store(base, _smid().to(tl.int64))
    tl.store(base + 1, _clock64())
    tl.store(base + 2, _globaltimer())


def sm_clock_stamp(out) -> None:
    """Launch `_sm_clock_stamp` with one CTA per row of ``out`` (int64 [rows, 3])."""
    _sm_clock_stamp[(out.shape[0],)](out, num_warps=1)


def _emitted_path(compiled, path: str) -> str:
    """The matrix instructions Triton emitted for ``compiled`` ("wgmma", "mma_sync" or
    "unknown" where its PTX is not at hand); raises if they are not ``path``'s."""
    ptx = compiled.asm.get("ptx", "") if hasattr(compiled, "asm") else ""
    used = "wgmma" if "wgmma" in ptx else ("mma_sync" if "mma.sync" in ptx else "unknown")
    if used != path and used != "unknown":
        raise TilesimError(f"asked for {path} but Triton emitted {used}")
    return used


@triton.jit
def _smid():
    return tl.inline_asm_elementwise(
        "mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
    )


# -- timing --------------------------------------------------------------------------


def _stamps(grid) -> torch.Tensor:
    """A zeroed [grid, 4] int64 buffer for the kernels' `_stamp`s."""
    return torch.zeros(grid[0], 4, dtype=torch.int64, device="cuda")


def effective_clock_MHz(stamps: torch.Tensor) -> float | None:
    """The SM clock the last launch ran at: its CTAs' %clock64 cycles over their
    %globaltimer ns (None if the timer did not move)."""
    st = stamps.cpu().double()
    ns = float((st[:, 3] - st[:, 1]).sum())
    cycles = float((st[:, 2] - st[:, 0]).sum())
    return round(cycles / ns * 1e3, 1) if ns > 0 and cycles > 0 else None


def time_calls(fn: Callable[[], object], min_time_s: float = 0.3, max_calls: int = 2000):
    """Median seconds of back-to-back calls of ``fn`` (no L2 flush), with the samples.

    Two warm-up calls; then calls timed one by one with CUDA events until
    ``min_time_s`` of wall time has passed.
    """
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    events = []
    t0 = time.perf_counter()
    while len(events) < max_calls:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
        if len(events) % 8 == 0:
            torch.cuda.synchronize()
            if time.perf_counter() - t0 >= min_time_s:
                break
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1e-3 for s, e in events]
    return median(samples), samples


class Bench:
    """Runs the micro-benchmarks on GPU 0 and collects calibration rows."""

    def __init__(self, sampler: ClockSampler, quick: bool = False, log=print):
        props = torch.cuda.get_device_properties(0)
        self.sm_count = props.multi_processor_count
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0)) or 50 * MiB
        self.sampler = sampler
        self.quick = quick
        self.log = log
        self.rows: list[dict] = []
        self.min_time_s = 0.15 if quick else 0.4

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        self.log("  " + summary_lines([row])[0])
        return row

    def timed(
        self, fn, min_time_s: float | None = None, max_calls: int = 2000
    ) -> tuple[float, list[float], float | None]:
        """(median s, samples, median SM clock MHz during the run or None)."""
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        t, samples = time_calls(fn, min_time_s or self.min_time_s, max_calls)
        clocks = self.sampler.between(t0, time.perf_counter())
        return t, samples, (median(clocks) if clocks else None)

    # -- memory -----------------------------------------------------------------------
    def hbm(self, nbytes: int = 2 * GiB) -> None:
        block = READ_BLOCK
        n_blocks = nbytes // (4 * block)
        nbytes = n_blocks * block * 4
        grid = (self.sm_count * CTAS_PER_SM_STREAM,)
        x = torch.rand(n_blocks * block, device="cuda")
        y = torch.empty_like(x)
        out = torch.empty(grid[0] * block, device="cuda")
        # correctness: one pass reads every element once
        _stream_read[grid](x, out, n_blocks, 1, BLOCK=block)
        _check_close(out.double().sum(), x.double().sum(), "stream_read")
        _stream_copy[grid](x, y, n_blocks, BLOCK=block)
        if not torch.equal(x, y):
            raise TilesimError("micro-benchmark stream_copy copied wrong data")
        _stream_write[grid](y, n_blocks, 0.5, BLOCK=block)
        if not bool((y == 0.5).all()):
            raise TilesimError("micro-benchmark stream_write wrote wrong data")

        size = f"{nbytes / GiB:g} GiB, {grid[0]} CTAs"
        t, s, _ = self.timed(lambda: _stream_read[grid](x, out, n_blocks, 1, BLOCK=block))
        self.add(
            measurement("hbm_read", nbytes / t, "B/s", f"stream_read {size}", s, size_bytes=nbytes)
        )
        t, s, _ = self.timed(lambda: _stream_write[grid](y, n_blocks, 1.0, BLOCK=block))
        self.add(
            measurement(
                "hbm_write", nbytes / t, "B/s", f"stream_write {size}", s, size_bytes=nbytes
            )
        )
        t, s, _ = self.timed(lambda: _stream_copy[grid](x, y, n_blocks, BLOCK=block))
        self.add(
            measurement(
                "hbm_copy",
                2 * nbytes / t,
                "B/s",
                f"stream_copy {size}, read+write bytes",
                s,
                size_bytes=nbytes,
            )
        )
        t, s, _ = self.timed(lambda: y.copy_(x))
        self.add(
            measurement(
                "torch_copy",
                2 * nbytes / t,
                "B/s",
                f"torch copy_ {size}, read+write bytes",
                s,
                size_bytes=nbytes,
            )
        )

    def l2(self, sizes_mib=(8, 16, 24, 32, 40, 48)) -> None:
        block = READ_BLOCK
        grid = (self.sm_count * CTAS_PER_SM_STREAM,)
        out = torch.empty(grid[0] * block, device="cuda")
        target = (0.5 if self.quick else 2.0) * GiB  # bytes read per launch
        for mib in sizes_mib:
            n_blocks = (mib * MiB) // (4 * block)
            nbytes = n_blocks * block * 4
            passes = max(1, int(target // nbytes))
            x = torch.rand(n_blocks * block, device="cuda")
            _stream_read[grid](x, out, n_blocks, 2, BLOCK=block)
            _check_close(out.double().sum(), 2 * x.double().sum(), "stream_read (L2)")
            t, s, _ = self.timed(lambda: _stream_read[grid](x, out, n_blocks, passes, BLOCK=block))  # noqa: B023
            self.add(
                measurement(
                    f"l2_read@{mib}MiB",
                    nbytes * passes / t,
                    "B/s",
                    f"stream_read {mib} MiB x {passes} passes in one launch, {grid[0]} CTAs",
                    s,
                    size_bytes=nbytes,
                    passes=passes,
                )
            )

    def latency(self) -> None:
        # L2: 16k nodes, warmed by one full lap; HBM: 4M nodes, of which one run's
        # laps (warm-up and timed calls together) visit well under half, each once
        for name, nbytes, steps in (("l2_latency", 4 * MiB, 20000), ("hbm_latency", GiB, 20000)):
            if self.quick:
                steps //= 4
            stride = 32  # int64 elements: 256 B between nodes, one L2 line each
            nodes = nbytes // (8 * stride)
            gen = torch.Generator(device="cuda").manual_seed(1234)
            perm = torch.randperm(nodes, device="cuda", generator=gen) * stride
            nxt = torch.zeros(nodes * stride, dtype=torch.int64, device="cuda")
            nxt[perm] = torch.roll(perm, -1)  # one cycle through every node
            pos = torch.zeros(1, dtype=torch.int64, device="cuda")
            _chase[(1,)](nxt, pos, nodes if name == "l2_latency" else 8, num_warps=1)
            t, s, _ = self.timed(
                lambda: _chase[(1,)](nxt, pos, steps, num_warps=1),  # noqa: B023
                min_time_s=0.05,
                max_calls=16,
            )
            self.add(
                measurement(
                    name,
                    t / steps,
                    "s",
                    f"pointer chase, {steps} dependent loads over {nbytes / MiB:g} MiB, "
                    "256 B apart, random cycle",
                    s,
                    size_bytes=nbytes,
                    steps=steps,
                )
            )

    def loaded_latency(self, loads_per_sm=(0, 1, 2, 4, 8)) -> None:
        """Pointer-chase latency while the other CTAs stream reads (the latency a load
        sees behind a busy memory system), for HBM and for L2, at several stream loads.

        One launch: program 0 chases 4000 dependent loads and reads %globaltimer
        around them; programs 1.. stream-read (HBM: a 2 GiB buffer; L2: a 24 MiB one,
        L2-resident) for longer than the chase takes. The stream's own bandwidth at
        that grid is timed alone, so each latency comes with the load it was under.
        """
        block = READ_BLOCK
        steps = 1000 if self.quick else 4000
        stride = 32
        cases = (("hbm", GiB, 2 * GiB), ("l2", 4 * MiB, 24 * MiB))
        for level, chase_bytes, stream_bytes in cases:
            nodes = chase_bytes // (8 * stride)
            gen = torch.Generator(device="cuda").manual_seed(1234)
            perm = torch.randperm(nodes, device="cuda", generator=gen) * stride
            nxt = torch.zeros(nodes * stride, dtype=torch.int64, device="cuda")
            nxt[perm] = torch.roll(perm, -1)
            pos = torch.zeros(1, dtype=torch.int64, device="cuda")
            ns = torch.zeros(2, dtype=torch.int64, device="cuda")
            n_blocks = stream_bytes // (4 * block)
            x = torch.rand(n_blocks * block, device="cuda")
            if level == "l2":  # warm the chase cycle into L2
                _chase[(1,)](nxt, pos, nodes, num_warps=1)
            for per_sm in loads_per_sm:
                streamers = self.sm_count * per_sm
                out = torch.empty(max(1, streamers) * block, device="cuda")
                # the stream alone: its bandwidth at this grid, and a pass count that
                # outlasts the chase (latency x steps, with a 3x margin)
                if streamers:
                    grid = (streamers,)
                    _stream_read[grid](x, out, n_blocks, 1, BLOCK=block)
                    _check_close(out.double().sum(), x.double().sum(), "stream_read")
                    probe = 1 if level == "hbm" else 200  # passes: launch cost stays small
                    t1, _, _ = self.timed(
                        lambda: _stream_read[grid](x, out, n_blocks, probe, BLOCK=block),  # noqa: B023
                        min_time_s=0.05,
                        max_calls=40,
                    )
                    bw = stream_bytes * probe / t1
                    passes = max(1, int(3 * steps * 2e-6 / (t1 / probe)))
                else:
                    bw, passes = 0.0, 0
                samples = []
                for _ in range(5):
                    _chase_under_load[(1 + streamers,)](
                        nxt, pos, ns, steps, x, out, n_blocks, passes, BLOCK=block, num_warps=4
                    )
                    torch.cuda.synchronize()
                    t0, t1 = ns.tolist()
                    samples.append((t1 - t0) * 1e-9 / steps)
                self.add(
                    measurement(
                        f"{level}_latency_loaded@{per_sm}",
                        median(samples),
                        "s",
                        f"pointer chase ({chase_bytes / MiB:g} MiB, {steps} hops, %globaltimer) "
                        f"while {streamers} CTAs ({per_sm}/SM) stream-read "
                        f"{stream_bytes / MiB:g} MiB",
                        samples,
                        streamers=streamers,
                        stream_Bps=bw,
                    )
                )
                self.log(
                    f"  {level} latency with {per_sm} streaming CTAs/SM "
                    f"({bw / 1e12:.2f} TB/s): {median(samples) * 1e9:.0f} ns"
                )

    # -- compute ------------------------------------------------------------------------
    def tensor(self, shapes=((128, 128, 64), (128, 64, 128), (128, 128, 128))) -> None:
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
                self.add(self._mma(dtype, path, shape))
            except Exception as exc:  # one failing variant must not end the calibration
                self.log(f"  tensor {dtype} {path} {shape}: failed ({_first_line(exc)})")

    def _mma(self, dtype: str, path: str, shape, ctas_per_sm: int = 2, num_warps: int = 4):
        bm, bn, bk = shape
        tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dtype]
        a = (torch.rand(bm, bk, device="cuda") - 0.5).to(tdtype)
        b = (torch.rand(bk, bn, device="cuda") - 0.5).to(tdtype)
        grid = (self.sm_count * ctas_per_sm,)
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
        if self.quick:
            iters //= 4
        iters += 1 if iters % 16 == 0 else 0
        with _mma_v3_disabled(sync):
            compiled = kernel[grid](a, b, c, stamps, 3, BM=bm, BN=bn, BK=bk, num_warps=num_warps)
            used = _emitted_path(compiled, path)
            want = 3 * (a.float() @ b.float())
            _check_rel(c[0], want, f"tl.dot loop {dtype} {path}")
            _check_rel(c[-1], want, f"tl.dot loop {dtype} {path}")
            t, s, clock = self.timed(
                lambda: kernel[grid](
                    a, b, c, stamps, iters, BM=bm, BN=bn, BK=bk, num_warps=num_warps
                )
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

    def mma_latency(self, shapes=((64, 16), (64, 32), (64, 64), (128, 16), (128, 64))) -> None:
        """SM cycles per step of a dependent chain of dots (each dot's A operand the last
        one's result), one CTA of 4 warps per SM, one and two dots a step, for wgmma and
        mma.sync: what a dot costs beyond the pipe's time when nothing else covers it."""
        hopper = torch.cuda.get_device_capability(0)[0] >= 9
        paths = ("wgmma", "mma_sync") if hopper else ("mma_sync",)
        for path in paths:
            for pair in (False, True):
                for bm, bk in shapes:
                    try:
                        self.add(self._mma_chain(path, bm, bk, pair))
                    except Exception as exc:  # one failing variant must not end the step
                        what = f"{path} {bm}x{bk}{' pair' if pair else ''}"
                        self.log(f"  mma chain {what}: failed ({_first_line(exc)})")

    def _mma_chain(self, path: str, bm: int, bk: int, pair: bool, num_warps: int = 4) -> dict:
        grid = (self.sm_count,)
        b = torch.eye(bk, device="cuda", dtype=torch.float16)
        x = (torch.rand(bm, bk, device="cuda") - 0.5).half()
        out = torch.empty(grid[0], bm, bk, device="cuda", dtype=torch.float16)
        stamps = _stamps(grid)
        hopper = torch.cuda.get_device_capability(0)[0] >= 9
        sync = path == "mma_sync" and hopper
        kernel = _mma_chain_sync if sync else _mma_chain
        # one iteration count throughout: Triton specialises an integer argument on its
        # divisibility by 16, so another count would compile (and time) another kernel
        iters = 2000 if self.quick else 8000

        def launch():
            return kernel[grid](
                b, x, out, stamps, iters, BM=bm, BK=bk, PAIR=pair, num_warps=num_warps
            )

        with _mma_v3_disabled(sync):
            compiled = launch()
            used = _emitted_path(compiled, path)
            if not (torch.equal(out[0], x) and torch.equal(out[-1], x)):
                raise TilesimError(f"micro-benchmark mma chain {path} {bm}x{bk}: wrong result")
            t, s, clock = self.timed(launch)
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

    def sustained_clock(self, seconds: float = 3.0) -> None:
        """Clock under a long tensor-core run: what attention's GEMMs see."""
        bm, bn, bk = 128, 128, 64
        a = (torch.rand(bm, bk, device="cuda") - 0.5).half()
        b = (torch.rand(bk, bn, device="cuda") - 0.5).half()
        grid = (self.sm_count * 2,)
        c = torch.empty(grid[0], bm, bn, device="cuda")
        iters = 30000
        if self.quick:
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
        clocks = self.sampler.between(t0 + 0.5 * (t1 - t0), t1) or self.sampler.between(t0, t1)
        if not clocks:
            self.log("  sm_clock_sustained: no nvidia-smi samples (clock will be derived)")
            return
        self.add(
            measurement(
                "sm_clock_sustained",
                median(clocks) * 1e6,
                "Hz",
                f"nvidia-smi clocks.sm during {t1 - t0:.1f} s of tl.dot 128x128x64 loops "
                f"(second half, {len(clocks)} samples)",
                [c * 1e6 for c in clocks],
                interval_ms=self.sampler.interval_ms,
                duration_s=round(t1 - t0, 2),
                kernel_flops=2 * bm * bn * bk * grid[0] * iters / t,
                clock_effective_MHz=effective_clock_MHz(stamps),
            )
        )

    def exp2(self) -> None:
        block, grid = 4096, (self.sm_count * 4,)
        x = torch.rand(block, device="cuda")
        out = torch.empty(grid[0] * block, device="cuda")
        stamps = _stamps(grid)
        _exp2_loop[grid](x, out, stamps, 3, BLOCK=block)
        want = x.double()
        for _ in range(3):
            want = torch.exp2(-want)
        _check_close(out[:block].double().norm(), want.norm(), "exp2 loop", tol=1e-4)
        iters = 2000 if self.quick else 8000
        t, s, clock = self.timed(lambda: _exp2_loop[grid](x, out, stamps, iters, BLOCK=block))
        self.add(
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

    def fp32(self) -> None:
        block, grid = 8192, (self.sm_count * 4,)
        x = torch.rand(block, device="cuda")
        out = torch.empty(grid[0] * block, device="cuda")
        a, b = 0.999, 0.001
        stamps = _stamps(grid)
        _fma_loop[grid](x, out, stamps, 2, a, b, BLOCK=block)
        want = x.double()
        for _ in range(8):
            want = want * a + b
        _check_close(out[:block].double().norm(), want.norm(), "fma loop", tol=1e-5)
        iters = 1000 if self.quick else 4000
        t, s, clock = self.timed(lambda: _fma_loop[grid](x, out, stamps, iters, a, b, BLOCK=block))
        self.add(
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

    def vector_latency(self) -> None:
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
            grid = (self.sm_count * per_sm,)
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
            iters = 2000 if self.quick else 8000
            t, s, clock = self.timed(lambda run=run, iters=iters: run(iters))
            self.add(
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

    def turnaround(self, warps=(8, 16, 32), spin_cycles: int = 20000) -> None:
        """Cycles from a CTA's end to the next CTA's start on the same SM slot: CTAs of
        ``w`` warps that spin ``spin_cycles`` each, ``64 / w`` of them per SM at most (the
        2048 threads an SM holds), 8 such waves. Per SM, the k-th start after the first
        wave takes the slot of the k-th end: the gap is their difference."""
        for w in warps:
            per_sm = 64 // w
            grid = (self.sm_count * per_sm * 8,)
            stamps = torch.zeros(grid[0], 3, dtype=torch.int64, device="cuda")
            _spin_cta[grid](stamps, spin_cycles, num_warps=w)
            torch.cuda.synchronize()
            gaps, samples = [], []
            for _ in range(3 if self.quick else 7):
                _spin_cta[grid](stamps, spin_cycles, num_warps=w)
                torch.cuda.synchronize()
                gaps = turnaround_gaps(stamps.cpu().tolist(), per_sm)
                samples.append(median(gaps))
            self.add(
                measurement(
                    f"cta_turnaround_{w}w",
                    median(samples),
                    "cycles",
                    f"SM cycles from a CTA's end to the next start on its slot, {grid[0]} "
                    f"CTAs of {w} warps spinning {spin_cycles} cycles ({per_sm} per SM), "
                    f"median over {len(gaps)} slot hand-overs per run",
                    samples,
                    warps=w,
                    ctas_per_sm=per_sm,
                )
            )

    def tile_latency(
        self,
        ctas: int = 16,
        warps=(4, 8),
        tiles=((64, 128), (128, 128)),
        small=(256, 2 * KiB, 8 * KiB),
    ) -> None:
        """Seconds per tile when each of ``ctas`` CTAs (on as many SMs: the HBM stays
        nearly idle) loads its own tiles with one in flight. K/V-sized fp16 ``tiles``
        stream (``_stream_tiles``): two sizes per CTA size, so that calibrate can take the
        bytes' share out. ``small`` loads (a row's statistics up to a quarter tile) walk
        a chain (``_chase_tiles``), each CTA's tiles spanning 16 MiB so that every run
        misses in L2."""
        n_tiles = 256 if self.quick else 1024
        for w in warps:
            for rows, cols in tiles:
                src = torch.randn(ctas * n_tiles * rows * cols, device="cuda").half()
                out = torch.empty(ctas * rows, device="cuda")
                run = functools.partial(
                    _stream_tiles[(ctas,)],
                    src,
                    out,
                    n_tiles,
                    ROWS=rows,
                    COLS=cols,
                    num_warps=w,
                    num_stages=1,
                )
                run()
                want = src.view(ctas, n_tiles, rows, cols).float().sum((1, 3)).flatten()
                _check_rel(out, want, f"stream_tiles {rows}x{cols}", tol=1e-4)
                t, s, clock = self.timed(run, min_time_s=0.05, max_calls=64)
                nbytes = rows * cols * 2
                self.add(
                    measurement(
                        f"hbm_tile_{w}w_{nbytes // 1024}k",
                        t / n_tiles,
                        "s",
                        f"{ctas} CTAs of {w} warps each streaming {n_tiles} fp16 {rows}x{cols} "
                        "tiles from HBM by plain loads, one in flight",
                        [x / n_tiles for x in s],
                        clock_MHz=clock,
                        warps=w,
                        tile_bytes=nbytes,
                    )
                )
            for nbytes in small:
                self._chase_tile_row(ctas, w, nbytes)

    def _chase_tile_row(self, ctas: int, warps: int, nbytes: int) -> None:
        size = nbytes // 4  # int32 elements
        n_tiles = 16 * MiB // nbytes // (4 if self.quick else 1)
        src = torch.arange(1, n_tiles + 1, dtype=torch.int32, device="cuda")
        src = src.repeat_interleave(size).repeat(ctas)
        out = torch.empty(ctas, dtype=torch.int32, device="cuda")
        run = functools.partial(
            _chase_tiles[(ctas,)], src, out, n_tiles, SIZE=size, num_warps=warps, num_stages=1
        )
        run()
        torch.cuda.synchronize()
        if not bool((out == n_tiles).all()):
            raise RuntimeError(f"chase_tiles {nbytes} B: walked to {out.tolist()[:4]}")
        t, s, clock = self.timed(run, min_time_s=0.05, max_calls=64)
        self.add(
            measurement(
                f"hbm_tile_chase_{warps}w_{nbytes}B",
                t / n_tiles,
                "s",
                f"{ctas} CTAs of {warps} warps each walking {n_tiles} int32 tiles of {nbytes} B "
                "from HBM, the next tile's address read from the last",
                [x / n_tiles for x in s],
                clock_MHz=clock,
                warps=warps,
                tile_bytes=nbytes,
            )
        )

    def store_latency(
        self, ctas: int = 16, warps=(4, 8), sizes=(256, 2 * KiB, 8 * KiB, 16 * KiB, 32 * KiB)
    ):
        """Seconds per tile when each of ``ctas`` CTAs (on as many SMs: the HBM stays
        nearly idle) writes its own int32 tiles with one in flight, each acknowledged
        before the next (``_store_chain``), spanning 16 MiB per CTA (nothing is
        rewritten while it could still sit in L2). ``calibrate`` takes what a tile of
        each size takes over one of 256 B: what a CTA's stores of that size add to its
        wait for their acknowledgement."""
        for w in warps:
            for nbytes in sizes:
                size = nbytes // 4
                n_tiles = 16 * MiB // nbytes // (4 if self.quick else 1)
                dst = torch.full((ctas * n_tiles * size,), -1, dtype=torch.int32, device="cuda")
                run = functools.partial(
                    _store_chain[(ctas,)], dst, n_tiles, SIZE=size, num_warps=w, num_stages=1
                )
                run()
                torch.cuda.synchronize()
                want = torch.arange(size, dtype=torch.int32, device="cuda")
                got = dst.view(ctas, n_tiles, size)
                for c, t in ((0, 0), (ctas - 1, n_tiles - 1)):
                    if not bool((got[c, t] == want + t).all()):
                        raise RuntimeError(f"store_chain {nbytes} B: CTA {c} tile {t} wrong")
                t, s, clock = self.timed(run, min_time_s=0.05, max_calls=64)
                self.add(
                    measurement(
                        f"hbm_store_chain_{w}w_{nbytes}B",
                        t / n_tiles,
                        "s",
                        f"{ctas} CTAs of {w} warps each writing {n_tiles} int32 tiles of "
                        f"{nbytes} B, each acknowledged (fence.acq_rel.gpu) before the next",
                        [x / n_tiles for x in s],
                        clock_MHz=clock,
                        warps=w,
                        tile_bytes=nbytes,
                    )
                )

    def dispatch(self, warps=(1, 4, 8), grids=(1 << 19, 1 << 20)) -> None:
        """SM cycles between two CTA starts on the GPU: grids of empty CTAs, back to back;
        the seconds between the two grid sizes over their CTAs (the launch's fixed cost
        drops out), at the run's SM clock. The same for 1 to 8 warps a CTA: the front
        end, not the SMs, sets it."""
        x = torch.empty(1, device="cuda")
        small, large = grids
        for w in warps:
            times, clocks = [], []
            for g in grids:
                t, _, clock = self.timed(lambda g=g, w=w: _empty[(g,)](x, num_warps=w))
                times.append(t)
                clocks.append(clock)
            per_cta = (times[1] - times[0]) / (large - small)
            clock = clocks[1] or clocks[0]
            if clock is None:
                raise RuntimeError("no SM clock read during the dispatch run")
            self.add(
                measurement(
                    f"cta_dispatch_{w}w",
                    per_cta * clock * 1e6,
                    "cycles",
                    f"empty grids of {small} and {large} CTAs of {w} warps back to back: "
                    f"{times[0] * 1e6:.1f} and {times[1] * 1e6:.1f} us, "
                    f"{per_cta * 1e9:.3f} ns a CTA at {clock:.0f} MHz",
                    warps=w,
                    clock_MHz=clock,
                )
            )

    def launch(self) -> None:
        x = torch.empty(1, device="cuda")
        _empty[(1,)](x)
        torch.cuda.synchronize()
        t = do_bench(lambda: _empty[(1,)](x), warmup=25, rep=200, return_mode="median") * 1e-3
        self.add(
            measurement("launch_do_bench", t, "s", "empty Triton kernel, do_bench median", [t])
        )
        n = 200
        t0 = time.perf_counter()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            _empty[(1,)](x)
        end.record()
        torch.cuda.synchronize()
        host = (time.perf_counter() - t0) / n
        self.add(
            measurement(
                "launch_back_to_back",
                start.elapsed_time(end) * 1e-3 / n,
                "s",
                f"{n} empty launches back to back (host {host * 1e6:.1f} us each)",
            )
        )
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            _empty[(1,)](x)
            stream.synchronize()
            with torch.cuda.graph(graph, stream=stream):
                for _ in range(100):
                    _empty[(1,)](x)
        torch.cuda.synchronize()
        t, s = time_calls(graph.replay, 0.1)
        self.add(measurement("launch_graph", t / 100, "s", "100 empty launches in a CUDA graph", s))


def turnaround_gaps(stamps: list, per_sm: int) -> list[float]:
    """From (smid, start, end) rows in SM cycles: for every SM, the gap between its
    k-th earliest end and its (per_sm + k)-th earliest start (the CTA that took the
    freed slot)."""
    by_sm: dict[int, list] = {}
    for sm, start, end in stamps:
        by_sm.setdefault(int(sm), []).append((start, end))
    gaps = []
    for rows in by_sm.values():
        starts = sorted(r[0] for r in rows)
        ends = sorted(r[1] for r in rows)
        gaps += [starts[per_sm + k] - ends[k] for k in range(len(starts) - per_sm)]
    return gaps


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


def _check_close(got, want, what: str, tol: float = 1e-5) -> None:
    got, want = float(got), float(want)
    if not abs(got - want) <= tol * max(abs(want), 1e-30):
        raise TilesimError(f"micro-benchmark {what} computed {got:.6g}, expected {want:.6g}")


def _check_rel(got: torch.Tensor, want: torch.Tensor, what: str, tol: float = 1e-3) -> None:
    err = float((got.double() - want.double()).norm() / want.double().norm())
    if not err <= tol:
        raise TilesimError(f"micro-benchmark {what}: relative error {err:.3g} (over {tol:g})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__
