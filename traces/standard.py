"""Standard attention as PyTorch's math path runs it: three kernels, S and P in HBM.

1. ``qk``: S = Q K^T * scale, a tiled GEMM. Grid (m, n, bh), m fastest; each CTA
   loads one Q tile (block_m x d) and one K tile (block_n x d), multiplies them
   with k = d in one step, scales in the epilogue and writes its block_m x
   block_n tile of S in the input dtype.
2. ``softmax``: one CTA per row of S (grid (r, bh)). It reads the row, applies
   the causal mask (S and P stay full N_q x N_kv: the math path masks, it does
   not skip; but the kernel's masked loads read only the r + 1 scores a causal
   row sees, rounded up to 8), takes max, exp2, sum, multiplies by 1/sum and
   writes the row of P. As tilesim's Triton kernel does (`softmax_fwd_plan`), a
   row of up to ``SOFTMAX_FWD_MAX_BLOCK`` scores (``SOFTMAX_MAX_BLOCK`` when
   causal) is held in registers and read once; a causal row is exponentiated at
   the narrowest compiled width (block, block/2, block/4) that holds its scores
   and gets zeros past it. A longer row is read twice (an online max/sum pass,
   then the normalise-and-write pass, both over the chunks that hold the row's
   scores; a causal row's chunks past its last score are written as zeros).
3. ``pv``: O = P V, tiles of block_m x d with a k-loop over N_kv in steps of
   block_n; the P and V tile loads are pipelined ``num_stages - 1`` ahead.

The causal mask costs FLOPs and bytes nothing here: the two GEMMs are full.
HBM traffic is Theta(N d + N^2): S and P are each written once and read once.
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

from ..hwmodels.gpu import GPU
from .ir import CtaProgram, Launch, Load, Loop, Mma, Role, Store, TensorSpec, Trace, Vector
from .tiles import (
    FP32_PER_MASKED_SCORE,
    ROW_PAD,
    STANDARD_FP32_PER_SCORE_SCALE,
    STANDARD_FP32_PER_SCORE_SECOND_PASS,
    STANDARD_FP32_PER_SCORE_SOFTMAX,
    cols,
    padded_cols,
    padded_row,
    params,
    qkvo_tensors,
    regs_estimate,
    rows,
    through_smem,
    times,
)
from .workload import KernelConfig, Workload

SOFTMAX_MAX_BLOCK = 8192  # longest row the backward's dS kernel, and the forward's causal
# softmax, keep in registers (one pass); the chunk of the forward's two-pass rows
SOFTMAX_REGS = 32  # a row kernel keeps a few scalars per thread
# The forward's non-causal softmax keeps rows of up to this many scores in registers (H200:
# one pass at 16384 took 8.35 ms where two passes of 8192 took 9.17,
# experiments/2026-11-30-tuning/README.md). A
# causal row of 8193-16384 scores is faster in two passes (7.50 ms vs 7.63): rows shorter
# than the chunk take one chunk per pass, and pass 2 re-reads S from L2.
SOFTMAX_FWD_MAX_BLOCK = 16384
# A causal one-pass row runs at the narrowest of the widths block, block/2, block/4 that
# holds the scores it sees (none narrower than SOFTMAX_MIN_WIDTH): it exponentiates at
# most twice what it sees, not the whole block (H200, N = 8192: 3.33 ms vs 3.46 at one width)
SOFTMAX_FWD_TIERS = 3
SOFTMAX_MIN_WIDTH = 16
SOFTMAX_LOAD_VECTOR = 8  # a causal row loads its scores rounded up to 8 (16-byte loads)


class SoftmaxPlan(NamedTuple):
    """How the forward's row-softmax kernel runs rows of ``n_kv`` scores."""

    block: int  # register block: a power of two >= the row (one pass) or the chunk (two)
    passes: int  # 1: the row in registers; 2: an online max/sum pass, then the write pass
    num_warps: int
    tiers: int  # causal one-pass rows: widths block, block/2, ..., block/2^(tiers-1)

    def widths(self) -> tuple[int, ...]:
        """The row widths the kernel compiles, narrowest first."""
        return tuple(self.block >> t for t in reversed(range(self.tiers)))


def row_params(workload: Workload, config: KernelConfig) -> dict:
    """``params`` and ``N_pad``, the padded row length (:func:`padded_row`)."""
    return {**params(workload, config), "N_pad": padded_row(workload.seqlen_kv)}


