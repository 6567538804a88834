"""The serving validation set (CPU): what it holds, that every point builds, and that the
output check compares each query head with its own K/V head."""

from __future__ import annotations

import pytest

from tilesim.hwmodels import load_gpu
from tilesim.traces import build
from tilesim.validate import serving_set
from tilesim.validate.grid import EXTERNAL_SCHEDULES


@pytest.fixture(scope="module")
def h200():
    return load_gpu("h200")


def test_the_decode_grid_covers_the_issue_and_fits_memory():
    ws = serving_set.decode_workloads()
    assert {w.seqlen_kv for w in ws} == {1024, 8192, 32768, 131072}
    assert {w.batch for w in ws} == {1, 16, 64, 256}
    assert {w.group for w in ws} == {1, 4, 8}
    assert all(w.seqlen_q == 1 and w.kv_bytes() <= serving_set.MAX_KV_BYTES for w in ws)
    # batch 1 at 128k reads 2 GiB of K and V without grouping: it is in; 256 x 128k is not
    assert any(w.batch == 1 and w.seqlen_kv == 131072 and w.group == 1 for w in ws)
    assert not any(w.batch == 256 and w.seqlen_kv == 131072 for w in ws)


def test_random_draws_are_the_same_for_a_seed():
    a = serving_set.random_decode_workloads(3, 10)
    assert a == serving_set.random_decode_workloads(3, 10)
    assert a != serving_set.random_decode_workloads(4, 10)
    assert len(a) == 10 and all(w.kv_bytes() <= serving_set.MAX_KV_BYTES for w in a)


def test_every_point_builds_with_the_config_it_runs(h200):
    points = serving_set.serving_points(h200, 0, 4)
    groups = [p.group for p in points]
    assert groups == sorted(groups, key=["decode", "decode-random", "gqa-prefill"].index)
    for p in points:
        trace = build(p.algo, p.workload, h200, p.config)
        assert trace.config == p.config.to_dict()
    prefill = [p for p in points if p.group == "gqa-prefill"]
    assert {p.algo for p in prefill} == {"v2", "v3"}
    assert {p.workload.group for p in prefill} == {1, 4, 8}
    # the peers get the same shapes; SDPA's grouped runs are timed, not predicted
    shapes = serving_set.serving_bench_shapes(0, 4)
    assert [s.workload for s in shapes] == list(dict.fromkeys(p.workload for p in points))
    assert not EXTERNAL_SCHEDULES["sdpa-flash"](prefill[-1].workload)


def test_the_output_check_reads_each_heads_own_kv_head():
    torch = pytest.importorskip("torch")
    from tilesim.kernels.reference import reference
    from tilesim.validate.gpu import timing

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 3, 64, generator=gen)
    k, v = (torch.randn(2, 2, 40, 64, generator=gen) for _ in range(2))
    right = reference(q, k, v)
    assert timing.check_output(lambda: right, q, k, v, False, {}, "fp16", out=q.clone()) < 1e-6
    # a kernel that read K/V head 0 for every query head fails the check (at the last head)
    wrong = reference(q, k[:, [0, 0, 0, 0]], v[:, [0, 0, 0, 0]])
    assert timing.check_output(lambda: wrong, q, k, v, False, {}, "fp16", out=q.clone()) > 0.1
