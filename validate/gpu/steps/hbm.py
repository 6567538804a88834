"""The `tilesim calibrate` step ``hbm``: HBM bandwidth of streaming reads, writes and copies.

Each kernel streams a buffer far larger than L2 (2 GiB), 8 CTAs per SM so that enough
loads are in flight to cover the latency; loads use ``cache_modifier=".cg"`` (cache in
L2, not L1). The stream kernels live here and are shared with the steps that stream
(``l2``, ``loaded_latency``, ``power``). Every output is checked before it is timed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ....errors import TilesimError
from ....units import GiB
from ...schema import measurement
from ..microbench import Bench, _check_close

READ_BLOCK = 2048  # fp32 elements per CTA per step: 8 KiB, 16 B vector loads
# Offsets are int32: buffers stay under 2^31 elements (8 GiB of fp32).
CTAS_PER_SM_STREAM = 8  # enough loads in flight to cover L2 and HBM latency


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


def hbm(bench: Bench, nbytes: int = 2 * GiB) -> None:
    """Streaming read, write and copy of ``nbytes`` (and torch's copy_), B/s each."""
    block = READ_BLOCK
    n_blocks = nbytes // (4 * block)
    nbytes = n_blocks * block * 4
    grid = (bench.sm_count * CTAS_PER_SM_STREAM,)
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
    t, s, _ = bench.timed(lambda: _stream_read[grid](x, out, n_blocks, 1, BLOCK=block))
    bench.add(
        measurement("hbm_read", nbytes / t, "B/s", f"stream_read {size}", s, size_bytes=nbytes)
    )
    t, s, _ = bench.timed(lambda: _stream_write[grid](y, n_blocks, 1.0, BLOCK=block))
    bench.add(
        measurement("hbm_write", nbytes / t, "B/s", f"stream_write {size}", s, size_bytes=nbytes)
    )
    t, s, _ = bench.timed(lambda: _stream_copy[grid](x, y, n_blocks, BLOCK=block))
    bench.add(
        measurement(
            "hbm_copy",
            2 * nbytes / t,
            "B/s",
            f"stream_copy {size}, read+write bytes",
            s,
            size_bytes=nbytes,
        )
    )
    t, s, _ = bench.timed(lambda: y.copy_(x))
    bench.add(
        measurement(
            "torch_copy",
            2 * nbytes / t,
            "B/s",
            f"torch copy_ {size}, read+write bytes",
            s,
            size_bytes=nbytes,
        )
    )
