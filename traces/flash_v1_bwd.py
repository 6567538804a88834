"""FlashAttention v1 backward: the released kernel's structure (the default) and Algorithm 4.

``config.v1_kernel == "released"`` (`released`; docs/fa1.md): the structure of the
released FlashAttention-1 backward, in three launches:

1. ``v1_bwd_preprocess``: D = rowsum(dO * O) and dQacc = 0, grid (128-row blocks, bh)
   (the released ``fmha_bwd_dot_do_o_kernel``'s grid, and its ``dq_tmp.zero_()``).
2. ``flash_v1_bwd``: grid (bh, z), ``num_splits`` CTAs per head; CTA z takes the K/V
   blocks z, z+S, ... (S = 1 or every block on its own CTA, by the released
   heuristic). K_j and V_j stay on chip and dK_j, dV_j accumulate there; the keys
   are split across ``split_k_warps`` warps, each owning its keys' rows of dK and dV.
   The loop over 16-row Q steps loads Q, dO, LSE, D (the next step's during this
   one) and runs S = Q K_j^T, P = exp(S*scale - LSE), dV += P^T dO, dP = dO V_j^T,
   dS = P * (dP - D), dK += dS^T Q, and dQ = scale * dS K_j, whose per-warp partials
   meet in shared memory and are added to the fp32 dQacc in L2 (atomic adds: a
   read-modify-write of 16 x d fp32 per step, as the released kernel's dq_tmp).
3. ``v1_bwd_dq``: dQ = dQacc in the input type (the released ``dq.copy_(dq_tmp)``).

``"algorithm1"``: the paper's Algorithm 4 as written. One CTA per (batch, head), as
the forward. The forward kept O and the row statistics l, m; the backward
recomputes P. The outer loop walks K/V blocks j: K_j and V_j are loaded once and
dK_j, dV_j accumulate on chip. The inner loop walks Q blocks i and every step loads
Q_i, O_i, dO_i, dQ_i, l_i, m_i, then

  S_ij = Q_i K_j^T;  P_ij = diag(l_i)^-1 exp(S_ij*scale - m_i)
  dV_j += P_ij^T dO_i
  dP_ij = dO_i V_j^T;  D_i = rowsum(dO_i * O_i);  dS_ij = P_ij * (dP_ij - D_i)
  dQ_i += scale * dS_ij K_j   (written back to HBM every inner step)
  dK_j += dS_ij^T Q_i

and after the inner loop writes dK_j (times scale) and dV_j. dQ accumulates in an
fp32 HBM workspace ``dQacc`` (a read-modify-write every inner step), which the CTA
first sets to zero (Algorithm 4, line 5); the last K/V block a Q block sees also
writes dQ in the input type. D_i is recomputed every inner step (line 19).

Causal (both), as the forward: the inner loop of block j starts at the first Q block
(step) that sees any of its columns; those straddling the diagonal pay the mask.
Algorithm 4 skips the K/V blocks no query sees; the released kernel's CTA stores
zeros for them.

Closed forms of Algorithm 4 (non-causal; T_c = cdiv(N_kv, block_n), exact with
partial tiles):

* matmul FLOPs: five GEMMs per (i, j) pair (S, dV, dP, dQ, dK), nothing
  recomputed twice: 10·B·H·N_q·N_kv·d = 2.5x the forward's 4·B·H·N_q·N_kv·d
  (the released kernel's too).
* exponentials: B·H·N_q·N_kv.
* HBM bytes, no reuse, Theta(N^2 d^2 / M) (T_c = N / B_c, B_c ~ M / 4d), dominated
  by the fp32 dQ round trips (2·4 bytes per element per K/V block):
  reads = B·H·[2·N_kv·d·e + T_c·N_q·(d·(2·e + e_o + 4) + 8)],
  writes = B·H·[(T_c + 1)·N_q·d·4 + N_q·d·e + 2·N_kv·d·e].
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from .config import backward_smem_bytes, v1_released_fp32_per_cta
from .flash_v1 import walk
from .flash_v2_bwd import backward_tensors
from .ir import CtaProgram, Launch, Load, Loop, Mma, Role, Store, TensorSpec, Trace, Vector
from .tiles import (
    BWD_FP32_PER_D_ELEM,
    BWD_FP32_PER_GRAD_SCALE,
    BWD_FP32_PER_SCORE_DS,
    BWD_FP32_PER_SCORE_P,
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


PREPROCESS_ROWS = 128  # rows per CTA of the D / dQacc launch (the released grid_dot)


def released(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    """The released FlashAttention-1 backward (see the module docstring)."""
    w, c = workload, config
    p = dict(params(w, c), S=c.num_splits)
    bh = w.batch * w.heads
    dtype = w.dtype
    wk = c.split_k_warps
    threads = c.num_warps * 32
    jb = "(z + S*j)"  # this CTA's j-th K/V block
    n = cols(jb)
    if w.causal:
        begin = f"block_n*{jb}//block_m"  # the first Q step that sees block jb
        q = f"({begin} + i)"
        inner_trips = f"T_r - {begin}"
        masked = "min(1, max(0, block_n//block_m - i))"
    else:
        q, inner_trips, masked = "i", "T_r", "0"
    r = rows(q)
    tile = ("bh", q)
    mask = f" + {masked}*{times(f'{r}*{n}', FLASH_FP32_PER_MASKED_SCORE)}" if w.causal else ""
    inner = (
        Load("q", "Q", tile, f"{r}*d*e"),
        Load("do", "dO", tile, f"{r}*d*e"),
        Load("lse", "LSE", tile, f"{r}*{FP32_BYTES}"),
        Load("dd", "D", tile, f"{r}*{FP32_BYTES}"),
        # the atomic adds below read dQacc's lines into L2 (nobody waits for them)
        Load("dqr", "dQacc", tile, f"{r}*d*{FP32_BYTES}"),
        # -- S = Q K_j^T, P = exp(S*scale - LSE); the operands from shared memory, every
        # warp its copy of Q (written there first) and its slice of K_j; P^T to dV's A
        # operand there ------------------------------------------------------------------
        Mma(r, n, "d", dtype, deps=("q", "kj")),
        Vector(
            exp=f"{r}*{n}",
            fp32=f"{r}*{n}*{BWD_FP32_PER_SCORE_P}{mask}",
            smem=f"2*{wk}*{r}*d*e + {n}*d*e + {through_smem(f'{r}*{n}*e')}",
            deps=("lse",),
        ),
        # -- dV_j += P^T dO (each warp its keys' rows); dP = dO V_j^T ----------------
        Mma(n, "d", r, dtype, deps=("do",)),
        Mma(r, n, "d", dtype, deps=("vj",)),
        # -- dS = P * (dP - D); dS^T to dK's A operand ---------------------------------
        Vector(
            fp32=f"{r}*{n}*{BWD_FP32_PER_SCORE_DS}",
            smem=f"2*{wk}*{r}*d*e + {n}*d*e + {through_smem(f'{r}*{n}*e')}",
            deps=("dd",),
        ),
        # -- dK_j += dS^T Q; dQ = dS K_j, the warps' partials summed in shared memory ---
        Mma(n, "d", r, dtype),
        Mma(r, "d", n, dtype),
        Vector(
            fp32=f"{r}*d*{wk}",
            smem=f"{n}*d*e + {through_smem(f'{wk}*{r}*d*{FP32_BYTES}')}",
        ),
        Store("dQacc", tile, f"{r}*d*{FP32_BYTES}"),
    )
    main = CtaProgram(
        (
            Role(
                "main",
                (
                    Loop(
                        "j",
                        "cdiv(T_c - z, S)",
                        (
                            Load("kj", "K", ("bh", jb), f"{n}*d*e"),
                            Load("vj", "V", ("bh", jb), f"{n}*d*e"),
                            Loop("i", inner_trips, inner, prefetch=c.num_stages - 1),
                            Vector(fp32=times(f"{n}*d", BWD_FP32_PER_GRAD_SCALE)),
                            Store("dK", ("bh", jb), f"{n}*d*e"),
                            Store("dV", ("bh", jb), f"{n}*d*e"),
                        ),
                    ),
                ),
                c.num_warps,
            ),
        )
    )
    pre_rows = f"min({PREPROCESS_ROWS}, N_q - {PREPROCESS_ROWS}*m)"
    pre_tile = ("bh", "m", PREPROCESS_ROWS)  # 128-row tiles, not the 16-row steps
    preprocess = CtaProgram(
        (
            Role(
                "main",
                (
                    Load("o", "O", pre_tile, f"{pre_rows}*d*e_o"),
                    Load("do", "dO", pre_tile, f"{pre_rows}*d*e"),
                    Vector(fp32=f"{pre_rows}*d*{BWD_FP32_PER_D_ELEM}", deps=("o", "do")),
                    Store("D", pre_tile, f"{pre_rows}*{FP32_BYTES}"),
                    Store("dQacc", pre_tile, f"{pre_rows}*d*{FP32_BYTES}"),
                ),
                c.num_warps,
            ),
        )
    )
    convert = CtaProgram(
        (
            Role(
                "main",
                (
                    Load("dq", "dQacc", pre_tile, f"{pre_rows}*d*{FP32_BYTES}"),
                    Store("dQ", pre_tile, f"{pre_rows}*d*e", deps=("dq",)),
                ),
                c.num_warps,
            ),
        )
    )
    row_grid = (("m", -(-w.seqlen_q // PREPROCESS_ROWS)), ("bh", bh))
    row_regs = regs_estimate(2 * PREPROCESS_ROWS * w.head_dim, threads)
    launches = (
        Launch("v1_bwd_preprocess", row_grid, preprocess, 0, threads, row_regs, c.mma_path),
        Launch(
            name="flash_v1_bwd",
            grid=(("bh", bh), ("z", c.num_splits)),
            program=main,
            smem_bytes=backward_smem_bytes("v1", w, c),
            threads=threads,
            regs_per_thread=regs_estimate(v1_released_fp32_per_cta(w, c), threads),
            mma_path=c.mma_path,
        ),
        Launch("v1_bwd_dq", row_grid, convert, 0, threads, row_regs, c.mma_path),
    )
    dq_acc = TensorSpec("dQacc", (w.batch, w.heads, w.seqlen_q, w.head_dim), "fp32")
    return Trace(
        algo="v1",
        tensors=tuple(backward_tensors(w) + [dq_acc, row_stat("LSE", w)]),
        launches=launches,
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )
