"""The Gluon FA3 forward's per-tile device code, which both grids share.

One consumer warpgroup's work on one tile of ``gluon.forward`` (whose docstring
describes the schedule): the online softmax of an S block, P as the A operand of P V,
and ``_consumer_tile``, the K/V loop and epilogue of the warpgroup's 64 Q rows. This
module holds the one guarded import of Gluon: without it (an older Triton, or a newer
one whose API differs) ``AVAILABLE`` is False and no device function is defined.
"""

from __future__ import annotations

from .._common import LN2

try:  # Gluon is experimental: its API moved between Triton releases
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        mbarrier,
        tma,  # noqa: F401 - checked here, used by the producers
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import (  # noqa: F401 - the host's
        TensorDescriptor,
    )

    AVAILABLE = callable(getattr(gl, "warp_specialize", None))
except Exception:  # noqa: BLE001 - any import failure means "not available"
    AVAILABLE = False

if AVAILABLE:
    _LN2 = gl.constexpr(LN2)

    @gluon.jit
    def _softmax(
        s,
        m_i,
        l_i,
        start_n,
        diag,
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
                    keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(diag, 1))
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
        smem,
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

        ``smem``: the CTA's shared memory and barriers (Q tiles, K and V ring slots, Q
        ready, Q empty (None without the persistent grid), K/V ready and empty, ping-pong).
        ``c0`` is the ring's block counter at the tile's first block (slot and phase of
        block j: (c0 + j) % STAGES and (c0 + j) // STAGES); returns the counter after
        the tile and the ping-pong phase.
        """
        q_smem, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, sched = smem
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
        diag = rows + (n_kv - n_q)  # the last key each row sees (bottom-right causal)
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
            s, m_i, l_i, 0, diag, n_kv, qk_scale, s_layout, BLOCK_N, CAUSAL, MASK, hi_full
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
                diag,
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
