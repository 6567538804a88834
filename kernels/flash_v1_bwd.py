"""FlashAttention (v1) backward in Triton: the released kernel's structure, and Algorithm 4.

``config.v1_kernel == "released"`` (the default; traces/flash_v1_bwd.py, docs/fa1.md),
three launches:

1. ``v1_bwd_preprocess``: D = rowsum(dO ∘ O) and dQacc = 0, 128 rows per program.
2. ``v1_bwd``: grid (B·H, num_splits); program z takes the K/V blocks z, z+S, ...
   K_j, V_j are [W, block_n/W, d] (W = ``split_k_warps``): the GEMMs are batched over
   that axis, one warp per slice, so each warp owns its keys' rows of dK_j and dV_j.
   Per 16-row Q step (the next step's Q, dO, LSE, D loaded during this one):
   S = Q K_jᵀ, P = exp2(S·scale·log2e − LSE·log2e), dV += Pᵀ dO, dP = dO V_jᵀ,
   dS = P ∘ (dP − D), dK += dSᵀ Q, and dQ_i += scale · Σ_w dS_w K_w, the warps'
   partials summed (through shared memory) and added to float32 dQacc atomically.
   After the block, dK_j·scale and dV_j are written once.
3. ``v1_bwd_dq``: dQ = dQacc, in the input dtype.

The LSE is m + log ℓ of the forward's ``lm`` (the released forward keeps ℓ = 1).

``"algorithm1"``: the paper's Algorithm 4, as written. One program per (batch, head),
as the forward. The forward kept O and the row statistics ℓ and m
(``flash_v1.launches(..., lm=buffer)``); the backward recomputes P. The program

1. sets its head's rows of the float32 dQ workspace to 0 in HBM (line 5);
2. outer loop over K/V blocks j (block_n rows): K_j, V_j on chip, dK_j = dV_j = 0;
3. inner loop over Q blocks i (block_m rows): loads Q_i, O_i, dO_i, dQ_i, ℓ_i, m_i
   from HBM, then
   S = Q_i K_jᵀ·scale, P = exp(S − m_i) / ℓ_i, dV_j += Pᵀ dO_i,
   dP = dO_i V_jᵀ, D_i = rowsum(dO_i ∘ O_i), dS = P ∘ (dP − D_i),
   dQ_i += scale · dS K_j (written back to HBM every inner step), dK_j += dSᵀ Q_i;
   the last K/V block a Q block sees also writes dQ_i in the input dtype;
4. after the inner loop writes dK_j (times scale) and dV_j.

dQ accumulates in float32 (rounding it to fp16 on each of the Nk/block_n round
trips would lose accuracy the algorithm does not). As in the forward, threads
of the program write dQ_i elements that other threads read in the next outer
step, so a ``tl.debug_barrier()`` closes the initialisation and every outer step.

Causal (top-left aligned): the inner loop of block j starts at the first Q block
(step) with a row i >= j·block_n. A K/V block no query sees (Nk > Nq) runs no inner
step and stores dK_j = dV_j = 0.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..errors import TilesimError
from ._common import LOG2E, strides

_LOG2E = tl.constexpr(LOG2E)


@triton.jit
def _v1_bwd(
    Q,
    K,
    V,
    Out,
    DO,  # q, o, do [B, H, Nq, d]; k, v [B, H, Nk, d]
    DQ,
    DK,
    DV,  # gradients, input dtype, contiguous [B, H, N, d]
    DQacc,  # workspace: float32 dQ [B*H, Nq, d]
    L,
    M,  # the forward's ℓ and m, float32 [B*H, Nq]
    sm_scale,
    n_heads,
    n_q,
    n_kv,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_om,
    stride_od,
    stride_dob,
    stride_doh,
    stride_dom,
    stride_dod,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    off_bh = tl.program_id(0)
    off_b = off_bh // n_heads
    off_h = off_bh % n_heads
    Q += off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
    K += off_b.to(tl.int64) * stride_kb + off_h.to(tl.int64) * stride_kh
    V += off_b.to(tl.int64) * stride_vb + off_h.to(tl.int64) * stride_vh
    Out += off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh
    DO += off_b.to(tl.int64) * stride_dob + off_h.to(tl.int64) * stride_doh
    DQ += off_bh.to(tl.int64) * n_q * HEAD_DIM
    DK += off_bh.to(tl.int64) * n_kv * HEAD_DIM
    DV += off_bh.to(tl.int64) * n_kv * HEAD_DIM
    DQacc += off_bh.to(tl.int64) * n_q * HEAD_DIM
    L += off_bh.to(tl.int64) * n_q
    M += off_bh.to(tl.int64) * n_q
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    # -- line 5 of Algorithm 4: dQ = 0 in HBM --
    for start_m in range(0, n_q, BLOCK_M):
        rows = start_m + offs_m0
        tl.store(
            DQacc + rows[:, None] * HEAD_DIM + offs_d[None, :],
            tl.zeros([BLOCK_M, HEAD_DIM], tl.float32),
            mask=rows[:, None] < n_q,
        )
    tl.debug_barrier()

    last_n = (n_kv - 1) // BLOCK_N * BLOCK_N  # the last K/V block
    for start_n in range(0, n_kv, BLOCK_N):
        # -- outer loop: K_j, V_j on chip, dK_j and dV_j accumulate here --
        cols = start_n + offs_n0
        k = tl.load(
            K + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd,
            mask=cols[:, None] < n_kv,
            other=0.0,
        )
        v = tl.load(
            V + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
            mask=cols[:, None] < n_kv,
            other=0.0,
        )
        dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
        first_m = start_n // BLOCK_M * BLOCK_M if CAUSAL else 0
        for start_m in range(first_m, n_q, BLOCK_M):
            # -- inner loop: Q_i, O_i, dO_i, dQ_i, ℓ_i, m_i from HBM --
            rows = start_m + offs_m0
            row_ok = rows < n_q
            q = tl.load(
                Q + rows[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=row_ok[:, None],
                other=0.0,
            )
            o = tl.load(
                Out + rows[:, None] * stride_om + offs_d[None, :] * stride_od,
                mask=row_ok[:, None],
                other=0.0,
            )
            do = tl.load(
                DO + rows[:, None] * stride_dom + offs_d[None, :] * stride_dod,
                mask=row_ok[:, None],
                other=0.0,
            )
            dq_ptrs = DQacc + rows[:, None] * HEAD_DIM + offs_d[None, :]
            dq = tl.load(dq_ptrs, mask=row_ok[:, None], other=0.0)
            l_i = tl.load(L + rows, mask=row_ok, other=1.0)
            m_i = tl.load(M + rows, mask=row_ok, other=0.0)
            # -- S = Q_i K_jᵀ·scale; P = exp(S − m_i) / ℓ_i (masked and padded entries 0) --
            s = tl.dot(q, tl.trans(k))
            keep = (cols[None, :] < n_kv) & row_ok[:, None]
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            p = tl.math.exp2(s * (sm_scale * _LOG2E) - (m_i * _LOG2E)[:, None]) / l_i[:, None]
            p = tl.where(keep, p, 0.0)
            # -- dV_j += Pᵀ dO_i --
            dv = tl.dot(tl.trans(p.to(do.dtype)), do, dv)
            # -- dP = dO_i V_jᵀ; D_i = rowsum(dO_i ∘ O_i); dS = P ∘ (dP − D_i) --
            dp = tl.dot(do, tl.trans(v))
            delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)
            ds = (p * (dp - delta[:, None])).to(q.dtype)
            # -- dQ_i += scale · dS K_j, back to HBM --
            dq = dq + tl.dot(ds, k) * sm_scale
            tl.store(dq_ptrs, dq, mask=row_ok[:, None])
            # the last K/V block this Q block sees also writes dQ_i
            if CAUSAL:
                last_seen = tl.minimum(start_m + BLOCK_M - 1, n_kv - 1) // BLOCK_N * BLOCK_N
            else:
                last_seen = last_n
            if start_n == last_seen:
                tl.store(
                    DQ + rows[:, None] * HEAD_DIM + offs_d[None, :],
                    dq.to(DQ.dtype.element_ty),
                    mask=row_ok[:, None],
                )
            # -- dK_j += dSᵀ Q_i --
            dk = tl.dot(tl.trans(ds), q, dk)
        kv_ok = cols[:, None] < n_kv
        kv_off = cols[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(DK + kv_off, (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_ok)
        tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_ok)
        # the next outer step reads the dQ_i this one wrote, maybe from other threads
        tl.debug_barrier()


PREPROCESS_ROWS = 128  # rows per program of the D / dQacc launch (the released grid_dot)


@triton.jit
def _v1_released_preprocess(
    Out,
    DO,  # [B*H, Nq, d] contiguous
    Delta,  # float32 [B*H, Nq]
    DQacc,  # float32 [B*H, Nq, d], zeroed here
    n_q,
    HEAD_DIM: tl.constexpr,
    ROWS: tl.constexpr,
):
    off_bh = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs_d = tl.arange(0, HEAD_DIM)
    offs = off_bh * n_q * HEAD_DIM + rows[:, None] * HEAD_DIM + offs_d[None, :]
    ok = rows[:, None] < n_q
    o = tl.load(Out + offs, mask=ok, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(Delta + off_bh * n_q + rows, tl.sum(o * do, 1), mask=rows < n_q)
    tl.store(DQacc + offs, tl.zeros([ROWS, HEAD_DIM], tl.float32), mask=ok)


@triton.jit
def _released_step_inputs(
    Q, DO, LSE, Delta, step, n_q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr
):
    """Q, dO, LSE and D of one 16-row step (contiguous [N, d] rows)."""
    rows = step * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = rows[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    ok = rows < n_q
    q = tl.load(Q + offs, mask=ok[:, None], other=0.0)
    do = tl.load(DO + offs, mask=ok[:, None], other=0.0)
    lse = tl.load(LSE + rows, mask=ok, other=float("inf"))  # P = 0 past the last row
    delta = tl.load(Delta + rows, mask=ok, other=0.0)
    return q, do, lse, delta


@triton.jit
def _v1_released_bwd(
    Q,
    K,
    V,
    DO,  # contiguous [B*H, N, d]
    DK,
    DV,  # gradients, input dtype, contiguous [B*H, Nk, d]
    DQacc,  # float32 [B*H, Nq, d], zeroed by the preprocess
    LSE,
    Delta,  # float32 [B*H, Nq]
    sm_scale,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # Q rows per step
    BLOCK_N: tl.constexpr,  # keys per K/V block
    SPLIT_K: tl.constexpr,  # warps that split a block's keys
    PREFETCH: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    off_bh = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    Q += off_bh * n_q * HEAD_DIM
    DO += off_bh * n_q * HEAD_DIM
    DQacc += off_bh * n_q * HEAD_DIM
    K += off_bh * n_kv * HEAD_DIM
    V += off_bh * n_kv * HEAD_DIM
    DK += off_bh * n_kv * HEAD_DIM
    DV += off_bh * n_kv * HEAD_DIM
    LSE += off_bh * n_q
    Delta += off_bh * n_q
    KEYS: tl.constexpr = BLOCK_N // SPLIT_K
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_key = tl.arange(0, SPLIT_K)[:, None] * KEYS + tl.arange(0, KEYS)[None, :]
    n_steps = tl.cdiv(n_q, BLOCK_M)
    qk_scale = sm_scale * _LOG2E

    for start_n in range(split * BLOCK_N, n_kv, n_splits * BLOCK_N):
        # -- K_j, V_j as [SPLIT_K, KEYS, d]; dK_j, dV_j accumulate per warp --
        cols = start_n + offs_key  # [W, KEYS]
        kv_off = cols[:, :, None] * HEAD_DIM + offs_d[None, None, :]
        kv_ok = cols[:, :, None] < n_kv
        k = tl.load(K + kv_off, mask=kv_ok, other=0.0)
        v = tl.load(V + kv_off, mask=kv_ok, other=0.0)
        kt = tl.trans(k, (0, 2, 1))
        vt = tl.trans(v, (0, 2, 1))
        dk = tl.zeros([SPLIT_K, KEYS, HEAD_DIM], dtype=tl.float32)
        dv = tl.zeros([SPLIT_K, KEYS, HEAD_DIM], dtype=tl.float32)
        first = start_n // BLOCK_M if CAUSAL else 0
        if PREFETCH:
            q, do, lse, delta = _released_step_inputs(
                Q, DO, LSE, Delta, first, n_q, HEAD_DIM, BLOCK_M
            )
        for step in range(first, n_steps):
            rows = step * BLOCK_M + offs_m
            if PREFETCH:
                q_n, do_n, lse_n, delta_n = _released_step_inputs(
                    Q, DO, LSE, Delta, step + 1, n_q, HEAD_DIM, BLOCK_M
                )
            else:
                q, do, lse, delta = _released_step_inputs(
                    Q, DO, LSE, Delta, step, n_q, HEAD_DIM, BLOCK_M
                )
            qb = tl.broadcast_to(q[None, :, :], (SPLIT_K, BLOCK_M, HEAD_DIM))
            dob = tl.broadcast_to(do[None, :, :], (SPLIT_K, BLOCK_M, HEAD_DIM))
            # -- S = Q K_jᵀ, P = exp2(S·scale·log2e − LSE·log2e): [W, M, KEYS] --
            s = tl.dot(qb, kt)
            p = tl.math.exp2(s * qk_scale - (lse * _LOG2E)[None, :, None])
            keep = cols[:, None, :] < n_kv
            if CAUSAL:
                keep = keep & (cols[:, None, :] <= rows[None, :, None])
            p = tl.where(keep, p, 0.0)
            # -- dV_j += Pᵀ dO; dP = dO V_jᵀ; dS = P ∘ (dP − D) --
            dv = tl.dot(tl.trans(p.to(do.dtype), (0, 2, 1)), dob, dv)
            dp = tl.dot(dob, vt)
            ds = (p * (dp - delta[None, :, None])).to(q.dtype)
            # -- dK_j += dSᵀ Q; dQ_i += scale · Σ_w dS_w K_w --
            dk = tl.dot(tl.trans(ds, (0, 2, 1)), qb, dk)
            dq = tl.sum(tl.dot(ds, k), 0) * sm_scale
            tl.atomic_add(
                DQacc + rows[:, None] * HEAD_DIM + offs_d[None, :],
                dq,
                mask=rows[:, None] < n_q,
                sem="relaxed",
            )
            if PREFETCH:
                q, do, lse, delta = q_n, do_n, lse_n, delta_n
        tl.store(DK + kv_off, (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_ok)
        tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_ok)


def launches(q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv):
    """The backward launches of v1 [(name, run)] (inputs checked; ``o``, ``lm`` from
    the forward; ``dq``, ``dk``, ``dv`` contiguous)."""
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    dq_acc = torch.empty((batch * heads, n_q, d), dtype=torch.float32, device=q.device)
    if config.v1_kernel == "released":
        return _released_launches(q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv, dq_acc)

    def run():
        _v1_bwd[(batch * heads,)](
            q,
            k,
            v,
            o,
            do,
            dq,
            dk,
            dv,
            dq_acc,
            lm[0],
            lm[1],
            sm_scale,
            heads,
            n_q,
            n_kv,
            *strides(q),
            *strides(k),
            *strides(v),
            *strides(o),
            *strides(do),
            HEAD_DIM=d,
            BLOCK_M=config.block_m,
            BLOCK_N=config.block_n,
            CAUSAL=causal,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )

    return [("v1_bwd", run)]


def _released_launches(q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv, dq_acc):
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    if config.num_stages > 2:
        raise TilesimError("the released v1 kernel loads one step ahead: num_stages 1 or 2")
    bh = batch * heads
    lse = (lm[1] + torch.log(lm[0])).contiguous()  # m + log ℓ (ℓ = 1 from the released forward)
    delta = torch.empty((bh, n_q), dtype=torch.float32, device=q.device)
    q, k, v, do, o = (t.contiguous() for t in (q, k, v, do, o))
    rows_grid = (triton.cdiv(n_q, PREPROCESS_ROWS), bh)

    def run_preprocess():
        _v1_released_preprocess[rows_grid](
            o, do, delta, dq_acc, n_q, HEAD_DIM=d, ROWS=PREPROCESS_ROWS, num_warps=4
        )

    def run_main():
        _v1_released_bwd[(bh, config.num_splits)](
            q,
            k,
            v,
            do,
            dk,
            dv,
            dq_acc,
            lse,
            delta,
            sm_scale,
            n_q,
            n_kv,
            HEAD_DIM=d,
            BLOCK_M=config.block_m,
            BLOCK_N=config.block_n,
            SPLIT_K=config.split_k_warps,
            PREFETCH=config.num_stages > 1,
            CAUSAL=causal,
            num_warps=config.num_warps,
            num_stages=1,
        )

    def run_dq():
        dq.copy_(dq_acc.view(dq.shape))

    return [("v1_bwd_preprocess", run_preprocess), ("v1_bwd", run_main), ("v1_bwd_dq", run_dq)]
