"""The `tilesim calibrate` steps ``tile_latency`` and ``store_latency``: one tile in flight.

A few CTAs (on as many SMs: the HBM stays nearly idle) each load their own tiles, one in
flight: K/V-sized fp16 tiles streamed by plain loads, and smaller loads that walk a
chain (the next tile's address read from the last); and each writes its own tiles, each
acknowledged before the next. `calibrate` turns the seconds per tile into what a tile
costs beyond one load's latency and the rate an SM's stores leave it at.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from ....units import KiB, MiB
from ...schema import measurement
from ..microbench import Bench, _check_rel


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


def tile_latency(
    bench: Bench,
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
    n_tiles = 256 if bench.quick else 1024
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
            t, s, clock = bench.timed(run, min_time_s=0.05, max_calls=64)
            nbytes = rows * cols * 2
            bench.add(
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
            _chase_tile_row(bench, ctas, w, nbytes)


def _chase_tile_row(bench: Bench, ctas: int, warps: int, nbytes: int) -> None:
    size = nbytes // 4  # int32 elements
    n_tiles = 16 * MiB // nbytes // (4 if bench.quick else 1)
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
    t, s, clock = bench.timed(run, min_time_s=0.05, max_calls=64)
    bench.add(
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
    bench: Bench, ctas: int = 16, warps=(4, 8), sizes=(256, 2 * KiB, 8 * KiB, 16 * KiB, 32 * KiB)
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
            n_tiles = 16 * MiB // nbytes // (4 if bench.quick else 1)
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
            t, s, clock = bench.timed(run, min_time_s=0.05, max_calls=64)
            bench.add(
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
