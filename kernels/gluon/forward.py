"""FlashAttention-3 forward for Hopper written in Gluon: explicit warp specialisation.

Triton's compiler-driven ``warp_specialize=True`` build of ``flash_v3`` deadlocked
on an H200 with Triton 3.6 (experiments/2026-11-30-tuning/README.md). This kernel writes the FA3
schedule out by hand with ``triton.experimental.gluon`` (Triton 3.6's API):

* **Producer warp** (a worker partition of 1 warp, ``setmaxnreg`` down to
  ``PRODUCER_REGS``): TMA loads of the CTA's two Q tiles, then K and V blocks
  into a ``num_stages``-deep ring of shared-memory slots. Each slot has a
  "ready" mbarrier (TMA transaction bytes) and an "empty" mbarrier that both
  consumer warpgroups arrive on once their wgmmas stopped reading it.
* **Two consumer warpgroups** (the default partition and a 4-warp worker
  partition), each owning 64 of the CTA's 128 Q rows with its own
  online-softmax state: S = Q Kᵀ by wgmma from shared memory, P kept in
  registers as the A operand of O += P V.
* **Intra-warpgroup overlap**: iteration j issues S(j) = Q K(j)ᵀ and then
  O += P(j-1) V(j-1) before waiting for S(j) only, so the softmax of block j
  runs while the tensor cores still do P V of block j-1 (FA3 §3.2).
* **Ping-pong** (``PINGPONG``): warpgroup w waits on mbarrier ``sched[w]``
  before issuing its two GEMMs and arrives on ``sched[1-w]`` after, so the two
  warpgroups issue their GEMMs in alternation and one's softmax overlaps the
  other's GEMMs (FA3 §3.1; FA3 uses named barriers, Gluon 3.6 has mbarriers).
* **FP8** e4m3 with per-tensor descales, P rounded to e4m3, V passed
  transposed (K-major, as fp8 wgmma needs) by ``transpose_v.TransposeV``; with
  ``permute_p`` V's keys are also permuted within each 32 so that P becomes the
  8-bit A operand without moving bytes between lanes (``_p_operand``).

* **Persistent grid** (``config.persistent``): one CTA per SM loops over tiles
  (head-major; causal longest first), the K/V ring running on across tiles, Q
  double-buffered where shared memory allows (fp8), so the next tile's loads overlap
  this tile's last blocks and epilogue. Without it (``_fwd_one_tile``) the kernel is
  the one-tile-per-CTA code it was before, not the tile loop run once: that compiled to
  more instructions and barriers and ran slower (experiments/2026-11-30-tuning/README.md).

Measured slower on the H200 and removed (experiments/2026-11-30-tuning/README.md has the
numbers, commit 919fefa the code): one "empty" release per ring slot after P V
(``merge_empty``), the
fp8 V transpose fused into a 4-warp producer (``fuse_vt``), and a persistent CTA's next
S(0) issued before this tile's last P V (``prefetch``).

Rows past the end of a head (N not a multiple of 128) are read from the next
head (flat [B·H·N, d] descriptors) and never stored; K/V columns past the end
are masked to -inf. Causal masking is bottom-right (row i sees columns j <= i + Nk - Nq); only
blocks that straddle the diagonal or the end of K/V take the mask.

Layout: this module is the host side (``launches``, ``check_config``, ``smem_bytes``)
and the kernel ``_v3_gluon_fwd``, which dispatches on ``PERSISTENT`` to the body in
``gluon.persistent`` or ``gluon.one_tile``; both call the per-tile consumer of
``gluon.tile``, which also holds the one guarded import of Gluon.

Importing this module never fails: without Gluon (an older Triton, or a newer
one whose API differs) ``AVAILABLE`` is False and ``launches`` raises a one-line
TilesimError.
"""

from __future__ import annotations

import torch
import triton

from ...errors import TilesimError
from ...hwmodels.presets import load_gpu
from .._common import LOG2E, device_gpu
from ..launch import Launch, rebase
from ..transpose_v import TransposeV
from .tile import AVAILABLE

if AVAILABLE:  # the same imports succeeded in gluon.tile
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    from .one_tile import _fwd_one_tile
    from .persistent import _fwd_persistent

WG_M = 64  # Q rows per consumer warpgroup (wgmma's M is 64 per warpgroup)
BLOCK_M = 2 * WG_M  # Q rows per CTA: two consumer warpgroups
PRODUCER_REGS = 24  # registers per thread left to the TMA warp (setmaxnreg)
CONSUMER_REGS = 240  # registers per thread of a worker consumer warpgroup
SUPPORTED_HEAD_DIMS = (64, 128)

