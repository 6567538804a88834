"""FlashAttention (v1) forward: the paper's Algorithm 1, as written, in Triton.

One program per (batch, head) — v1 parallelises over B·H only. The program

1. initialises O = 0, ℓ = 0, m = -inf for its head in HBM;
2. outer loop over K/V blocks j (block_n rows): loads K_j, V_j on chip;
3. inner loop over Q blocks i (block_m rows): loads Q_i, O_i, ℓ_i, m_i from HBM,
   computes S_ij = Q_i K_jᵀ·scale, m̃ = rowmax(S_ij), P̃ = exp(S_ij − m̃),
   ℓ̃ = rowsum(P̃), m_new = max(m_i, m̃), ℓ_new = e^(m_i−m_new) ℓ_i + e^(m̃−m_new) ℓ̃,
   O_i ← diag(ℓ_new)⁻¹ (diag(ℓ_i) e^(m_i−m_new) O_i + e^(m̃−m_new) P̃ V_j),
   and writes O_i, ℓ_new, m_new back to HBM — every inner step.

O, ℓ and m live in a float32 HBM workspace (rounding O to fp16/bf16 on each of
the Nk/block_n round trips would cost accuracy the paper's algorithm does not
lose); the last K/V block a Q block sees also writes its O, in the input dtype,
to the output.
Different threads of the program may write and later read the same O_i
element, so a ``tl.debug_barrier()`` (bar.sync, which also orders global
memory within the CTA) closes each outer step and the initialisation.

Causal (top-left aligned): for K/V block j the inner loop starts at the first Q
block that has a row i >= j·block_n; fully masked blocks are skipped.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import strides

NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def _v1_fwd(
    Q,
    K,
    V,
    Out,  # q, out [B, H, Nq, d]; k, v [B, H, Nk, d]
    Acc,
    L,
    M,  # workspace: float32 O [B*H, Nq, d], ℓ and m [B*H, Nq]
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
    Acc += off_bh.to(tl.int64) * n_q * HEAD_DIM
    L += off_bh.to(tl.int64) * n_q
    M += off_bh.to(tl.int64) * n_q
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    # -- step 2 of Algorithm 1: O = 0, ℓ = 0, m = -inf in HBM --
    for start_m in range(0, n_q, BLOCK_M):
        rows = start_m + offs_m0
        tl.store(
            Acc + rows[:, None] * HEAD_DIM + offs_d[None, :],
            tl.zeros([BLOCK_M, HEAD_DIM], tl.float32),
            mask=rows[:, None] < n_q,
        )
        tl.store(L + rows, tl.zeros([BLOCK_M], tl.float32), mask=rows < n_q)
        tl.store(M + rows, tl.full([BLOCK_M], NEG_INF, tl.float32), mask=rows < n_q)
    tl.debug_barrier()

    last_n = (n_kv - 1) // BLOCK_N * BLOCK_N  # the last K/V block
    for start_n in range(0, n_kv, BLOCK_N):
        # -- outer loop: K_j, V_j stay on chip for the whole inner loop --
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
        # causal: Q blocks before this one's first key row see none of it
        first_m = start_n // BLOCK_M * BLOCK_M if CAUSAL else 0
        for start_m in range(first_m, n_q, BLOCK_M):
            # -- inner loop: Q_i, O_i, ℓ_i, m_i from HBM --
            rows = start_m + offs_m0
            row_ok = rows < n_q
            q = tl.load(
                Q + rows[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=row_ok[:, None],
                other=0.0,
            )
            acc_ptrs = Acc + rows[:, None] * HEAD_DIM + offs_d[None, :]
            o_i = tl.load(acc_ptrs, mask=row_ok[:, None], other=0.0)
            l_i = tl.load(L + rows, mask=row_ok, other=0.0)
            m_i = tl.load(M + rows, mask=row_ok, other=NEG_INF)
            # -- S_ij, then m̃, P̃, ℓ̃ of this block --
            s = tl.dot(q, tl.trans(k)) * sm_scale
            keep = cols[None, :] < n_kv
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, NEG_INF)
            m_blk = tl.max(s, 1)
            # rows with every column masked (m̃ = -inf) contribute nothing
            m_safe = tl.where(m_blk == NEG_INF, 0.0, m_blk)
            p = tl.exp(s - m_safe[:, None])
            l_blk = tl.sum(p, 1)
            # -- combine with the running statistics --
            m_new = tl.maximum(m_i, m_blk)
            m_new_safe = tl.where(m_new == NEG_INF, 0.0, m_new)
            a_old = tl.exp(m_i - m_new_safe)  # e^(m_i - m_new)
            a_blk = tl.exp(m_blk - m_new_safe)  # e^(m̃ - m_new)
            l_new = a_old * l_i + a_blk * l_blk
            pv = tl.dot(p.to(v.dtype), v)
            # a row with nothing seen yet (ℓ_new = 0) keeps O = 0
            l_div = tl.where(l_new == 0.0, 1.0, l_new)
            o_new = ((l_i * a_old)[:, None] * o_i + a_blk[:, None] * pv) / l_div[:, None]
            # -- write O_i, ℓ_i, m_i back to HBM --
            tl.store(acc_ptrs, o_new, mask=row_ok[:, None])
            tl.store(L + rows, l_new, mask=row_ok)
            tl.store(M + rows, m_new, mask=row_ok)
            # the last K/V block this Q block sees also writes the output
            if CAUSAL:
                last_seen = tl.minimum(start_m + BLOCK_M - 1, n_kv - 1) // BLOCK_N * BLOCK_N
            else:
                last_seen = last_n
            if start_n == last_seen:
                o_ptrs = Out + rows[:, None] * stride_om + offs_d[None, :] * stride_od
                tl.store(o_ptrs, o_new.to(Out.dtype.element_ty), mask=row_ok[:, None])
        # the next outer step reads what this one wrote, maybe from other threads
        tl.debug_barrier()


def launches(q, k, v, causal, sm_scale, config, out, *, lm=None):
    """The one launch of v1 [(name, run)] (inputs already checked).

    ``lm``: an optional float32 [2, B·H, Nq] buffer that keeps the final row
    statistics ℓ (``lm[0]``) and m (``lm[1]``) for the backward; by default a temporary.
    """
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    acc = torch.empty((batch * heads, n_q, d), dtype=torch.float32, device=q.device)
    if lm is None:
        lm = torch.empty((2, batch * heads, n_q), dtype=torch.float32, device=q.device)

    def run():
        _v1_fwd[(batch * heads,)](
            q,
            k,
            v,
            out,
            acc,
            lm[0],
            lm[1],
            sm_scale,
            heads,
            n_q,
            n_kv,
            *strides(q),
            *strides(k),
            *strides(v),
            *strides(out),
            HEAD_DIM=d,
            BLOCK_M=config.block_m,
            BLOCK_N=config.block_n,
            CAUSAL=causal,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )

    return [("v1_fwd", run)]


def forward(q, k, v, causal, sm_scale, config, out):
    for _, run in launches(q, k, v, causal, sm_scale, config, out):
        run()
    return out
