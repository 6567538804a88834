"""Standard attention in three Triton kernels; the n x n matrices really go through HBM.

1. ``qk``:      S = Q Kᵀ · scale, tiles of block_m x block_n with k = d in one step,
                written to HBM in the input dtype. Grid (cdiv(Nq, block_m),
                cdiv(Nk, block_n), B·H). Causal or not, every tile is computed,
                as a plain ``softmax(Q @ K.T) @ V`` does.
2. ``softmax``: one program per row of S, grid (Nq, B·H): reads the row, applies
                the causal mask (column j > row i + Nk - Nq is masked, bottom-right aligned),
                writes P = softmax(row) in the input dtype, as
                ``traces.standard.softmax_fwd_plan`` says: a row of up to
                SOFTMAX_FWD_MAX_BLOCK scores (SOFTMAX_MAX_BLOCK when causal) is read
                once, held in registers; a longer one twice (an online max/sum pass,
                then the normalising pass, in chunks). A causal one-pass row runs at
                the narrowest compiled width that holds its scores and writes zeros
                past it; causal loads stop at the row's scores rounded up to 8
                columns.
3. ``pv``:      O = P V, tiles of block_m x d with a k-loop of block_n over Nk
                (num_stages-deep software pipelining). Grid (cdiv(Nq, block_m), B·H).

The S and P buffers are [B·H, Nq, Nk_pad] with Nk_pad = Nk rounded up to 16
(``traces.standard.padded_row``): Triton specialises an integer argument divisible
by 16, so the kernels' row strides and column bounds (Nk_pad, or a causal row's
scores rounded up to 8 with a hint) are known multiples of 8 elements and every
access is a 16-byte one; the scores past Nk are masked in registers and P's padding
columns are written as zeros. At a bound Triton cannot prove a multiple of 8 (Nk
itself, or i + 1) every access is a 2-byte one: 8x the instructions, and, measured
on the H200, 2-3x the time.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..traces.standard import softmax_fwd_plan, softmax_plan
from ..traces.tiles import padded_row
from ._common import LOG2E, strides

NEG_INF = tl.constexpr(float("-inf"))
_LOG2E = tl.constexpr(LOG2E)


@triton.jit
def _qk_kernel(
    Q,
    K,
    S,  # q, k [B, H, N, d]; s [B*H, Nq, Nk_pad]
    sm_scale,
    n_heads,
    n_q,
    n_kv,
    n_cols,  # Nk_pad: S's row length, a multiple of 16
    stride_qb,
    stride_qh,
    stride_qm,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_sbh,
    stride_sm,
    stride_sn,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0)
    start_n = tl.program_id(1)
    off_bh = tl.program_id(2)
    off_b = off_bh // n_heads
    off_h = off_bh % n_heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    Q += off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
    K += off_b.to(tl.int64) * stride_kb + off_h.to(tl.int64) * stride_kh
    S += off_bh.to(tl.int64) * stride_sbh
    # -- one tile of S, k = d in a single step --
    q = tl.load(
        Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
        mask=offs_m[:, None] < n_q,
        other=0.0,
    )
    k = tl.load(
        K + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
        mask=offs_n[:, None] < n_kv,
        other=0.0,
    )
    s = tl.dot(q, tl.trans(k)) * sm_scale  # 0 in the padding columns (K rows past Nk: 0)
    s_ptrs = S + offs_m[:, None].to(tl.int64) * stride_sm + offs_n[None, :] * stride_sn
    tl.store(
        s_ptrs, s.to(S.dtype.element_ty), mask=(offs_m[:, None] < n_q) & (offs_n[None, :] < n_cols)
    )


@triton.jit
def _softmax_row(
    S,
    P,  # this row of S and P
    n_cols,  # the row's length (Nk_pad, a multiple of 16)
    n_valid,  # columns the row sees: j < n_valid
    n_load,  # columns loaded: n_valid rounded up to 8 (16-byte vectors), within the row
    WIDTH: tl.constexpr,  # register block of this row: n_valid <= WIDTH
    BLOCK: tl.constexpr,  # the launch's block: columns [WIDTH, BLOCK) are past n_valid
):
    cols = tl.arange(0, WIDTH)
    # loads bounded by a multiple of 8 are 16-byte vectors; the exact mask is a select
    x = tl.load(S + cols, mask=cols < n_load, other=NEG_INF).to(tl.float32)
    x = tl.where(cols < n_valid, x, NEG_INF)
    # exp(x - m) as exp2((x - m) * log2 e): one MUFU op per score; the row is
    # normalised by one reciprocal and a multiply per score (a division per score
    # costs a dozen instructions)
    m = tl.max(x, 0)
    e = tl.math.exp2((x - m) * _LOG2E)
    p = e * (1.0 / tl.sum(e, 0))
    tl.store(P + cols, p.to(P.dtype.element_ty), mask=cols < n_cols)
    if WIDTH < BLOCK:
        # the rest of a causal row is past its last score: zeros, no load, no exp2
        rest = tl.arange(0, BLOCK)
        zeros = tl.zeros([BLOCK], dtype=P.dtype.element_ty)
        tl.store(P + rest, zeros, mask=(rest >= WIDTH) & (rest < n_cols))


@triton.jit
def _softmax_kernel(
    S,
    P,  # [B*H*Nq rows, Nk_pad]
    n_q,
    n_kv,
    stride_row,  # Nk_pad, a multiple of 16
    CAUSAL: tl.constexpr,
    BLOCK: tl.constexpr,
    ONE_PASS: tl.constexpr,
    TIERS: tl.constexpr,  # causal one-pass rows: widths BLOCK, BLOCK/2, ..., BLOCK/2^(TIERS-1)
):
    i = tl.program_id(0)  # query index of this row, for the causal mask
    row = tl.program_id(1) * n_q + i  # (a 2-D grid: no modulo per row)
    S += row.to(tl.int64) * stride_row
    P += row.to(tl.int64) * stride_row
    n_cols = stride_row
    # columns this row may see: j < Nk, and j <= i + Nk - Nq when causal (bottom-right)
    n_valid = tl.minimum(n_kv, i + 1 + n_kv - n_q) if CAUSAL else n_kv
    # loads stop at n_valid rounded up to 8 columns (within Nk_pad, a multiple of 16)
    n_load = tl.multiple_of(tl.minimum((n_valid + 7) // 8 * 8, n_cols), 8)
    if ONE_PASS:
        if CAUSAL and TIERS > 1:
            # the narrowest width that holds the row's scores: a row exponentiates at
            # most twice the scores it sees (the smallest width: any number)
            narrow: tl.constexpr = BLOCK >> (TIERS - 1)
            if n_valid <= narrow:
                _softmax_row(S, P, n_cols, n_valid, n_load, narrow, BLOCK)
            for t in tl.static_range(1, TIERS):
                if (n_valid > (narrow << (t - 1))) & (n_valid <= (narrow << t)):
                    _softmax_row(S, P, n_cols, n_valid, n_load, narrow << t, BLOCK)
        else:
            _softmax_row(S, P, n_cols, n_valid, n_load, BLOCK, BLOCK)
    else:
        cols = tl.arange(0, BLOCK)
        # -- pass 1: running row max and rescaled row sum, a chunk at a time --
        # (the first chunk always holds column 0, so the max is finite from the start)
        x = tl.load(S + cols, mask=cols < n_load, other=NEG_INF).to(tl.float32)
        x = tl.where(cols < n_valid, x, NEG_INF)
        m_row = tl.max(x, 0)
        l_row = tl.sum(tl.math.exp2((x - m_row) * _LOG2E), 0)
        for start in range(BLOCK, n_valid, BLOCK):
            xs = tl.load(S + start + cols, mask=start + cols < n_load, other=NEG_INF)
            xs = xs.to(tl.float32)
            xs = tl.where(start + cols < n_valid, xs, NEG_INF)
            m_new = tl.maximum(m_row, tl.max(xs, 0))
            l_row = l_row * tl.math.exp2((m_row - m_new) * _LOG2E) + tl.sum(
                tl.math.exp2((xs - m_new) * _LOG2E), 0
            )
            m_row = m_new
        # -- pass 2: normalise and write P (masked columns get 0) --
        inv_l = 1.0 / l_row
        for start in range(0, n_valid, BLOCK):
            xs = tl.load(S + start + cols, mask=start + cols < n_load, other=NEG_INF)
            xs = xs.to(tl.float32)
            xs = tl.where(start + cols < n_valid, xs, NEG_INF)
            p = tl.math.exp2((xs - m_row) * _LOG2E) * inv_l
            tl.store(P + start + cols, p.to(P.dtype.element_ty), mask=start + cols < n_cols)
        # chunks wholly past the columns the row sees (causal): zeros, no load, no exp2
        zeros = tl.zeros([BLOCK], dtype=P.dtype.element_ty)
        for start in range(tl.cdiv(n_valid, BLOCK) * BLOCK, n_cols, BLOCK):
            tl.store(P + start + cols, zeros, mask=start + cols < n_cols)


@triton.jit
def _pv_kernel(
    P,
    V,
    Out,  # p [B*H, Nq, Nk_pad]; v, o [B, H, N, d]
    n_heads,
    n_q,
    n_kv,
    n_cols,  # Nk_pad: P's row length, a multiple of 16 (zeros past Nk)
    stride_pbh,
    stride_pm,
    stride_pn,
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
):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // n_heads
    off_h = off_bh % n_heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    P += off_bh.to(tl.int64) * stride_pbh
    V += off_b.to(tl.int64) * stride_vb + off_h.to(tl.int64) * stride_vh
    Out += off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # -- k-loop over the key dimension, block_n at a time --
    for start_n in range(0, n_kv, BLOCK_N):
        cols = start_n + offs_n
        p = tl.load(
            P + offs_m[:, None].to(tl.int64) * stride_pm + cols[None, :] * stride_pn,
            mask=(offs_m[:, None] < n_q) & (cols[None, :] < n_cols),
            other=0.0,
        )
        v = tl.load(
            V + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
            mask=cols[:, None] < n_kv,
            other=0.0,
        )
        acc = tl.dot(p, v, acc)
    o_ptrs = Out + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < n_q)


def softmax_launch(n_kv: int) -> tuple[int, bool, int]:
    """(block, one_pass, num_warps) of the backward's row kernel (dS): the plan its
    trace models (traces.standard.softmax_plan). The forward's softmax runs
    traces.standard.softmax_fwd_plan."""
    block, passes, num_warps = softmax_plan(n_kv)
    return block, passes == 1, num_warps


def softmax_rows(s: torch.Tensor, p: torch.Tensor, n_kv: int, causal: bool) -> None:
    """P = softmax(mask(S)) row by row, as the forward's second launch runs it.

    ``s``, ``p``: [B·H, Nq, Nk_pad] buffers (:func:`probs_buffer`); columns from
    ``n_kv`` on are padding, never read into a row's result; P's are written as zeros.
    """
    bh, n_q, n_pad = s.shape
    # the kernel takes Nk_pad as both the row stride and the bound of its loads
    assert s.is_contiguous() and p.is_contiguous() and p.shape == s.shape and n_pad % 8 == 0
    plan = softmax_fwd_plan(n_kv, causal)
    _softmax_kernel[(n_q, bh)](
        s,
        p,
        n_q,
        n_kv,
        n_pad,
        CAUSAL=causal,
        BLOCK=plan.block,
        ONE_PASS=plan.passes == 1,
        TIERS=plan.tiers,
        num_warps=plan.num_warps,
    )


def probs_buffer(q: torch.Tensor, n_kv: int) -> torch.Tensor:
    """An empty [B·H, Nq, Nk_pad] buffer for S, P (or the backward's dP, dS)."""
    batch, heads, n_q, _ = q.shape
    n_pad = padded_row(n_kv)
    return torch.empty((batch * heads, n_q, n_pad), dtype=q.dtype, device=q.device)


def launches(q, k, v, causal, sm_scale, config, out, *, p=None):
    """The three launches [(name, run)]: qk, softmax, pv (inputs already checked).

    ``p``: an optional :func:`probs_buffer` that keeps P after the run (the
    backward reads it); by default P is a temporary.
    """
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    bm, bn = config.block_m, config.block_n
    s = probs_buffer(q, n_kv)
    p = torch.empty_like(s) if p is None else p

    def run_qk():
        grid = (triton.cdiv(n_q, bm), triton.cdiv(n_kv, bn), batch * heads)
        _qk_kernel[grid](
            q,
            k,
            s,
            sm_scale,
            heads,
            n_q,
            n_kv,
            s.shape[2],
            *strides(q),
            *strides(k),
            *s.stride(),
            HEAD_DIM=d,
            BLOCK_M=bm,
            BLOCK_N=bn,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )

    def run_softmax():
        softmax_rows(s, p, n_kv, causal)

    def run_pv():
        grid = (triton.cdiv(n_q, bm), batch * heads)
        _pv_kernel[grid](
            p,
            v,
            out,
            heads,
            n_q,
            n_kv,
            p.shape[2],
            *p.stride(),
            *strides(v),
            *strides(out),
            HEAD_DIM=d,
            BLOCK_M=bm,
            BLOCK_N=bn,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )

    return [("standard_qk", run_qk), ("standard_softmax", run_softmax), ("standard_pv", run_pv)]


def forward(q, k, v, causal, sm_scale, config, out):
    for _, run in launches(q, k, v, causal, sm_scale, config, out):
        run()
    return out
