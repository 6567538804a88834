"""Standard attention's backward in five Triton kernels: P, dP and dS go through HBM.

The forward kept P (``standard.launches(..., p=buffer)``); nothing is
recomputed. The launches are those of ``traces/standard_bwd.py``:

1. ``bwd_dv``:      dV = Pᵀ dO, tiles of block_n x d, k-loop over the Q blocks
                    (block_m rows of P and dO per step). Grid (cdiv(Nk, block_n), B·H).
2. ``bwd_dp``:      dP = dO Vᵀ, the forward's ``qk`` GEMM kernel with dO for Q, V
                    for K and scale 1. Grid (cdiv(Nq, block_m), cdiv(Nk, block_n), B·H).
3. ``bwd_softmax``: dS = P ∘ (dP − rowsum(dP ∘ P)), one program per row; a row of
                    up to SOFTMAX_MAX_BLOCK scores is read once, a longer one twice
                    (the row sum, then dS), the forward softmax kernel's plan.
4. ``bwd_dq``:      dQ = dS K · scale, tiles of block_m x d, k-loop over K blocks.
5. ``bwd_dk``:      dK = dSᵀ Q · scale, tiles of block_n x d, k-loop over Q blocks.

dP and dS are [B·H, Nq, Nk_pad] buffers in the input dtype, as P, with zeros in
the padding columns; column accesses are bounded by Nk_pad, a multiple of 16, so
they stay 16-byte vectors (see kernels/standard.py). Causal masking costs nothing
here: masked P is 0, so masked dS is 0 and the GEMMs stay full.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._common import strides
from .standard import _qk_kernel, probs_buffer, softmax_launch


@triton.jit
def _ds_gemm_kernel(
    A,  # P or dS [B*H, Nq, Nk_pad]
    B,  # dO, Q or K [B, H, N, d]
    Out,  # dV, dK or dQ [B, H, N, d]
    scale,
    n_heads,
    n_out,  # rows of Out (Nk for dV/dK, Nq for dQ)
    n_red,  # length of the reduction (Nq for dV/dK, Nk for dQ)
    a_cols,  # A's row length (Nk_pad, a multiple of 16; zeros past Nk)
    stride_abh,
    stride_am,
    stride_an,
    stride_bb,
    stride_bh,
    stride_bn,
    stride_bd,
    stride_ob,
    stride_oh,
    stride_on,
    stride_od,
    HEAD_DIM: tl.constexpr,
    BLOCK_OUT: tl.constexpr,  # rows of Out per program
    BLOCK_RED: tl.constexpr,  # reduction step
    TRANS_A: tl.constexpr,  # Out = scale · Aᵀ B (dV, dK) instead of scale · A B (dQ)
):
    start = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // n_heads
    off_h = off_bh % n_heads
    offs_o = start * BLOCK_OUT + tl.arange(0, BLOCK_OUT)
    offs_r = tl.arange(0, BLOCK_RED)
    offs_d = tl.arange(0, HEAD_DIM)
    A += off_bh.to(tl.int64) * stride_abh
    B += off_b.to(tl.int64) * stride_bb + off_h.to(tl.int64) * stride_bh
    Out += off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh
    acc = tl.zeros([BLOCK_OUT, HEAD_DIM], dtype=tl.float32)
    # -- k-loop over the reduction dimension --
    for start_r in range(0, n_red, BLOCK_RED):
        red = start_r + offs_r
        if TRANS_A:
            # a [BLOCK_RED, BLOCK_OUT] tile of A (rows: queries, columns: keys), used transposed
            a = tl.load(
                A + red[:, None].to(tl.int64) * stride_am + offs_o[None, :] * stride_an,
                mask=(red[:, None] < n_red) & (offs_o[None, :] < a_cols),
                other=0.0,
            )
            a = tl.trans(a)
        else:
            a = tl.load(
                A + offs_o[:, None].to(tl.int64) * stride_am + red[None, :] * stride_an,
                mask=(offs_o[:, None] < n_out) & (red[None, :] < a_cols),
                other=0.0,
            )
        b = tl.load(
            B + red[:, None] * stride_bn + offs_d[None, :] * stride_bd,
            mask=red[:, None] < n_red,
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    acc = acc * scale
    o_ptrs = Out + offs_o[:, None] * stride_on + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_o[:, None] < n_out)


@triton.jit
def _softmax_bwd_kernel(
    P,
    DP,
    DS,  # [B*H*Nq rows, Nk_pad]; zeros past Nk in P and dP, so in dS
    stride_row,  # Nk_pad, a multiple of 16
    BLOCK: tl.constexpr,
    ONE_PASS: tl.constexpr,
):
    row = tl.program_id(0)
    n_cols = stride_row
    P += row.to(tl.int64) * stride_row
    DP += row.to(tl.int64) * stride_row
    DS += row.to(tl.int64) * stride_row
    cols = tl.arange(0, BLOCK)
    if ONE_PASS:
        p = tl.load(P + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        dp = tl.load(DP + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        delta = tl.sum(p * dp, 0)
        tl.store(DS + cols, (p * (dp - delta)).to(DS.dtype.element_ty), mask=cols < n_cols)
    else:
        # -- pass 1: delta = rowsum(dP ∘ P) --
        part = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            p = tl.load(P + start + cols, mask=ok, other=0.0).to(tl.float32)
            dp = tl.load(DP + start + cols, mask=ok, other=0.0).to(tl.float32)
            part += p * dp
        delta = tl.sum(part, 0)
        # -- pass 2: dS = P ∘ (dP − delta) --
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            p = tl.load(P + start + cols, mask=ok, other=0.0).to(tl.float32)
            dp = tl.load(DP + start + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(DS + start + cols, (p * (dp - delta)).to(DS.dtype.element_ty), mask=ok)


def launches(q, k, v, do, p, causal, sm_scale, config, dq, dk, dv):
    """The five backward launches [(name, run)] (inputs checked; ``p`` from the forward).

    ``causal`` is already in P (masked probabilities are 0), so no kernel reads it.
    """
    del causal
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    bm, bn = config.block_m, config.block_n
    n_pad = p.shape[2]
    dp = probs_buffer(q, n_kv)
    ds = probs_buffer(q, n_kv)
    block, one_pass, sm_warps = softmax_launch(n_kv)
    meta = dict(HEAD_DIM=d, num_warps=config.num_warps, num_stages=config.num_stages)

    def gemm(a, b, out, scale, n_out, n_red, block_out, block_red, trans_a):
        def run():
            grid = (triton.cdiv(n_out, block_out), batch * heads)
            _ds_gemm_kernel[grid](
                a,
                b,
                out,
                scale,
                heads,
                n_out,
                n_red,
                a.shape[2],
                *a.stride(),
                *strides(b),
                *strides(out),
                BLOCK_OUT=block_out,
                BLOCK_RED=block_red,
                TRANS_A=trans_a,
                **meta,
            )

        return run

    def run_dp():
        grid = (triton.cdiv(n_q, bm), triton.cdiv(n_kv, bn), batch * heads)
        _qk_kernel[grid](
            do,
            v,
            dp,
            1.0,
            heads,
            n_q,
            n_kv,
            dp.shape[2],
            *strides(do),
            *strides(v),
            *dp.stride(),
            BLOCK_M=bm,
            BLOCK_N=bn,
            **meta,
        )

    def run_softmax():
        _softmax_bwd_kernel[(batch * heads * n_q,)](
            p, dp, ds, n_pad, BLOCK=block, ONE_PASS=one_pass, num_warps=sm_warps
        )

    return [
        ("standard_bwd_dv", gemm(p, do, dv, 1.0, n_kv, n_q, bn, bm, True)),
        ("standard_bwd_dp", run_dp),
        ("standard_bwd_softmax", run_softmax),
        ("standard_bwd_dq", gemm(ds, k, dq, sm_scale, n_q, n_kv, bm, bn, False)),
        ("standard_bwd_dk", gemm(ds, q, dk, sm_scale, n_kv, n_q, bn, bm, True)),
    ]
