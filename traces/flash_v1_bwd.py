"""FlashAttention v1 backward: the released kernel (the default) and the paper's Algorithm 4.

``config.v1_kernel == "released"`` (`released`): the released FlashAttention-1
backward's loops (flash-attn 1.0.x ``fmha_dgrad_kernel_1xN_loop``, its split path;
docs/fa1.md) as tilesim's Triton kernel (kernels/flash_v1_bwd.py) runs them, in
three launches: ``bwd_dot`` (D = rowsum(dO * O), 128 rows a CTA, which also zeroes
the fp32 dQ accumulator dQacc), ``flash_v1_bwd`` and ``bwd_dq`` (dQ = scale *
dQacc in the input type). ``flash_v1_bwd``'s grid is (bh, z): CTA z walks the K/V
blocks z, z+S, ... (``num_splits`` S: 1, or one CTA per block); for each it keeps
dK_j, dV_j in registers and walks every 16-row Q step, loading Q_i, dO_i, l_i,
m_i, D_i one step ahead: S = Q_i K_j^T and dP = dO_i V_j^T with the warps
splitting the keys, dV_j += P^T dO_i and dK_j += dS^T Q_i (each warp its keys'
rows; the compiled sm_90a kernel runs these two, block_n rows tall, on wgmma),
dQ_i = dS K_j added into dQacc with atomics (dS through shared memory, each warp
d / W columns). K_j's and V_j's fragments are read from shared memory every step
(Triton sinks their loads into the step loop: 3 block_n x d tiles a step).

``"algorithm1"``: the paper's Algorithm 4 as written.

One CTA per (batch, head), as the forward. The forward kept O and the row
statistics l, m; the backward recomputes P. The outer loop walks K/V blocks j:
K_j and V_j are loaded once and dK_j, dV_j accumulate on chip. The inner loop
walks Q blocks i and every step loads Q_i, O_i, dO_i, dQ_i, l_i, m_i, then

  S_ij = Q_i K_j^T;  P_ij = diag(l_i)^-1 exp(S_ij*scale - m_i)
  dV_j += P_ij^T dO_i
  dP_ij = dO_i V_j^T;  D_i = rowsum(dO_i * O_i);  dS_ij = P_ij * (dP_ij - D_i)
  dQ_i += scale * dS_ij K_j   (written back to HBM every inner step)
  dK_j += dS_ij^T Q_i

and after the inner loop writes dK_j (times scale) and dV_j. As the forward's
fp32 ``Acc`` workspace, dQ accumulates in an fp32 HBM workspace ``dQacc`` (a
read-modify-write every inner step: rounding it to fp16 T_c times would lose
accuracy), which the CTA first sets to zero (Algorithm 4, line 5); the last K/V
block a Q block sees also writes dQ in the input type. D_i is recomputed every
inner step (Algorithm 4 line 19), FP32 work only.

Causal, as the forward: the inner loop of block j starts at the first Q block
that sees any of its columns; the blocks straddling the diagonal pay the mask;
K/V blocks no query sees are skipped.

Closed forms (non-causal; T_c = cdiv(N_kv, block_n), exact with partial tiles):

* matmul FLOPs: five GEMMs per (i, j) pair (S, dV, dP, dQ, dK), nothing
  recomputed twice: 10·B·H·N_q·N_kv·d = 2.5x the forward's 4·B·H·N_q·N_kv·d.
* exponentials: B·H·N_q·N_kv.
* HBM bytes, no reuse, Theta(N^2 d^2 / M) (T_c = N / B_c, B_c ~ M / 4d), dominated
  by the fp32 dQ round trips (2·4 bytes per element per K/V block):
  reads = B·H·[2·N_kv·d·e + T_c·N_q·(d·(2·e + e_o + 4) + 8)],
  writes = B·H·[(T_c + 1)·N_q·d·4 + N_q·d·e + 2·N_kv·d·e].
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from .config import v1_released_fp32_per_cta
from .flash_v1 import walk
from .flash_v2_bwd import backward_tensors
from .ir import CtaProgram, Launch, Load, Loop, Mma, Role, Store, TensorSpec, Trace, Vector
from .smem import backward_smem_bytes
from .tiles import (
    BWD_FP32_PER_D_ELEM,
    BWD_FP32_PER_GRAD_SCALE,
    BWD_FP32_PER_SCORE_DS,
    FLASH_FP32_PER_MASKED_SCORE,
    FP32_BYTES,
    V1_BWD_FP32_PER_DQ_STEP,
    V1_BWD_FP32_PER_ROW_STEP,
    V1_BWD_FP32_PER_SCORE_P,
    cols,
    params,
    regs_estimate,
    row_stat,
    rows,
    through_smem,
    times,
)
from .workload import KernelConfig, Workload


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    if config.v1_kernel == "released":
        return released(workload, config, gpu)
    w, c = workload, config
    p = params(w, c)
    dtype = w.dtype
    threads = c.num_warps * 32

    # the same walk as the forward (traces.flash_v1)
    qi, outer_trips, inner_trips, mask, is_last = walk(w)
    r, n = rows(qi), cols("j")
    tile_i = ("bh", qi)

    inner = (
        Load("q", "Q", tile_i, f"{r}*d*e"),
        Load("o", "O", tile_i, f"{r}*d*e_o"),
        Load("do", "dO", tile_i, f"{r}*d*e"),
        Load("dq", "dQacc", tile_i, f"{r}*d*{FP32_BYTES}"),
        # -- S_ij = Q_i K_j^T; P_ij = exp(S*scale - m_i) / l_i ------------------------
        Mma(r, n, "d", dtype, deps=("q", "kj"), id="s"),
        # l_i, m_i: the H200 build issues these row loads only after S's wgmmas, right
        # before the exponentials that need them (SASS, Triton 3.6): exposed latency
        Load("l", "L", tile_i, f"{r}*{FP32_BYTES}"),
        Load("mx", "M", tile_i, f"{r}*{FP32_BYTES}"),
        Vector(
            exp=f"{r}*{n}",
            fp32=f"{r}*{n}*{V1_BWD_FP32_PER_SCORE_P} + {times(r, V1_BWD_FP32_PER_ROW_STEP)}{mask}",
            smem=f"{r}*{n}*e",  # P^T into shared memory: dV's A operand
            deps=("l", "mx"),
        ),
        # -- dV_j += P^T dO_i --------------------------------------------------------------
        Mma(n, "d", r, dtype, deps=("do",), id="dv"),
        # -- dP = dO_i V_j^T; D_i = rowsum(dO_i * O_i); dS = P * (dP - D_i) --------------------
        Mma(r, n, "d", dtype, deps=("vj",), id="dp"),
        # dS to dQ's A operand through shared memory, and dS^T into it for dK
        Vector(
            fp32=f"{r}*d*{BWD_FP32_PER_D_ELEM} + {r}*{n}*{BWD_FP32_PER_SCORE_DS}",
            smem=f"{through_smem(f'{r}*{n}*e')} + {r}*{n}*e",
            deps=("o",),
        ),
        # -- dQ_i += scale * dS K_j, written back to HBM -----------------------------------
        Mma(r, "d", n, dtype, id="dqk"),
        # dQacc_i came in by plain loads (the load wrote it to shared memory, this reads
        # it back into the accumulator layout) and goes out through it (tiles.through_smem)
        Vector(
            fp32=f"{r}*d*{V1_BWD_FP32_PER_DQ_STEP}",
            smem=f"{r}*d*{FP32_BYTES} + {through_smem(f'{r}*d*{FP32_BYTES}')}",
            deps=("dq",),
        ),
        Store("dQacc", tile_i, f"{r}*d*{FP32_BYTES}"),
        Store("dQ", tile_i, f"{r}*d*e*{is_last}"),
        # -- dK_j += dS^T Q_i ----------------------------------------------------------------
        Mma(n, "d", r, dtype, id="dk"),
    )
    # -- line 5: dQ = 0 in HBM, one Q block at a time ------------------------------------
    init = Loop("m", "T_r", (Store("dQacc", ("bh", "m"), f"{rows('m')}*d*{FP32_BYTES}"),))
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    init,
                    Loop(
                        "j",
                        outer_trips,
                        (
                            Load("kj", "K", ("bh", "j"), f"{n}*d*e"),
                            Load("vj", "V", ("bh", "j"), f"{n}*d*e"),
                            Loop("i", inner_trips, inner, prefetch=c.num_stages - 1),
                            Vector(fp32=times(f"{n}*d", BWD_FP32_PER_GRAD_SCALE)),
                            Store("dK", ("bh", "j"), f"{n}*d*e"),
                            Store("dV", ("bh", "j"), f"{n}*d*e"),
                        ),
                    ),
                ),
                c.num_warps,
            ),
        )
    )
    launch = Launch(
        name="flash_v1_bwd",
        grid=(("bh", w.batch * w.heads),),
        program=program,
        smem_bytes=backward_smem_bytes("v1", w, c),
        threads=threads,
        # accumulators: dK_j, dV_j (block_n x d each), the S / dP tile, the dS K_j product
        regs_per_thread=regs_estimate(
            2 * c.block_n * w.head_dim + c.block_m * c.block_n + c.block_m * w.head_dim, threads
        ),
        mma_path=c.mma_path,
    )
    dq_acc = TensorSpec("dQacc", (w.batch, w.heads, w.seqlen_q, w.head_dim), "fp32")
    tensors = [t for t in backward_tensors(w) if t.name != "D"] + [
        dq_acc,
        row_stat("L", w),
        row_stat("M", w),
    ]

    return Trace(
        algo="v1",
        tensors=tuple(tensors),
        launches=(launch,),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )


DOT_ROWS = 128  # rows per CTA of the D launch (kernels/flash_v1_bwd.py)
CONVERT_ROWS = 64  # rows per CTA of the dQ conversion


def released(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    """The released FlashAttention-1 backward (see the module docstring)."""
    w, c = workload, config
    p = dict(params(w, c), S=c.num_splits, W=c.num_warps)
    dtype = w.dtype
    bh = w.batch * w.heads
    threads = c.num_warps * 32
    # the forward's walk with the roles of the loops swapped: K/V block j of CTA z is
    # z + S*jj; each walks the Q steps that see it
    j = "(z + S*jj)"
    if w.causal:
        q = f"block_n*{j}//block_m + i"
        inner_trips = f"max(0, T_r - block_n*{j}//block_m)"
        masked = f"min(1, max(0, cdiv(block_n*({j} + 1) - 1, block_m) - ({q})))"
    else:
        q, inner_trips, masked = "i", "T_r", "0"
    r, n = rows(f"({q})"), cols(j)
    tile = ("bh", q)
    mask = f" + {masked}*{times(f'{r}*{n}', FLASH_FP32_PER_MASKED_SCORE)}" if w.causal else ""
    stat = f"{r}*{FP32_BYTES}"
    inner = (
        Load("q", "Q", tile, f"{r}*d*e"),
        Load("do", "dO", tile, f"{r}*d*e"),
        Load("l", "L", tile, stat),
        Load("mx", "M", tile, stat),
        Load("dd", "D", tile, stat),
        # -- S = Q_i K_j^T, P = exp(S*scale - m) / l: each warp its keys; K_j's fragments
        # from shared memory ----------------------------------------------------------------
        Vector(smem=f"{n}*d*e", deps=("q",)),
        Mma(r, n, "d", dtype, deps=("kj",), id="s"),
        Vector(
            exp=f"{r}*{n}",
            fp32=f"{r}*{n}*{V1_BWD_FP32_PER_SCORE_P} + {times(r, V1_BWD_FP32_PER_ROW_STEP)}{mask}",
            deps=("l", "mx"),
        ),
        # -- dV_j += P^T dO_i (dO_i staged in shared memory) --------------------------------
        Mma(n, "d", r, dtype, deps=("do",), id="dv"),
        # -- dP = dO_i V_j^T; dS = P * (dP - D_i) --------------------------------------------
        Vector(smem=f"{n}*d*e"),
        Mma(r, n, "d", dtype, deps=("vj",), id="dp"),
        # dS through shared memory: every warp reads all of it for dQ
        Vector(
            fp32=f"{r}*{n}*{BWD_FP32_PER_SCORE_DS}",
            smem=f"(1 + W)*{r}*{n}*e + {n}*d*e",
            deps=("dd",),
        ),
        # -- dK_j += dS^T Q_i; dQ_i = dS K_j, added into dQacc (atomics at the L2) ----------
        Mma(n, "d", r, dtype, id="dk"),
        Mma(r, "d", n, dtype, id="dqk"),
        Store("dQacc", tile, f"{r}*d*{FP32_BYTES}"),
    )
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    Loop(
                        "jj",
                        "cdiv(T_c - z, S)",
                        (
                            Load("kj", "K", ("bh", j), f"{n}*d*e"),
                            Load("vj", "V", ("bh", j), f"{n}*d*e"),
                            Vector(smem=f"2*{n}*d*e", deps=("kj", "vj")),
                            Loop("i", inner_trips, inner, prefetch=c.num_stages - 1),
                            Vector(fp32=times(f"{n}*d", BWD_FP32_PER_GRAD_SCALE)),
                            Store("dK", ("bh", j), f"{n}*d*e"),
                            Store("dV", ("bh", j), f"{n}*d*e"),
                        ),
                    ),
                ),
                c.num_warps,
            ),
        )
    )
    main = Launch(
        name="flash_v1_bwd",
        grid=(("bh", bh), ("z", c.num_splits)),
        program=program,
        smem_bytes=backward_smem_bytes("v1", w, c),
        threads=threads,
        regs_per_thread=regs_estimate(v1_released_fp32_per_cta(w, c), threads),
        mma_path=c.mma_path,
    )
    all_rows = bh * w.seqlen_q
    g = f"min({DOT_ROWS}, {all_rows} - {DOT_ROWS}*g)"
    dot = Launch(
        name="bwd_dot",
        grid=(("g", -(-all_rows // DOT_ROWS)),),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        Load("o", "O", ("g",), f"{g}*d*e_o"),
                        Load("do", "dO", ("g",), f"{g}*d*e"),
                        Vector(fp32=f"{g}*d*{BWD_FP32_PER_D_ELEM}", deps=("o", "do")),
                        Store("D", ("g",), f"{g}*{FP32_BYTES}"),
                        Store("dQacc", ("g",), f"{g}*d*{FP32_BYTES}"),
                    ),
                    4,
                ),
            )
        ),
        smem_bytes=0,
        threads=128,
        regs_per_thread=regs_estimate(2 * DOT_ROWS * w.head_dim, 128),
        mma_path=c.mma_path,
    )
    g = f"min({CONVERT_ROWS}, {all_rows} - {CONVERT_ROWS}*g)"
    convert = Launch(
        name="bwd_dq",
        grid=(("g", -(-all_rows // CONVERT_ROWS)),),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        Load("dq", "dQacc", ("g",), f"{g}*d*{FP32_BYTES}"),
                        Vector(fp32=times(f"{g}*d", BWD_FP32_PER_GRAD_SCALE), deps=("dq",)),
                        Store("dQ", ("g",), f"{g}*d*e"),
                    ),
                    4,
                ),
            )
        ),
        smem_bytes=0,
        threads=128,
        regs_per_thread=regs_estimate(CONVERT_ROWS * w.head_dim, 128),
        mma_path=c.mma_path,
    )
    dq_acc = TensorSpec("dQacc", (w.batch, w.heads, w.seqlen_q, w.head_dim), "fp32")
    tensors = backward_tensors(w) + [dq_acc, row_stat("L", w), row_stat("M", w)]
    return Trace(
        algo="v1",
        tensors=tuple(tensors),
        launches=(dot, main, convert),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )
