"""FlashAttention (v1) backward: the paper's Algorithm 4, as written, in Triton.

One program per (batch, head), as the forward. The forward kept O and the row
statistics ℓ and m (``flash_v1.launches(..., lm=buffer)``); the backward
recomputes P. The program

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
with a row i >= j·block_n. A K/V block no query sees (Nk > Nq) runs no inner
step and stores dK_j = dV_j = 0.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

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


def launches(q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv):
    """The one backward launch of v1 [(name, run)] (inputs checked; ``o``, ``lm`` from
    the forward; ``dq``, ``dk``, ``dv`` contiguous)."""
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    dq_acc = torch.empty((batch * heads, n_q, d), dtype=torch.float32, device=q.device)

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
