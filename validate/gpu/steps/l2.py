"""The `tilesim calibrate` step ``l2``: the L2 read-bandwidth curve over working-set sizes.

Streaming reads of working sets below the L2 size, many passes in one launch; pass r
starts each CTA on another block, so no compiler can hoist a load out of the loop and
re-reads measure L2. `calibration_figures.pick_l2_bandwidth` takes the preset's point of the curve.
"""

from __future__ import annotations

import torch

from ....units import GiB, MiB
from ...schema import measurement
from ..microbench import Bench, _check_close
from .hbm import CTAS_PER_SM_STREAM, READ_BLOCK, _stream_read


def l2(bench: Bench, sizes_mib=(8, 16, 24, 32, 40, 48)) -> None:
    """Streaming-read B/s of each working set of ``sizes_mib`` MiB, read many times."""
    block = READ_BLOCK
    grid = (bench.sm_count * CTAS_PER_SM_STREAM,)
    out = torch.empty(grid[0] * block, device="cuda")
    target = (0.5 if bench.quick else 2.0) * GiB  # bytes read per launch
    for mib in sizes_mib:
        n_blocks = (mib * MiB) // (4 * block)
        nbytes = n_blocks * block * 4
        passes = max(1, int(target // nbytes))
        x = torch.rand(n_blocks * block, device="cuda")
        _stream_read[grid](x, out, n_blocks, 2, BLOCK=block)
        _check_close(out.double().sum(), 2 * x.double().sum(), "stream_read (L2)")
        t, s, _ = bench.timed(lambda: _stream_read[grid](x, out, n_blocks, passes, BLOCK=block))  # noqa: B023
        bench.add(
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
