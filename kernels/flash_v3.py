"""FlashAttention-3-style forward for Hopper (sm_90) in Triton: TMA, warp specialisation, FP8.

What this kernel really uses of FlashAttention-3's techniques:

* **TMA**: Q, K, V (and O when the Q length is a multiple of block_m) move by
  tensor descriptors (``cp.async.bulk.tensor`` into shared memory, completion on
  mbarriers), ``num_stages`` deep for K and V.
* **wgmma**: both GEMMs are asynchronous warpgroup MMAs (Triton emits them on
  sm_90); P stays in registers as the A operand of the second GEMM.
* **Producer/consumer warp specialisation** (``config.warp_specialize``): runs
  the hand-written Gluon kernel of ``kernels/gluon/`` instead (TMA producer
  warp, two consumer warpgroups, ``setmaxnreg``, mbarrier ping-pong with
  ``config.pingpong``, softmax(j) overlapped with P V(j-1); measured correct and
  1.1-1.4x this kernel on the H200, experiments/2026-11-30-tuning/README.md). This module's own
  ``tl.range(..., warp_specialize=True)`` build (Triton 3.6's Hopper pass: one
  producer and two consumer warpgroups) deadlocked on an H200 and runs only with
  ``TILESIM_V3_WARP_SPECIALIZE=1``. Without warp specialisation v3 is 8 warps (two
  warpgroups of 64 rows) that issue their own TMA loads ``num_stages - 1`` blocks
  ahead.
* **Persistent grid** (``config.persistent``): one CTA per SM loops over
  (Q block, head) tiles; causal tiles longest first.
* **FP8** (e4m3 inputs, ``torch.float8_e4m3fn``) with **per-tensor** descale
  factors (``real = stored × scale``) for Q, K and V; P is rounded to e4m3 for the
  second GEMM; the output is fp16. Hopper's fp8 wgmma wants both operands
  K-major, so V is passed transposed ([B, H, d, Nk], a separate copy, made by
  the ``v3_transpose_v`` launch) and loaded as [d, block_n] tiles.

What this Triton kernel does not do (Triton's language does not let one express it;
the Gluon kernel does the first two):
* **ping-pong** scheduling of two consumer warpgroups with named barriers; with
  ``num_warps=8`` the 128-row tile is split between two warpgroups (64 rows each)
  that run unsynchronised, so one's softmax can overlap the other's GEMMs, but
  no barrier enforces the alternation. ``config.pingpong`` without
  ``warp_specialize`` is therefore rejected.
* explicit intra-warpgroup overlap of softmax(j) with GEMM0(j+1): left to
  Triton's software pipeliner.
* in-kernel V transpose for FP8 (FlashAttention-3 does it with LDSM/STSM).

Measured (experiments/2026-11-30-tuning/README.md): Triton's warp-specialised build hung on an H200
with Triton 3.6. ``traces.config.default_config`` (what `attention` runs when no
config is given, and what predictions use) is, at d <= 128, the Gluon kernel
with warp specialisation, no ping-pong and 3 stages (1.13-1.15x this Triton
kernel's fp16 throughput on the H200); at d = 256 this Triton kernel (no warp
specialisation, 2 stages).

Causal masking is aligned bottom-right (row i sees columns j <= i + Nk - Nq).
Grouped-query heads: query head h reads K/V head h // (H / H_kv). Tiles that run
past the end of a head read the next head's rows, mask those columns to -inf
and never store those rows.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ._common import LN2, LOG2E
from .flash_v2 import TensorDescriptor, _softmax_step, flat_template
from .launch import Launch, rebase
from .transpose_v import TransposeV

_LN2 = tl.constexpr(LN2)


@triton.jit
def _v3_tile(
    desc_q,
    desc_k,
    desc_v,
    desc_o,
    Out,
    LSE,
    start_m,
    off_bh,
    qk_scale,
    out_scale,
    n_q,
    n_kv,
    group,
    stride_om,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    MASK: tl.constexpr,
    FP8: tl.constexpr,
    EVEN_M: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    """One (Q block, head) tile: the whole K/V loop and the epilogue."""
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q_row0 = off_bh * n_q + start_m * BLOCK_M
    kv_row0 = (off_bh // group) * n_kv  # its K/V head: b*H_kv + h // group
    vt_row0 = (off_bh // group) * HEAD_DIM
    shift = n_kv - n_q  # the bottom-right diagonal
    q = desc_q.load([q_row0, 0])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = tl.minimum((start_m + 1) * BLOCK_M + shift, n_kv) if CAUSAL else n_kv
    # One loop: Triton 3.6's Hopper warp specialisation rejects a second loop (or a
    # peeled diagonal block) after the specialised one, so with causal masking or a
    # partial last K/V block every block takes the (cheap, FP32-pipe) mask.
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        # -- producer side: K and V tiles by TMA --
        k = desc_k.load([kv_row0 + start_n, 0])
        if FP8:  # noqa: SIM108 - a [d, block_n] tile of Vᵀ: K-major, as fp8 wgmma wants
            v = desc_v.load([vt_row0, start_n]).T
        else:
            v = desc_v.load([kv_row0 + start_n, 0])
        # -- consumer side: S = Q Kᵀ, online softmax, O += P V --
        qk = tl.dot(q, k.T)
        acc, l_i, m_i = _softmax_step(
            acc, l_i, m_i, qk, v, start_n, offs_m, offs_n, n_kv, shift, qk_scale, MASK, CAUSAL
        )
    # -- epilogue: one rescale (and the V descale for fp8), O and log-sum-exp --
    acc = acc * (out_scale / l_i)[:, None]
    lse = (m_i + tl.math.log2(l_i)) * _LN2
    tl.store(LSE + off_bh.to(tl.int64) * n_q + offs_m, lse, mask=offs_m < n_q)
    out = acc.to(Out.dtype.element_ty)
    if EVEN_M and not WARP_SPECIALIZE:
        desc_o.store([q_row0, 0], out)
    else:
        # pointer stores: a partial last block must not touch the next head, and the
        # warp-specialised split of the tile into two consumer halves cannot use a
        # [block_m, d] TMA store
        offs_d = tl.arange(0, HEAD_DIM)
        o_ptrs = (
            Out
            + (q_row0 + tl.arange(0, BLOCK_M)).to(tl.int64)[:, None] * stride_om
            + offs_d[None, :]
        )
        tl.store(o_ptrs, out, mask=offs_m[:, None] < n_q)


@triton.jit
def _v3_fwd(
    desc_q,
    desc_k,
    desc_v,
    desc_o,  # TMA descriptors; desc_v is over Vᵀ for fp8
    Out,
    LSE,  # out [B*H*Nq, d] (masked stores of a partial last block); lse float32 [B*H, Nq]
    qk_scale,
    out_scale,  # sm_scale·q_scale·k_scale / ln 2; v_scale
    n_bh,
    n_q,
    n_kv,
    group,
    stride_om,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    MASK: tl.constexpr,
    FP8: tl.constexpr,
    EVEN_M: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    PERSISTENT: tl.constexpr,
):
    if PERSISTENT:
        n_m = tl.cdiv(n_q, BLOCK_M)
        n_tiles = n_m * n_bh
        for tile in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
            off_bh = tile // n_m
            start_m = tile % n_m
            if CAUSAL:
                start_m = n_m - 1 - start_m  # longest K/V loops first
            _v3_tile(
                desc_q,
                desc_k,
                desc_v,
                desc_o,
                Out,
                LSE,
                start_m,
                off_bh,
                qk_scale,
                out_scale,
                n_q,
                n_kv,
                group,
                stride_om,
                HEAD_DIM,
                BLOCK_M,
                BLOCK_N,
                CAUSAL,
                MASK,
                FP8,
                EVEN_M,
                WARP_SPECIALIZE,
            )
    else:
        _v3_tile(
            desc_q,
            desc_k,
            desc_v,
            desc_o,
            Out,
            LSE,
            tl.program_id(0),
            tl.program_id(1),
            qk_scale,
            out_scale,
            n_q,
            n_kv,
            group,
            stride_om,
            HEAD_DIM,
            BLOCK_M,
            BLOCK_N,
            CAUSAL,
            MASK,
            FP8,
            EVEN_M,
            WARP_SPECIALIZE,
        )


def launch_warps(config) -> int:
    """Triton's ``num_warps`` for a v3 config.

    ``config.num_warps`` counts the consumer warps (8: two warpgroups, as
    FlashAttention-3). With warp specialisation Triton 3.6's Hopper pass takes a
    launch of 4 warps and builds one producer and two consumer warpgroups (12
    warps in all) by splitting the 128-row tile between the consumers; without it
    the launch has ``config.num_warps`` warps that do everything.
    """
    return config.num_warps // 2 if config.warp_specialize else config.num_warps


# Triton 3.6's Hopper warp-specialised build of this kernel deadlocked on an H200
# (experiments/2026-11-30-tuning/README.md); warp_specialize=True runs the Gluon kernel
# (kernels/gluon/) instead, and Triton's own build only where this variable is set to 1,
# for investigation.
WARP_SPECIALIZE_ENV = "TILESIM_V3_WARP_SPECIALIZE"


def compiler_warp_specialize() -> bool:
    """True when warp_specialize=True should run Triton's own (hung) build, not Gluon's."""
    return os.environ.get(WARP_SPECIALIZE_ENV) == "1"


def check_config(config) -> str | None:
    """Why ``config`` cannot run as v3, or None."""
    if config.pingpong and not config.warp_specialize:
        return "v3 ping-pong needs warp_specialize=True (the Gluon kernel)"
    if config.warp_specialize and not compiler_warp_specialize():
        # warp_specialize=True runs the hand-written Gluon kernel (kernels/gluon/)
        from . import gluon

        return gluon.check_config(config)
    if config.pingpong:
        return (
            "v3 ping-pong needs the Gluon kernel; Triton's own warp specialisation "
            f"({WARP_SPECIALIZE_ENV}=1) cannot express it"
        )
    if config.warp_specialize and (config.num_warps != 8 or config.block_m != 128):
        return (
            "v3 warp specialisation needs block_m=128 and num_warps=8 (two consumer "
            f"warpgroups of 64 rows), got block_m={config.block_m} "
            f"num_warps={config.num_warps}"
        )
    return None


def sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter: a few programs exercise the persistent loop


class Forward:
    """The launches of this Triton v3 kernel for one signature (for fp8 the V transpose
    first): grid, constexprs, scalars and descriptor layouts fixed here; :meth:`run`
    binds a call's tensors (inputs already checked)."""

    def __init__(self, q, k, v, causal, sm_scale, config, *, q_scale=1.0, k_scale=1.0, v_scale=1.0):
        if TensorDescriptor is None:  # pragma: no cover - triton too old
            raise RuntimeError("v3 needs triton.tools.tensor_descriptor (triton >= 3.3)")
        batch, heads, n_q, d = q.shape
        n_kv = k.shape[2]
        bm, bn = config.block_m, config.block_n
        fp8 = q.dtype == torch.float8_e4m3fn
        self.copy = not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous())
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        self.template_q, self.template_k = flat_template(q, bm), flat_template(k, bn)
        out = torch.empty(
            (batch, heads, n_q, d), dtype=torch.float16 if fp8 else q.dtype, device=q.device
        )
        self.template_o = flat_template(out, bm)
        self.transpose = None
        if fp8:
            self.transpose = TransposeV(v.shape)
            self.vt_shape = (batch, k.shape[1], d, self.transpose.n_pad)
            vt = torch.empty(self.vt_shape, dtype=v.dtype, device=v.device)
            self.template_v = TensorDescriptor.from_tensor(
                vt.view(-1, self.transpose.n_pad), [d, bn]
            )
        else:
            self.template_v = flat_template(v, bn)
        n_m = triton.cdiv(n_q, bm)
        if config.persistent:
            grid = (min(n_m * batch * heads, sm_count(q.device)),)
        else:
            grid = (n_m, batch * heads)
        self.scalars = (
            sm_scale * q_scale * k_scale * LOG2E, v_scale, batch * heads, n_q, n_kv,
            heads // k.shape[1], d,
        )  # fmt: skip
        meta = dict(
            HEAD_DIM=d,
            BLOCK_M=bm,
            BLOCK_N=bn,
            CAUSAL=causal,
            MASK=causal or n_kv % bn != 0,
            FP8=fp8,
            EVEN_M=n_q % bm == 0,
            WARP_SPECIALIZE=config.warp_specialize,
            PERSISTENT=config.persistent,
            num_warps=launch_warps(config),
            num_stages=config.num_stages,
        )
        self.launch = Launch(_v3_fwd, grid, meta)

    def new_vt(self, v):
        """The fp8 Vᵀ buffer of one call."""
        return torch.empty(self.vt_shape, dtype=v.dtype, device=v.device)

    def run(self, q, k, v, out, lse, vt=None) -> None:
        """O and the log-sum-exp of a call into ``out`` (contiguous) and ``lse``; for fp8
        the V transpose first (into ``vt``, a new one by default)."""
        if self.copy:
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        if self.transpose is not None:
            vt = self.new_vt(v) if vt is None else vt
            self.transpose(v, vt)
            v = vt
        self.run_kernel(q, k, v, out, lse, v)

    def run_kernel(self, q, k, v, out, lse, vt) -> None:
        """The kernel alone, over ``vt`` (V itself unless fp8)."""
        self.launch(
            rebase(self.template_q, q),
            rebase(self.template_k, k),
            rebase(self.template_v, vt),
            rebase(self.template_o, out),
            out,
            lse,
            *self.scalars,
        )


