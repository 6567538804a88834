"""``fast`` against ``detailed`` on what-if variants of the calibrated H200.

Each hardware field of `tilesim.simulator.bench`'s what-if check (SM count, HBM
and L2 bandwidth, L2 size, SM clock) at each factor, on the causal d = 64 shape,
whose 1x points are within 2% for every algorithm. Standard attention, the
costliest to simulate in detail, is checked on the SM counts only (the field
whose change moves its wave sampling). `make bench`'s ``--whatif`` runs the whole
grid: both shapes, all four algorithms.
"""

from __future__ import annotations

import pytest

from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.simulator.bench import (
    TOLERANCE,
    WHATIF_FACTORS,
    WHATIF_FIELDS,
    WHATIF_GPU,
    WHATIF_SHAPES,
)
from tilesim.traces import build

SHAPE = WHATIF_SHAPES[1]
CASES = [
    (algo, field, factor)
    for algo in ("v1", "v2", "v3")
    for field in WHATIF_FIELDS
    for factor in WHATIF_FACTORS
] + [("standard", "sm_count", factor) for factor in ("2x", "4x")]


# v1 (the released structure) at this shape splits its 8 heads' Q steps over many CTAs,
# each walking every K/V block with a few steps: the coalesced walk is 3-10% off detailed
# on some variants (test_sim_fidelity.py's _V1_FEW_HEADS; engine: steps.py).
_V1 = pytest.mark.xfail(reason="coalesced K/V walk of many-split v1 CTAs", strict=True)
_V1_MISSES = {
    ("sm_count", "0.5x"),
    ("l2_bandwidth_Bps", "0.5x"),
    ("l2_bandwidth_Bps", "2x"),
    ("l2_bandwidth_Bps", "4x"),
    ("sm_clock_hz", "0.5x"),
    ("sm_clock_hz", "2x"),
    ("sm_clock_hz", "4x"),
}
CASES = [pytest.param(c, marks=_V1) if c[0] == "v1" and c[1:] in _V1_MISSES else c for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}={c[2]}")
def test_fast_is_within_two_percent_of_detailed_on_a_what_if_variant(case):
    algo, field, factor = case
    gpu = load_gpu(WHATIF_GPU).with_overrides({field: factor})
    trace = build(algo, SHAPE, gpu)
    fast, detailed = simulate(trace, gpu, "fast"), simulate(trace, gpu, "detailed")
    assert fast.time_s == pytest.approx(detailed.time_s, rel=TOLERANCE)
    assert fast.hbm_read_bytes == pytest.approx(detailed.hbm_read_bytes, rel=TOLERANCE)
