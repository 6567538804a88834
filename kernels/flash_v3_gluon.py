"""FlashAttention-3 forward for Hopper written in Gluon: explicit warp specialisation.

Triton's compiler-driven ``warp_specialize=True`` build of ``flash_v3`` deadlocked
on an H200 with Triton 3.6 (kernels/TUNING.md). This kernel writes the FA3
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
  transposed (K-major, as fp8 wgmma needs) by ``flash_v3.transpose_v``; with
  ``permute_p`` V's keys are also permuted within each 32 so that P becomes the
  8-bit A operand without moving bytes between lanes (``_p_operand``).

* **Persistent grid** (``config.persistent``): one CTA per SM loops over tiles
  (head-major; causal longest first), the K/V ring running on across tiles, Q
  double-buffered where shared memory allows (fp8), so the next tile's loads overlap
  this tile's last blocks and epilogue. Without it (``_fwd_one_tile``) the kernel is
  the one-tile-per-CTA code it was before, not the tile loop run once: that compiled to
  more instructions and barriers and ran slower (kernels/TUNING.md).

Measured slower on the H200 and removed (kernels/TUNING.md has the numbers, commit
919fefa the code): one "empty" release per ring slot after P V (``merge_empty``), the
fp8 V transpose fused into a 4-warp producer (``fuse_vt``), and a persistent CTA's next
S(0) issued before this tile's last P V (``prefetch``).

Rows past the end of a head (N not a multiple of 128) are read from the next
head (flat [B·H·N, d] descriptors) and never stored; K/V columns past the end
are masked to -inf. Causal masking is top-left (row i sees columns j <= i); only
blocks that straddle the diagonal or the end of K/V take the mask.

Importing this module never fails: without Gluon (an older Triton, or a newer
one whose API differs) ``AVAILABLE`` is False and ``launches`` raises a one-line
TilesimError.
"""

from __future__ import annotations

import torch
import triton

from ..errors import TilesimError
from ._common import LN2, LOG2E

try:  # Gluon is experimental: its API moved between Triton releases
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    AVAILABLE = callable(getattr(gl, "warp_specialize", None))
except Exception:  # noqa: BLE001 - any import failure means "not available"
    AVAILABLE = False

WG_M = 64  # Q rows per consumer warpgroup (wgmma's M is 64 per warpgroup)
BLOCK_M = 2 * WG_M  # Q rows per CTA: two consumer warpgroups
PRODUCER_REGS = 24  # registers per thread left to the TMA warp (setmaxnreg)
CONSUMER_REGS = 240  # registers per thread of a worker consumer warpgroup
SUPPORTED_HEAD_DIMS = (64, 128)

