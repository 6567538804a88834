"""The `tilesim calibrate` step ``dispatch``: how fast the GPU starts CTAs.

Grids of empty CTAs of two sizes, back to back: the seconds between them over the CTAs
between (the launch's fixed cost drops out), at the run's SM clock.
"""

from __future__ import annotations

import torch

from ...schema import measurement
from ..microbench import Bench
from .launch import _empty


def dispatch(bench: Bench, warps=(1, 4, 8), grids=(1 << 19, 1 << 20)) -> None:
    """SM cycles between two CTA starts on the GPU: grids of empty CTAs, back to back;
    the seconds between the two grid sizes over their CTAs (the launch's fixed cost
    drops out), at the run's SM clock. The same for 1 to 8 warps a CTA: the front
    end, not the SMs, sets it."""
    x = torch.empty(1, device="cuda")
    small, large = grids
    for w in warps:
        times, clocks = [], []
        for g in grids:
            t, _, clock = bench.timed(lambda g=g, w=w: _empty[(g,)](x, num_warps=w))
            times.append(t)
            clocks.append(clock)
        per_cta = (times[1] - times[0]) / (large - small)
        clock = clocks[1] or clocks[0]
        if clock is None:
            raise RuntimeError("no SM clock read during the dispatch run")
        bench.add(
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
