"""The schedules of PyTorch SDPA's math and flash backends, against what they launch.

The launch lists, grids and cuBLAS tiles are the torch profiler's records on the H200
(experiments/2026-12-01-sdpa-kernels/sdpa_kernels.json); byte and FMA counts are
worked out by hand for a small shape.
"""

from __future__ import annotations

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import build_external, sdpa_flash, sdpa_math
from tilesim.traces.config import NAMED_CONFIGS
from tilesim.traces.counters import counters
from tilesim.traces.workload import Workload

H200 = load_gpu("h200")

NON_CAUSAL = [
    "to_fp32_q",
    "to_fp32_k",
    "to_fp32_v",
    "scale_q",
    "scale_k",
    "qk",
    "softmax_warp",
    "isneginf",
    "all_rows",
    "zero_scalar",
    "where",
    "attn_to_input",
    "pv",
    "out_to_input",
]
MASK = ["mask_ones", "mask_tril", "mask_scalar0", "mask_scalar1", "mask_where"]


def names(trace) -> list[str]:
    return [launch.name for launch in trace.launches]


def test_math_launches_are_the_profiled_kernels_in_order():
    w = Workload(1, 2, 256, 256, 64)
    assert names(sdpa_math.build(w, H200)) == NON_CAUSAL
    causal = names(sdpa_math.build(Workload(1, 2, 256, 256, 64, causal=True), H200))
    # the mask is built after q's scaling, added to S after the first GEMM
    expected = NON_CAUSAL[:4] + MASK + NON_CAUSAL[4:6] + ["add_mask"] + NON_CAUSAL[6:]
    assert causal == expected


def test_math_splits_tensors_of_more_than_2_gib_as_tensoriterator_does():
    # 64 heads x 4096^2 fp32 scores: 4 GiB, two launches of 2^29 elements (profiled)
    trace = sdpa_math.build(Workload(4, 16, 4096, 4096, 128, causal=True), H200)
    got = names(trace)
    for name in ("add_mask", "isneginf", "where", "attn_to_input"):
        assert f"{name}_0" in got and f"{name}_1" in got and f"{name}_2" not in got
    grids = {launch.name: launch.num_ctas for launch in trace.launches}
    # the profiler's grids: 2097152 CTAs of the broadcast add, 524288 of isneginf,
    # 65536 of each casting copy, one row of 1024 threads per CTA for the softmax
    assert grids["add_mask_0"] == 2097152 and grids["isneginf_0"] == 524288
    assert grids["to_fp32_q"] == 65536 and grids["softmax_reg"] == 262144
    assert grids["all_rows"] == 16384 and grids["mask_tril"] == 16384
    assert sdpa_math.index_parts(2**30, 4) == 2 and sdpa_math.index_parts(2**29, 4) == 1


