"""FlashAttention (v1) backward in Triton: the released FlashAttention-1 kernel's structure.

``config.v1_kernel == "released"`` (the default; docs/fa1.md): the loops of
flash-attn 1.0.x's ``fmha_dgrad_kernel_1xN_loop`` on its split path. Three launches:

1. ``v1_bwd_dot``: D = rowsum(dO ∘ O), 128 rows a CTA, which also sets those rows
   of the float32 dQ accumulator ``dQacc`` to 0 (the released kernel's
   ``dq_tmp.zero_()`` and ``fmha_bwd_dot_do_o_kernel``, one launch here);
2. ``v1_bwd``: grid (B·H, num_splits). Program z walks the K/V blocks z, z+S, ...
   (S = num_splits: 1, or one CTA per block). For each block j (``block_n`` keys)
   it keeps dK_j, dV_j in registers and walks the ``block_m`` = 16-row Q steps:
   S = Q_i K_jᵀ and dP = dO_i V_jᵀ with the ``num_warps`` = 8 warps splitting the
   keys, P = exp(S·scale − lse), dS = P ∘ (dP − D_i), dV_j += Pᵀ dO_i and
   dK_j += dSᵀ Q_i (each warp its own keys' rows), dQ_i += dS K_j, added into
   ``dQacc`` with atomics (the warps exchange dS through shared memory, each adding
   d/8 columns; the released kernel sums per-warp partials there instead);
3. ``v1_bwd_dq``: dQ = scale · dQacc in the input dtype.

The forward kept ℓ and m (``lm``, float32 [2, B·H, Nq]): P = exp(S·scale − m) / ℓ,
so either v1 forward's state serves (the released forward's ℓ = 1, m = lse).
The released kernel with one CTA per head loads and stores its fp32 dQ each step
and computes D in its first pass; this one always takes the split path.

Causal (Nq = Nk: v1 has no shifted diagonal, traces.config.check_serving): block
j's walk starts at the first step with a row i >= j·block_n; the steps on the
diagonal (and a partial last block) mask.

``"algorithm1"``: the paper's Algorithm 4 (:mod:`flash_v1_algorithm1_bwd`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import flash_v1_algorithm1_bwd
from ._common import LOG2E

_LOG2E = tl.constexpr(LOG2E)
DOT_ROWS = 128  # rows per CTA of the D launch (the released fmha_bwd_dot_do_o_kernel's)
CONVERT_ROWS = 64  # rows per CTA of the dQ conversion


@triton.jit
def _v1_released_bwd(
    Q,
    K,
    V,
    DO,  # q, do [B*H, Nq, d]; k, v [B*H, Nk, d], contiguous
    DK,
    DV,  # gradients [B*H, Nk, d], input dtype
    DQacc,  # float32 [B*H, Nq, d], zeroed
    L,
    M,  # the forward's ℓ and m, float32 [B*H, Nq]
    Delta,  # D = rowsum(dO ∘ O), float32 [B*H, Nq]
    sm_scale,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    q_base = off_bh.to(tl.int64) * n_q * HEAD_DIM
    kv_base = off_bh.to(tl.int64) * n_kv * HEAD_DIM
    Q += q_base
    DO += q_base
    DQacc += q_base
    K += kv_base
    V += kv_base
    DK += kv_base
    DV += kv_base
    L += off_bh.to(tl.int64) * n_q
    M += off_bh.to(tl.int64) * n_q
    Delta += off_bh.to(tl.int64) * n_q
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * _LOG2E

    for start_n in range(split * BLOCK_N, n_kv, n_split * BLOCK_N):
        # -- K_j, V_j on chip; dK_j, dV_j accumulate in registers --
        cols = start_n + offs_n0
        kv_ok = cols[:, None] < n_kv
        kv_off = cols[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv_off, mask=kv_ok, other=0.0)
        v = tl.load(V + kv_off, mask=kv_ok, other=0.0)
        dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
        first_m = start_n // BLOCK_M * BLOCK_M if CAUSAL else 0
        for start_m in range(first_m, n_q, BLOCK_M):
            rows = start_m + offs_m0
            row_ok = rows < n_q
            q_off = rows[:, None] * HEAD_DIM + offs_d[None, :]
            q = tl.load(Q + q_off, mask=row_ok[:, None], other=0.0)
            do = tl.load(DO + q_off, mask=row_ok[:, None], other=0.0)
            ell = tl.load(L + rows, mask=row_ok, other=1.0)
            m = tl.load(M + rows, mask=row_ok, other=0.0)
            delta = tl.load(Delta + rows, mask=row_ok, other=0.0)
            # -- S, P: each warp its keys; rows past Nq have dO = 0 --
            s = tl.dot(q, tl.trans(k))
            p = tl.math.exp2(s * qk_scale - (m * _LOG2E)[:, None]) / ell[:, None]
            partial = start_n + BLOCK_N > n_kv
            if CAUSAL:
                partial = partial | (start_n + BLOCK_N > start_m + 1)
            if partial:
                keep = cols[None, :] < n_kv
                if CAUSAL:
                    keep = keep & (cols[None, :] <= rows[:, None])
                p = tl.where(keep, p, 0.0)
            # -- dV_j += Pᵀ dO_i; dP = dO_i V_jᵀ; dS = P ∘ (dP − D_i) --
            dv = tl.dot(tl.trans(p.to(do.dtype)), do, dv)
            dp = tl.dot(do, tl.trans(v))
            ds = (p * (dp - delta[:, None])).to(q.dtype)
            # -- dK_j += dSᵀ Q_i; dQ_i += dS K_j into the fp32 accumulator --
            dk = tl.dot(tl.trans(ds), q, dk)
            dq = tl.dot(ds, k)
            tl.atomic_add(DQacc + q_off, dq, mask=row_ok[:, None], sem="relaxed")
        tl.store(DK + kv_off, (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_ok)
        tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_ok)


@triton.jit
def _dot_do_o(
    Out,
    DO,  # [B*H*Nq, d] contiguous
    Delta,  # float32 [B*H*Nq]
    DQacc,  # float32 [B*H*Nq, d]
    n_rows,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = rows.to(tl.int64)[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    ok = rows[:, None] < n_rows
    o = tl.load(Out + offs, mask=ok, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(Delta + rows, tl.sum(o * do, 1), mask=rows < n_rows)
    tl.store(DQacc + offs, tl.zeros([BLOCK_M, HEAD_DIM], tl.float32), mask=ok)


@triton.jit
def _dq_convert(DQacc, DQ, sm_scale, n_rows, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = rows.to(tl.int64)[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    ok = rows[:, None] < n_rows
    dq = tl.load(DQacc + offs, mask=ok, other=0.0)
    tl.store(DQ + offs, (dq * sm_scale).to(DQ.dtype.element_ty), mask=ok)


def launches(q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv):
    """The backward launches of v1 [(name, run)] (inputs checked and contiguous; ``o``,
    ``lm`` from the forward; ``dq``, ``dk``, ``dv`` contiguous)."""
    if config.v1_kernel != "released":
        return flash_v1_algorithm1_bwd.launches(
            q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv
        )
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    bh = batch * heads
    dq_acc = torch.empty((bh, n_q, d), dtype=torch.float32, device=q.device)
    delta = torch.empty((bh, n_q), dtype=torch.float32, device=q.device)

    rows = bh * n_q

    def run_dot():
        grid = (triton.cdiv(rows, DOT_ROWS),)
        _dot_do_o[grid](o, do, delta, dq_acc, rows, HEAD_DIM=d, BLOCK_M=DOT_ROWS, num_warps=4)

    def run_main():
        _v1_released_bwd[(bh, config.num_splits)](
            q,
            k,
            v,
            do,
            dk,
            dv,
            dq_acc,
            lm[0],
            lm[1],
            delta,
            sm_scale,
            n_q,
            n_kv,
            HEAD_DIM=d,
            BLOCK_M=config.block_m,
            BLOCK_N=config.block_n,
            CAUSAL=causal,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )

    def run_convert():
        grid = (triton.cdiv(rows, CONVERT_ROWS),)
        _dq_convert[grid](dq_acc, dq, sm_scale, rows, HEAD_DIM=d, BLOCK_M=CONVERT_ROWS)

    return [
        ("v1_bwd_dot", run_dot),
        ("v1_bwd", run_main),
        ("v1_bwd_dq", run_convert),
    ]
