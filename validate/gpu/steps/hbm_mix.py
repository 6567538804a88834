"""The `tilesim calibrate` step ``hbm_mix``: HBM bandwidth under a mix of reads and writes.

DRAM turns its data bus around between reads and writes, so a stream that does both
runs slower than the time its reads and its writes would take alone. Each CTA of a grid
stream reads R blocks of 8 KiB and writes W per step, over 2 GiB in all, at write
shares 25, 50, 75 and 90% of the bytes (3:1, 1:1, 1:3, 1:9); the row's value is read +
write bytes per second (``GPU.hbm_mix_*_efficiency`` = it over the peak). Every output
is checked before it is timed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ....errors import TilesimError
from ....units import GiB
from ...schema import measurement
from ..microbench import Bench
from .hbm import CTAS_PER_SM_STREAM, READ_BLOCK

# (reads, writes) per step for each write share the preset keeps (hwmodels HBM_MIX_POINTS)
MIXES = {25: (3, 1), 50: (1, 1), 75: (1, 3), 90: (1, 9)}


@triton.jit
def _stream_mix(
    x_ptr,  # *fp32 [n_steps * R * BLOCK] read
    y_ptr,  # *fp32 [n_steps * W * BLOCK] written: each block the step's sum of reads + 1
    n_steps,
    R: tl.constexpr,
    W: tl.constexpr,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    for j in range(pid, n_steps, nprog):
        s = tl.zeros([BLOCK], dtype=tl.float32) + 1.0
        for r in tl.static_range(R):
            s += tl.load(x_ptr + (j * R + r) * BLOCK + offs, cache_modifier=".cg")
        for w in tl.static_range(W):
            tl.store(y_ptr + (j * W + w) * BLOCK + offs, s)


def _mix(bench, share: int, reads: int, writes: int, nbytes: int) -> None:
    block = READ_BLOCK
    n_steps = nbytes // ((reads + writes) * block * 4)
    grid = (bench.sm_count * CTAS_PER_SM_STREAM,)
    x = torch.rand(n_steps * reads * block, device="cuda")
    y = torch.empty(n_steps * writes * block, device="cuda")

    def run():
        _stream_mix[grid](x, y, n_steps, R=reads, W=writes, BLOCK=block)

    run()
    want = x.view(n_steps, reads, block).sum(1, keepdim=True) + 1.0
    if not torch.allclose(y.view(n_steps, writes, block), want.expand(-1, writes, -1)):
        raise TilesimError(f"micro-benchmark stream_mix {reads}:{writes} wrote wrong data")
    t, samples, _ = bench.timed(run)
    moved = (reads + writes) * n_steps * block * 4
    size = f"{moved / GiB:g} GiB, {grid[0]} CTAs"
    bench.add(
        measurement(
            f"hbm_mix_{share}",
            moved / t,
            "B/s",
            f"stream of {reads} reads : {writes} writes of 8 KiB a step ({share}% writes), "
            f"{size}, read+write bytes",
            samples,
            size_bytes=moved,
            read_bytes=reads * n_steps * block * 4,
            write_bytes=writes * n_steps * block * 4,
        )
    )


def hbm_mix(bench: Bench) -> None:
    """The step: one stream per write share of `MIXES`."""
    nbytes = (GiB // 2) if bench.quick else 2 * GiB
    for share, (reads, writes) in MIXES.items():
        _mix(bench, share, reads, writes, nbytes)
