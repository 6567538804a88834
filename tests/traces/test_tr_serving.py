"""The serving schedules: grouped-query heads, decode's split KV and packed heads, the
bottom-right causal diagonal, the split heuristic, and the FLOP/byte formulas."""

from __future__ import annotations

import dataclasses

import pytest

from tilesim.errors import TilesimError
from tilesim.simulator import simulate
from tilesim.traces import KernelConfig, Workload, build, default_config
from tilesim.traces.counters import counters
from tilesim.traces.expand import expand
from tilesim.traces.expr import cdiv
from tilesim.traces.ir import Load, Mma, Store
from tilesim.traces.serving import is_decode, num_splits_heuristic


def loads(trace, launch, cta, tensor):
    return [
        f.op for f in expand(trace, launch, cta) if isinstance(f.op, Load) and f.op.tensor == tensor
    ]


# -- the workload -------------------------------------------------------------------------


def test_a_multi_head_workload_is_what_it_always_was():
    w = Workload(2, 8, 1024, 1024, 64, causal=True)
    assert Workload(2, 8, 1024, 1024, 64, causal=True, kv_heads=8) == w
    assert w.to_dict() == {
        "batch": 2, "heads": 8, "seqlen_q": 1024, "seqlen_kv": 1024, "head_dim": 64,
        "causal": True, "dtype": "fp16", "pass_": "fwd",
    }  # fmt: skip
    assert (w.num_kv_heads, w.group, w.causal_shift) == (8, 1, 0)
    # replacing the heads of a multi-head workload keeps it multi-head
    assert dataclasses.replace(w, heads=4).group == 1
    g = Workload(2, 8, 1, 4096, 64, kv_heads=2)
    assert g.to_dict()["kv_heads"] == 2 and Workload(**g.to_dict()) == g


def test_flops_follow_the_shared_convention():
    w = Workload(2, 4, 1000, 3000, 128)
    assert w.flops() == 4 * 2 * 4 * 1000 * 3000 * 128
    # causal: the square's half, and for N_q < N_kv (bottom-right) N_q·N_kv - N_q²/2
    square = Workload(2, 4, 1000, 1000, 128, causal=True)
    assert square.flops() == 4 * 2 * 4 * 1000 * 1000 * 128 / 2
    shifted = Workload(2, 4, 1000, 3000, 128, causal=True)
    assert shifted.flops() == 4 * 2 * 4 * 128 * (1000 * 3000 - 1000**2 / 2)
    # the backward is 2.5 forwards; grouped heads do the same matmuls
    assert dataclasses.replace(w, pass_="bwd").flops() == 2.5 * w.flops()
    assert Workload(2, 4, 1000, 3000, 128, kv_heads=1).flops() == w.flops()
    # varlen: each sequence its own length
    v = Workload(3, 4, 1, 300, 128, seqlens_kv=(100, 200, 300))
    assert v.flops() == 4 * 4 * 128 * (100 + 200 + 300)
    # the whole product, mask or no mask: an exact int
    assert square.dense_flops() == dataclasses.replace(square, causal=False).flops()
    assert isinstance(w.dense_flops(), int) and w.dense_flops() == w.flops()


