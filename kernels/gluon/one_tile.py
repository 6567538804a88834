"""The Gluon FA3 forward's one-tile grid: grid (row blocks, heads), one tile per CTA.

``_fwd_one_tile`` is the kernel body without ``config.persistent`` (``gluon.forward``
dispatches to it) and ``_producer_one`` its TMA warp: d1ceb50's code, kept apart from
the persistent tile loop because that loop run once compiled to a slower kernel
(``_fwd_one_tile`` says why).
"""

from __future__ import annotations

from .tile import AVAILABLE

if AVAILABLE:  # the same imports succeeded in gluon.tile
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

    from .tile import _consumer_tile

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
        group,
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
        kv_row0 = (off_bh // group) * n_kv  # the K/V head: b*H_kv + h // group
        vt_row0 = (off_bh // group) * HEAD_DIM
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
        n_bh,  # unused: the persistent body's signature, so one call dispatches to either
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
        """Grid (row blocks, heads): one tile per CTA.

        This is d1ceb50's kernel body, the build measured at 453 TFLOPS (fp16 d=64
        causal, N=16k). Running the persistent tile loop with one tile per CTA instead
        (start/stop/step at run time, the tile's row block and head by a division, the
        ring's slots and phases from a run-time block counter, Q buffers indexed at run
        time, the loop's values carried through the warp_specialize captures) compiled
        to more instructions and three more BAR.SYNC (3912 vs 3720 SASS instructions,
        34 vs 31, at d=64 causal) and ran 4-11% slower
        (experiments/2026-11-30-tuning/README.md). The
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
        shift = n_kv - n_q  # the bottom-right diagonal: row i sees keys <= i + shift
        hi = gl.minimum((start_m + 1) * (NUM_WG * WGM) + shift, n_kv) if CAUSAL else n_kv
        n_blocks = gl.cdiv(hi, BLOCK_N)
        # blocks starting at or past hi_full need the mask (diagonal / partial end)
        hi_full = n_kv // BLOCK_N * BLOCK_N
        if CAUSAL:
            hi_full = gl.minimum(hi_full, (start_m * (NUM_WG * WGM) + shift) // BLOCK_N * BLOCK_N)

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

        # the ring's shared memory and barriers, one argument of the consumers
        smem = (q_smem, k_smem, v_smem, q_bar, None, k_ready, v_ready, k_empty, v_empty, sched)
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
            group,
            n_blocks,
            HEAD_DIM,
            BLOCK_N,
            STAGES,
            FP8,
        )
        # One comprehension over the partitions: consumer warpgroups 0 .. NUM_WG-1 (the
        # default partition, the launch's 4 warps, is warpgroup 0), then the producer. The
        # consumers' argument tuple stays a literal inside the call so that its constexprs
        # stay constexprs (the producer's, bound to a name above, do not: see the docstring).
        gl.warp_specialize(
            [
                (
                    _consumer_tile,
                    (
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
                        0,  # c0: the ring starts at slot 0, phase 0
                        wg,  # qb: this warpgroup's Q tile
                        0,  # q_phase
                        0,  # sched_phase
                        wg,
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
                )
                if wg < NUM_WG
                else (_producer_one, producer_args)
                for wg in (0, 1, 2, 3)[: NUM_WG + 1]
            ],
            [4] * (NUM_WG - 1) + [1],
            [CONSUMER_REGS] * (NUM_WG - 1) + [PRODUCER_REGS],
        )