def test_math_bytes_and_fma_by_hand():
    bh, n, d, e = 2, 256, 64, 2
    w = Workload(1, bh, n, n, d)
    c = {lc.name: lc for lc in counters(sdpa_math.build(w, H200)).launches}
    qkv, scores = bh * n * d, bh * n * n
    for x in ("q", "k", "v"):
        assert (c[f"to_fp32_{x}"].read_bytes, c[f"to_fp32_{x}"].write_bytes) == (
            qkv * e,
            qkv * 4,
        )
    assert (c["scale_q"].read_bytes, c["scale_q"].write_bytes) == (qkv * 4, qkv * 4)
    assert (c["softmax_warp"].read_bytes, c["softmax_warp"].write_bytes) == (
        scores * 4,
        scores * 4,
    )
    assert c["softmax_warp"].exp_count == scores  # rows of 256: the warp kernel's width
    assert (c["isneginf"].read_bytes, c["isneginf"].write_bytes) == (scores * 4, scores)
    assert (c["all_rows"].read_bytes, c["all_rows"].write_bytes) == (scores, bh * n)
    assert (c["where"].read_bytes, c["where"].write_bytes) == (scores * 4, scores * 4)
    assert (c["attn_to_input"].read_bytes, c["attn_to_input"].write_bytes) == (
        scores * 4,
        scores * e,
    )
    assert (c["out_to_input"].read_bytes, c["out_to_input"].write_bytes) == (qkv * 4, qkv * e)
    # S = Q K^T: each CTA reads its Q rows and K rows (all d) once; writes its S tile
    t = sdpa_math.gemm_tile(n, n, bh, H200)
    tm, tn = n // t.block_m, n // t.block_n
    assert c["qk"].read_bytes == bh * (tn * n * d + tm * n * d) * 4
    assert c["qk"].write_bytes == scores * 4
    # FFMA lane-ops: B*H*N^2*d, over the tile's share of the FP32 pipe (per k-step of 8)
    milli = round(1000 * sdpa_math.fma_share(t))
    step = t.block_m * t.block_n * 8 * 1000 // milli
    assert c["qk"].fp32_ops == bh * tm * tn * (d // 8) * step
    assert bh * n * n * d * 1000 / milli == pytest.approx(c["qk"].fp32_ops, rel=1e-3)
    p = sdpa_math.gemm_tile(n, d, bh, H200)
    assert c["pv"].write_bytes == qkv * 4
    assert c["pv"].read_bytes == bh * (-(-d // p.block_n) * n * n + -(-n // p.block_m) * n * d) * 4
    assert sdpa_math.fma_count(w) == 2 * bh * n * n * d


def test_the_causal_mask_is_built_once_and_broadcast_over_the_heads():
    bh, n = 6, 512
    c = {
        lc.name: lc
        for lc in counters(sdpa_math.build(Workload(2, 3, n, n, 128, causal=True), H200)).launches
    }
    assert c["mask_ones"].write_bytes == n * n
    assert (c["mask_tril"].read_bytes, c["mask_tril"].write_bytes) == (n * n, n * n)
    assert (c["mask_where"].read_bytes, c["mask_where"].write_bytes) == (n * n, 4 * n * n)
    # S += mask: S read and written, the mask read by every head (L2 serves the repeats)
    assert c["add_mask"].read_bytes == 2 * 4 * bh * n * n
    assert c["add_mask"].write_bytes == 4 * bh * n * n


@pytest.mark.parametrize(
    ("m", "n", "batch", "tile"),
    [
        # (m, n, batch) of the profiled SGEMMs and the tile cuBLAS ran (10 of 14 agree)
        (4096, 4096, 64, (128, 128)),
        (2048, 2048, 256, (128, 128)),
        (300, 64, 1, (32, 32)),
        (700, 700, 15, (64, 64)),
        (2500, 2500, 8, (128, 128)),
        (300, 300, 1, (32, 32)),
        (4096, 128, 64, (128, 128)),
        (2048, 64, 256, (128, 64)),
        (1000, 64, 2, (32, 32)),
        (2500, 128, 8, (64, 64)),
    ],
)
def test_the_sgemm_tile_rule_matches_the_profiled_choices(m, n, batch, tile):
    t = sdpa_math.gemm_tile(m, n, batch, H200)
    assert (t.block_m, t.block_n) == tile


def test_the_sgemm_efficiency_is_the_microbenchmark_scaled_by_issue_share():
    big = sdpa_math.GEMM_TILES[0]
    small = sdpa_math.GEMM_TILES[-1]
    assert sdpa_math.fma_share(sdpa_math.SGEMM_REFERENCE) == pytest.approx(0.804)
    assert 0.6 < sdpa_math.fma_share(small) < sdpa_math.fma_share(big) < 0.81


def test_every_math_launch_is_reported_as_estimated():
    w = Workload(1, 2, 256, 256, 64, causal=True)
    pred = simulate(build_external("sdpa-math", w, H200), H200)
    assert [x["launch"] for x in pred.estimated_launches] == [lp.name for lp in pred.launches]
    assert any("cuBLAS SGEMM" in x["why"] for x in pred.estimated_launches)
    assert pred.time_s > 0


@pytest.mark.parametrize(
    ("shape", "splits"),
    [
        # (B, H, N, d, causal) and the split count of the profiled grid (grid.y)
        ((1, 2, 1000, 64, True), 4),
        ((3, 5, 700, 128, False), 3),
        ((1, 1, 300, 64, False), 2),
        ((4, 16, 4096, 128, False), 1),
        ((2, 4, 2500, 128, True), 1),
        ((5, 3, 1234, 128, False), 1),
    ],
)
def test_flash_splits_kv_as_the_profiled_kernels(shape, splits):
    b, h, n, d, causal = shape
    w = Workload(b, h, n, n, d, causal=causal)
    assert sdpa_flash.num_splits(w, H200) == splits
    trace = build_external("sdpa-flash", w, H200)
    if splits == 1:
        # FlashAttention-2's kernel with its tiles: tilesim's v2 schedule
        assert names(trace) == ["flash_v2"]
        assert trace.config == NAMED_CONFIGS["fa2"].make(w, H200).to_dict()
    else:
        assert names(trace) == ["flash_fwd_splitkv", "flash_fwd_splitkv_combine"]
        grid = dict(trace.launches[0].grid)
        assert grid == {"m": -(-n // 64), "s": splits, "bh": b * h}


def test_flash_split_bytes_by_hand():
    w = Workload(1, 1, 300, 300, 64)  # 2 splits of 256-row K/V blocks
    c = {lc.name: lc for lc in counters(build_external("sdpa-flash", w, H200)).launches}
    rows, d = 300, 64
    split = c["flash_fwd_splitkv"]
    # every (Q block, split) CTA writes float32 partial rows of O and their LSE
    assert split.write_bytes == 2 * rows * (d + 1) * 4
    # Q once per split; each of the 5 Q blocks reads K and V once over its two splits
    # (split 0 the first 256 rows, split 1 the 44 past them)
    assert split.read_bytes == 2 * rows * d * 2 + 5 * 2 * rows * d * 2
    combine = c["flash_fwd_splitkv_combine"]
    assert combine.read_bytes == 2 * rows * (d + 1) * 4
    assert combine.write_bytes == rows * d * 2 + rows * 4


def test_external_schedules_are_forward_fp16_bf16_only():
    with pytest.raises(TilesimError, match="forward schedule"):
        build_external("sdpa-math", Workload(1, 1, 128, 128, 64, pass_="bwd"), H200)
    with pytest.raises(TilesimError, match="unknown external kernel"):
        build_external("sdpa-cudnn", Workload(1, 1, 128, 128, 64), H200)