if AVAILABLE:
    _LN2 = gl.constexpr(LN2)

    @gluon.jit
    def _tile(t, n_m, n_bh, CAUSAL: gl.constexpr):
        """Persistent tile ``t`` -> (row block, flat head).

        Head-major (consecutive tiles share one head's K and V in L2). Causal tiles run
        longest K/V loop first: every head's last row block, then the one before, ...
        (longest-processing-time order over a static round robin).
        """
        if CAUSAL:
            start_m = n_m - 1 - t // n_bh
            off_bh = t % n_bh
        else:
            start_m = t % n_m
            off_bh = t // n_m
        return start_m, off_bh

    @gluon.jit
    def _kv_extent(start_m, n_kv, ROWS: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        """K/V blocks of a tile and the first key block that needs the mask."""
        hi = gl.minimum((start_m + 1) * ROWS, n_kv) if CAUSAL else n_kv
        n_blocks = gl.cdiv(hi, BLOCK_N)
        # blocks starting at or past hi_full need the mask (diagonal / partial end)
        hi_full = n_kv // BLOCK_N * BLOCK_N
        if CAUSAL:
            hi_full = gl.minimum(hi_full, (start_m * ROWS) // BLOCK_N * BLOCK_N)
        return n_blocks, hi_full

    @gluon.jit
    def _producer(
        desc_q,
        desc_k,
        desc_v,
        q_smem,
        k_smem,
        v_smem,
        q_bar,
        q_empty,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        sched,
        first,
        n_tiles,
        step,
        n_m,
        n_bh,
        n_q,
        n_kv,
        HEAD_DIM: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        CAUSAL: gl.constexpr,
        FP8: gl.constexpr,
    ):
        """The TMA warp: per tile both Q tiles, then K and V block by block into the ring.

        The ring's block counter runs on across tiles, so a persistent CTA's producer
        loads the next tile's Q and first K/V blocks while the consumers still finish
        this tile's last blocks and store O.
        """
        NUM_WG: gl.constexpr = sched.shape[0]
        Q_BUFS: gl.constexpr = q_smem.shape[0] // sched.shape[0]  # Q tiles per warpgroup
        WGM: gl.constexpr = desc_q.block_type.shape[0]
        c0 = 0
        it = 0
        for t in range(first, n_tiles, step):
            start_m, off_bh = _tile(t, n_m, n_bh, CAUSAL)
            n_blocks, hi_full = _kv_extent(start_m, n_kv, NUM_WG * WGM, BLOCK_N, CAUSAL)
            q_row0 = off_bh * n_q + start_m * (NUM_WG * WGM)
            for wg in gl.static_range(NUM_WG):
                qb = (it % Q_BUFS) * NUM_WG + wg
                # the consumer's last S of this buffer's previous tile is done
                mbarrier.wait(q_empty.index(qb), ((it // Q_BUFS) & 1) ^ 1)
                mbarrier.expect(q_bar.index(qb), desc_q.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    desc_q,
                    [q_row0 + wg * WGM, 0],
                    q_bar.index(qb),
                    q_smem.index(qb),
                )
            kv_row0 = off_bh * n_kv
            vt_row0 = off_bh * HEAD_DIM
            for j in range(n_blocks):
                c = c0 + j
                s = c % STAGES
                # the slot's previous use ended when both consumers arrived on "empty";
                # the first round waits on the (already complete) phase before phase 0
                phase = ((c // STAGES) & 1) ^ 1
                mbarrier.wait(k_empty.index(s), phase)
                mbarrier.expect(k_ready.index(s), desc_k.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    desc_k, [kv_row0 + j * BLOCK_N, 0], k_ready.index(s), k_smem.index(s)
                )
                mbarrier.wait(v_empty.index(s), phase)
                mbarrier.expect(v_ready.index(s), desc_v.block_type.nbytes)
                if FP8:  # a [d, block_n] tile of Vᵀ
                    tma.async_copy_global_to_shared(
                        desc_v, [vt_row0, j * BLOCK_N], v_ready.index(s), v_smem.index(s)
                    )
                else:
                    tma.async_copy_global_to_shared(
                        desc_v, [kv_row0 + j * BLOCK_N, 0], v_ready.index(s), v_smem.index(s)
                    )
            c0 += n_blocks
            it += 1  # noqa: SIM113 - Gluon loops have no enumerate

    @gluon.jit
    def _producer_one(
        desc_q,
        desc_k,
        desc_v,
        q_smem,
        k_smem,
        v_smem,
        q_bar,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        start_m,
        off_bh,
        n_q,
        n_kv,
        n_blocks,
        HEAD_DIM: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        FP8: gl.constexpr,
    ):
        """The non-persistent grid's TMA warp: both Q tiles once, then K and V block by
        block into the ring (d1ceb50's code, kept so that the one-tile build compiles as
        it did before the persistent grid; ``_fwd_one_tile`` says why)."""
        NUM_WG: gl.constexpr = q_smem.shape[0]
        q_row0 = off_bh * n_q + start_m * (NUM_WG * desc_q.block_type.shape[0])
        for wg in gl.static_range(NUM_WG):
            mbarrier.expect(q_bar.index(wg), desc_q.block_type.nbytes)
            tma.async_copy_global_to_shared(
                desc_q,
                [q_row0 + wg * desc_q.block_type.shape[0], 0],
                q_bar.index(wg),
                q_smem.index(wg),
            )
        kv_row0 = off_bh * n_kv
        vt_row0 = off_bh * HEAD_DIM
        for j in range(n_blocks):
            s = j % STAGES
            # the slot's previous use ended when both consumers arrived on "empty";
            # the first round waits on the (already complete) phase before phase 0
            phase = ((j // STAGES) & 1) ^ 1
            mbarrier.wait(k_empty.index(s), phase)
            mbarrier.expect(k_ready.index(s), desc_k.block_type.nbytes)
            tma.async_copy_global_to_shared(
                desc_k, [kv_row0 + j * BLOCK_N, 0], k_ready.index(s), k_smem.index(s)
            )
            mbarrier.wait(v_empty.index(s), phase)
            mbarrier.expect(v_ready.index(s), desc_v.block_type.nbytes)
            if FP8:  # a [d, block_n] tile of Vᵀ
                tma.async_copy_global_to_shared(
                    desc_v, [vt_row0, j * BLOCK_N], v_ready.index(s), v_smem.index(s)
                )
            else:
                tma.async_copy_global_to_shared(
                    desc_v, [kv_row0 + j * BLOCK_N, 0], v_ready.index(s), v_smem.index(s)
                )

    @gluon.jit
    def _softmax(
        s,
        m_i,
        l_i,
        start_n,
        rows,
        n_kv,
        qk_scale,
        s_layout: gl.constexpr,
        BLOCK_N: gl.constexpr,
        CAUSAL: gl.constexpr,
        MASK: gl.constexpr,
        hi_full,
    ):
        """Online softmax of one S block (exp2 domain): P, the new m and l, and O's factor."""
        if MASK:  # noqa: SIM102 - MASK is a constexpr, start_n a run-time value
            if start_n >= hi_full:  # only blocks at the diagonal / the end of K/V
                cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
                keep = gl.expand_dims(cols < n_kv, 0)
                if CAUSAL:
                    keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
                s = gl.where(keep, s, -float("inf"))
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
        l_i = l_i * alpha + gl.sum(p, 1)
        return p, m_new, l_i, alpha

    @gluon.jit
    def _p_operand(p, dtype: gl.constexpr, p_layout: gl.constexpr, PERMUTE_P: gl.constexpr):
        """P (wgmma accumulator layout, fp32) as the A operand of P V in ``dtype``.

        An 8-bit A operand holds 4 consecutive k per register (k = 4t..4t+3 and
        16+4t..16+4t+3 of each 32 for lane t % 4), the accumulator pairs (columns 2t, 2t+1,
        8+2t, 9+2t of each 16): a plain conversion moves bytes between lanes (16 shuffles
        and their selects per block). With ``PERMUTE_P`` the columns are reordered within
        each 32 so that every lane keeps its own values (column 16h + 4t + 2g + i takes
        column 16h + 8g + 2t + i): the conversion is register-only. V's keys are permuted
        the same way by ``transpose_v(..., permute=True)``, so P V is unchanged.
        """
        if PERMUTE_P:
            M: gl.constexpr = p.shape[0]
            N: gl.constexpr = p.shape[1]
            p6 = gl.reshape(p, [M, N // 32, 2, 2, 4, 2])  # [row, c, h, g, t, i]
            p6 = gl.permute(p6, (0, 1, 2, 4, 3, 5))  # [row, c, h, t, g, i]
            p = gl.reshape(p6, [M, N])
        return gl.convert_layout(p.to(dtype), p_layout)

    @gluon.jit
    def _consumer_tile(
        q_smem,
        k_smem,
        v_smem,
        q_bar,
        q_empty,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        sched,
        Out,
        LSE,
        qk_scale,
        out_scale,
        start_m,
        off_bh,
        n_q,
        n_kv,
        n_blocks,
        hi_full,
        stride_om,
        c0,
        qb,
        q_phase,
        sched_phase,
        WG: gl.constexpr,
        HEAD_DIM: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        CAUSAL: gl.constexpr,
        MASK: gl.constexpr,
        FP8: gl.constexpr,
        PINGPONG: gl.constexpr,
        PERMUTE_P: gl.constexpr,
        PERSISTENT: gl.constexpr,
    ):
        """One consumer warpgroup on one tile: 64 rows of Q, the K/V loop, the epilogue.

        ``c0`` is the ring's block counter at the tile's first block (slot and phase of
        block j: (c0 + j) % STAGES and (c0 + j) // STAGES); returns the counter after
        the tile and the ping-pong phase.
        """
        WGM: gl.constexpr = q_smem.shape[1]
        dtype: gl.constexpr = q_smem.dtype
        k_inst: gl.constexpr = 256 // dtype.primitive_bitwidth
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, k_inst]
        )
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, k_inst]
        )
        p_layout: gl.constexpr = gl.DotOperandLayout(
            operand_index=0, parent=o_layout, k_width=32 // dtype.primitive_bitwidth
        )
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

        NUM_WG: gl.constexpr = sched.shape[0]
        rows = start_m * (NUM_WG * WGM) + WG * WGM + gl.arange(0, WGM, layout=row_s)
        m_i = gl.full([WGM], -float("inf"), gl.float32, layout=row_s)
        l_i = gl.full([WGM], 0.0, gl.float32, layout=row_s)
        acc = gl.zeros([WGM, HEAD_DIM], gl.float32, layout=o_layout)
        s_zero = gl.zeros([WGM, BLOCK_N], gl.float32, layout=s_layout)
        q = q_smem.index(qb)  # Q buffer qb: this warpgroup's rows of this tile
        mbarrier.wait(q_bar.index(qb), q_phase)

        # -- block 0: S(0) and its softmax, nothing to overlap with yet --
        if PINGPONG:
            mbarrier.wait(sched.index(WG), sched_phase)
            sched_phase ^= 1
        s_idx = c0 % STAGES
        mbarrier.wait(k_ready.index(s_idx), (c0 // STAGES) & 1)
        k = k_smem.index(s_idx)
        s_tok = warpgroup_mma(q, k.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        if PINGPONG:
            mbarrier.arrive(sched.index((WG + 1) % NUM_WG))
        s, q, k = warpgroup_mma_wait(0, deps=(s_tok, q, k))
        mbarrier.arrive(k_empty.index(s_idx))
        p, m_i, l_i, alpha = _softmax(
            s, m_i, l_i, 0, rows, n_kv, qk_scale, s_layout, BLOCK_N, CAUSAL, MASK, hi_full
        )

        # -- steady state: S(j) and P(j-1) V(j-1) in flight, softmax(j) under P V --
        for j in range(1, n_blocks):
            c = c0 + j
            s_idx = c % STAGES
            s_phase = (c // STAGES) & 1
            v_idx = (c - 1) % STAGES
            v_phase = ((c - 1) // STAGES) & 1
            if PINGPONG:
                mbarrier.wait(sched.index(WG), sched_phase)
                sched_phase ^= 1
            mbarrier.wait(k_ready.index(s_idx), s_phase)
            k = k_smem.index(s_idx)
            s_tok = warpgroup_mma(q, k.permute((1, 0)), s_zero, use_acc=False, is_async=True)
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            p_op = _p_operand(p, dtype, p_layout, PERMUTE_P)
            mbarrier.wait(v_ready.index(v_idx), v_phase)
            v = v_smem.index(v_idx)
            if FP8:
                v = v.permute((1, 0))
            o_tok = warpgroup_mma(p_op, v, acc, is_async=True)
            if PINGPONG:
                mbarrier.arrive(sched.index((WG + 1) % NUM_WG))
            s, q, k = warpgroup_mma_wait(1, deps=(s_tok, q, k))
            mbarrier.arrive(k_empty.index(s_idx))
            p, m_i, l_i, alpha = _softmax(
                s,
                m_i,
                l_i,
                j * BLOCK_N,
                rows,
                n_kv,
                qk_scale,
                s_layout,
                BLOCK_N,
                CAUSAL,
                MASK,
                hi_full,
            )
            acc, v = warpgroup_mma_wait(0, deps=(o_tok, v))
            mbarrier.arrive(v_empty.index(v_idx))
        if PERSISTENT:  # every S of this tile is done: the producer may load the next Q
            mbarrier.arrive(q_empty.index(qb))

        # -- the last P V --
        last = c0 + n_blocks - 1
        v_idx = last % STAGES
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
        p_op = _p_operand(p, dtype, p_layout, PERMUTE_P)
        mbarrier.wait(v_ready.index(v_idx), (last // STAGES) & 1)
        v = v_smem.index(v_idx)
        if FP8:
            v = v.permute((1, 0))
        o_tok = warpgroup_mma(p_op, v, acc, is_async=True)
        acc, v = warpgroup_mma_wait(0, deps=(o_tok, v))
        mbarrier.arrive(v_empty.index(v_idx))

        # -- epilogue: 1/l (and V's descale), log-sum-exp, masked stores --
        lse = (m_i + gl.log2(l_i)) * _LN2
        gl.store(LSE + off_bh.to(gl.int64) * n_q + rows, lse, mask=rows < n_q)
        scale = gl.convert_layout(out_scale / l_i, row_o)
        out = (acc * gl.expand_dims(scale, 1)).to(Out.dtype.element_ty)
        rows_o = start_m * (NUM_WG * WGM) + WG * WGM + gl.arange(0, WGM, layout=row_o)
        cols_o = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
        offs = (off_bh.to(gl.int64) * n_q + rows_o.to(gl.int64)) * stride_om
        ptrs = Out + gl.expand_dims(offs, 1) + gl.expand_dims(cols_o, 0)
        gl.store(ptrs, out, mask=gl.expand_dims(rows_o < n_q, 1))
        return c0 + n_blocks, sched_phase

    @gluon.jit
    def _consumer(
        q_smem,
        k_smem,
        v_smem,
        q_bar,
        q_empty,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        sched,
        Out,
        LSE,
        qk_scale,
        out_scale,
        first,
        n_tiles,
        step,
        n_m,
        n_bh,
        n_q,
        n_kv,
        stride_om,
        WG: gl.constexpr,
        HEAD_DIM: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        CAUSAL: gl.constexpr,
        MASK: gl.constexpr,
        FP8: gl.constexpr,
        PINGPONG: gl.constexpr,
        PERMUTE_P: gl.constexpr,
    ):
        """One consumer warpgroup of the persistent grid: its tiles in turn."""
        NUM_WG: gl.constexpr = sched.shape[0]
        Q_BUFS: gl.constexpr = q_smem.shape[0] // sched.shape[0]  # Q tiles per warpgroup
        WGM: gl.constexpr = q_smem.shape[1]
        c0 = 0
        sched_phase = 0
        it = 0
        for t in range(first, n_tiles, step):
            start_m, off_bh = _tile(t, n_m, n_bh, CAUSAL)
            qb = (it % Q_BUFS) * NUM_WG + WG  # this tile's Q buffer and its phase
            q_phase = (it // Q_BUFS) & 1
            n_blocks, hi_full = _kv_extent(start_m, n_kv, NUM_WG * WGM, BLOCK_N, CAUSAL)
            c0, sched_phase = _consumer_tile(
                q_smem,
                k_smem,
                v_smem,
                q_bar,
                q_empty,
                k_ready,
                v_ready,
                k_empty,
                v_empty,
                sched,
                Out,
                LSE,
                qk_scale,
                out_scale,
                start_m,
                off_bh,
                n_q,
                n_kv,
                n_blocks,
                hi_full,
                stride_om,
                c0,
                qb,
                q_phase,
                sched_phase,
                WG,
                HEAD_DIM,
                BLOCK_N,
                STAGES,
                CAUSAL,
                MASK,
                FP8,
                PINGPONG,
                PERMUTE_P,
                True,  # PERSISTENT
            )
            it += 1  # noqa: SIM113 - Gluon loops have no enumerate

    @gluon.jit
    def _fwd_persistent(
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
        stride_om,
        HEAD_DIM: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        CAUSAL: gl.constexpr,
        MASK: gl.constexpr,
        FP8: gl.constexpr,
        PINGPONG: gl.constexpr,
        PERMUTE_P: gl.constexpr,
        Q_BUFS: gl.constexpr,
        PRODUCER_REGS: gl.constexpr,
        CONSUMER_REGS: gl.constexpr,
        NUM_WG: gl.constexpr,
    ):
        """Grid (CTAs,): CTA i takes tiles i, i + CTAs, ... (``_tile``)."""
        WGM: gl.constexpr = desc_q.block_type.shape[0]
        n_m = gl.cdiv(n_q, NUM_WG * WGM)
        first = gl.program_id(0)
        step = gl.num_programs(0)
        n_tiles = n_m * n_bh

        dtype: gl.constexpr = desc_q.dtype
        # Q_BUFS = 2: the next tile's Q loads while this tile runs
        q_smem = gl.allocate_shared_memory(dtype, [Q_BUFS * NUM_WG, WGM, HEAD_DIM], desc_q.layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], desc_k.layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES] + desc_v.block_type.shape, desc_v.layout)
        bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
        q_bar = gl.allocate_shared_memory(gl.int64, [Q_BUFS * NUM_WG, 1], bar_layout)
        q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFS * NUM_WG, 1], bar_layout)
        sched = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], bar_layout)
        k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        for i in gl.static_range(Q_BUFS * NUM_WG):
            mbarrier.init(q_bar.index(i), count=1)
            mbarrier.init(q_empty.index(i), count=1)
        for i in gl.static_range(NUM_WG):
            mbarrier.init(sched.index(i), count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(k_ready.index(i), count=1)
            mbarrier.init(v_ready.index(i), count=1)
            mbarrier.init(k_empty.index(i), count=NUM_WG)  # one arrival per consumer group
            mbarrier.init(v_empty.index(i), count=NUM_WG)
        if PINGPONG:
            # warpgroup 0 issues its GEMMs first
            mbarrier.arrive(sched.index(0))

        # (the producer's arguments are written out in each call: a tuple assigned to a
        # variable turns its constexprs into run-time values)
        # the default partition (the launch's 4 warps) is consumer warpgroup 0
        if NUM_WG == 2:
            gl.warp_specialize(
                [
                    (
                        _consumer,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            q_empty,
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            first,
                            n_tiles,
                            step,
                            n_m,
                            n_bh,
                            n_q,
                            n_kv,
                            stride_om,
                            0,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                        ),
                    ),
                    (
                        _consumer,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            q_empty,
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            first,
                            n_tiles,
                            step,
                            n_m,
                            n_bh,
                            n_q,
                            n_kv,
                            stride_om,
                            1,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                        ),
                    ),
                    (
                        _producer,
                        (
                            desc_q,
                            desc_k,
                            desc_v,
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            q_empty,
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,  # its shape: the number of consumer warpgroups
                            first,
                            n_tiles,
                            step,
                            n_m,
                            n_bh,
                            n_q,
                            n_kv,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            FP8,
                        ),
                    ),
                ],
                [4, 1],
                [CONSUMER_REGS, PRODUCER_REGS],
            )
        else:
            gl.warp_specialize(
                [
                    (
                        _consumer,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            q_empty,
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            first,
                            n_tiles,
                            step,
                            n_m,
                            n_bh,
                            n_q,
                            n_kv,
                            stride_om,
                            0,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                        ),
                    ),
                    (
                        _consumer,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            q_empty,
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            first,
                            n_tiles,
                            step,
                            n_m,
                            n_bh,
                            n_q,
                            n_kv,
                            stride_om,
                            1,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                        ),
                    ),
                    (
                        _consumer,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            q_empty,
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            first,
                            n_tiles,
                            step,
                            n_m,
                            n_bh,
                            n_q,
                            n_kv,
                            stride_om,
                            2,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                        ),
                    ),
                    (
                        _producer,
                        (
                            desc_q,
                            desc_k,
                            desc_v,
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            q_empty,
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,  # its shape: the number of consumer warpgroups
                            first,
                            n_tiles,
                            step,
                            n_m,
                            n_bh,
                            n_q,
                            n_kv,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            FP8,
                        ),
                    ),
                ],
                [4, 4, 1],
                [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS],
            )

    @gluon.jit
    def _fwd_one_tile(
        desc_q,
        desc_k,
        desc_v,
        Out,
        LSE,
        qk_scale,
        out_scale,
        n_q,
        n_kv,
        stride_om,
        HEAD_DIM: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        CAUSAL: gl.constexpr,
        MASK: gl.constexpr,
        FP8: gl.constexpr,
        PINGPONG: gl.constexpr,
        PERMUTE_P: gl.constexpr,
        Q_BUFS: gl.constexpr,
        PRODUCER_REGS: gl.constexpr,
        CONSUMER_REGS: gl.constexpr,
        NUM_WG: gl.constexpr,
    ):
        """Grid (row blocks, heads): one tile per CTA.

        This is d1ceb50's kernel body, the build measured at 453 TFLOPS (fp16 d=64
        causal, N=16k). Running the persistent tile loop with one tile per CTA instead
        (start/stop/step at run time, the tile's row block and head by a division, the
        ring's slots and phases from a run-time block counter, Q buffers indexed at run
        time, the loop's values carried through the warp_specialize captures) compiled
        to more instructions and three more BAR.SYNC (3912 vs 3720 SASS instructions,
        34 vs 31, at d=64 causal) and ran 4-11% slower (kernels/TUNING.md). The
        producer's arguments travel as a tuple, which turns its constexprs into
        run-time values (run-time ring slot and FP8 branch in the TMA warp): that is how
        the measured build was compiled, so it stays.
        """
        gl.static_assert(Q_BUFS == 1, "one Q buffer per warpgroup without the persistent grid")
        WGM: gl.constexpr = desc_q.block_type.shape[0]
        n_m = gl.num_programs(0)
        start_m = gl.program_id(0)
        if CAUSAL:
            start_m = n_m - 1 - start_m  # longest K/V loops first
        off_bh = gl.program_id(1)
        hi = gl.minimum((start_m + 1) * (NUM_WG * WGM), n_kv) if CAUSAL else n_kv
        n_blocks = gl.cdiv(hi, BLOCK_N)
        # blocks starting at or past hi_full need the mask (diagonal / partial end)
        hi_full = n_kv // BLOCK_N * BLOCK_N
        if CAUSAL:
            hi_full = gl.minimum(hi_full, (start_m * (NUM_WG * WGM)) // BLOCK_N * BLOCK_N)

        dtype: gl.constexpr = desc_q.dtype
        q_smem = gl.allocate_shared_memory(dtype, [NUM_WG, WGM, HEAD_DIM], desc_q.layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], desc_k.layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES] + desc_v.block_type.shape, desc_v.layout)
        bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
        q_bar = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], bar_layout)
        sched = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], bar_layout)
        k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
        for i in gl.static_range(NUM_WG):
            mbarrier.init(q_bar.index(i), count=1)
            mbarrier.init(sched.index(i), count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(k_ready.index(i), count=1)
            mbarrier.init(v_ready.index(i), count=1)
            mbarrier.init(k_empty.index(i), count=NUM_WG)  # one arrival per consumer group
            mbarrier.init(v_empty.index(i), count=NUM_WG)
        if PINGPONG:
            # warpgroup 0 issues its GEMMs first
            mbarrier.arrive(sched.index(0))

        producer_args = (
            desc_q,
            desc_k,
            desc_v,
            q_smem,
            k_smem,
            v_smem,
            q_bar,
            k_ready,
            v_ready,
            k_empty,
            v_empty,
            start_m,
            off_bh,
            n_q,
            n_kv,
            n_blocks,
            HEAD_DIM,
            BLOCK_N,
            STAGES,
            FP8,
        )
        # the default partition (the launch's 4 warps) is consumer warpgroup 0
        if NUM_WG == 2:
            gl.warp_specialize(
                [
                    (
                        _consumer_tile,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            None,  # q_empty: persistent grid only
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            start_m,
                            off_bh,
                            n_q,
                            n_kv,
                            n_blocks,
                            hi_full,
                            stride_om,
                            0,  # c0: the ring starts at slot 0, phase 0
                            0,  # qb: this warpgroup's Q tile
                            0,  # q_phase
                            0,  # sched_phase
                            0,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                            False,  # PERSISTENT
                        ),
                    ),
                    (
                        _consumer_tile,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            None,  # q_empty: persistent grid only
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            start_m,
                            off_bh,
                            n_q,
                            n_kv,
                            n_blocks,
                            hi_full,
                            stride_om,
                            0,  # c0: the ring starts at slot 0, phase 0
                            1,  # qb: this warpgroup's Q tile
                            0,  # q_phase
                            0,  # sched_phase
                            1,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                            False,  # PERSISTENT
                        ),
                    ),
                    (_producer_one, producer_args),
                ],
                [4, 1],
                [CONSUMER_REGS, PRODUCER_REGS],
            )
        else:
            gl.warp_specialize(
                [
                    (
                        _consumer_tile,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            None,  # q_empty: persistent grid only
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            start_m,
                            off_bh,
                            n_q,
                            n_kv,
                            n_blocks,
                            hi_full,
                            stride_om,
                            0,  # c0: the ring starts at slot 0, phase 0
                            0,  # qb: this warpgroup's Q tile
                            0,  # q_phase
                            0,  # sched_phase
                            0,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                            False,  # PERSISTENT
                        ),
                    ),
                    (
                        _consumer_tile,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            None,  # q_empty: persistent grid only
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            start_m,
                            off_bh,
                            n_q,
                            n_kv,
                            n_blocks,
                            hi_full,
                            stride_om,
                            0,  # c0: the ring starts at slot 0, phase 0
                            1,  # qb: this warpgroup's Q tile
                            0,  # q_phase
                            0,  # sched_phase
                            1,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                            False,  # PERSISTENT
                        ),
                    ),
                    (
                        _consumer_tile,
                        (
                            q_smem,
                            k_smem,
                            v_smem,
                            q_bar,
                            None,  # q_empty: persistent grid only
                            k_ready,
                            v_ready,
                            k_empty,
                            v_empty,
                            sched,
                            Out,
                            LSE,
                            qk_scale,
                            out_scale,
                            start_m,
                            off_bh,
                            n_q,
                            n_kv,
                            n_blocks,
                            hi_full,
                            stride_om,
                            0,  # c0: the ring starts at slot 0, phase 0
                            2,  # qb: this warpgroup's Q tile
                            0,  # q_phase
                            0,  # sched_phase
                            2,
                            HEAD_DIM,
                            BLOCK_N,
                            STAGES,
                            CAUSAL,
                            MASK,
                            FP8,
                            PINGPONG,
                            PERMUTE_P,
                            False,  # PERSISTENT
                        ),
                    ),
                    (_producer_one, producer_args),
                ],
                [4, 4, 1],
                [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS],
            )

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
        # two bodies rather than one tile loop run once: the one-tile grid keeps the
        # code it had before the persistent grid (``_fwd_one_tile``)
        if PERSISTENT:
            _fwd_persistent(
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
        else:
            _fwd_one_tile(
                desc_q,
                desc_k,
                desc_v,
                Out,
                LSE,
                qk_scale,
                out_scale,
                n_q,
                n_kv,
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


SMEM_LIMIT_BYTES = 232_448  # sm_90: 227 KiB of shared memory per CTA (opt-in)


def smem_bytes(
    head_dim: int, block_n: int, stages: int, elem_bytes: int, groups: int = 2, q_buffers: int = 1
) -> int:
    """Shared memory of one CTA: ``q_buffers`` Q tiles per consumer group, ``stages`` K and
    V slots, barriers."""
    tiles = q_buffers * groups * WG_M * head_dim + 2 * stages * block_n * head_dim
    return tiles * elem_bytes + 8 * ((2 * q_buffers + 1) * groups + 4 * stages)


def check_config(
    config, head_dim: int | None = None, elem_bytes: int = 2, groups: int = 2
) -> str | None:
    """Why the Gluon kernel cannot run ``config`` (one line), or None.

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
        if need > SMEM_LIMIT_BYTES:
            return (
                f"v3 warp_specialize=True with num_stages={config.num_stages} needs {need} B "
                f"of shared memory per CTA (limit {SMEM_LIMIT_BYTES}); use fewer stages"
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
    that P needs no lane shuffles to become the A operand of P V (kernels/TUNING.md:
    +5-8% non-causal on the H200, 1-2% slower causal); ``None``: on for fp8 without
    the causal mask. ``config.persistent`` launches one CTA per SM, each looping over
    tiles. ``ctas`` caps the persistent grid (tests run many tiles
    per CTA on small shapes with it). ``q_buffers=2`` (persistent only) double-buffers
    Q so that the next tile's Q loads during this one; ``None``: 2 where shared memory
    allows (``smem_bytes``), else 1.
    """
    if consumer_groups not in (2, 3):
        raise TilesimError(f"consumer_groups must be 2 or 3, got {consumer_groups!r}")
    from .flash_v3 import transpose_v  # the same fp8 V transpose launch as the Triton v3

    batch, heads, n_q, d = q.shape
    n_kv = k.shape[2]
    fp8 = q.dtype == torch.float8_e4m3fn
    if permute_p is None:
        permute_p = fp8 and not causal
    problem = check_config(config, d, q.element_size(), consumer_groups)
    if problem:
        raise TilesimError(problem)
    bn = config.block_n
    q, k = q.contiguous(), k.contiguous()
    if lse is None:
        lse = torch.empty((batch * heads, n_q), dtype=torch.float32, device=q.device)
    desc_q = _descriptor(q.view(-1, d), [WG_M, d])
    desc_k = _descriptor(k.view(-1, d), [bn, d])
    runs = []
    if fp8:
        n_pad = triton.cdiv(n_kv, 16) * 16
        vt = torch.empty((batch, heads, d, n_pad), dtype=v.dtype, device=v.device)
        runs.append(("v3_transpose_v", lambda: transpose_v(v, vt, permute=bool(permute_p))))
        desc_v = _descriptor(vt.view(-1, n_pad), [d, bn])
    else:
        desc_v = _descriptor(v.contiguous().view(-1, d), [bn, d])
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
        q_buffers = 2 if two <= SMEM_LIMIT_BYTES else 1
    if q_buffers not in (1, 2):
        raise TilesimError(f"q_buffers must be 1 or 2, got {q_buffers!r}")
    args = (
        desc_q,
        desc_k,
        desc_v,
        out,
        lse,
        sm_scale * q_scale * k_scale * LOG2E,
        v_scale,
        n_q,
        n_kv,
        batch * heads,
        out.stride(2),
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

    def run():
        _v3_gluon_fwd[grid](*args, **meta)

    runs.append(("v3_fwd", run))
    return runs