def test_kv_bytes_shrink_with_the_group():
    w = Workload(4, 32, 1, 8192, 128)
    assert w.kv_bytes() == 2 * 4 * 32 * 8192 * 128 * 2
    assert Workload(4, 32, 1, 8192, 128, kv_heads=8).kv_bytes() * 4 == w.kv_bytes()
    assert Workload(2, 32, 1, 8192, 128, seqlens_kv=(100, 8192)).kv_bytes() == (
        2 * 32 * (100 + 8192) * 128 * 2
    )


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"kv_heads": 3}, r"heads \(8\) must be a multiple of kv_heads \(3\)"),
        ({"kv_heads": 16}, r"heads \(8\) must be a multiple of kv_heads \(16\)"),
        ({"kv_heads": 0}, "kv_heads must be a positive integer"),
        ({"causal": True, "seqlen_q": 300}, "the first 172 query rows would see no key"),
        ({"seqlens_kv": (128,)}, r"one KV length per sequence \(2\), got 1"),
        ({"seqlens_kv": (128, 129)}, "longer than seqlen_kv 128"),
        ({"seqlens_kv": (64, 128), "seqlen_q": 100, "causal": True}, r"seqlens_kv\[0\] = 64"),
        ({"page_size": 24}, "page_size must be 0 .* or a power of two, got 24"),
        ({"page_table": ((0,), (1,))}, "page_table needs a page_size"),
        ({"page_size": 16, "page_table": ((0,) * 8, (1,))}, "page table too short: sequence 1"),
        ({"page_size": 16, "page_table": ((0,) * 8,)}, r"one row of pages per sequence \(2\)"),
        ({"page_size": 64, "page_table": ((0, -1), (2, 3))}, r"page_table\[0\]\[1\] must be"),
        ({"seqlen_kv": 1 << 21}, "seqlen_kv must be at most 1048576"),
        ({"seqlen_q": 1 << 16, "seqlen_kv": 1 << 17}, "seqlen_q x seqlen_kv must be at most"),
    ],
)
def test_bad_serving_workloads_are_one_line_errors(kw, match):
    base = {"batch": 2, "heads": 8, "seqlen_q": 128, "seqlen_kv": 128, "head_dim": 64}
    with pytest.raises(TilesimError, match=match) as info:
        Workload(**(base | kw))
    assert "\n" not in str(info.value)


def test_a_long_cache_is_allowed_when_the_queries_are_few():
    w = Workload(1, 8, 1, 1 << 20, 128, kv_heads=1)
    assert w.seqlen_kv == 1 << 20


@pytest.mark.parametrize(
    ("algo", "kw", "match"),
    [
        ("standard", {"kv_heads": 2}, "grouped-query heads.* not standard"),
        ("v1", {"kv_heads": 2}, "grouped-query heads.* not v1"),
        ("v2", {"kv_heads": 2, "pass_": "bwd"}, "grouped-query heads.* not v2 bwd"),
        ("v1", {"causal": True, "seqlen_q": 64}, "bottom-right.* not v1"),
        ("v2", {"seqlens_kv": (128, 100)}, "varlen .* no schedule yet"),
        ("v2", {"page_size": 16}, "paged .* no schedule yet"),
    ],
)
def test_algorithms_without_a_serving_schedule_say_so(algo, kw, match, h100):
    base = {"batch": 2, "heads": 8, "seqlen_q": 128, "seqlen_kv": 128, "head_dim": 64}
    with pytest.raises(TilesimError, match=match):
        build(algo, Workload(**(base | kw)), h100)


# -- grouped-query heads: one K/V tile for the group ---------------------------------------