if AVAILABLE:

    @gluon.jit
    def _v3_gluon_fwd(
        desc_q,
        desc_k,
        desc_v,
        Out,
        LSE,
        qk_scale,
        out_scale,
        n_q,
        n_kv,
        n_bh,
        group,  # query heads per K/V head
        stride_om,
        HEAD_DIM: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        CAUSAL: gl.constexpr,
        MASK: gl.constexpr,
        FP8: gl.constexpr,
        PINGPONG: gl.constexpr,
        PERMUTE_P: gl.constexpr,
        PERSISTENT: gl.constexpr,
        Q_BUFS: gl.constexpr,
        PRODUCER_REGS: gl.constexpr,
        CONSUMER_REGS: gl.constexpr,
        NUM_WG: gl.constexpr,
    ):
        # two bodies with one signature rather than one tile loop run once: the one-tile
        # grid keeps the code it had before the persistent grid (``_fwd_one_tile``)
        (_fwd_persistent if PERSISTENT else _fwd_one_tile)(
            desc_q,
            desc_k,
            desc_v,
            Out,
            LSE,
            qk_scale,
            out_scale,
            n_q,
            n_kv,
            n_bh,
            group,
            stride_om,
            HEAD_DIM,
            BLOCK_N,
            STAGES,
            CAUSAL,
            MASK,
            FP8,
            PINGPONG,
            PERMUTE_P,
            Q_BUFS,
            PRODUCER_REGS,
            CONSUMER_REGS,
            NUM_WG,
        )


SM90_PRESET = "h100"  # the GPU whose limits the kernel is checked against without a device


def smem_bytes(
    head_dim: int, block_n: int, stages: int, elem_bytes: int, groups: int = 2, q_buffers: int = 1
) -> int:
    """Shared memory of one CTA: ``q_buffers`` Q tiles per consumer group, ``stages`` K and
    V slots, barriers."""
    tiles = q_buffers * groups * WG_M * head_dim + 2 * stages * block_n * head_dim
    return tiles * elem_bytes + 8 * ((2 * q_buffers + 1) * groups + 4 * stages)


def check_config(
    config,
    head_dim: int | None = None,
    elem_bytes: int = 2,
    groups: int = 2,
    smem_limit: int | None = None,
) -> str | None:
    """Why the Gluon kernel cannot run ``config`` (one line), or None.

    ``smem_limit``: the shared memory a CTA may opt into, the device's preset's
    ``smem_bytes_per_cta_max`` (by default the sm_90 preset's, which the kernel targets).

    ``groups`` (consumer warpgroups of 64 rows) other than 2 is an experiment that
    KernelConfig cannot describe (block_m = 192 and 12 consumer warps are not powers of
    two); it is reachable only through ``launches(..., consumer_groups=3)``.
    """
    if not AVAILABLE:
        return (
            "v3 warp_specialize=True runs a Gluon kernel, which needs Triton 3.6's "
            "triton.experimental.gluon (gl.warp_specialize); this Triton has not got it"
        )
    if groups == 2 and (config.block_m != BLOCK_M or config.num_warps != 8):
        return (
            "v3 warp_specialize=True needs block_m=128 and num_warps=8 (two consumer "
            f"warpgroups of 64 rows), got block_m={config.block_m} num_warps={config.num_warps}"
        )
    if config.block_n not in (64, 128):
        return f"v3 warp_specialize=True needs block_n 64 or 128, got {config.block_n}"
    if head_dim is not None:
        if head_dim not in SUPPORTED_HEAD_DIMS:
            return f"v3 warp_specialize=True supports head_dim 64 and 128, got {head_dim}"
        need = smem_bytes(head_dim, config.block_n, config.num_stages, elem_bytes, groups)
        if smem_limit is None:
            smem_limit = load_gpu(SM90_PRESET).smem_bytes_per_cta_max
        if need > smem_limit:
            return (
                f"v3 warp_specialize=True with num_stages={config.num_stages} needs {need} B "
                f"of shared memory per CTA (limit {smem_limit}); use fewer stages"
            )
    return None


def _gl_dtype(dtype):
    return {
        torch.float16: gl.float16,
        torch.bfloat16: gl.bfloat16,
        torch.float8_e4m3fn: gl.float8e4nv,
    }[dtype]


def _descriptor(t2d, block_shape):
    layout = gl.NVMMASharedLayout.get_default_for(block_shape, _gl_dtype(t2d.dtype))
    return GluonDescriptor.from_tensor(t2d, block_shape, layout)


