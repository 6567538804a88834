"""FlashAttention-2 backward in Triton: recompute P tile by tile; dK/dV and dQ in two passes.

The forward kept O and the natural-log log-sum-exp (LSE) of each row
(``flash_v2.launches(..., lse=buffer)``). Three launches, exactly those of
``traces/flash_v2_bwd.py`` (no atomics):

1. ``bwd_preprocess``: D = rowsum(dO ∘ O), float32, grid (cdiv(Nq, block_m), B·H).
2. ``bwd_dkdv``: grid (cdiv(Nk, block_n), B·H), the K/V block fastest. K_n, V_n
   stay on chip; the loop over Q blocks i (block_m rows) loads Q_i (transposed),
   dO_i, LSE_i, D_i and runs
   Sᵀ = K_n Q_iᵀ, Pᵀ = exp2(Sᵀ·scale·log2e − LSE_i·log2e), dV += Pᵀ dO_i,
   dPᵀ = V_n dO_iᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − D_i), dK += dSᵀ Q_i;
   at the end dK ·= scale and dK, dV are written once.
3. ``bwd_dq``: grid (cdiv(Nq, block_m), B·H). Q_m, dO_m, LSE_m, D_m stay on chip;
   the loop over K/V blocks j loads K_j, V_j (transposed) and runs
   S = Q_m K_jᵀ, P = exp2(S·scale·log2e − LSE·log2e), dP = dO_m V_jᵀ,
   dS = P ∘ (dP − D), dQ += dS K_j; at the end dQ ·= scale, written once.

Causal (Nq = Nk: no shifted diagonal in the backward, traces.config.check_serving):
``bwd_dkdv`` walks the Q blocks straddling its diagonal first (with the mask),
then the Q blocks that see the whole K/V block (no mask). ``bwd_dq`` walks the K/V
blocks its Q block sees whole, then the diagonal ones (with the mask), as the
forward does.

Partial blocks need no score mask: a row past Nq loads LSE = +inf, so its P is 0;
a K/V row past Nk loads K = V = 0, so it adds nothing to dQ, and its own dK/dV
rows are never stored. The kernels read q, k, v, o, dO as contiguous
[B, H, N, d] (``backward_launches`` makes them so before any launch).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import LOG2E

_LOG2E = tl.constexpr(LOG2E)


@triton.jit
def _preprocess(
    Out,
    DO,  # [B*H, Nq, d] contiguous
    Delta,  # float32 [B*H, Nq]
    n_q,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1).to(tl.int64)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    offs = off_bh * n_q * HEAD_DIM + rows[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(Out + offs, mask=rows[:, None] < n_q, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=rows[:, None] < n_q, other=0.0).to(tl.float32)
    tl.store(Delta + off_bh * n_q + rows, tl.sum(o * do, 1), mask=rows < n_q)


@triton.jit
def _dkdv_loop(
    dk,
    dv,
    k,
    v,
    Q,
    DO,
    LSE,
    Delta,  # this head's slices
    lo,
    hi,
    cols,
    n_q,
    qk_scale,  # sm_scale · log2 e
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    MASK: tl.constexpr,  # apply the causal mask
    EVEN_M: tl.constexpr,  # Nq % block_m == 0: no bounds checks
):
    """Q blocks [lo, hi) of one K/V block: accumulate dK (unscaled) and dV."""
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_m0
        # -- load Q_iᵀ, dO_i, LSE_i, D_i --
        qt_ptrs = Q + rows[None, :] * HEAD_DIM + offs_d[:, None]
        do_ptrs = DO + rows[:, None] * HEAD_DIM + offs_d[None, :]
        if EVEN_M:
            qt = tl.load(qt_ptrs)
            do = tl.load(do_ptrs)
            lse = tl.load(LSE + rows)
            delta = tl.load(Delta + rows)
        else:
            qt = tl.load(qt_ptrs, mask=rows[None, :] < n_q, other=0.0)
            do = tl.load(do_ptrs, mask=rows[:, None] < n_q, other=0.0)
            lse = tl.load(LSE + rows, mask=rows < n_q, other=float("inf"))
            delta = tl.load(Delta + rows, mask=rows < n_q, other=0.0)
        # -- Sᵀ = K_n Q_iᵀ; Pᵀ = exp2(Sᵀ·scale − LSE) --
        st = tl.dot(k, qt)
        pt = tl.math.exp2(st * qk_scale - (lse * _LOG2E)[None, :])
        if MASK:
            pt = tl.where(rows[None, :] >= cols[:, None], pt, 0.0)
        # -- dV += Pᵀ dO_i --
        dv = tl.dot(pt.to(do.dtype), do, dv)
        # -- dPᵀ = V_n dO_iᵀ; dSᵀ = Pᵀ ∘ (dPᵀ − D_i); dK += dSᵀ Q_i --
        dpt = tl.dot(v, tl.trans(do))
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(qt.dtype), tl.trans(qt), dk)
    return dk, dv


@triton.jit
def _v2_bwd_dkdv(
    Q,
    K,
    V,
    DO,
    DK,
    DV,  # contiguous [B*H, N, d]
    LSE,
    Delta,  # float32 [B*H, Nq]
    sm_scale,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    start_n = tl.program_id(0) * BLOCK_N  # K/V block: fastest-varying grid index
    off_bh = tl.program_id(1).to(tl.int64)
    Q += off_bh * n_q * HEAD_DIM
    DO += off_bh * n_q * HEAD_DIM
    K += off_bh * n_kv * HEAD_DIM
    V += off_bh * n_kv * HEAD_DIM
    DK += off_bh * n_kv * HEAD_DIM
    DV += off_bh * n_kv * HEAD_DIM
    LSE += off_bh * n_q
    Delta += off_bh * n_q
    cols = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_offs = cols[:, None] * HEAD_DIM + offs_d[None, :]

    # -- K_n, V_n stay on chip --
    if EVEN_N:
        k = tl.load(K + kv_offs)
        v = tl.load(V + kv_offs)
    else:
        k = tl.load(K + kv_offs, mask=cols[:, None] < n_kv, other=0.0)
        v = tl.load(V + kv_offs, mask=cols[:, None] < n_kv, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * _LOG2E
    end_m = tl.cdiv(n_q, BLOCK_M) * BLOCK_M
    if CAUSAL:
        # Q blocks [first, full) straddle the diagonal; [full, end) see all of block n
        first = start_n // BLOCK_M * BLOCK_M
        last_col = tl.minimum(start_n + BLOCK_N, n_kv) - 1
        full = tl.minimum(tl.cdiv(last_col, BLOCK_M) * BLOCK_M, end_m)
        # a K/V block that starts past the last query is seen by no row
        full = tl.where(start_n < n_q, full, first)
        dk, dv = _dkdv_loop(
            dk, dv, k, v, Q, DO, LSE, Delta, first, full, cols, n_q, qk_scale,
            HEAD_DIM, BLOCK_M, True, EVEN_M,
        )  # fmt: skip
        lo = tl.where(start_n < n_q, full, end_m)
    else:
        lo = 0
    dk, dv = _dkdv_loop(
        dk, dv, k, v, Q, DO, LSE, Delta, lo, end_m, cols, n_q, qk_scale,
        HEAD_DIM, BLOCK_M, False, EVEN_M,
    )  # fmt: skip

    # -- epilogue: dK ·= scale; write dK and dV once --
    dk = dk * sm_scale
    tl.store(DK + kv_offs, dk.to(DK.dtype.element_ty), mask=cols[:, None] < n_kv)
    tl.store(DV + kv_offs, dv.to(DV.dtype.element_ty), mask=cols[:, None] < n_kv)


@triton.jit
def _dq_loop(
    dq,
    q,
    do,
    lse2,  # LSE · log2 e of the block's rows
    delta,
    K,
    V,  # this head's slices
    lo,
    hi,
    rows,
    n_kv,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """K/V blocks [lo, hi) of one Q block: accumulate dQ (unscaled)."""
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n0
        # -- load K_j, V_j --
        kv_offs = cols[:, None] * HEAD_DIM + offs_d[None, :]
        if EVEN_N:
            k = tl.load(K + kv_offs)
            v = tl.load(V + kv_offs)
        else:
            k = tl.load(K + kv_offs, mask=cols[:, None] < n_kv, other=0.0)
            v = tl.load(V + kv_offs, mask=cols[:, None] < n_kv, other=0.0)
        # -- recompute S = Q K_jᵀ, P = exp2(S·scale − LSE) --
        s = tl.dot(q, tl.trans(k))
        p = tl.math.exp2(s * qk_scale - lse2[:, None])
        if MASK:
            p = tl.where(cols[None, :] <= rows[:, None], p, 0.0)
        # -- recompute dP = dO V_jᵀ; dS = P ∘ (dP − D); dQ += dS K_j --
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def _v2_bwd_dq(
    Q,
    K,
    V,
    DO,
    DQ,  # contiguous [B*H, N, d]
    LSE,
    Delta,  # float32 [B*H, Nq]
    sm_scale,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M  # Q block: fastest-varying grid index
    off_bh = tl.program_id(1).to(tl.int64)
    Q += off_bh * n_q * HEAD_DIM
    DO += off_bh * n_q * HEAD_DIM
    DQ += off_bh * n_q * HEAD_DIM
    K += off_bh * n_kv * HEAD_DIM
    V += off_bh * n_kv * HEAD_DIM
    LSE += off_bh * n_q
    Delta += off_bh * n_q
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_offs = rows[:, None] * HEAD_DIM + offs_d[None, :]

    # -- Q_m, dO_m, LSE_m, D_m stay on chip --
    if EVEN_M:
        q = tl.load(Q + q_offs)
        do = tl.load(DO + q_offs)
        lse = tl.load(LSE + rows)
        delta = tl.load(Delta + rows)
    else:
        q = tl.load(Q + q_offs, mask=rows[:, None] < n_q, other=0.0)
        do = tl.load(DO + q_offs, mask=rows[:, None] < n_q, other=0.0)
        lse = tl.load(LSE + rows, mask=rows < n_q, other=float("inf"))
        delta = tl.load(Delta + rows, mask=rows < n_q, other=0.0)
    lse2 = lse * _LOG2E
    qk_scale = sm_scale * _LOG2E
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # K/V blocks [0, split) are seen whole; [split, hi) straddle the diagonal
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, n_kv)
        split = tl.minimum(start_m, n_kv) // BLOCK_N * BLOCK_N
    else:
        hi = n_kv
        split = n_kv
    dq = _dq_loop(
        dq, q, do, lse2, delta, K, V, 0, split, rows, n_kv, qk_scale,
        HEAD_DIM, BLOCK_N, False, EVEN_N,
    )  # fmt: skip
    if CAUSAL:
        dq = _dq_loop(
            dq, q, do, lse2, delta, K, V, split, hi, rows, n_kv, qk_scale,
            HEAD_DIM, BLOCK_N, True, EVEN_N,
        )  # fmt: skip

    # -- epilogue: dQ ·= scale; write dQ once --
    dq = dq * sm_scale
    tl.store(DQ + q_offs, dq.to(DQ.dtype.element_ty), mask=rows[:, None] < n_q)


def launches(q, k, v, do, o, lse, causal, sm_scale, config, dq, dk, dv):
    """The three backward launches of v2 [(name, run)] (inputs checked and contiguous;
    ``o`` and ``lse`` float32 [B·H, Nq] from the forward; ``dq``, ``dk``, ``dv`` contiguous)."""
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    bm, bn = config.block_m, config.block_n
    bh = batch * heads
    delta = torch.empty((bh, n_q), dtype=torch.float32, device=q.device)
    meta = dict(
        HEAD_DIM=d,
        BLOCK_M=bm,
        BLOCK_N=bn,
        CAUSAL=causal,
        EVEN_M=n_q % bm == 0,
        EVEN_N=n_kv % bn == 0,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )

    def run_preprocess():
        grid = (triton.cdiv(n_q, bm), bh)
        _preprocess[grid](o, do, delta, n_q, HEAD_DIM=d, BLOCK_M=bm, num_warps=config.num_warps)

    def run_dkdv():
        grid = (triton.cdiv(n_kv, bn), bh)
        _v2_bwd_dkdv[grid](q, k, v, do, dk, dv, lse, delta, sm_scale, n_q, n_kv, **meta)

    def run_dq():
        grid = (triton.cdiv(n_q, bm), bh)
        _v2_bwd_dq[grid](q, k, v, do, dq, lse, delta, sm_scale, n_q, n_kv, **meta)

    return [
        ("v2_bwd_preprocess", run_preprocess),
        ("v2_bwd_dkdv", run_dkdv),
        ("v2_bwd_dq", run_dq),
    ]
