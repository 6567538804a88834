"""Backward-pass schedules: counters against closed forms, fwd_bwd, files, and the engine."""

from __future__ import annotations

import dataclasses

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import KernelConfig, Workload, build, default_config, kept_bytes, load, save
from tilesim.traces.config import named_config, smem_bytes
from tilesim.traces.counters import counters
from tilesim.traces.expand import expand
from tilesim.traces.expr import cdiv
from tilesim.traces.ir import Load, Mma, Store, Vector
from tilesim.traces.standard import softmax_plan
from tilesim.traces.tiles import padded_row

BWD_ALGOS = ("standard", "v1", "v2")
# matmul FLOPs per (B, H, N_q, N_kv, d) of the backward schedules, non-causal:
# standard 4 GEMMs, v1 5 (Algorithm 4), v2 4 in dK/dV + 3 in dQ (S, dP recomputed)
BWD_FLOPS_PER_UNIT = {"standard": 8, "v1": 10, "v2": 14}


def bwd(shape, causal=False, pass_="bwd"):
    return Workload(*shape, causal=causal, pass_=pass_)


def fwd_of(w: Workload) -> Workload:
    return dataclasses.replace(w, pass_="fwd")


def visible_pairs(w: Workload, bm: int, bn: int):
    """(rows of Q block i, cols of K block j) of every pair with a visible score."""
    out = []
    for i in range(cdiv(w.seqlen_q, bm)):
        r = min(bm, w.seqlen_q - bm * i)
        for j in range(cdiv(w.seqlen_kv, bn)):
            if not w.causal or bn * j <= bm * i + r - 1:
                out.append((i, j, r, min(bn, w.seqlen_kv - bn * j)))
    return out


SHAPES = [
    (2, 4, 1024, 1024, 64),
    (1, 2, 1000, 1000, 128),
    (2, 2, 512, 1536, 64),
    (1, 1, 1000, 1000, 256),
]


# -- FLOPs and exponentials ---------------------------------------------------------


@pytest.mark.parametrize("algo", BWD_ALGOS)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_flops_and_exp_equal_closed_form(algo, shape, h100):
    w = bwd(shape)
    c = counters(build(algo, w, h100))
    unit = w.batch * w.heads * w.seqlen_q * w.seqlen_kv
    assert c.matmul_flops == BWD_FLOPS_PER_UNIT[algo] * unit * w.head_dim
    # P is read from HBM (standard), recomputed once (v1) or in both passes (v2)
    assert c.exp_count == {"standard": 0, "v1": 1, "v2": 2}[algo] * unit


