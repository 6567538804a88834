"""FlashAttention v1 backward as the paper's Algorithm 4 writes it.

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
from .config import backward_smem_bytes
from .flash_v1 import walk
from .flash_v2_bwd import backward_tensors
from .ir import CtaProgram, Launch, Load, Loop, Mma, Role, Store, TensorSpec, Trace, Vector
from .tiles import (
    BWD_FP32_PER_D_ELEM,
    BWD_FP32_PER_GRAD_SCALE,
    BWD_FP32_PER_SCORE_DS,
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