@pytest.mark.parametrize("algo", ["v2", "v3"])
def test_the_heads_of_a_group_read_the_same_kv_tiles(algo, h100):
    w = Workload(2, 8, 256, 512, 128, kv_heads=2, causal=True)
    trace = build(algo, w, h100)
    tensors = {t.name: t.shape for t in trace.tensors}
    assert tensors["K"] == tensors["V"] == (2, 2, 512, 128)
    assert tensors["Q"] == tensors["O"] == (2, 8, 256, 128)
    launch = trace.launches[0]
    t_r = dict(launch.grid)["m"]
    # query heads 0..3 of batch 0 are K/V head 0; 4..7 K/V head 1; batch 1 from 2 on
    for bh in range(16):
        k = loads(trace, 0, bh * t_r + 1, "K")
        assert k and {op.tile[0] for op in k} == {bh // 4}


@pytest.mark.parametrize("algo", ["v2", "v3"])
def test_grouped_heads_read_kv_from_hbm_once_per_kv_head(algo, h200):
    """L2 serves the G query heads of a group: K and V come from HBM about once."""
    mha = Workload(1, 16, 2048, 2048, 128)
    gqa = dataclasses.replace(mha, kv_heads=2)
    p_mha = simulate(build(algo, mha, h200), h200, "fast")
    p_gqa = simulate(build(algo, gqa, h200), h200, "fast")
    q_bytes = 16 * 2048 * 128 * 2
    assert p_gqa.hbm_read_bytes < 1.05 * (q_bytes + gqa.kv_bytes())
    assert p_mha.hbm_read_bytes > 0.95 * (q_bytes + mha.kv_bytes())
    assert p_gqa.matmul_flops == p_mha.matmul_flops
    assert p_gqa.time_s < 1.05 * p_mha.time_s


# -- decode: split KV, packed heads, the combine --------------------------------------------


def test_decode_packs_the_group_and_splits_the_cache(h200):
    w = Workload(1, 32, 1, 8192, 128, kv_heads=8)
    c = default_config("v2", w, h200)
    assert is_decode(w)
    # 8 K/V heads on 132 SMs: FlashAttention's 15 splits, of which 13 get blocks (5 each)
    assert c.num_splits == 13
    assert (c.block_m, c.pack_gqa, c.mma_path) == (16, True, "mma_sync")
    trace = build("v2", w, h200, c)
    split, combine = trace.launches
    assert (split.name, combine.name) == ("flash_decode", "combine")
    assert split.grid == (("m", 1), ("s", c.num_splits), ("bh", 8))  # B·H_kv, not B·H
    assert combine.grid == (("m", 1), ("bh", 8))
    # each CTA's Q block is the 4 heads of its K/V head; its splits tile the cache
    blocks = []
    for s in range(c.num_splits):
        (q,) = loads(trace, 0, s, "Q")
        assert q.nbytes == 4 * 128 * 2
        mma = next(f.op for f in expand(trace, 0, s) if isinstance(f.op, Mma))
        assert mma.m == 4
        blocks += [op.tile[1] for op in loads(trace, 0, s, "K")]
    assert blocks == list(range(cdiv(8192, c.block_n)))
    # K and V read once per K/V head, the partials written and read back
    cn = counters(trace)
    assert cn.read_bytes_by_tensor["K"] == cn.read_bytes_by_tensor["V"] == w.kv_bytes() // 2
    per_split = 8 * 4 * 128 * 4  # fp32 partial O of every query head
    assert cn.write_bytes_by_tensor["O_acc"] == cn.read_bytes_by_tensor["O_acc"]
    assert cn.write_bytes_by_tensor["O_acc"] == c.num_splits * per_split
    stores = [f.op for f in expand(trace, 1, 0) if isinstance(f.op, Store)]
    assert [s.tensor for s in stores] == ["O", "LSE"]


@pytest.mark.parametrize(
    "shape", [(1, 32, 1, 32768, 128, 8), (4, 8, 3, 5000, 64, 1), (2, 4, 5, 700, 128, 4)]
)
@pytest.mark.parametrize("causal", [False, True])
def test_split_trip_counts_cover_every_visible_block_once(shape, causal, h100):
    b, h, n_q, n_kv, d, hk = shape
    w = Workload(b, h, n_q, n_kv, d, causal=causal, kv_heads=hk)
    c = default_config("v2", w, h100).replace(num_splits=3, pack_gqa=True)
    trace = build("v2", w, h100, c)
    (grid_m, t_r), (_, splits), _ = trace.launches[0].grid
    assert splits == 3 and t_r == cdiv(n_q * h // hk, c.block_m)
    seen = []
    for s in range(3):
        seen += [op.tile[1] for op in loads(trace, 0, s * t_r, "K")]
    assert sorted(seen) == seen == list(range(cdiv(n_kv, c.block_n)))
    flops = counters(trace).launches[0].matmul_flops
    # every score of every packed row once: N_kv - (masked triangle) per row
    rows = b * h * n_q
    visible = rows * n_kv - (b * h * n_q * (n_q - 1) // 2 if causal else 0)
    if not causal:
        assert flops == 4 * visible * d
    else:
        assert flops >= 4 * visible * d  # whole blocks on the diagonal


def test_the_split_heuristic_is_flashattentions():
    # 8 Q blocks on 132 SMs: waves 8s/132; s = 33 fills two waves exactly (efficiency
    # 1.0), the fewest splits within 85% of it is 15 (120/132 = 0.91; 14: 0.85 - just under)
    assert num_splits_heuristic(8, 132, 64, 1, 0, 50 << 20, False) == 15
    # enough Q blocks already: one split; a short cache: one split
    assert num_splits_heuristic(120, 132, 64, 1, 0, 50 << 20, False) == 1
    assert num_splits_heuristic(8, 132, 4, 1, 0, 50 << 20, False) == 1
    # filled, but one K/V head larger than L2 re-read by many Q blocks: split by L2 size
    assert num_splits_heuristic(400, 132, 64, 300, 120 << 20, 50 << 20, False) == 3
    assert num_splits_heuristic(400, 132, 64, 300, 120 << 20, 50 << 20, True) == 1
    # never more splits than K/V blocks
    assert num_splits_heuristic(1, 132, 7, 1, 0, 50 << 20, False) <= 7


def test_decode_splits_until_the_gpu_is_full(h200):
    small = default_config("v2", Workload(1, 32, 1, 32768, 128, kv_heads=8), h200)
    full = default_config("v2", Workload(64, 32, 1, 32768, 128, kv_heads=8), h200)
    assert small.num_splits > 1 and full.num_splits == 1
    # a square prefill, or more query rows than one small block, keeps v2's kernel
    assert not is_decode(Workload(1, 32, 64, 64, 128))
    assert not is_decode(Workload(1, 32, 32, 4096, 128, kv_heads=8))  # 256 packed rows
    assert default_config("v2", Workload(1, 32, 1024, 1024, 128), h200).num_splits == 1


def test_splitting_decode_is_faster_than_one_cta_per_head(h200):
    w = Workload(1, 32, 1, 32768, 128, kv_heads=8)
    split = simulate(build("v2", w, h200), h200, "fast")
    one = default_config("v2", w, h200).replace(num_splits=1, pack_gqa=False)
    whole = simulate(build("v2", w, h200, one), h200, "fast")
    # (2.2x at a fixed 1.52 GHz; 1.9x with the clock model, which runs both at the MMA
    # ceiling: the 32 CTAs' latency-bound walk gains from the clock, the split one, held
    # by HBM, does not)
    assert split.time_s < whole.time_s / 1.5
    # the split schedule streams K and V at most of HBM's speed, 32 CTAs cannot
    assert w.kv_bytes() / split.time_s > 0.6 * h200.hbm_bandwidth_Bps
    assert w.kv_bytes() / whole.time_s < 0.4 * h200.hbm_bandwidth_Bps


@pytest.mark.parametrize(
    ("algo", "changes", "match"),
    [
        ("v3", {"num_splits": 2}, "schedule of the v2 forward .* not of v3"),
        ("standard", {"pack_gqa": True}, "schedule of the v2 forward"),
        ("v2", {"num_splits": 9}, "num_splits 9 is more than the 8 K/V blocks"),
    ],
)
def test_bad_split_configs_are_one_line_errors(algo, changes, match, h100):
    w = Workload(1, 4, 1, 1024, 64, kv_heads=4)
    config = default_config(algo, w, h100).replace(block_n=128, **changes)
    with pytest.raises(TilesimError, match=match):
        build(algo, w, h100, config)


def test_config_fields_check_their_values():
    with pytest.raises(TilesimError, match="num_splits must be an integer from 1 to 128"):
        KernelConfig(16, 128, 4, 3, num_splits=0)
    with pytest.raises(TilesimError, match="pack_gqa must be true or false"):
        KernelConfig(16, 128, 4, 3, pack_gqa=1)
    assert "num_splits" not in KernelConfig(16, 128, 4, 3).to_dict()
    assert KernelConfig(16, 128, 4, 3, num_splits=4).to_dict()["num_splits"] == 4