def _warps(block: int) -> int:
    # 16 scores per thread from 2048 to 8192 (4 warps below), 32 at 16384: 32 warps (16
    # per thread) ran 2% slower there, and 8192 at 32 warps 1.4x slower (H200)
    return min(16, max(4, block // 512))


def _pow2(n: int) -> int:
    """The row block of ``n`` scores: a power of two, and no narrower than a padded row."""
    return max(ROW_PAD, 1 << max(0, n - 1).bit_length())


def softmax_plan(n_kv: int) -> tuple[int, int, int]:
    """(block, passes over the row, num_warps) of the backward's dS row kernel for rows
    of ``n_kv`` scores (kernels/standard_bwd.py launches exactly this); also the chunk
    plan of the forward's two-pass rows."""
    block = min(_pow2(n_kv), SOFTMAX_MAX_BLOCK)
    return block, 1 if block >= n_kv else 2, _warps(block)


def softmax_fwd_plan(n_kv: int, causal: bool) -> SoftmaxPlan:
    """The forward's row-softmax plan for rows of ``n_kv`` scores; kernels/standard.py
    launches exactly this and ``build`` models it."""
    if n_kv > (SOFTMAX_MAX_BLOCK if causal else SOFTMAX_FWD_MAX_BLOCK):
        block, passes, warps = softmax_plan(n_kv)
        return SoftmaxPlan(block, passes, warps, 1)
    block = _pow2(n_kv)
    tiers = 1
    while causal and tiers < SOFTMAX_FWD_TIERS and block >> tiers >= SOFTMAX_MIN_WIDTH:
        tiers += 1
    return SoftmaxPlan(block, 1, _warps(block), tiers)


def _exceeds(n: str, width: int) -> str:
    """1 if the expression ``n`` exceeds ``width``, else 0 (n >= 0), as an IR expression."""
    return f"min(1, max(0, {n} - {width}))"


def softmax_row_work(plan: SoftmaxPlan, causal: bool, shift: int = 0) -> tuple[str, str, str]:
    """(scores read per pass, exp2 lanes, FP32 lanes) of forward softmax row ``r``, as
    IR expressions; lanes past the row's end (a block padded to a power of two) are
    not counted."""
    # a row sees N_kv scores (causal: r + 1 + N_kv - N_q, the bottom-right diagonal); its
    # loads stop at that rounded up to 8 columns, and a select masks the scores past it
    seen = f"min(N_kv, r + 1{f' + {shift}' if shift else ''})" if causal else "N_kv"
    vec = SOFTMAX_LOAD_VECTOR
    read = f"cdiv({seen}, {vec})*{vec}" if causal else "N_pad"
    per_score = STANDARD_FP32_PER_SCORE_SOFTMAX + FP32_PER_MASKED_SCORE
    if plan.passes == 1:
        # the narrowest compiled width that holds the row: every lane of it is exponentiated
        widths = plan.widths()
        steps = [f"{hi - lo}*{_exceeds(seen, lo)}" for lo, hi in pairwise(widths)]
        lanes = f"min(N_kv, {' + '.join([str(widths[0]), *steps])})" if causal else "N_kv"
        return read, lanes, f"{lanes}*{per_score}"
    # two passes over the chunks (of `block`) that hold the row's scores, each lane
    # exponentiated in both; chunks wholly past a causal row's last score get zeros
    chunks = f"min(N_kv, cdiv({seen}, {plan.block})*{plan.block})"
    return read, f"2*{chunks}", f"{chunks}*{per_score + STANDARD_FP32_PER_SCORE_SECOND_PASS}"


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    w, c = workload, config
    p = row_params(w, c)
    bh = w.batch * w.heads
    dtype = w.dtype
    threads = c.num_warps * 32
    row_q, col_n, col_k = rows("m"), cols("n"), cols("j")
    pad_n, pad_k = padded_cols("n"), padded_cols("j")

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
                        Vector(
                            fp32=times(f"{row_q}*{col_n}", STANDARD_FP32_PER_SCORE_SCALE),
                            smem=through_smem(f"{row_q}*{col_n}*e"),  # to the store layout
                        ),
                        Store("S", ("bh", "m", "n"), f"{row_q}*{pad_n}*e"),
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
    plan = softmax_fwd_plan(w.seqlen_kv, w.causal)
    sm_warps = plan.num_warps
    sm_threads = sm_warps * 32
    read, exp, fp32 = softmax_row_work(plan, w.causal, w.causal_shift)
    softmax_ops = [
        Load(f"s{i}" if plan.passes > 1 else "s", "S", ("bh", "r"), f"{read}*e")
        for i in range(plan.passes)
    ]
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
                        Store("P", ("bh", "r"), "N_pad*e"),
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
                                Load("p", "P", ("bh", "m", "j"), f"{row_q}*{pad_k}*e"),
                                Load("v", "V", ("bh", "j"), f"{col_k}*d*e"),
                                Mma(row_q, "d", col_k, dtype, deps=("p", "v")),
                            ),
                            prefetch=c.num_stages - 1,
                        ),
                        Vector(smem=through_smem(f"{row_q}*d*e_o")),  # to the store layout
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
        TensorSpec("S", (w.batch, w.heads, w.seqlen_q, p["N_pad"]), dtype),
        TensorSpec("P", (w.batch, w.heads, w.seqlen_q, p["N_pad"]), dtype),
    ]
    return Trace(
        algo="standard",
        tensors=tuple(tensors),
        launches=(qk, softmax, pv),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )
