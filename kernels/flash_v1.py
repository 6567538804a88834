"""FlashAttention (v1) forward in Triton: the released FlashAttention-1 kernel's structure.

``config.v1_kernel == "released"`` (the default; docs/fa1.md): the loops of
flash-attn 1.0.x's ``fmha_fprop_kernel_1xN``. Grid (B·H, num_splits). For each
K/V block j (``block_n`` keys, its fragments held in registers for the whole
block) program z walks the ``block_m`` = 16-row Q steps z, z+S, z+2S, ...
(S = num_splits). A 16-row step is one tensor-core tile high, so the
``num_warps`` = 4 warps split the block's keys for S = Q K_jᵀ (each warp
block_n/4 keys) and the row max and row sum meet through shared memory; for
O = P V the warps exchange P through shared memory and each computes d/4
columns of O (the released kernel sums per-warp partial O instead: the same
barrier, docs/fa1.md). Per step, with the previous blocks' normalised O and
log-sum-exp lse:

    m = rowmax(S)·scale, P = exp(S·scale − m), ℓ = rowsum(P),
    lse' = log(e^lse + e^m ℓ), O ← e^(lse − lse') O + e^(m − lse') P V.

O round-trips through a float32 HBM workspace between K/V blocks (not read on
the first block, replaced by the output on the last one a step sees), and so
does lse (``lm[1]``, in the exp2 domain while the walk runs; the last block
writes the natural-log lse there and ℓ = 1 in ``lm[0]``, which the backward reads).
The next step's Q, O and lse are loaded while this step computes (as the
released kernel double-buffers Q). The Q-step loop is a ``while`` loop: Triton
sinks a loop-invariant load of dot operands into a ``for`` loop that uses it
(ReorderInstructions), which would reload every warp's K/V fragments from
shared memory at each step.

Other threads of the program read in block j+1 the workspace that threads wrote
in block j, so a ``tl.debug_barrier()`` (bar.sync, which also orders global
memory within the CTA) closes each block.

Causal (Nq = Nk: v1 has no shifted diagonal, traces.config.check_serving): block
j's walk starts at the first step with a row i >= j·block_n; the steps on the
diagonal (and a partial last block) mask.

``"algorithm1"``: the paper's Algorithm 1 (:mod:`flash_v1_algorithm1`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..errors import TilesimError
from . import flash_v1_algorithm1
from ._common import LN2, LOG2E, strides

NEG_BIG = tl.constexpr(-1.0e6)  # a masked score, exp2 domain: finite, so no NaN rows
_LOG2E = tl.constexpr(LOG2E)
_LN2 = tl.constexpr(LN2)


@triton.jit
def _step_loads(Q, Acc, LSE, rows, offs_d, n_q, stride_qm, stride_qd, seen, HEAD_DIM):
    """One step's Q [16, d] and, after the first block (``seen``), its O and lse."""
    ok = rows < n_q
    q = tl.load(Q + rows[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=ok[:, None])
    o = tl.load(
        Acc + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=ok[:, None] & seen, other=0.0
    )
    lse = tl.load(LSE + rows, mask=ok & seen, other=0.0)
    return q, o, lse


@triton.jit
def _v1_released_fwd(
    Q,
    K,
    V,
    Out,  # q, out [B, H, Nq, d]; k, v [B, H, Nk, d]
    Acc,  # workspace: float32 O [B*H, Nq, d]
    L,
    LSE,  # float32 [B*H, Nq]: ℓ = 1 and lse at the end (lse2 while the walk runs)
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
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    off_b = off_bh // n_heads
    off_h = off_bh % n_heads
    Q += off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
    K += off_b.to(tl.int64) * stride_kb + off_h.to(tl.int64) * stride_kh
    V += off_b.to(tl.int64) * stride_vb + off_h.to(tl.int64) * stride_vh
    Out += off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh
    Acc += off_bh.to(tl.int64) * n_q * HEAD_DIM
    L += off_bh.to(tl.int64) * n_q
    LSE += off_bh.to(tl.int64) * n_q
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * _LOG2E
    n_steps = tl.cdiv(n_q, BLOCK_M)
    last_block = (n_kv - 1) // BLOCK_N * BLOCK_N

    for start_n in range(0, n_kv, BLOCK_N):
        # -- K_j, V_j: loaded once, each warp's fragments stay in its registers --
        cols = start_n + offs_n0
        kt = tl.load(
            K + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd,
            mask=cols[None, :] < n_kv,
            other=0.0,
        )
        v = tl.load(
            V + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
            mask=cols[:, None] < n_kv,
            other=0.0,
        )
        seen = start_n > 0
        # this program's first step: causal, the first that reaches column start_n
        first = start_n // BLOCK_M if CAUSAL else 0
        step = first + (split - first % n_split + n_split) % n_split
        q, o_old, lse_old = _step_loads(
            Q,
            Acc,
            LSE,
            step * BLOCK_M + offs_m0,
            offs_d,
            n_q,
            stride_qm,
            stride_qd,
            seen,
            HEAD_DIM,
        )
        while step < n_steps:
            rows = step * BLOCK_M + offs_m0
            # -- the next step's inputs, loaded while this one computes --
            q_next, o_next, lse_next = _step_loads(
                Q,
                Acc,
                LSE,
                rows + n_split * BLOCK_M,
                offs_d,
                n_q,
                stride_qm,
                stride_qd,
                seen,
                HEAD_DIM,
            )
            # -- S = Q Kᵀ: each warp its keys; m, P, ℓ (maxima and sums across warps) --
            s = tl.dot(q, kt)
            partial = start_n + BLOCK_N > n_kv
            if CAUSAL:
                partial = partial | (start_n + BLOCK_N > step * BLOCK_M + 1)
            if partial:
                keep = cols[None, :] < n_kv
                if CAUSAL:
                    keep = keep & (cols[None, :] <= rows[:, None])
                s = tl.where(keep, s, NEG_BIG)
            m = tl.max(s, 1) * qk_scale
            p = tl.math.exp2(s * qk_scale - m[:, None])
            ell = tl.sum(p, 1)
            # -- P V: P through shared memory, each warp d/4 columns --
            pv = tl.dot(p.to(v.dtype), v)
            # -- combine with the earlier blocks' normalised O and lse --
            lse_blk = m + tl.math.log2(ell)
            # (the first block has no earlier O: its factor is 0, not e^(0 − lse'))
            top = tl.where(seen, tl.maximum(lse_old, lse_blk), lse_blk)
            lse_new = top + tl.math.log2(
                tl.where(seen, tl.math.exp2(lse_old - top), 0.0) + tl.math.exp2(lse_blk - top)
            )
            alpha = tl.where(seen, tl.math.exp2(lse_old - lse_new), 0.0)
            o = o_old * alpha[:, None] + pv * tl.math.exp2(m - lse_new)[:, None]
            # -- O and lse back to HBM; the last block a step sees writes the output --
            if CAUSAL:
                last = tl.minimum(step * BLOCK_M + BLOCK_M - 1, n_kv - 1) // BLOCK_N * BLOCK_N
            else:
                last = last_block
            ok = rows < n_q
            if start_n == last:
                tl.store(
                    Out + rows[:, None] * stride_om + offs_d[None, :] * stride_od,
                    o.to(Out.dtype.element_ty),
                    mask=ok[:, None],
                )
                tl.store(LSE + rows, lse_new * _LN2, mask=ok)
                tl.store(L + rows, tl.full([BLOCK_M], 1.0, tl.float32), mask=ok)
            else:
                tl.store(Acc + rows[:, None] * HEAD_DIM + offs_d[None, :], o, mask=ok[:, None])
                tl.store(LSE + rows, lse_new, mask=ok)
            q, o_old, lse_old = q_next, o_next, lse_next
            step += n_split
        # the next block reads what this one wrote, maybe from other threads
        tl.debug_barrier()


def launches(q, k, v, causal, sm_scale, config, out, *, lm=None):
    """The one launch of v1 [(name, run)] (inputs already checked).

    ``lm``: an optional float32 [2, B·H, Nq] buffer that keeps the final row
    statistics ℓ (``lm[0]``) and m (``lm[1]``) for the backward; by default a temporary.
    The released kernel keeps the log-sum-exp: ℓ = 1, m = lse.
    """
    if config.v1_kernel != "released":
        return flash_v1_algorithm1.launches(q, k, v, causal, sm_scale, config, out, lm=lm)
    if config.num_stages != 2:
        raise TilesimError(
            f"the released v1 forward loads the next step during this one: num_stages=2, "
            f"got {config.num_stages}"
        )
    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    acc = torch.empty((batch * heads, n_q, d), dtype=torch.float32, device=q.device)
    if lm is None:
        lm = torch.empty((2, batch * heads, n_q), dtype=torch.float32, device=q.device)

    def run():
        _v1_released_fwd[(batch * heads, config.num_splits)](
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
            num_stages=1,
        )

    return [("v1_fwd", run)]


def forward(q, k, v, causal, sm_scale, config, out):
    for _, run in launches(q, k, v, causal, sm_scale, config, out):
        run()
    return out
