"""The random validation set: drawn by a seed, off the grid, cheap to time."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.validate import random_set

H200 = load_gpu("h200")


@pytest.fixture(scope="module")
def points():
    return random_set.random_points(H200, seed=1, count=180)


def test_the_same_seed_draws_the_same_shapes_and_another_seed_others(points):
    again = random_set.random_points(H200, seed=1, count=180)
    assert [p.label for p in again] == [p.label for p in points]
    other = random_set.random_points(H200, seed=2, count=180)
    assert {p.label for p in other} != {p.label for p in points}


def test_every_kind_gets_its_share_and_every_point_runs_the_default(points):
    kinds = Counter((p.algo, p.workload.pass_) for p in points)
    assert kinds == {k: 30 for k in random_set.KINDS}
    for p in points:
        assert p.config == default_config(p.algo, p.workload, H200)


def test_the_shapes_are_off_the_grid(points):
    ws = [p.workload for p in points]
    ns = [w.seqlen_q for w in ws]
    assert sum(n & (n - 1) == 0 for n in ns) <= len(ns) // 10  # mostly not powers of two
    assert min(ns) >= random_set.MIN_SEQLEN and max(ns) <= random_set.MAX_SEQLEN
    assert max(ns) > 8192 and min(ns) < 512
    assert all(1 <= w.batch <= 64 and 1 <= w.heads <= 64 for w in ws)
    assert {w.head_dim for w in ws} == {64, 128} and {w.causal for w in ws} == {False, True}
    assert {w.dtype for w in ws} == {"fp16", "bf16", "fp8"}
    assert {p.algo for p in points if p.workload.dtype == "fp8"} == {"v3"}
    # some grids leave SMs idle
    assert any(w.batch * w.heads * math.ceil(w.seqlen_q / 128) < H200.sm_count for w in ws)


def test_every_point_is_within_the_time_and_memory_bounds(points):
    assert all(random_set._affordable(p.algo, p.workload, H200) for p in points)


def test_an_ampere_gpu_draws_no_v3():
    pts = random_set.random_points(load_gpu("a100"), seed=3, count=25)
    assert len(pts) == 25 and all(p.algo != "v3" for p in pts)


@pytest.mark.parametrize(("seed", "count"), [(-1, 10), (0, 0), (0, 10_001)])
def test_bad_seed_or_count_is_one_line(seed, count):
    with pytest.raises(TilesimError, match="--seed|--points"):
        random_set.random_points(H200, seed, count)


def test_external_shapes_alternate_kernels_and_repeat_by_seed():
    shapes = random_set.external_shapes(H200, seed=41, count=40)
    again = random_set.external_shapes(H200, seed=41, count=40)
    assert [(s.impls, s.workload) for s in again] == [(s.impls, s.workload) for s in shapes]
    other = random_set.external_shapes(H200, seed=42, count=40)
    assert {s.workload for s in other} != {s.workload for s in shapes}
    assert [s.impls for s in shapes] == [("sdpa-flash",), ("sdpa-math",)] * 20
    only = random_set.external_shapes(H200, seed=41, count=5, impls=("sdpa-math",))
    assert all(s.impls == ("sdpa-math",) for s in only)


def test_external_shapes_are_drawn_as_the_random_set_and_fit_their_bounds():
    from tilesim.traces import build_external
    from tilesim.validate.gpu.timing import math_scratch_bytes

    shapes = random_set.external_shapes(H200, seed=7, count=120)
    ws = [s.workload for s in shapes]
    assert all(w.pass_ == "fwd" and w.dtype in ("fp16", "bf16") for w in ws)
    assert all(1 <= w.batch <= 64 and 1 <= w.heads <= 64 for w in ws)
    assert {w.head_dim for w in ws} == {64, 128} and {w.causal for w in ws} == {False, True}
    ns = [w.seqlen_q for w in ws]
    assert min(ns) >= random_set.MIN_SEQLEN and max(ns) <= random_set.MAX_SEQLEN
    for s in shapes:
        assert random_set._external_affordable(s.impls[0], s.workload, H200)
        if s.impls == ("sdpa-math",):
            assert math_scratch_bytes(s.workload) <= random_set.MAX_SCRATCH_BYTES
        # every draw has its schedule: FA2's tiles or its split-KV pair, or the math launches
        assert build_external(s.impls[0], s.workload, H200).launches


def test_external_shapes_refuse_a_kernel_without_a_schedule():
    with pytest.raises(TilesimError, match="no random set for 'sdpa-cudnn'"):
        random_set.external_shapes(H200, seed=1, count=2, impls=("sdpa-cudnn",))
