"""Standard attention's backward as PyTorch's math path runs it: P and dP in HBM.

The forward kept P (N_q x N_kv, input dtype) in HBM; the backward reads it
instead of recomputing it. Five launches:

1. ``bwd_dv``: dV = P^T dO, tiles of block_n x d (grid (n, bh), n fastest) with a
   k-loop over the Q blocks i loading P_in (block_m x block_n) and dO_i,
   pipelined ``num_stages - 1`` ahead.
2. ``bwd_dp``: dP = dO V^T, a tiled GEMM like the forward's S = Q K^T (grid
   (m, n, bh)); each CTA writes its block_m x block_n tile of dP.
3. ``bwd_softmax``: dS = P * (dP - rowsum(dP * P)), one CTA per row (grid
   (r, bh)), reading the rows of P and dP and writing the row of dS. Rows of up
   to ``SOFTMAX_MAX_BLOCK`` scores stay in registers and are read once; longer
   rows are read twice (the row sum, then dS), as the forward's softmax kernel.
4. ``bwd_dq``: dQ = dS K * scale, tiles of block_m x d, k-loop over K blocks j.
5. ``bwd_dk``: dK = dS^T Q * scale, tiles of block_n x d, k-loop over Q blocks i.

The causal mask costs nothing more: masked P is 0, the GEMMs are full.

Closed forms (exact for any shape, partial tiles included):

* matmul FLOPs: four full GEMMs of 2·N_q·N_kv·d each = 8·B·H·N_q·N_kv·d (2x the
  forward: nothing is recomputed), causal or not.
* HBM bytes, no reuse, Theta(N d + N^2): P read once by ``bwd_dv`` and
  ``passes`` times by the softmax backward, dP written once and read ``passes``
  times, dS written once and read twice; each d-wide operand read once per tile
  of the other side (T_r = cdiv(N_q, block_m), T_c = cdiv(N_kv, block_n)):
  reads = B·H·[(3 + 2·passes)·N_q·N_pad·e + 3·T_c·N_q·d·e + 2·T_r·N_kv·d·e]
  (dO twice and Q once per K block; V and K once per Q block),
  writes = B·H·[2·N_q·N_pad·e + (N_q + 2·N_kv)·d·e], with N_pad = N_kv rounded up to
  16 (the rows of P, dP and dS, ``tiles.padded_row``).
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from .flash_v2_bwd import backward_tensors
from .ir import CtaProgram, Launch, Load, Loop, Mma, Role, Store, TensorSpec, Trace, Vector
from .standard import SOFTMAX_REGS, row_params, softmax_plan
from .tiles import (
    BWD_FP32_PER_GRAD_SCALE,
    STANDARD_BWD_FP32_PER_SCORE_SOFTMAX,
    cols,
    padded_cols,
    regs_estimate,
    rows,
    through_smem,
    times,
)
from .workload import KernelConfig, Workload


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    w, c = workload, config
    p = row_params(w, c)
    bh = w.batch * w.heads
    dtype = w.dtype
    threads = c.num_warps * 32
    d, e = w.head_dim, w.elem_bytes
    bm, bn, stages = c.block_m, c.block_n, c.num_stages

    def gemm_loop(
        name: str, grid: tuple, out: str, out_rows: str, var: str, trips: str, operands, k: str
    ):
        """A tiled GEMM out (out_rows x d) += A (out_rows x k) B (k x d), k-loop over ``var``."""
        loads = tuple(Load(i, t, tile, nb) for i, t, tile, nb in operands)
        body = (*loads, Mma(out_rows, "d", k, dtype, deps=tuple(op.id for op in loads)))
        scale = out in ("dQ", "dK")
        # the accumulator goes to the store's layout through shared memory
        tail = (
            Vector(
                fp32=times(f"{out_rows}*d", BWD_FP32_PER_GRAD_SCALE) if scale else 0,
                smem=through_smem(f"{out_rows}*d*e"),
            ),
        )
        out_tile = ("bh", grid[0][0])
        # dV, dK: block_n x d outputs, the d-wide operand (dO_i, Q_i) block_m rows;
        # dQ: a block_m x d output, the d-wide operand K_j block_n rows
        acc_rows, operand_rows = (bm, bn) if out == "dQ" else (bn, bm)
        return Launch(
            name=name,
            grid=grid,
            program=CtaProgram(
                (
                    Role(
                        "main",
                        (
                            Loop(var, trips, body, prefetch=stages - 1),
                            *tail,
                            Store(out, out_tile, f"{out_rows}*d*e"),
                        ),
                        c.num_warps,
                    ),
                )
            ),
            smem_bytes=stages * (bm * bn + operand_rows * d) * e,
            threads=threads,
            regs_per_thread=regs_estimate(acc_rows * d, threads),
            mma_path=c.mma_path,
        )

    row_i, row_m, col_n, col_j = rows("i"), rows("m"), cols("n"), cols("j")
    pad_n, pad_j = padded_cols("n"), padded_cols("j")  # columns of P, dP, dS tiles

    # -- 1. dV = P^T dO ------------------------------------------------------------
    dv = gemm_loop(
        "bwd_dv",
        (("n", p["T_c"]), ("bh", bh)),
        "dV",
        col_n,
        "i",
        "T_r",
        (
            ("p", "P", ("bh", "i", "n"), f"{row_i}*{pad_n}*e"),
            ("do", "dO", ("bh", "i"), f"{row_i}*d*e"),
        ),
        row_i,
    )

    # -- 2. dP = dO V^T ------------------------------------------------------------
    dp = Launch(
        name="bwd_dp",
        grid=(("m", p["T_r"]), ("n", p["T_c"]), ("bh", bh)),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        Load("do", "dO", ("bh", "m"), f"{row_m}*d*e"),
                        Load("v", "V", ("bh", "n"), f"{col_n}*d*e"),
                        Mma(row_m, col_n, "d", dtype, deps=("do", "v")),
                        Vector(smem=through_smem(f"{row_m}*{col_n}*e")),  # to the store layout
                        Store("dP", ("bh", "m", "n"), f"{row_m}*{pad_n}*e"),
                    ),
                    c.num_warps,
                ),
            )
        ),
        smem_bytes=(bm + bn) * d * e,
        threads=threads,
        regs_per_thread=regs_estimate(bm * bn, threads),
        mma_path=c.mma_path,
    )

    # -- 3. dS = P * (dP - rowsum(dP * P)), one CTA per row ---------------------------
    _, passes, sm_warps = softmax_plan(w.seqlen_kv)
    row_loads = []
    for k in range(passes):
        suffix = str(k) if passes > 1 else ""
        row_loads += [
            Load(f"p{suffix}", "P", ("bh", "r"), "N_pad*e"),
            Load(f"dp{suffix}", "dP", ("bh", "r"), "N_pad*e"),
        ]
    softmax = Launch(
        name="bwd_softmax",
        grid=(("r", w.seqlen_q), ("bh", bh)),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        *row_loads,
                        Vector(
                            fp32=f"N_kv*{STANDARD_BWD_FP32_PER_SCORE_SOFTMAX}",
                            deps=tuple(op.id for op in row_loads),
                        ),
                        Store("dS", ("bh", "r"), "N_pad*e"),
                    ),
                    sm_warps,
                ),
            )
        ),
        smem_bytes=2 * sm_warps * 4,  # the cross-warp row sum
        threads=sm_warps * 32,
        regs_per_thread=SOFTMAX_REGS,
        mma_path=c.mma_path,
    )

    # -- 4. dQ = dS K * scale --------------------------------------------------------
    dq = gemm_loop(
        "bwd_dq",
        (("m", p["T_r"]), ("bh", bh)),
        "dQ",
        row_m,
        "j",
        "T_c",
        (
            ("ds", "dS", ("bh", "m", "j"), f"{row_m}*{pad_j}*e"),
            ("k", "K", ("bh", "j"), f"{col_j}*d*e"),
        ),
        col_j,
    )

    # -- 5. dK = dS^T Q * scale ------------------------------------------------------
    dk = gemm_loop(
        "bwd_dk",
        (("n", p["T_c"]), ("bh", bh)),
        "dK",
        col_n,
        "i",
        "T_r",
        (
            ("ds", "dS", ("bh", "i", "n"), f"{row_i}*{pad_n}*e"),
            ("q", "Q", ("bh", "i"), f"{row_i}*d*e"),
        ),
        row_i,
    )

    launches = (dv, dp, softmax, dq, dk)
    nn = (w.batch, w.heads, w.seqlen_q, p["N_pad"])
    tensors = [t for t in backward_tensors(w) if t.name not in ("O", "D")] + [
        TensorSpec(name, nn, dtype) for name in ("P", "dP", "dS")
    ]
    return Trace(
        algo="standard",
        tensors=tuple(tensors),
        launches=launches,
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )
