"""FlashAttention-2 forward in Triton.

Grid: (cdiv(Nq, block_m), B·H), the Q-block index fastest, so the CTAs that run
together read the same head's K and V (L2 reuse). Each CTA keeps its Q block on
chip, walks the K/V blocks with an online softmax (running row max ``m`` and
row sum ``l``), rescales the accumulator once at the end and stores O and the
log-sum-exp (natural log) of each row.

Causal (aligned bottom-right: row i sees columns j <= i + Nk - Nq): a CTA visits
only the K/V blocks left of and on its diagonal. Blocks wholly below the diagonal
run without a mask; the diagonal blocks (and a partial last K/V block) run with it.
Grouped-query heads: k and v have H_kv heads and query head h reads K/V head
h // (H / H_kv); the CTAs of one group read the same K/V tiles (L2 serves them).
A config with ``num_splits > 1`` or ``pack_gqa`` runs the decode kernel
(:mod:`.flash_decode`) instead.

Loads: on Hopper the Q, K, V and O tiles move through host-side TMA tensor
descriptors over the tensors flattened to [B·H·N, d]; elsewhere (Ampere, the
interpreter) through pointer loads with masks. A descriptor tile that runs past
the end of a head reads the next head's rows; the kernel masks those columns to
-inf, multiplies their V rows by zero and never stores such rows.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import flash_decode
from ._common import LN2, LOG2E, strides
from .launch import Launch, rebase

try:  # triton >= 3.3
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: pointer loads only
    TensorDescriptor = None

NEG_BIG = tl.constexpr(-1.0e6)  # additive mask in the exp2 domain: finite, so no NaN rows
_LN2 = tl.constexpr(LN2)


@triton.jit
def _softmax_step(
    acc,
    l_i,
    m_i,
    qk,
    v,
    start_n,
    offs_m,
    offs_n,
    n_kv,
    shift,
    qk_scale,
    MASK: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    """One K/V block of the online softmax: qk = Q Kᵀ (unscaled fp32), v [block_n, d]."""
    if MASK:
        cols = start_n + offs_n
        keep = cols[None, :] < n_kv
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + shift)
        qk = qk * qk_scale + tl.where(keep, 0.0, NEG_BIG)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        qk = qk - m_ij[:, None]
    else:
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
    # -- exponentials (SFU) and the rescale factor of the old rows --
    p = tl.math.exp2(qk)
    alpha = tl.math.exp2(m_i - m_ij)
    l_ij = tl.sum(p, 1)
    # -- O += P V on the tensor cores, after rescaling the running accumulator --
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc)
    l_i = l_i * alpha + l_ij
    return acc, l_i, m_ij


@triton.jit
def _kv_loop(
    acc,
    l_i,
    m_i,
    q,
    K,
    V,
    desc_k,
    desc_v,
    kv_row0,
    lo,
    hi,
    offs_m,
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
    USE_DESC: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Walk K/V blocks [lo, hi) of one head (``MASK``: apply the bounds/causal mask)."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        # -- load K and V blocks --
        if USE_DESC:
            k = desc_k.load([kv_row0 + start_n, 0])
            v = desc_v.load([kv_row0 + start_n, 0])
        else:
            rows = start_n + offs_n
            k_ptrs = K + rows[:, None] * stride_kn + offs_d[None, :] * stride_kd
            v_ptrs = V + rows[:, None] * stride_vn + offs_d[None, :] * stride_vd
            if MASK:
                k = tl.load(k_ptrs, mask=rows[:, None] < n_kv, other=0.0)
                v = tl.load(v_ptrs, mask=rows[:, None] < n_kv, other=0.0)
            else:
                k = tl.load(k_ptrs)
                v = tl.load(v_ptrs)
        # -- S = Q Kᵀ --
        qk = tl.dot(q, tl.trans(k))
        acc, l_i, m_i = _softmax_step(
            acc, l_i, m_i, qk, v, start_n, offs_m, offs_n, n_kv, shift, qk_scale, MASK, CAUSAL
        )
    return acc, l_i, m_i


@triton.jit
def _v2_fwd(
    Q,
    K,
    V,
    Out,
    LSE,  # q, k, v, out [B, H, N, d]; lse float32 [B*H, Nq]
    desc_q,
    desc_k,
    desc_v,
    desc_o,  # TMA descriptors over [B*H*N, d] (USE_DESC) or None
    qk_scale,  # sm_scale / ln 2
    n_heads,
    group,  # query heads per K/V head
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
    USE_DESC: tl.constexpr,
    EVEN_M: tl.constexpr,
):
    start_m = tl.program_id(0)  # Q block: fastest-varying grid index
    off_bh = tl.program_id(1)
    off_b = off_bh // n_heads
    off_h = off_bh % n_heads
    off_hk = off_h // group  # its K/V head
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    Q += off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
    K += off_b.to(tl.int64) * stride_kb + off_hk.to(tl.int64) * stride_kh
    V += off_b.to(tl.int64) * stride_vb + off_hk.to(tl.int64) * stride_vh
    Out += off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh
    q_row0 = off_bh * n_q + start_m * BLOCK_M  # rows in the flattened [B*H*N, d] view
    kv_row0 = (off_bh // group) * n_kv  # b*H_kv + h // group

    # -- Q stays on chip for the whole K/V loop --
    if USE_DESC:
        q = desc_q.load([q_row0, 0])
    else:
        q_ptrs = Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
        q = tl.load(q_ptrs, mask=offs_m[:, None] < n_q, other=0.0)

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # K/V blocks [0, split) need no mask; [split, hi) need the causal and/or bounds mask.
    shift = n_kv - n_q  # the bottom-right diagonal: row i sees columns <= i + shift
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M + shift, n_kv)
        split = tl.minimum(start_m * BLOCK_M + shift + 1, n_kv)
    else:
        hi = n_kv
        split = n_kv
    split = (split // BLOCK_N) * BLOCK_N
    acc, l_i, m_i = _kv_loop(
        acc,
        l_i,
        m_i,
        q,
        K,
        V,
        desc_k,
        desc_v,
        kv_row0,
        0,
        split,
        offs_m,
        offs_n,
        offs_d,
        n_kv,
        shift,
        qk_scale,
        stride_kn,
        stride_kd,
        stride_vn,
        stride_vd,
        False,
        CAUSAL,
        USE_DESC,
        BLOCK_N,
    )
    acc, l_i, m_i = _kv_loop(
        acc,
        l_i,
        m_i,
        q,
        K,
        V,
        desc_k,
        desc_v,
        kv_row0,
        split,
        hi,
        offs_m,
        offs_n,
        offs_d,
        n_kv,
        shift,
        qk_scale,
        stride_kn,
        stride_kd,
        stride_vn,
        stride_vd,
        True,
        CAUSAL,
        USE_DESC,
        BLOCK_N,
    )

    # -- epilogue: one rescale, store O and the log-sum-exp --
    acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * _LN2
    tl.store(LSE + off_bh.to(tl.int64) * n_q + offs_m, lse, mask=offs_m < n_q)
    out = acc.to(Out.dtype.element_ty)
    if USE_DESC and EVEN_M:
        desc_o.store([q_row0, 0], out)
    else:
        o_ptrs = Out + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
        tl.store(o_ptrs, out, mask=offs_m[:, None] < n_q)


def use_descriptors(q: torch.Tensor) -> bool:
    """TMA descriptors on Hopper; pointer loads on Ampere and the interpreter."""
    return (
        TensorDescriptor is not None
        and q.device.type == "cuda"
        and torch.cuda.get_device_capability(q.device)[0] == 9
    )


def contiguous_strides(shape) -> tuple[int, ...]:
    """The element strides of a contiguous tensor of ``shape``."""
    out, step = [], 1
    for size in reversed(shape):
        out.append(step)
        step *= size
    return tuple(reversed(out))


def flat_template(t: torch.Tensor, block_rows: int) -> TensorDescriptor:
    """A TMA descriptor over contiguous [B, H, N, d] viewed as [B*H*N, d], tile
    [block_rows, d]; :func:`~.launch.rebase` moves it onto any tensor of that shape."""
    d = t.shape[-1]
    return TensorDescriptor(t, [t.numel() // d, d], [d, 1], [block_rows, d])


class Forward:
    """The launch of v2 for one signature: grid, constexprs, scalars and descriptor
    layouts fixed here; :meth:`run` binds a call's tensors (inputs already checked)."""

    def __init__(self, q, k, v, causal, sm_scale, config, *, use_desc=None):
        batch, heads, n_q, d = q.shape
        n_kv = k.shape[2]
        bm, bn = config.block_m, config.block_n
        self.use_desc = use_descriptors(q) if use_desc is None else use_desc
        self.copy = self.use_desc and not all(t.is_contiguous() for t in (q, k, v))
        if self.use_desc:
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            self.templates = tuple(flat_template(t, b) for t, b in ((q, bm), (k, bn), (v, bn)))
            self.template_o = flat_template(q, bm)  # out: q's shape and dtype
        out_strides = contiguous_strides((batch, heads, n_q, d))
        self.scalars = (
            sm_scale * LOG2E,
            heads,
            heads // k.shape[1],
            n_q,
            n_kv,
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
            USE_DESC=self.use_desc,
            EVEN_M=n_q % bm == 0,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )
        self.launch = Launch(_v2_fwd, (triton.cdiv(n_q, bm), batch * heads), meta)

    def run(self, q, k, v, out, lse) -> None:
        """O and the log-sum-exp of a call into ``out`` (contiguous) and ``lse``."""
        if self.use_desc:
            if self.copy:
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            tq, tk, tv = self.templates
            descs = (rebase(tq, q), rebase(tk, k), rebase(tv, v), rebase(self.template_o, out))
        else:
            descs = (None, None, None, None)
        self.launch(q, k, v, out, lse, *descs, *self.scalars)


def runs_decode(config, q, k) -> bool:
    """Whether ``config`` is the split-KV / head-packed schedule (the decode kernel)."""
    return config.num_splits > 1 or (config.pack_gqa and q.shape[1] > k.shape[1])


def forward_runner(q, k, v, causal, sm_scale, config, *, use_desc=None):
    """The forward of one signature: v2's kernel, or the decode kernel for its configs;
    either has ``run(q, k, v, out, lse)``."""
    if runs_decode(config, q, k):
        return flash_decode.Forward(q, k, v, causal, sm_scale, config)
    return Forward(q, k, v, causal, sm_scale, config, use_desc=use_desc)


def launches(q, k, v, causal, sm_scale, config, out, *, use_desc=None, lse=None):
    """v2's kernel launch (or the decode kernel's two), as [(name, run)] (inputs already
    checked)."""
    batch, heads, n_q, _ = q.shape
    if lse is None:
        lse = torch.empty((batch * heads, n_q), dtype=torch.float32, device=q.device)
    if runs_decode(config, q, k):
        decode = flash_decode.Forward(q, k, v, causal, sm_scale, config)
        return decode.runs(q, k, v, out, lse, *decode.buffers())
    fwd = Forward(q, k, v, causal, sm_scale, config, use_desc=use_desc)
    if fwd.copy:  # once, here: each run then launches only the kernel
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        fwd.copy = False

    def run():
        fwd.run(q, k, v, out, lse)

    return [("v2_fwd", run)]


def forward(q, k, v, causal, sm_scale, config, out, *, use_desc=None, return_lse=False):
    """Run v2; with ``return_lse`` also return the natural-log log-sum-exp [B, H, Nq]."""
    batch, heads, n_q, _ = q.shape
    lse = torch.empty((batch * heads, n_q), dtype=torch.float32, device=q.device)
    for _, run in launches(q, k, v, causal, sm_scale, config, out, use_desc=use_desc, lse=lse):
        run()
    if return_lse:
        return out, lse.view(batch, heads, n_q)
    return out