@pytest.mark.parametrize("shape", SHAPES)
def test_paper_gemms_are_two_and_a_half_forwards(shape, h100):
    """The five products the paper counts (S, dV, dP, dQ, dK) are 2.5x the forward's
    two; v2's separate dQ pass adds S and dP again (its launch runs 3 GEMMs, of
    which only dQ = dS K is one of the five)."""
    w = bwd(shape)
    fwd = counters(build("v2", fwd_of(w), h100)).matmul_flops
    per_launch = {lc.name: lc.matmul_flops for lc in counters(build("v2", w, h100)).launches}
    assert per_launch["bwd_preprocess"] == 0
    assert per_launch["bwd_dkdv"] == 2 * fwd  # S, dV, dP, dK
    assert per_launch["bwd_dq"] * 2 == 3 * fwd  # S, dP, dQ
    assert 2 * (per_launch["bwd_dkdv"] + per_launch["bwd_dq"] // 3) == 5 * fwd
    assert 2 * counters(build("v1", w, h100)).matmul_flops == 5 * fwd


@pytest.mark.parametrize(
    "shape,config",
    [
        ((1, 2, 1000, 1000, 64), None),
        ((2, 1, 2048, 2048, 128), None),
        ((1, 2, 1000, 1000, 64), KernelConfig(64, 16, 4, 2)),  # block_n < block_m
        ((1, 2, 700, 700, 64), KernelConfig(32, 64, 4, 2)),
    ],
)
def test_causal_flops_count_visible_block_pairs(shape, config, h100):
    for algo in ("v1", "v2"):
        w = bwd(shape, causal=True)
        cfg = config or default_config(algo, w, h100)
        pairs = visible_pairs(w, cfg.block_m, cfg.block_n)
        scores = w.batch * w.heads * sum(r * n for _, _, r, n in pairs)
        c = counters(build(algo, w, h100, cfg))
        assert c.matmul_flops == BWD_FLOPS_PER_UNIT[algo] * scores * w.head_dim, algo
        assert c.exp_count == (2 if algo == "v2" else 1) * scores, algo
    # standard masks, it does not skip: full GEMMs
    w = bwd(shape, causal=True)
    c = counters(build("standard", w, h100))
    assert c.matmul_flops == 8 * w.batch * w.heads * w.seqlen_q * w.seqlen_kv * w.head_dim


# -- HBM bytes, no reuse -------------------------------------------------------------


@pytest.mark.parametrize("shape", [*SHAPES, (1, 1, 512, 9000, 64)])
def test_standard_bytes_closed_form(shape, h100):
    w = bwd(shape)
    cfg = default_config("standard", w, h100)
    c = counters(build("standard", w, h100, cfg))
    bh, nq, nk, d, e = w.batch * w.heads, w.seqlen_q, w.seqlen_kv, w.head_dim, w.elem_bytes
    t_r, t_c = cdiv(nq, cfg.block_m), cdiv(nk, cfg.block_n)
    passes = softmax_plan(nk)[1]
    row = padded_row(nk)  # P, dP and dS rows, padded to 16 columns
    reads = (3 + 2 * passes) * nq * row * e + 3 * t_c * nq * d * e + 2 * t_r * nk * d * e
    writes = 2 * nq * row * e + (nq + 2 * nk) * d * e
    assert c.no_reuse_read_bytes == bh * reads
    assert c.no_reuse_write_bytes == bh * writes


@pytest.mark.parametrize("shape", SHAPES)
def test_v1_bytes_closed_form_dominated_by_dq_round_trips(shape, h100):
    """The paper's Algorithm 4 (`fa1-algorithm1`)."""
    w = bwd(shape)
    cfg = named_config("fa1-algorithm1", "v1", w, h100)
    c = counters(build("v1", w, h100, cfg))
    bh, nq, nk, d, e = w.batch * w.heads, w.seqlen_q, w.seqlen_kv, w.head_dim, w.elem_bytes
    t_c = cdiv(nk, cfg.block_n)
    assert c.no_reuse_read_bytes == bh * (2 * nk * d * e + t_c * nq * (d * (3 * e + 4) + 8))
    assert c.no_reuse_write_bytes == bh * ((t_c + 1) * nq * d * 4 + nq * d * e + 2 * nk * d * e)
    dq = c.read_bytes_by_tensor["dQacc"] + c.write_bytes_by_tensor["dQacc"]
    others = c.no_reuse_hbm_bytes - dq
    assert dq > max(
        b for t, b in {**c.read_bytes_by_tensor, **c.write_bytes_by_tensor}.items() if t != "dQacc"
    )
    assert dq > 0.3 * others


@pytest.mark.parametrize("shape", SHAPES[:3])  # d = 256 runs Algorithm 4
@pytest.mark.parametrize("causal", [False, True])
def test_v1_released_backward_bytes(shape, causal, h100):
    """The released backward: D and the zeroed dQacc (one launch), the K/V walk reading K,
    V once and every step's Q, dO, l, m, D, adding into dQacc, and dQ from dQacc."""
    w = bwd(shape, causal=causal)
    if causal and w.seqlen_q != w.seqlen_kv:  # no shifted diagonal in v1 (check_serving)
        with pytest.raises(TilesimError, match="bottom-right"):
            default_config("v1", w, h100)
        return
    cfg = default_config("v1", w, h100)
    assert cfg.v1_kernel == "released"
    trace = build("v1", w, h100, cfg)
    assert [x.name for x in trace.launches] == ["bwd_dot", "flash_v1_bwd", "bwd_dq"]
    c = counters(trace)
    bh, nq, nk, d, e = w.batch * w.heads, w.seqlen_q, w.seqlen_kv, w.head_dim, w.elem_bytes
    bm, bn = cfg.block_m, cfg.block_n
    tc, tr = cdiv(nk, bn), cdiv(nq, bm)
    steps = [tr - (bn * j // bm if causal else 0) for j in range(tc)]
    rows = sum(max(0, nq - bm * (tr - s)) for s in steps)  # rows of the steps walked
    assert c.read_bytes_by_tensor["K"] == c.read_bytes_by_tensor["V"] == bh * nk * d * e
    assert c.read_bytes_by_tensor["Q"] == bh * rows * d * e
    assert c.read_bytes_by_tensor["dO"] == bh * (rows + nq) * d * e  # + D's launch
    assert c.read_bytes_by_tensor["D"] == c.read_bytes_by_tensor["M"] == bh * rows * 4
    assert c.write_bytes_by_tensor["dQacc"] == bh * (rows + nq) * d * 4  # adds + zeroing
    assert c.read_bytes_by_tensor["dQacc"] == bh * nq * d * 4
    for t in ("dK", "dV"):
        assert c.write_bytes_by_tensor[t] == bh * nk * d * e
    assert c.write_bytes_by_tensor["dQ"] == bh * nq * d * e


def test_v1_bytes_grow_as_n_squared_d_squared_over_m(h100):
    """Theta(N^2 d^2 / M): at fixed tiles (fixed M) doubling N quadruples the bytes."""
    cfg = KernelConfig(64, 64, 4, 1)
    small = counters(build("v1", bwd((1, 1, 2048, 2048, 64)), h100, cfg)).no_reuse_hbm_bytes
    large = counters(build("v1", bwd((1, 1, 4096, 4096, 64)), h100, cfg)).no_reuse_hbm_bytes
    assert 3.8 < large / small < 4.0


@pytest.mark.parametrize("shape", SHAPES)
def test_v2_bytes_closed_form(shape, h100):
    w = bwd(shape)
    cfg = default_config("v2", w, h100)
    c = counters(build("v2", w, h100, cfg))
    bh, nq, nk, d, e = w.batch * w.heads, w.seqlen_q, w.seqlen_kv, w.head_dim, w.elem_bytes
    t_r, t_c = cdiv(nq, cfg.block_m), cdiv(nk, cfg.block_n)
    reads = (
        nq * d * 2 * e  # preprocess: O, dO
        + 2 * nk * d * e  # dK/dV: K_n, V_n resident
        + t_c * nq * (2 * d * e + 8)  # dK/dV: Q, dO, LSE, D once per K/V block
        + nq * (2 * d * e + 8)  # dQ: Q, dO, LSE, D resident
        + t_r * 2 * nk * d * e  # dQ: K, V once per Q block
    )
    assert c.no_reuse_read_bytes == bh * reads
    assert c.no_reuse_write_bytes == bh * (4 * nq + (nq + 2 * nk) * d * e)
    # (N / block_n) passes over Q and dO for dK/dV, (N / block_m) over K and V for dQ
    size_q, size_k = bh * nq * d * e, bh * nk * d * e
    assert c.read_bytes_by_tensor["Q"] == (t_c + 1) * size_q
    assert c.read_bytes_by_tensor["dO"] == (t_c + 2) * size_q
    assert c.read_bytes_by_tensor["K"] == c.read_bytes_by_tensor["V"] == (t_r + 1) * size_k


def test_v2_causal_bytes_follow_the_visible_pairs(h100):
    w = bwd((1, 2, 1000, 1000, 64), causal=True)
    cfg = default_config("v2", w, h100)
    c = counters(build("v2", w, h100, cfg))
    d, e = w.head_dim, w.elem_bytes
    pairs = visible_pairs(w, cfg.block_m, cfg.block_n)
    assert c.read_bytes_by_tensor["Q"] == 2 * (
        sum(r for _, _, r, _ in pairs) * d * e + w.seqlen_q * d * e
    )
    assert c.read_bytes_by_tensor["K"] == 2 * (
        sum(n for _, _, _, n in pairs) * d * e + w.seqlen_kv * d * e
    )


@pytest.mark.parametrize("algo", ("v1", "v2"))
def test_a_shifted_causal_diagonal_has_no_backward_schedule(algo, h100):
    # bottom-right causal with N_q < N_kv: the forward of v2 has it, the backward not yet
    w = bwd((1, 2, 1000, 1100, 64), causal=True)
    with pytest.raises(TilesimError, match=r"bottom-right\) is modelled for standard and the v2"):
        build(algo, w, h100)


@pytest.mark.parametrize("algo", BWD_ALGOS)
def test_counters_match_a_brute_force_walk(algo, h100):
    w = bwd((1, 2, 200, 200, 64), causal=True)
    cfg = KernelConfig(32, 32, 4, 2)
    trace = build(algo, w, h100, cfg)
    flops = exp = fp32 = 0
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    for li, launch in enumerate(trace.launches):
        for cta in range(launch.num_ctas):
            for f in expand(trace, li, cta):
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
    c = counters(trace)
    assert (c.matmul_flops, c.exp_count, c.fp32_ops) == (flops, exp, fp32)
    assert c.read_bytes_by_tensor == reads
    assert c.write_bytes_by_tensor == writes


# -- what the forward keeps ------------------------------------------------------------


@pytest.mark.parametrize("algo", BWD_ALGOS)
@pytest.mark.parametrize("causal", [False, True])
def test_kept_bytes_are_what_the_forward_writes_and_the_backward_reads(algo, causal, h100):
    w = bwd((2, 3, 1000, 1000, 64), causal=causal)
    fwd = build(algo, fwd_of(w), h100)
    back = build(algo, w, h100)
    written = counters(fwd).write_bytes_by_tensor
    read = counters(back).read_bytes_by_tensor
    sizes = {t.name: t.nbytes for t in fwd.tensors}
    kept = sorted(t for t in written if t in read)
    assert kept_bytes(algo, w) == sum(sizes[t] for t in kept)
    rows = w.batch * w.heads * w.seqlen_q
    expected = {
        "standard": rows * 1008 * 2,  # P, n x n (rows padded to 16 columns)
        "v1": rows * w.head_dim * 2 + 2 * rows * 4,  # O + l + m
        "v2": rows * w.head_dim * 2 + rows * 4,  # O + LSE
    }[algo]
    assert kept_bytes(algo, w) == expected


# -- fwd_bwd -------------------------------------------------------------------------


@pytest.mark.parametrize("algo", BWD_ALGOS)
def test_fwd_bwd_is_the_forward_then_the_backward(algo, h100):
    w = bwd((1, 2, 1000, 1000, 128), causal=True, pass_="fwd_bwd")
    cfg = default_config(algo, w, h100)
    both = build(algo, w, h100, cfg)  # a config given drives both passes
    fwd = build(algo, fwd_of(w), h100, cfg)
    back = build(algo, dataclasses.replace(w, pass_="bwd"), h100, cfg)
    assert both.launches == fwd.launches + back.launches
    names = [t.name for t in both.tensors]
    assert len(names) == len(set(names))
    assert set(names) == {t.name for t in fwd.tensors} | {t.name for t in back.tensors}
    assert both.workload["pass_"] == "fwd_bwd"
    cb, cf, ck = counters(both), counters(fwd), counters(back)
    assert cb.matmul_flops == cf.matmul_flops + ck.matmul_flops
    assert cb.no_reuse_hbm_bytes == cf.no_reuse_hbm_bytes + ck.no_reuse_hbm_bytes
    # what the forward wrote needs no compulsory read in the backward
    kept = {"standard": "P", "v1": "O", "v2": "LSE"}[algo]
    assert cb.compulsory_read_bytes < cf.compulsory_read_bytes + ck.compulsory_read_bytes
    assert kept in cb.write_bytes_by_tensor and kept in ck.read_bytes_by_tensor


def test_fwd_bwd_with_each_pass_default_runs_the_backward_as_built_alone(h100):
    # v1 at d = 64: the forward's default runs 4 warps, the backward's 8, so the backward's
    # expressions are renamed (W_bwd, ...): every field of every op, the shared-memory
    # bytes of a Vector too, must evaluate as in the backward alone
    w = bwd((1, 2, 1024, 1024, 64), causal=True, pass_="fwd_bwd")
    both = build("v1", w, h100)
    back = build("v1", dataclasses.replace(w, pass_="bwd"), h100)
    assert both.params["W"] != back.params["W"]
    i = len(both.launches) - len(back.launches)
    for cta in (0, 1):
        assert expand(both, i, cta) == expand(back, 0, cta)


def test_backward_defaults_fit_every_gpu(gpus):
    for gpu in gpus.values():
        for algo in BWD_ALGOS:
            for d in (64, 128, 256):
                for pass_ in ("bwd", "fwd_bwd"):
                    w = bwd((1, 1, 512, 512, d), pass_=pass_)
                    cfg = default_config(algo, w, gpu)
                    trace = build(algo, w, gpu, cfg)
                    build(algo, w, gpu)  # each pass with its own default fits too
                    need = smem_bytes(algo, w, cfg)
                    assert need <= gpu.smem_bytes_per_cta_max
                    assert max(launch.smem_bytes for launch in trace.launches) <= need


# -- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("pass_", ["bwd", "fwd_bwd"])
def test_v3_backward_is_a_clear_error(pass_, h100):
    w = bwd((1, 2, 512, 512, 64), pass_=pass_)
    with pytest.raises(TilesimError, match="v3 backward is not modelled yet; use v2"):
        build("v3", w, h100)
    with pytest.raises(TilesimError, match="v3 backward"):
        default_config("v3", w, h100)


def test_unknown_pass_and_tiles_too_big(h100):
    with pytest.raises(TilesimError, match="unknown pass 'backward'"):
        Workload(1, 1, 64, 64, 64, pass_="backward")
    with pytest.raises(TilesimError, match="v1 bwd tiles .* need"):
        build("v1", bwd((1, 1, 512, 512, 256)), h100, KernelConfig(128, 128, 4, 2))


# -- files and the engine ------------------------------------------------------------


@pytest.mark.parametrize("algo", BWD_ALGOS)
@pytest.mark.parametrize("pass_", ["bwd", "fwd_bwd"])
def test_backward_trace_file_round_trip(algo, pass_, h100, tmp_path):
    trace = build(algo, bwd((2, 2, 1000, 1000, 64), causal=True, pass_=pass_), h100)
    assert load(save(trace, tmp_path / f"{algo}.trace.json")) == trace


@pytest.mark.parametrize("algo", BWD_ALGOS)
@pytest.mark.parametrize("pass_", ["bwd", "fwd_bwd"])
@pytest.mark.parametrize("causal", [False, True])
def test_engine_runs_backward_traces(algo, pass_, causal):
    gpu = load_gpu("h200")
    trace = build(algo, bwd((1, 2, 1000, 1000, 64), causal=causal, pass_=pass_), gpu)
    p = simulate(trace, gpu)
    c = counters(trace)
    assert p.time_s > 0
    assert p.matmul_flops == c.matmul_flops
    assert [lp.name for lp in p.launches] == [launch.name for launch in trace.launches]
