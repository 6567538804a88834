"""Standard attention as PyTorch's math path runs it: three kernels, S and P in HBM.

1. ``qk``: S = Q K^T * scale, a tiled GEMM. Grid (m, n, bh), m fastest; each CTA
   loads one Q tile (block_m x d) and one K tile (block_n x d), multiplies them
   with k = d in one step, scales in the epilogue and writes its block_m x
   block_n tile of S in the input dtype.
2. ``softmax``: one CTA per row of S (grid (r, bh)). It reads the row, applies
   the causal mask (S and P stay full N_q x N_kv: the math path masks, it does
   not skip; but the kernel's masked loads read only the r + 1 scores a causal
   row sees), takes max, exp2, sum, multiplies by 1/sum and writes the row of P. As
   tilesim's Triton kernel does (`softmax_plan`), a row of up to
   ``SOFTMAX_MAX_BLOCK`` scores is held in registers and read once; a longer
   row is read twice (an online max/sum pass, then the normalise-and-write
   pass: each pass exponentiates every score it reads; pass 2 writes the
   chunks wholly past a causal row's last score as zeros, without exp).
3. ``pv``: O = P V, tiles of block_m x d with a k-loop over N_kv in steps of
   block_n; the P and V tile loads are pipelined ``num_stages - 1`` ahead.

The causal mask costs FLOPs and bytes nothing here: the two GEMMs are full.
HBM traffic is Theta(N d + N^2): S and P are each written once and read once.
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from .ir import CtaProgram, Launch, Load, Loop, Mma, Role, Store, TensorSpec, Trace, Vector
from .tiles import (
    FP32_PER_MASKED_SCORE,
    STANDARD_FP32_PER_SCORE_SCALE,
    STANDARD_FP32_PER_SCORE_SECOND_PASS,
    STANDARD_FP32_PER_SCORE_SOFTMAX,
    cols,
    params,
    qkvo_tensors,
    regs_estimate,
    rows,
    times,
)
from .workload import KernelConfig, Workload

SOFTMAX_MAX_BLOCK = 8192  # longest row the softmax kernel keeps in registers (one pass)
SOFTMAX_REGS = 32  # a row kernel keeps a few scalars per thread


def softmax_plan(n_kv: int) -> tuple[int, int, int]:
    """(block, passes over the row, num_warps) of the row-softmax kernel for rows of
    ``n_kv`` scores; kernels/standard.py launches exactly this."""
    block = min(1 << max(0, n_kv - 1).bit_length(), SOFTMAX_MAX_BLOCK)
    num_warps = 4 if block <= 2048 else 8 if block <= 4096 else 16
    return block, 1 if block >= n_kv else 2, num_warps


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    w, c = workload, config
    p = params(w, c)
    bh = w.batch * w.heads
    dtype = w.dtype
    threads = c.num_warps * 32
    row_q, col_n, col_k = rows("m"), cols("n"), cols("j")

    # -- 1. S = Q K^T * scale ------------------------------------------------
    qk = Launch(
        name="qk",
        grid=(("m", p["T_r"]), ("n", p["T_c"]), ("bh", bh)),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        Load("q", "Q", ("bh", "m"), f"{row_q}*d*e"),
                        Load("k", "K", ("bh", "n"), f"{col_n}*d*e"),
                        Mma(row_q, col_n, "d", dtype, deps=("q", "k")),
                        Vector(fp32=times(f"{row_q}*{col_n}", STANDARD_FP32_PER_SCORE_SCALE)),
                        Store("S", ("bh", "m", "n"), f"{row_q}*{col_n}*e"),
                    ),
                    c.num_warps,
                ),
            )
        ),
        smem_bytes=(c.block_m + c.block_n) * w.head_dim * w.elem_bytes,
        threads=threads,
        regs_per_thread=regs_estimate(c.block_m * c.block_n, threads),
        mma_path=c.mma_path,
    )

    # -- 2. P = softmax(mask(S)), one CTA per row ------------------------------
    _, passes, sm_warps = softmax_plan(w.seqlen_kv)
    per_score = STANDARD_FP32_PER_SCORE_SOFTMAX + (FP32_PER_MASKED_SCORE if w.causal else 0)
    sm_threads = sm_warps * 32
    # The kernel loads only the columns the row sees (masked loads): a causal row r
    # reads r + 1 scores, each pass; it writes the whole row of P.
    seen = "min(N_kv, r + 1)" if w.causal else "N_kv"
    softmax_ops = [
        Load(f"s{i}" if passes > 1 else "s", "S", ("bh", "r"), f"{seen}*e") for i in range(passes)
    ]
    if passes == 1:
        exp, fp32 = "N_kv", f"N_kv*{per_score}"
    else:
        # pass 1 exponentiates the scores the row sees; pass 2 the chunks that hold
        # them (whole chunks of `block`, up to the row's end) and writes zeros past them
        block = softmax_plan(w.seqlen_kv)[0]
        chunks = f"min(N_kv, cdiv({seen}, {block})*{block})"
        exp = f"{seen} + {chunks}"
        fp32 = f"{chunks}*{per_score + STANDARD_FP32_PER_SCORE_SECOND_PASS}"
    softmax = Launch(
        name="softmax",
        grid=(("r", w.seqlen_q), ("bh", bh)),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        *softmax_ops,
                        Vector(
                            exp=exp,
                            fp32=fp32,
                            deps=tuple(op.id for op in softmax_ops),
                        ),
                        Store("P", ("bh", "r"), "N_kv*e"),
                    ),
                    sm_threads // 32,
                ),
            )
        ),
        # the row lives in registers; shared memory holds the cross-warp reductions
        # (one fp32 per warp, for the max and the sum)
        smem_bytes=2 * sm_warps * 4,
        threads=sm_threads,
        regs_per_thread=SOFTMAX_REGS,
        mma_path=c.mma_path,
    )

    # -- 3. O = P V ------------------------------------------------------------
    pv = Launch(
        name="pv",
        grid=(("m", p["T_r"]), ("bh", bh)),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        Loop(
                            "j",
                            "T_c",
                            (
                                Load("p", "P", ("bh", "m", "j"), f"{row_q}*{col_k}*e"),
                                Load("v", "V", ("bh", "j"), f"{col_k}*d*e"),
                                Mma(row_q, "d", col_k, dtype, deps=("p", "v")),
                            ),
                            prefetch=c.num_stages - 1,
                        ),
                        Store("O", ("bh", "m"), f"{row_q}*d*e_o"),
                    ),
                    c.num_warps,
                ),
            )
        ),
        smem_bytes=c.num_stages * (c.block_m * c.block_n + c.block_n * w.head_dim) * w.elem_bytes,
        threads=threads,
        regs_per_thread=regs_estimate(c.block_m * w.head_dim, threads),
        mma_path=c.mma_path,
    )

    tensors = qkvo_tensors(w) + [
        TensorSpec("S", (w.batch, w.heads, w.seqlen_q, w.seqlen_kv), dtype),
        TensorSpec("P", (w.batch, w.heads, w.seqlen_q, w.seqlen_kv), dtype),
    ]
    return Trace(
        algo="standard",
        tensors=tuple(tensors),
        launches=(qk, softmax, pv),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )
