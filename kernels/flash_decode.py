"""Split-KV decode in Triton: Flash-Decoding with the query heads of a group packed.

Decode has a few query rows per sequence against a long KV cache, so v2's grid of
one CTA per (Q block, head) leaves most SMs idle and loads every K/V tile once per
query head. This kernel follows FlashAttention's decode path instead:

* PackGQA (``config.pack_gqa``, FlashAttention-3): a CTA takes the G query heads
  of one K/V head together. Its Q block is ``BLOCK_M`` of the N_q·G (row, head)
  pairs, heads fastest (packed row p is query row p // G of head h_kv·G + p % G),
  so each K/V tile it loads serves all G heads.
* Split-KV (``config.num_splits`` S > 1, Flash-Decoding): grid (Q blocks, S,
  B·H_kv); split s walks K/V blocks [s·P, (s+1)·P), P = cdiv(cdiv(N_kv, BLOCK_N), S),
  and writes its float32 partial O and log-sum-exp (base 2) to a workspace; then
  ``_combine`` (one program per Q block) weighs the S partials by
  exp2(lse_s - lse) and writes O and the natural-log log-sum-exp. One split
  writes O directly.

Causal masking is aligned bottom-right: query row i sees key columns
j <= i + N_kv - N_q. K/V blocks every row of the Q block sees whole run
without a mask. A row that sees no key of a split gets lse -inf and O 0 there,
which the combine weighs by 0. Loads are pointer loads (masked gathers of the
packed Q rows), which Triton pipelines ``num_stages`` deep.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import LN2, LOG2E, strides
from .launch import Launch

NEG_BIG = tl.constexpr(-1.0e6)  # additive mask in the exp2 domain: finite, so no NaN rows
_LN2 = tl.constexpr(LN2)


@triton.jit
def _kv_blocks(
    acc,
    l_i,
    m_i,
    q,
    K,
    V,
    lo,
    hi,
    q_row,
    offs_n,
    offs_d,
    n_kv,
    shift,
    qk_scale,
    stride_kn,
    stride_kd,
    stride_vn,
    stride_vd,
    MASK: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """The online softmax over K/V blocks [lo, hi) (block indices) of one K/V head."""
    for blk in range(lo, hi):
        start_n = blk * BLOCK_N
        cols = start_n + offs_n
        k_ptrs = K + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = V + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd
        if MASK:
            k = tl.load(k_ptrs, mask=cols[:, None] < n_kv, other=0.0)
            v = tl.load(v_ptrs, mask=cols[:, None] < n_kv, other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        # -- S = Q K^T --
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if MASK:
            keep = cols[None, :] < n_kv
            if CAUSAL:
                keep = keep & (cols[None, :] <= q_row[:, None] + shift)
            qk = qk + tl.where(keep, 0.0, NEG_BIG)
        # -- online softmax --
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        # -- acc += P V --
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _decode_fwd(
    Q,
    K,
    V,
    Out,  # q, out [B, H, Nq, d]; k, v [B, H_kv, Nkv, d]
    LSE,  # float32 [B*H, Nq], natural log (one split)
    Oacc,  # float32 [S, grid heads, T_r*BLOCK_M, d] (splits)
    LSEacc,  # float32 [S, grid heads, T_r*BLOCK_M], base 2 (splits)
    qk_scale,  # sm_scale / ln 2
    n_heads,
    n_kv_heads,
    group,  # n_heads // n_kv_heads
    n_q,
    n_kv,
    blocks_per_split,
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
    PACK: tl.constexpr,
    SPLIT: tl.constexpr,
):
    start_m = tl.program_id(0)
    split = tl.program_id(1)
    off_g = tl.program_id(2)  # (b, K/V head) packed; (b, query head) otherwise
    offs_p = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    if PACK:
        off_b = off_g // n_kv_heads
        off_hk = off_g % n_kv_heads
        q_row = offs_p // group
        q_head = off_hk * group + offs_p % group
        n_rows = n_q * group
    else:
        off_b = off_g // n_heads
        q_head = off_g % n_heads + offs_p * 0
        off_hk = (off_g % n_heads) // group
        q_row = offs_p
        n_rows = n_q
    row_ok = offs_p < n_rows
    q_off = q_head.to(tl.int64) * stride_qh + q_row.to(tl.int64) * stride_qm
    q_ptrs = Q + off_b.to(tl.int64) * stride_qb + q_off[:, None] + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    K += off_b.to(tl.int64) * stride_kb + off_hk.to(tl.int64) * stride_kh
    V += off_b.to(tl.int64) * stride_vb + off_hk.to(tl.int64) * stride_vh

    # -- this split's K/V blocks: those without a mask, then the masked ones --
    shift = n_kv - n_q
    lo = split * blocks_per_split
    hi = tl.minimum(tl.cdiv(n_kv, BLOCK_N), lo + blocks_per_split)
    if CAUSAL:
        # query rows first_q .. last_q - 1 are in this block
        last_q = tl.minimum(start_m * BLOCK_M + BLOCK_M, n_rows)
        first_q = start_m * BLOCK_M
        if PACK:
            last_q = tl.cdiv(last_q, group)
            first_q = first_q // group
        hi = tl.minimum(hi, tl.cdiv(last_q + shift, BLOCK_N))
        full = tl.minimum(first_q + shift + 1, n_kv) // BLOCK_N
    else:
        full = n_kv // BLOCK_N
    mid = tl.maximum(lo, tl.minimum(hi, full))

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    acc, l_i, m_i = _kv_blocks(
        acc, l_i, m_i, q, K, V, lo, mid, q_row, offs_n, offs_d, n_kv, shift, qk_scale,
        stride_kn, stride_kd, stride_vn, stride_vd, False, CAUSAL, BLOCK_N,
    )  # fmt: skip
    acc, l_i, m_i = _kv_blocks(
        acc, l_i, m_i, q, K, V, mid, hi, q_row, offs_n, offs_d, n_kv, shift, qk_scale,
        stride_kn, stride_kd, stride_vn, stride_vd, True, CAUSAL, BLOCK_N,
    )  # fmt: skip

    # -- epilogue: a row that saw no key of this split has l = 0: O 0, lse -inf --
    seen = l_i > 0.0
    acc = acc / tl.where(seen, l_i, 1.0)[:, None]
    lse2 = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
    if SPLIT:
        n_grid = tl.num_programs(2)
        pad = tl.num_programs(0) * BLOCK_M
        base = (split * n_grid + off_g).to(tl.int64) * pad
        tl.store(LSEacc + base + offs_p, lse2)
        o_ptrs = Oacc + (base + offs_p)[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptrs, acc)
    else:
        lse_off = (off_b * n_heads + q_head).to(tl.int64) * n_q + q_row
        tl.store(LSE + lse_off, lse2 * _LN2, mask=row_ok)
        o_off = q_head.to(tl.int64) * stride_oh + q_row.to(tl.int64) * stride_om
        o_ptrs = Out + off_b.to(tl.int64) * stride_ob + o_off[:, None] + offs_d[None, :] * stride_od
        tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _combine(
    Oacc,
    LSEacc,
    Out,
    LSE,
    n_splits,
    n_heads,
    n_kv_heads,
    group,
    n_q,
    stride_ob,
    stride_oh,
    stride_om,
    stride_od,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    SPLITS_POW2: tl.constexpr,
    PACK: tl.constexpr,
):
    """O = sum_s exp2(lse_s - lse) O_s with lse = log2 sum_s exp2(lse_s), per row."""
    start_m = tl.program_id(0)
    off_g = tl.program_id(1)
    n_grid = tl.num_programs(1)
    pad = tl.num_programs(0) * BLOCK_M
    offs_p = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_s = tl.arange(0, SPLITS_POW2)
    offs_d = tl.arange(0, HEAD_DIM)
    # -- the S partial log-sum-exps, their max and the sum of the weights --
    rows0 = off_g.to(tl.int64) * pad + offs_p
    lse_ptrs = LSEacc + (offs_s.to(tl.int64) * n_grid * pad)[:, None] + rows0[None, :]
    lse_s = tl.load(lse_ptrs, mask=offs_s[:, None] < n_splits, other=float("-inf"))
    lse_max = tl.max(lse_s, 0)
    total = tl.sum(tl.math.exp2(lse_s - lse_max[None, :]), 0)
    lse = lse_max + tl.math.log2(total)
    # -- the weighted partial outputs --
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for s in range(0, n_splits):
        rows = s * n_grid * pad + rows0
        w = tl.math.exp2(tl.load(LSEacc + rows) - lse)
        o = tl.load(Oacc + rows[:, None] * HEAD_DIM + offs_d[None, :])
        acc += w[:, None] * o
    if PACK:
        off_b = off_g // n_kv_heads
        q_row = offs_p // group
        q_head = (off_g % n_kv_heads) * group + offs_p % group
        n_rows = n_q * group
    else:
        off_b = off_g // n_heads
        q_row = offs_p
        q_head = off_g % n_heads + offs_p * 0
        n_rows = n_q
    row_ok = offs_p < n_rows
    lse_off = (off_b * n_heads + q_head).to(tl.int64) * n_q + q_row
    tl.store(LSE + lse_off, lse * _LN2, mask=row_ok)
    o_off = q_head.to(tl.int64) * stride_oh + q_row.to(tl.int64) * stride_om
    o_ptrs = Out + off_b.to(tl.int64) * stride_ob + o_off[:, None] + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


COMBINE_WARPS = 4  # traces/flash_v2.py's combine launch
COMBINE_STAGES = 3


class Forward:
    """The decode launches for one signature (inputs already checked): the split-KV
    kernel and, with more than one split, the combine."""

    def __init__(self, q, k, v, causal, sm_scale, config):
        batch, heads, n_q, d = q.shape
        kv_heads, n_kv = k.shape[1], k.shape[2]
        group = heads // kv_heads
        pack = config.pack_gqa and group > 1
        bm, bn, splits = config.block_m, config.block_n, config.num_splits
        rows = n_q * group if pack else n_q
        grid_heads = batch * (kv_heads if pack else heads)
        n_m = triton.cdiv(rows, bm)
        self.splits = splits
        self.workspace = (splits, grid_heads, n_m * bm) if splits > 1 else None
        self.head_dim = d
        self.device = q.device
        blocks_per_split = triton.cdiv(triton.cdiv(n_kv, bn), splits)
        out_strides = (heads * n_q * d, n_q * d, d, 1)
        self.scalars = (
            sm_scale * LOG2E,
            heads,
            kv_heads,
            group,
            n_q,
            n_kv,
            blocks_per_split,
            *strides(q),
            *strides(k),
            *strides(v),
            *out_strides,
        )
        meta = dict(
            HEAD_DIM=d,
            BLOCK_M=bm,
            BLOCK_N=bn,
            CAUSAL=causal,
            PACK=pack,
            SPLIT=splits > 1,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )
        self.launch = Launch(_decode_fwd, (n_m, splits, grid_heads), meta)
        self.combine = None
        if splits > 1:
            self.combine_scalars = (splits, heads, kv_heads, group, n_q, *out_strides)
            cmeta = dict(
                HEAD_DIM=d,
                BLOCK_M=bm,
                SPLITS_POW2=triton.next_power_of_2(splits),
                PACK=pack,
                num_warps=COMBINE_WARPS,
                num_stages=COMBINE_STAGES,
            )
            self.combine = Launch(_combine, (n_m, grid_heads), cmeta)

    def buffers(self):
        """The float32 workspace of the split partials (None with one split)."""
        if self.workspace is None:
            return None, None
        o = torch.empty((*self.workspace, self.head_dim), dtype=torch.float32, device=self.device)
        lse = torch.empty(self.workspace, dtype=torch.float32, device=self.device)
        return o, lse

    def runs(self, q, k, v, out, lse, oacc=None, lseacc=None):
        """[(name, run)]: the split kernel, then the combine (partials in oacc, lseacc)."""
        if self.splits > 1 and oacc is None:
            oacc, lseacc = self.buffers()
        dummy = lse if oacc is None else oacc

        def split():
            self.launch(q, k, v, out, lse, dummy, lse if lseacc is None else lseacc, *self.scalars)

        runs = [("flash_decode", split)]
        if self.combine is not None:

            def combine():
                self.combine(oacc, lseacc, out, lse, *self.combine_scalars)

            runs.append(("combine", combine))
        return runs

    def run(self, q, k, v, out, lse) -> None:
        for _, run in self.runs(q, k, v, out, lse):
            run()
