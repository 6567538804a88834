"""FlashAttention v1 as the paper's Algorithm 1 writes it.

One CTA per (batch, head): the grid has only B*H CTAs, so a small batch leaves
SMs idle — the limitation v2 removed. The outer loop walks K/V blocks j (K_j and
V_j stay in shared memory for the whole inner loop); the inner loop walks Q
blocks i and, every step, loads Q_i, O_i, l_i, m_i from HBM, computes
S_ij = Q_i K_j^T, the online-softmax statistics, P~_ij V_j, rescales O_i and
writes O_i, l_i, m_i back. As in tilesim's Triton kernel (kernels/flash_v1.py),
the running O lives in an fp32 HBM workspace ``Acc`` (rounding it to fp16 on
each of the T_c round trips would lose accuracy the algorithm does not lose),
the CTA itself first initialises Acc = 0, l = 0, m = -inf (line 2 of the
algorithm), and the last K/V block a Q block sees also writes its O, in the
output type. HBM traffic is Theta(N^2 d^2 / M): Acc is read and written once
per K/V block (T_c = N / B_c times), and B_c ~ M / 4d.

Tiles come from the config (block_m = B_r, block_n = B_c). Causal: the inner
loop of block j starts at the first Q block that sees any of its columns
(blocks fully above the diagonal are skipped); the blocks straddling the
diagonal pay the mask. K/V blocks no query sees are not loaded.
"""

from __future__ import annotations

from typing import NamedTuple

from ..hwmodels.gpu import GPU
from .config import smem_bytes
from .ir import CtaProgram, Launch, Load, Loop, Mma, Role, Store, TensorSpec, Trace, Vector
from .tiles import (
    FLASH_FP32_PER_MASKED_SCORE,
    FLASH_FP32_PER_SCORE,
    FP32_BYTES,
    V1_FP32_PER_O_STEP,
    V1_FP32_PER_ROW_STEP,
    causal_kv_blocks,
    cols,
    params,
    qkvo_tensors,
    regs_estimate,
    row_stat,
    rows,
    through_smem,
    times,
)
from .workload import KernelConfig, Workload


class Walk(NamedTuple):
    """Algorithm 1's loops (shared with the backward, Algorithm 4): expressions over the
    outer K/V block j and the inner step i."""

    qi: str  # Q block of inner step i
    outer_trips: str  # K/V blocks
    inner_trips: str  # Q blocks of K/V block j
    mask: str  # "" or " + <FP32 ops of the causal select in this step>"
    is_last: str  # 1 on the last K/V block Q block qi sees, else 0


def walk(w: Workload) -> Walk:
    if not w.causal:
        return Walk("i", "T_c", "T_r", "", "min(1, max(0, j - (T_c - 2)))")
    # Q block index of inner step i: start at the first block reaching column block j.
    first_i = "block_n*j//block_m"
    qi = f"i + {first_i}"
    # Steps i < diag see part of block j masked: Q blocks before the first one
    # that sees all of it, cdiv(block_n*(j+1) - 1, block_m).
    diag = f"cdiv(block_n*(j + 1) - 1, block_m) - {first_i}"
    in_diag = f"min(1, max(0, {diag} - i))*{rows(qi)}*{cols('j')}"
    return Walk(
        qi,
        "min(T_c, cdiv(N_q, block_n))",  # K/V blocks some query sees
        f"T_r - {first_i}",
        f" + {times(in_diag, FLASH_FP32_PER_MASKED_SCORE)}",
        f"min(1, max(0, j - ({causal_kv_blocks(qi)} - 2)))",
    )


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    w, c = workload, config
    p = params(w, c)
    dtype = w.dtype
    threads = c.num_warps * 32

    qi, outer_trips, inner_trips, mask, is_last = walk(w)
    r, n = rows(qi), cols("j")
    tile_i = ("bh", qi)

    inner = (
        Load("q", "Q", tile_i, f"{r}*d*e"),
        Load("o", "Acc", tile_i, f"{r}*d*{FP32_BYTES}"),
        # -- S_ij = Q_i K_j^T --------------------------------------------------
        Mma(r, n, "d", dtype, deps=("q", "kj")),
        # -- m~, P~ = exp(S - m~), l~ ---------------------------------------------
        Vector(exp=f"{r}*{n}", fp32=f"{r}*{n}*{FLASH_FP32_PER_SCORE}{mask}"),
        # l_i and m_i: the kernel loads them with Q_i and Acc_i, but the H200 build
        # (Triton 3.6, sm_90a) issues these two row loads only here, after the
        # exponentials of P~ and before P~ V_j: their latency is not hidden by the
        # first one's (SASS of the 64x64, d = 128 kernel)
        Load("l", "L", tile_i, f"{r}*{FP32_BYTES}"),
        Load("mx", "M", tile_i, f"{r}*{FP32_BYTES}"),
        # -- P~_ij V_j; m_new, l_new ---------------------------------------------
        Mma(r, "d", n, dtype, deps=("vj",)),
        Vector(fp32=times(r, V1_FP32_PER_ROW_STEP), deps=("l", "mx")),
        # -- O_i = diag(l_new)^-1 (diag(l_i) e^(m_i - m_new) O_i + e^(m~ - m_new) P~ V_j)
        # Acc_i came in by plain loads: it reaches the accumulator layout through shared
        # memory (the load wrote it there; reading it back is this op's), and the new
        # O_i goes to the store's layout the same way (tiles.through_smem)
        Vector(
            fp32=f"{r}*d*{V1_FP32_PER_O_STEP}",
            smem=f"{r}*d*{FP32_BYTES} + {through_smem(f'{r}*d*{FP32_BYTES}')}",
            deps=("o",),
        ),
        Store("Acc", tile_i, f"{r}*d*{FP32_BYTES}"),
        Store("L", tile_i, f"{r}*{FP32_BYTES}"),
        Store("M", tile_i, f"{r}*{FP32_BYTES}"),
        Store("O", tile_i, f"{r}*d*e_o*{is_last}"),
    )
    # -- line 2: Acc = 0, l = 0, m = -inf in HBM, one Q block at a time ---------
    tile_m = ("bh", "m")
    init = Loop(
        "m",
        "T_r",
        (
            Store("Acc", tile_m, f"{rows('m')}*d*{FP32_BYTES}"),
            Store("L", tile_m, f"{rows('m')}*{FP32_BYTES}"),
            Store("M", tile_m, f"{rows('m')}*{FP32_BYTES}"),
        ),
    )
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
                        ),
                    ),
                ),
                c.num_warps,
            ),
        )
    )
    launch = Launch(
        name="flash_v1",
        grid=(("bh", w.batch * w.heads),),
        program=program,
        smem_bytes=smem_bytes("v1", w, c),
        threads=threads,
        # accumulators: the S tile and the P~ V product
        regs_per_thread=regs_estimate(c.block_m * c.block_n + c.block_m * w.head_dim, threads),
        mma_path=c.mma_path,
    )
    acc = TensorSpec("Acc", (w.batch, w.heads, w.seqlen_q, w.head_dim), "fp32")
    tensors = qkvo_tensors(w) + [acc, row_stat("L", w), row_stat("M", w)]
    return Trace(
        algo="v1",
        tensors=tuple(tensors),
        launches=(launch,),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )
