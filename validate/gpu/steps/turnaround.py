"""The `tilesim calibrate` step ``turnaround``: the cycles between CTAs on one SM slot.

CTAs that spin a fixed number of cycles record their SM and their first and last cycle;
with several waves per SM, each start after the first wave takes the slot of an end,
and the gap between them is the cost of retiring a CTA and launching the next.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...schema import measurement
from ...stats import median
from ..microbench import Bench, _clock64, _smid


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


def turnaround(bench: Bench, warps=(8, 16, 32), spin_cycles: int = 20000) -> None:
    """Cycles from a CTA's end to the next CTA's start on the same SM slot: CTAs of
    ``w`` warps that spin ``spin_cycles`` each, ``64 / w`` of them per SM at most (the
    2048 threads an SM holds), 8 such waves. Per SM, the k-th start after the first
    wave takes the slot of the k-th end: the gap is their difference."""
    for w in warps:
        per_sm = 64 // w
        grid = (bench.sm_count * per_sm * 8,)
        stamps = torch.zeros(grid[0], 3, dtype=torch.int64, device="cuda")
        _spin_cta[grid](stamps, spin_cycles, num_warps=w)
        torch.cuda.synchronize()
        gaps, samples = [], []
        for _ in range(3 if bench.quick else 7):
            _spin_cta[grid](stamps, spin_cycles, num_warps=w)
            torch.cuda.synchronize()
            gaps = turnaround_gaps(stamps.cpu().tolist(), per_sm)
            samples.append(median(gaps))
        bench.add(
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