class Forward:
    """The launches of the Gluon kernel for one signature (for fp8 the V transpose first):
    grid, constexprs, scalars and descriptor layouts fixed here; :meth:`run` binds a
    call's tensors. Options as for :func:`launches`."""

    def __init__(
        self,
        q,
        k,
        v,
        causal,
        sm_scale,
        config,
        *,
        q_scale=1.0,
        k_scale=1.0,
        v_scale=1.0,
        consumer_groups=2,
        permute_p=None,
        ctas=None,
        q_buffers=None,
    ):
        if consumer_groups not in (2, 3):
            raise TilesimError(f"consumer_groups must be 2 or 3, got {consumer_groups!r}")
        batch, heads, n_q, d = q.shape
        n_kv = k.shape[2]
        fp8 = q.dtype == torch.float8_e4m3fn
        if permute_p is None:
            permute_p = fp8 and not causal
        smem_limit = device_gpu(q.device).smem_bytes_per_cta_max
        problem = check_config(config, d, q.element_size(), consumer_groups, smem_limit)
        if problem:
            raise TilesimError(problem)
        bn = config.block_n
        self.copy = not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous())
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        self.template_q = _descriptor(q.view(-1, d), [WG_M, d])
        self.template_k = _descriptor(k.view(-1, d), [bn, d])
        self.transpose = None
        if fp8:
            self.transpose = TransposeV(v.shape, permute=bool(permute_p))
            self.vt_shape = (batch, k.shape[1], d, self.transpose.n_pad)
            vt = torch.empty(self.vt_shape, dtype=v.dtype, device=v.device)
            self.template_v = _descriptor(vt.view(-1, self.transpose.n_pad), [d, bn])
        else:
            self.template_v = _descriptor(v.view(-1, d), [bn, d])
        n_m = triton.cdiv(n_q, consumer_groups * WG_M)
        if config.persistent:  # one CTA per SM (registers allow no second), tiles in turn
            sms = torch.cuda.get_device_properties(q.device).multi_processor_count
            grid = (min(sms if ctas is None else ctas, n_m * batch * heads),)
        else:
            grid = (n_m, batch * heads)
        if not config.persistent:
            q_buffers = 1
        elif q_buffers is None:
            two = smem_bytes(d, bn, config.num_stages, q.element_size(), consumer_groups, 2)
            q_buffers = 2 if two <= smem_limit else 1
        if q_buffers not in (1, 2):
            raise TilesimError(f"q_buffers must be 1 or 2, got {q_buffers!r}")
        self.scalars = (
            sm_scale * q_scale * k_scale * LOG2E,
            v_scale,
            n_q,
            n_kv,
            batch * heads,
            heads // k.shape[1],  # query heads per K/V head
            d,  # out's row stride: contiguous [B·H·Nq, d]
        )
        meta = dict(
            HEAD_DIM=d,
            BLOCK_N=bn,
            STAGES=config.num_stages,
            CAUSAL=causal,
            MASK=causal or n_kv % bn != 0,
            FP8=fp8,
            PINGPONG=config.pingpong,
            PERMUTE_P=bool(permute_p) and fp8,
            PERSISTENT=bool(config.persistent),
            Q_BUFS=q_buffers,
            PRODUCER_REGS=PRODUCER_REGS,
            # registers: 65,536 per SM over (groups + 1) warpgroups; the default partition
            # gets what the workers leave (240 is the most ptxas gives a thread that wgmma
            # needs in practice; 160 with three consumer groups)
            CONSUMER_REGS=CONSUMER_REGS if consumer_groups == 2 else 160,
            NUM_WG=consumer_groups,
            num_warps=4,  # the default partition: consumer warpgroup 0
        )
        self.launch = Launch(_v3_gluon_fwd, grid, meta)

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
            desc_v = rebase(self.template_v, vt)
        else:
            desc_v = rebase(self.template_v, v)
        self.launch(
            rebase(self.template_q, q), rebase(self.template_k, k), desc_v, out, lse, *self.scalars
        )

    def run_kernel(self, q, k, v, out, lse, vt) -> None:
        """The kernel alone, over an fp8 ``vt`` that :meth:`run` (or the transpose) filled."""
        self.launch(
            rebase(self.template_q, q),
            rebase(self.template_k, k),
            rebase(self.template_v, vt),
            out,
            lse,
            *self.scalars,
        )


def launches(
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
    lse=None,
    consumer_groups=2,
    permute_p=None,
    ctas=None,
    q_buffers=None,
):
    """The launches [(name, run)]: for fp8 first the V transpose, then the Gluon kernel.

    ``consumer_groups=3`` (192 Q rows per CTA, 160 registers per consumer thread, which
    fits without spills only with block_n = 64) is an experiment outside KernelConfig.
    ``permute_p=True`` (fp8 only) writes Vᵀ with its keys permuted within each 32 so
    that P needs no lane shuffles to become the A operand of P V
    (experiments/2026-11-30-tuning/README.md:
    +5-8% non-causal on the H200, 1-2% slower causal); ``None``: on for fp8 without
    the causal mask. ``config.persistent`` launches one CTA per SM, each looping over
    tiles. ``ctas`` caps the persistent grid (tests run many tiles
    per CTA on small shapes with it). ``q_buffers=2`` (persistent only) double-buffers
    Q so that the next tile's Q loads during this one; ``None``: 2 where shared memory
    allows (``smem_bytes``), else 1.
    """
    fwd = Forward(
        q,
        k,
        v,
        causal,
        sm_scale,
        config,
        q_scale=q_scale,
        k_scale=k_scale,
        v_scale=v_scale,
        consumer_groups=consumer_groups,
        permute_p=permute_p,
        ctas=ctas,
        q_buffers=q_buffers,
    )
    batch, heads, n_q, _ = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    fwd.copy = False
    if lse is None:
        lse = torch.empty((batch * heads, n_q), dtype=torch.float32, device=q.device)
    if fwd.transpose is None:
        return [("v3_fwd", lambda: fwd.run(q, k, v, out, lse))]
    vt = fwd.new_vt(v)
    return [
        ("v3_transpose_v", lambda: fwd.transpose(v, vt)),
        ("v3_fwd", lambda: fwd.run_kernel(q, k, v, out, lse, vt)),
    ]
