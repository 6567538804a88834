"""Counters walked from the IR, held against closed forms and against a brute-force walk."""

from __future__ import annotations

import pytest

import tilesim.traces.counters as counters_mod
from tilesim.traces import KernelConfig, Workload, build, default_config
from tilesim.traces.config import named_config
from tilesim.traces.counters import counters
from tilesim.traces.expand import expand
from tilesim.traces.expr import cdiv
from tilesim.traces.ir import Load, Mma, Store, Vector
from tilesim.traces.standard import SOFTMAX_FWD_MAX_BLOCK, SOFTMAX_MAX_BLOCK
from tilesim.traces.tiles import padded_row

ALGOS = ("standard", "v1", "v2", "v3")


def full_flops(w: Workload) -> int:
    return 4 * w.batch * w.heads * w.seqlen_q * w.seqlen_kv * w.head_dim


def causal_block_flops(w: Workload, bm: int, bn: int) -> int:
    """FLOPs of the (Q block, K block) pairs with at least one visible score (causal,
    bottom-right: row r sees columns c <= r + N_kv - N_q)."""
    total = 0
    for m in range(cdiv(w.seqlen_q, bm)):
        rows = min(bm, w.seqlen_q - bm * m)
        last_row = bm * m + rows - 1
        for j in range(cdiv(w.seqlen_kv, bn)):
            if bn * j <= last_row + w.seqlen_kv - w.seqlen_q:
                total += 4 * rows * min(bn, w.seqlen_kv - bn * j) * w.head_dim
    return w.batch * w.heads * total


def brute_force(trace):
    """Counters from expanding every CTA of every launch, op by op."""
    flops = exp = fp32 = 0
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    for li, launch in enumerate(trace.launches):
        for c in range(launch.num_ctas):
            for f in expand(trace, li, c):
                op = f.op
                if isinstance(op, Mma):
                    flops += 2 * op.m * op.n * op.k
                elif isinstance(op, Vector):
                    exp += op.exp
                    fp32 += op.fp32
                elif isinstance(op, Load):
                    reads[op.tensor] = reads.get(op.tensor, 0) + op.nbytes
                elif isinstance(op, Store):
                    writes[op.tensor] = writes.get(op.tensor, 0) + op.nbytes
    return flops, exp, fp32, reads, writes


# -- FLOPs and exponentials ----------------------------------------------------------


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize(
    "shape",
    [
        (2, 4, 1024, 1024, 64),
        (1, 2, 2048, 2048, 128),
        (1, 1, 1000, 1000, 128),
        (2, 2, 512, 1536, 64),
    ],
)
def test_flops_and_exp_equal_closed_form_non_causal(algo, shape, h100):
    w = Workload(*shape)
    c = counters(build(algo, w, h100))
    assert c.matmul_flops == full_flops(w)
    assert c.exp_count == w.batch * w.heads * w.seqlen_q * w.seqlen_kv


@pytest.mark.parametrize("algo", ALGOS)
def test_partial_tiles_cost_exactly_the_full_shape(algo, h100):
    # N = 1000 with 128-row blocks: the last tile has 104 rows, never 128
    w = Workload(2, 3, 1000, 1000, 128)
    config = default_config(algo, w, h100).replace(block_m=128, block_n=128, num_stages=1)
    trace = build(algo, w, h100, config)
    c = counters(trace)
    assert c.matmul_flops == full_flops(w)
    assert c.exp_count == 2 * 3 * 1000 * 1000
    # Q is read in 8 blocks, and together they are exactly Q once (no rounding up)
    q_once = 2 * 3 * 1000 * 128 * 2
    if algo in ("v2", "v3"):
        assert c.read_bytes_by_tensor["Q"] == q_once
        assert c.write_bytes_by_tensor["O"] == q_once


@pytest.mark.parametrize(
    ("algo", "shape"),
    [
        *(
            (a, s)
            for a in ("v1", "v2", "v3")
            for s in ((1, 2, 1024, 1024, 64), (2, 1, 1000, 1000, 128))
        ),
        ("v2", (1, 1, 700, 1300, 64)),  # the diagonal shifted right by 600 (bottom-right)
        ("v3", (1, 1, 700, 1300, 64)),
        ("v2", (1, 1, 1, 1300, 64)),  # decode: one row sees every key
    ],
)
def test_causal_flops_are_exactly_the_unmasked_blocks(algo, shape, h100):
    w = Workload(*shape, causal=True)
    trace = build(algo, w, h100)
    cfg = trace.config
    c = counters(trace)
    assert c.matmul_flops == causal_block_flops(w, cfg["block_m"], cfg["block_n"])
    # exponentials follow the same blocks (masked scores of a diagonal block are computed;
    # a split-KV combine launch adds its own)
    attention = c.launches[0]
    assert attention.exp_count * 4 * w.head_dim == attention.matmul_flops == c.matmul_flops


