"""The Gluon FA3 forward's persistent grid: one CTA per SM loops over tiles.

``_fwd_persistent`` is the kernel body for ``config.persistent`` (``gluon.forward``
dispatches to it): tile order (``_tile``), the TMA producer whose K/V ring and Q
buffers run on across tiles, and the consumer warpgroups' tile loop around the shared
``_consumer_tile``.
"""

from __future__ import annotations

from .tile import AVAILABLE

if AVAILABLE:  # the same imports succeeded in gluon.tile
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

    from .tile import _consumer_tile

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
    def _kv_extent(
        start_m, n_q, n_kv, ROWS: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr
    ):
        """K/V blocks of a tile and the first key block that needs the mask (causal: the
        bottom-right diagonal, row i sees keys <= i + n_kv - n_q)."""
        shift = n_kv - n_q
        hi = gl.minimum((start_m + 1) * ROWS + shift, n_kv) if CAUSAL else n_kv
        n_blocks = gl.cdiv(hi, BLOCK_N)
        # blocks starting at or past hi_full need the mask (diagonal / partial end)
        hi_full = n_kv // BLOCK_N * BLOCK_N
        if CAUSAL:
            hi_full = gl.minimum(hi_full, (start_m * ROWS + shift) // BLOCK_N * BLOCK_N)
        return n_blocks, hi_full

    @gluon.jit
    def _producer(
        desc_q,
        desc_k,
        desc_v,
        smem,  # the ring's shared memory and barriers (``_fwd_persistent``)
        walk,  # this CTA's tiles: (first, n_tiles, step, n_m, n_bh, group)
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
        q_smem, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, sched = smem
        NUM_WG: gl.constexpr = sched.shape[0]
        Q_BUFS: gl.constexpr = q_smem.shape[0] // sched.shape[0]  # Q tiles per warpgroup
        WGM: gl.constexpr = desc_q.block_type.shape[0]
        c0 = 0
        it = 0
        first, n_tiles, step, n_m, n_bh, group = walk
        for t in range(first, n_tiles, step):
            start_m, off_bh = _tile(t, n_m, n_bh, CAUSAL)
            n_blocks, hi_full = _kv_extent(start_m, n_q, n_kv, NUM_WG * WGM, BLOCK_N, CAUSAL)
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
            kv_row0 = (off_bh // group) * n_kv  # the K/V head: b*H_kv + h // group
            vt_row0 = (off_bh // group) * HEAD_DIM
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
    def _consumer(
        smem,  # the ring's shared memory and barriers (``_fwd_persistent``)
        Out,
        LSE,
        qk_scale,
        out_scale,
        walk,  # this CTA's tiles: (first, n_tiles, step, n_m, n_bh, group)
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
        q_smem, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, sched = smem
        NUM_WG: gl.constexpr = sched.shape[0]
        Q_BUFS: gl.constexpr = q_smem.shape[0] // sched.shape[0]  # Q tiles per warpgroup
        WGM: gl.constexpr = q_smem.shape[1]
        c0 = 0
        sched_phase = 0
        it = 0
        first, n_tiles, step, n_m, n_bh, group = walk
        for t in range(first, n_tiles, step):
            start_m, off_bh = _tile(t, n_m, n_bh, CAUSAL)
            qb = (it % Q_BUFS) * NUM_WG + WG  # this tile's Q buffer and its phase
            q_phase = (it // Q_BUFS) & 1
            n_blocks, hi_full = _kv_extent(start_m, n_q, n_kv, NUM_WG * WGM, BLOCK_N, CAUSAL)
            c0, sched_phase = _consumer_tile(
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
        walk = (first, n_tiles, step, n_m, n_bh, group)  # the CTA's tiles, for both partitions

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
        # the ring's shared memory and barriers, as one argument of both partitions (no
        # constexprs in it, so binding it to a name changes nothing)
        smem = (q_smem, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, sched)

        # One comprehension over the partitions: consumer warpgroups 0 .. NUM_WG-1 (the
        # default partition, the launch's 4 warps, is warpgroup 0), then the producer. The
        # argument tuples stay literals inside the call: a tuple bound to a name turns its
        # constexprs into run-time values (and a list built with + does not compile).
        gl.warp_specialize(
            [
                (
                    _consumer,
                    (
                        smem,
                        Out,
                        LSE,
                        qk_scale,
                        out_scale,
                        walk,
                        n_q,
                        n_kv,
                        stride_om,
                        wg,
                        HEAD_DIM,
                        BLOCK_N,
                        STAGES,
                        CAUSAL,
                        MASK,
                        FP8,
                        PINGPONG,
                        PERMUTE_P,
                    ),
                )
                if wg < NUM_WG
                else (
                    _producer,
                    (
                        desc_q,
                        desc_k,
                        desc_v,
                        smem,  # sched's shape: the number of consumer warpgroups
                        walk,
                        n_q,
                        n_kv,
                        HEAD_DIM,
                        BLOCK_N,
                        STAGES,
                        CAUSAL,
                        FP8,
                    ),
                )
                for wg in (0, 1, 2, 3)[: NUM_WG + 1]
            ],
            [4] * (NUM_WG - 1) + [1],
            [CONSUMER_REGS] * (NUM_WG - 1) + [PRODUCER_REGS],
        )
