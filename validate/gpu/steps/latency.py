"""The `tilesim calibrate` steps ``latency`` and ``loaded_latency``: pointer chases.

A single CTA walks a random cycle of int64 nodes 256 B apart (one L2 line each), every
load's address the value of the last, through 4 MiB (L2) and 1 GiB (HBM): seconds per
hop is a load's latency. ``loaded_latency`` times the same chase while the other CTAs
of its launch stream reads, at several streaming loads: the latency a load sees
behind a busy memory system.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ....units import GiB, MiB
from ...schema import measurement
from ...stats import median
from ..microbench import Bench, _check_close, _globaltimer
from .hbm import READ_BLOCK, _stream_read


@triton.jit
def _chase(next_ptr, pos_ptr, steps):
    # start where the previous launch stopped: a chase through HBM never revisits
    # (and so never hits in L2) until it has gone round the whole cycle
    idx = tl.load(pos_ptr)
    for _ in range(steps):
        idx = tl.load(next_ptr + idx, cache_modifier=".cg")
    tl.store(pos_ptr, idx)


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


def latency(bench: Bench) -> None:
    """Seconds per hop of a pointer chase through L2 and through HBM, nothing else running."""
    # L2: 16k nodes, warmed by one full lap; HBM: 4M nodes, of which one run's
    # laps (warm-up and timed calls together) visit well under half, each once
    for name, nbytes, steps in (("l2_latency", 4 * MiB, 20000), ("hbm_latency", GiB, 20000)):
        if bench.quick:
            steps //= 4
        stride = 32  # int64 elements: 256 B between nodes, one L2 line each
        nodes = nbytes // (8 * stride)
        gen = torch.Generator(device="cuda").manual_seed(1234)
        perm = torch.randperm(nodes, device="cuda", generator=gen) * stride
        nxt = torch.zeros(nodes * stride, dtype=torch.int64, device="cuda")
        nxt[perm] = torch.roll(perm, -1)  # one cycle through every node
        pos = torch.zeros(1, dtype=torch.int64, device="cuda")
        _chase[(1,)](nxt, pos, nodes if name == "l2_latency" else 8, num_warps=1)
        t, s, _ = bench.timed(
            lambda: _chase[(1,)](nxt, pos, steps, num_warps=1),  # noqa: B023
            min_time_s=0.05,
            max_calls=16,
        )
        bench.add(
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


def loaded_latency(bench: Bench, loads_per_sm=(0, 1, 2, 4, 8)) -> None:
    """Pointer-chase latency while the other CTAs stream reads (the latency a load
    sees behind a busy memory system), for HBM and for L2, at several stream loads.

    One launch: program 0 chases 4000 dependent loads and reads %globaltimer
    around them; programs 1.. stream-read (HBM: a 2 GiB buffer; L2: a 24 MiB one,
    L2-resident) for longer than the chase takes. The stream's own bandwidth at
    that grid is timed alone, so each latency comes with the load it was under.
    """
    block = READ_BLOCK
    steps = 1000 if bench.quick else 4000
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
            streamers = bench.sm_count * per_sm
            out = torch.empty(max(1, streamers) * block, device="cuda")
            # the stream alone: its bandwidth at this grid, and a pass count that
            # outlasts the chase (latency x steps, with a 3x margin)
            if streamers:
                grid = (streamers,)
                _stream_read[grid](x, out, n_blocks, 1, BLOCK=block)
                _check_close(out.double().sum(), x.double().sum(), "stream_read")
                probe = 1 if level == "hbm" else 200  # passes: launch cost stays small
                t1, _, _ = bench.timed(
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
            bench.add(
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
            bench.log(
                f"  {level} latency with {per_sm} streaming CTAs/SM "
                f"({bw / 1e12:.2f} TB/s): {median(samples) * 1e9:.0f} ns"
            )