@pytest.mark.parametrize("algo", ("v1", "v2", "v3"))
def test_causal_is_about_half_at_large_n(algo, h100):
    w = Workload(1, 1, 16384, 16384, 128, causal=True)
    ratio = counters(build(algo, w, h100)).matmul_flops / full_flops(w)
    # (T + 1) / 2T for T diagonal-aligned blocks: just above one half
    assert 0.5 < ratio < 0.51


def test_standard_causal_is_full_gemm_work(h100):
    # PyTorch's math path masks S, it does not skip: the GEMMs are full when causal
    w = Workload(1, 2, 1024, 1024, 64, causal=True)
    c = counters(build("standard", w, h100))
    assert c.matmul_flops == full_flops(w)
    nc = counters(build("standard", Workload(1, 2, 1024, 1024, 64), h100))
    assert nc.exp_count == 2 * 1024 * 1024
    # ... but a causal softmax row r runs at the narrowest of the widths 256, 512, 1024
    # (block/4, block/2, block) that holds its r + 1 scores: exp2 and FP32 lanes follow it
    lanes = sum(next(x for x in (256, 512, 1024) if x >= r + 1) for r in range(1024))
    assert lanes == 256 * 256 + 256 * 512 + 512 * 1024
    assert c.exp_count == 2 * lanes
    assert c.fp32_ops - nc.fp32_ops == 2 * 5 * (lanes - 1024 * 1024)  # 4 + the mask select
    # ... and its loads read the r + 1 scores it sees, rounded up to 8 columns (16 bytes)
    read = sum(-(-(r + 1) // 8) * 8 for r in range(1024))
    unread = 2 * (1024 * 1024 - read) * w.elem_bytes
    assert c.no_reuse_read_bytes == nc.no_reuse_read_bytes - unread
    assert c.no_reuse_write_bytes == nc.no_reuse_write_bytes


def test_standard_causal_rows_beyond_the_block_read_s_once(h100):
    # rows of N = 1000 pad to a block of 1024; the last rows see 1000 scores, not 1024
    w = Workload(1, 1, 1000, 1000, 64, causal=True)
    c = counters(build("standard", w, h100))
    lanes = sum(min(1000, next(x for x in (256, 512, 1024) if x >= r + 1)) for r in range(1000))
    assert c.exp_count == lanes
    assert c.read_bytes_by_tensor["S"] == sum(-(-(r + 1) // 8) * 8 for r in range(1000)) * 2


def test_standard_two_pass_rows_exponentiate_twice(h100):
    # a non-causal row longer than the register block (16384) takes two passes in chunks
    # of 8192; both exponentiate every score of the row
    n = SOFTMAX_FWD_MAX_BLOCK + 1
    full = counters(build("standard", Workload(1, 1, 16, n, 64), h100))
    assert full.exp_count == 16 * 2 * n
    # causal rows take two passes past 8192 scores, over the chunks (of 8192) holding the
    # scores a row sees: rows r < 8192 the first chunk, the last row both
    n = SOFTMAX_MAX_BLOCK + 1
    causal = counters(build("standard", Workload(1, 1, n, n, 64, causal=True), h100))
    chunk = SOFTMAX_MAX_BLOCK
    assert causal.exp_count == sum(2 * min(n, -(-(r + 1) // chunk) * chunk) for r in range(n))
    # each pass reads the scores the row sees, rounded up to 8 columns
    assert causal.read_bytes_by_tensor["S"] == 2 * sum(-(-(r + 1) // 8) * 8 for r in range(n)) * 2


# -- HBM bytes -------------------------------------------------------------------------


def standard_bytes(w: Workload, bm: int, bn: int, passes: int = 1) -> tuple[int, int]:
    bh, e = w.batch * w.heads, w.elem_bytes
    tr, tc = cdiv(w.seqlen_q, bm), cdiv(w.seqlen_kv, bn)
    q = bh * w.seqlen_q * w.head_dim * e
    kv = bh * w.seqlen_kv * w.head_dim * e
    s = bh * w.seqlen_q * padded_row(w.seqlen_kv) * e  # rows of S and P padded to 16
    reads = tc * q + tr * kv + passes * s + s + tr * kv  # qk: Q, K; softmax: S; pv: P, V
    writes = s + s + q  # S, P, O
    return reads, writes


@pytest.mark.parametrize("n", [1000, 2048])
def test_standard_bytes_equal_formula(n, h100):
    w = Workload(2, 2, n, n, 64)
    trace = build("standard", w, h100)
    c = counters(trace)
    reads, writes = standard_bytes(w, trace.config["block_m"], trace.config["block_n"])
    assert (c.no_reuse_read_bytes, c.no_reuse_write_bytes) == (reads, writes)


def test_standard_bytes_grow_as_n_squared(h100):
    # 4096 -> 8192: both rows fit the softmax's one-pass register block
    small = counters(build("standard", Workload(1, 1, 4096, 4096, 128), h100))
    large = counters(build("standard", Workload(1, 1, 8192, 8192, 128), h100))
    ratio = large.no_reuse_hbm_bytes / small.no_reuse_hbm_bytes
    assert 3.95 < ratio <= 4.0
    # compulsory is Theta(N d + N^2) too: S and P written, Q, K, V read and O written once
    for n, c in ((4096, small), (8192, large)):
        assert c.compulsory_hbm_bytes == 2 * n * n * 2 + 4 * n * 128 * 2


@pytest.mark.parametrize(
    ("n_kv", "passes"), [(SOFTMAX_FWD_MAX_BLOCK, 1), (SOFTMAX_FWD_MAX_BLOCK + 1, 2)]
)
def test_standard_long_rows_are_read_twice(n_kv, passes, h100):
    # a row longer than the softmax's register block takes a max/sum pass, then a write pass
    w = Workload(1, 1, 16, n_kv, 64)
    trace = build("standard", w, h100)
    c = counters(trace)
    reads, writes = standard_bytes(w, trace.config["block_m"], trace.config["block_n"], passes)
    assert (c.no_reuse_read_bytes, c.no_reuse_write_bytes) == (reads, writes)


def v1_bytes(w: Workload, bm: int, bn: int) -> tuple[int, int]:
    """Algorithm 1, non-causal: K, V once; per K/V block, Q, the fp32 running O (Acc), l, m
    read and Acc, l, m written; O written once at the end."""
    bh, e, n, d = w.batch * w.heads, w.elem_bytes, w.seqlen_q, w.head_dim
    tc = cdiv(w.seqlen_kv, bn)
    stats = 2 * n * 4
    acc = n * d * 4
    reads = bh * (2 * w.seqlen_kv * d * e + tc * (n * d * e + acc + stats))
    writes = bh * ((acc + stats) * (tc + 1) + n * d * e)  # + the initialisation of Acc, l, m
    return reads, writes


@pytest.mark.parametrize("n", [1000, 4096])
def test_v1_bytes_equal_formula(n, h100):
    w = Workload(2, 2, n, n, 64)
    trace = build("v1", w, h100, named_config("fa1-algorithm1", "v1", w, h100))
    c = counters(trace)
    assert (c.no_reuse_read_bytes, c.no_reuse_write_bytes) == v1_bytes(
        w, trace.config["block_m"], trace.config["block_n"]
    )


@pytest.mark.parametrize("n", [1000, 4096])
@pytest.mark.parametrize("causal", [False, True])
def test_v1_released_bytes_equal_formula(n, causal, h100):
    """The released kernel: K, V once per split (each of a head's CTAs loads every block); per
    K/V block every row's Q, and its fp32 O and lse
    read back (not on the first block) and written (O itself on the last); l = 1 once."""
    w = Workload(2, 2, n, n, 64, causal=causal)
    cfg = default_config("v1", w, h100)
    assert (cfg.v1_kernel, cfg.block_m, cfg.block_n) == ("released", 16, 256)
    c = counters(build("v1", w, h100, cfg))
    bh, d, e, bm, bn = 4, 64, 2, cfg.block_m, cfg.block_n
    tc = cdiv(n, bn)
    # rows each K/V block's walk visits: every row, or causal those of its steps from the
    # first one that reaches the block
    rows = [n - (bn * j // bm) * bm if causal else n for j in range(tc)]
    kv = cfg.num_splits * bh * n * d * e
    assert c.read_bytes_by_tensor["K"] == c.read_bytes_by_tensor["V"] == kv
    assert c.read_bytes_by_tensor["Q"] == bh * sum(rows) * d * e
    assert c.read_bytes_by_tensor["Acc"] == bh * sum(rows[1:]) * d * 4
    assert c.read_bytes_by_tensor["M"] == bh * sum(rows[1:]) * 4
    assert c.write_bytes_by_tensor["Acc"] + bh * n * d * 4 == bh * sum(rows) * d * 4
    assert c.write_bytes_by_tensor["O"] == bh * n * d * e
    assert c.write_bytes_by_tensor["M"] == bh * sum(rows) * 4
    assert c.write_bytes_by_tensor["L"] == bh * n * 4


@pytest.mark.parametrize("d", [64, 128])
def test_v1_bytes_scale_as_n2_d2_over_m(d, h100):
    """Theorem 2 of the FlashAttention paper: Theta(N^2 d^2 / M) with B_c = M / 4d.

    M is the shared memory in elements; B_r = min(B_c, d). Doubling M halves the
    traffic, doubling N quadruples it, and bytes / (N^2 d^2 e / M) stays near 20
    (Q (2 B) and the fp32 running O (4 B) read, O written (4 B), once per K/V block:
    10 N d bytes per block, N / B_c = 4 N d / M blocks).
    """
    total = {}
    for m_bytes in (64 * 1024, 128 * 1024):
        m = m_bytes // 2
        bc = m // (4 * d)
        config = KernelConfig(min(bc, d), bc, 4, 1)
        for n in (4096, 8192):
            w = Workload(1, 1, n, n, d)
            c = counters(build("v1", w, h100, config))
            assert c.no_reuse_hbm_bytes == sum(v1_bytes(w, min(bc, d), bc))
            total[m, n] = c.no_reuse_hbm_bytes
            # the lower-order terms (K, V once; l, m; the initialisation) add a few %
            assert 20 <= c.no_reuse_hbm_bytes / (n * n * d * d * 2 / m) < 22
    (m1, m2) = sorted({m for m, _ in total})
    for n in (4096, 8192):
        assert total[m1, n] / total[m2, n] == pytest.approx(2, rel=0.05)
    for m in (m1, m2):
        assert total[m, 8192] / total[m, 4096] == pytest.approx(4, rel=0.03)


@pytest.mark.parametrize("algo", ("v2", "v3"))
@pytest.mark.parametrize("shape", [(2, 2, 4096, 4096, 128), (1, 3, 1000, 1500, 64)])
def test_flash_v2_v3_read_kv_once_per_q_block(algo, shape, h100):
    w = Workload(*shape)
    trace = build(algo, w, h100)
    c = counters(trace)
    bh, e, d = w.batch * w.heads, w.elem_bytes, w.head_dim
    passes = cdiv(w.seqlen_q, trace.config["block_m"])
    assert c.read_bytes_by_tensor["K"] == passes * bh * w.seqlen_kv * d * e
    assert c.read_bytes_by_tensor["V"] == passes * bh * w.seqlen_kv * d * e
    assert c.read_bytes_by_tensor["Q"] == bh * w.seqlen_q * d * e
    assert c.write_bytes_by_tensor == {"O": bh * w.seqlen_q * d * 2, "LSE": bh * w.seqlen_q * 4}


def test_compulsory_bytes_per_algorithm(h100):
    w = Workload(2, 2, 1024, 1024, 64)
    q = 2 * 2 * 1024 * 64 * 2
    s = 2 * 2 * 1024 * 1024 * 2
    stat = 2 * 2 * 1024 * 4
    c = {a: counters(build(a, w, h100)) for a in ALGOS}
    algorithm1 = counters(build("v1", w, h100, named_config("fa1-algorithm1", "v1", w, h100)))
    # standard: S and P are written first, so no compulsory read of them
    assert c["standard"].compulsory_read_bytes == 3 * q
    assert c["standard"].compulsory_write_bytes == 2 * s + q
    # Algorithm 1: the fp32 running O (Acc, twice Q's bytes), l, m are initialised before
    # they are read
    assert algorithm1.compulsory_read_bytes == 3 * q
    assert algorithm1.compulsory_write_bytes == q + 2 * q + 2 * stat
    # the released v1: the first K/V block writes Acc and lse (M) before any block reads them
    assert c["v1"].compulsory_read_bytes == 3 * q
    assert c["v1"].compulsory_write_bytes == q + 2 * q + 2 * stat
    for algo in ("v2", "v3"):
        assert c[algo].compulsory_read_bytes == 3 * q
        assert c[algo].compulsory_write_bytes == q + stat
    for algo in ALGOS:
        assert c[algo].no_reuse_hbm_bytes >= c[algo].compulsory_hbm_bytes


def test_fp8_halves_input_bytes_not_output(h100):
    w16 = Workload(1, 2, 1024, 1024, 128)
    w8 = Workload(1, 2, 1024, 1024, 128, dtype="fp8")
    c16, c8 = counters(build("v3", w16, h100)), counters(build("v3", w8, h100))
    r8, r16 = c8.read_bytes_by_tensor, c16.read_bytes_by_tensor
    for t in ("Q", "K"):
        assert r8[t] * 2 == r16[t]
    # fp8 V is transposed first (one read of V, one write of V^T); then the attention
    # kernel reads its (transposed) V tiles, half the fp16 bytes
    v_bytes = w8.batch * w8.heads * w8.seqlen_kv * w8.head_dim
    assert r8["V"] + r8.get("VT", 0) == v_bytes + r16["V"] // 2
    writes8 = dict(c8.write_bytes_by_tensor)
    assert writes8.pop("VT") == v_bytes
    assert writes8 == c16.write_bytes_by_tensor
    assert c8.matmul_flops == c16.matmul_flops


# -- the vectorised walk against a brute-force one -----------------------------------


CASES = [
    ("standard", {}, None),
    ("standard", {"causal": True, "seqlen_q": 200, "seqlen_kv": 333}, None),
    ("v1", {}, None),
    ("v1", {"causal": True}, None),
    ("v1", {"causal": True, "seqlen_q": 333, "seqlen_kv": 333}, {"num_stages": 2}),
    ("v2", {}, None),
    ("v2", {"causal": True, "seqlen_q": 200, "seqlen_kv": 333}, None),
    ("v2", {"heads": 4, "kv_heads": 2, "causal": True, "seqlen_q": 100}, None),
    # the decode kernel: heads packed, KV split three ways, the combine launch
    ("v2", {"heads": 4, "kv_heads": 1, "seqlen_q": 2}, {"num_splits": 3, "pack_gqa": True}),
    ("v2", {"causal": True, "seqlen_q": 70}, {"num_splits": 2}),
    ("v3", {"causal": True}, None),
    ("v3", {"seqlen_q": 333}, {"pingpong": True, "num_stages": 3}),
    ("v3", {"dtype": "fp8", "seqlen_q": 200, "seqlen_kv": 333}, {"persistent": True}),
    ("v3", {"causal": True}, {"warp_specialize": False, "pingpong": False, "num_warps": 4}),
]


@pytest.mark.parametrize("algo,shape,changes", CASES)
def test_counters_match_brute_force(algo, shape, changes, h100, monkeypatch):
    monkeypatch.setattr(counters_mod, "MAX_PAIRS", 7)  # exercise the chunked walk too
    kw = {"batch": 1, "heads": 2, "seqlen_q": 300, "seqlen_kv": 300, "head_dim": 64}
    w = Workload(**(kw | shape))
    config = default_config(algo, w, h100)
    config = config.replace(block_m=64 if algo != "v3" else 128, block_n=64, **(changes or {}))
    trace = build(algo, w, h100, config)
    c = counters(trace)
    flops, exp, fp32, reads, writes = brute_force(trace)
    assert (c.matmul_flops, c.exp_count, c.fp32_ops) == (flops, exp, fp32)
    assert c.read_bytes_by_tensor == reads
    assert c.write_bytes_by_tensor == writes


def test_counters_of_a_large_grid_are_quick(h100):
    # standard at N=16k: 2 x 10^5 CTAs per GEMM launch with partial tiles, walked as arrays
    import time

    w = Workload(1, 16, 16000, 16000, 128)
    start = time.perf_counter()
    c = counters(build("standard", w, h100))
    assert c.matmul_flops == full_flops(w)
    assert time.perf_counter() - start < 10  # brute force would take hours