def forward_runner(q, k, v, causal, sm_scale, config, **scales):
    """The :class:`Forward` that runs ``config``: the Gluon kernel's with warp
    specialisation, this module's otherwise (inputs and config already checked)."""
    if config.warp_specialize and not compiler_warp_specialize():
        from . import gluon

        return gluon.Forward(q, k, v, causal, sm_scale, config, **scales)
    return Forward(q, k, v, causal, sm_scale, config, **scales)


def launches(
    q, k, v, causal, sm_scale, config, out, *, q_scale=1.0, k_scale=1.0, v_scale=1.0, lse=None
):
    """The launches of v3 [(name, run)]: for fp8 first the V transpose, then the kernel."""
    if config.warp_specialize and not compiler_warp_specialize():
        from . import gluon

        return gluon.launches(
            q,
            k,
            v,
            causal,
            sm_scale,
            config,
            out,
            q_scale=q_scale,
            k_scale=k_scale,
            v_scale=v_scale,
            lse=lse,
        )
    fwd = Forward(
        q, k, v, causal, sm_scale, config, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale
    )
    batch, heads, n_q, _ = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if lse is None:
        lse = torch.empty((batch * heads, n_q), dtype=torch.float32, device=q.device)
    if fwd.transpose is None:
        return [("v3_fwd", lambda: fwd.run_kernel(q, k, v, out, lse, v))]
    vt = fwd.new_vt(v)
    return [
        ("v3_transpose_v", lambda: fwd.transpose(v, vt)),
        ("v3_fwd", lambda: fwd.run_kernel(q, k, v, out, lse, vt)),
    ]


def forward(
    q,
    k,
    v,
    causal,
    sm_scale,
    config,
    out,
    *,
    q_scale=1.0,
    k_scale=1.0,
    v_scale=1.0,
    return_lse=False,
):
    """Run v3; with ``return_lse`` also return the natural-log log-sum-exp [B, H, Nq]."""
    batch, heads, n_q, _ = q.shape
    lse = torch.empty((batch * heads, n_q), dtype=torch.float32, device=q.device)
    for _, run in launches(
        q,
        k,
        v,
        causal,
        sm_scale,
        config,
        out,
        q_scale=q_scale,
        k_scale=k_scale,
        v_scale=v_scale,
        lse=lse,
    ):
        run()
    if return_lse:
        return out, lse.view(batch, heads, n_q)
    return out
