"""FlashAttention v2: parallel over Q blocks, Q on chip, rescale once at the end.

Grid (m, bh) with the Q block fastest, as Triton's ``grid = (cdiv(N, BM), B*H)``:
consecutive CTAs are the Q blocks of one head and read the same K/V tiles, which
is what lets L2 serve most of them. Each CTA loads its Q tile once, walks the
K/V blocks with the loads ``num_stages - 1`` iterations ahead and per block runs
S = Q K^T (tensor cores), the online softmax (exp on the SFU, max / rescale on
the FP32 pipe), then acc += P V. At the end it divides by l once and stores O
and the log-sum-exp.

Causal: like Triton's tutorial kernel, a CTA runs two loops — the K/V blocks its
Q block sees entirely, then the blocks on the diagonal, which pay the mask — and
never visits a block fully above the diagonal. Its trip counts follow from its
Q block m, so the late Q blocks do the most work.
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from .config import smem_bytes
from .ir import CtaProgram, Launch, Load, Loop, Mma, Op, Role, Store, Trace, Vector
from .tiles import (
    FLASH_FP32_PER_O_FINAL,
    FLASH_FP32_PER_O_STEP,
    FLASH_FP32_PER_ROW_FINAL,
    FLASH_FP32_PER_ROW_STEP,
    FLASH_FP32_PER_SCORE,
    FP32_BYTES,
    FP32_PER_MASKED_SCORE,
    causal_full_blocks,
    causal_kv_blocks,
    cols,
    params,
    qkvo_tensors,
    regs_estimate,
    row_stat,
    rows,
    times,
)
from .workload import KernelConfig, Workload


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    w, c = workload, config
    p = params(w, c)
    threads = c.num_warps * 32
    r = rows("m")

    if w.causal:
        full, seen = causal_full_blocks("m"), causal_kv_blocks("m")
        loops = (
            _kv_loop("j", full, "j", w, c, masked=False),
            _kv_loop("jd", f"{seen} - {full}", f"{full} + jd", w, c, masked=True, suffix="d"),
        )
    else:
        loops = (_kv_loop("j", "T_c", "j", w, c, masked=False),)

    program = CtaProgram(
        (
            Role(
                "main",
                (
                    Load("q", "Q", ("bh", "m"), f"{r}*d*e"),
                    *loops,
                    # -- epilogue: O = acc / l, lse = m + log(l) -----------------------
                    Vector(
                        fp32=f"{times(r + '*d', FLASH_FP32_PER_O_FINAL)}"
                        f" + {times(r, FLASH_FP32_PER_ROW_FINAL)}"
                    ),
                    Store("O", ("bh", "m"), f"{r}*d*e_o"),
                    Store("LSE", ("bh", "m"), f"{r}*{FP32_BYTES}"),
                ),
                c.num_warps,
            ),
        )
    )
    launch = Launch(
        name="flash_v2",
        grid=(("m", p["T_r"]), ("bh", w.batch * w.heads)),
        program=program,
        smem_bytes=smem_bytes("v2", w, c),
        threads=threads,
        # accumulators: O (block_m x d) and the S / P tile (block_m x block_n)
        regs_per_thread=regs_estimate(c.block_m * w.head_dim + c.block_m * c.block_n, threads),
        mma_path=c.mma_path,
    )
    return Trace(
        algo="v2",
        tensors=tuple(qkvo_tensors(w) + [row_stat("LSE", w)]),
        launches=(launch,),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )


def _kv_loop(
    var: str,
    trips: str,
    block: str,
    w: Workload,
    c: KernelConfig,
    *,
    masked: bool,
    suffix: str = "",
) -> Op:
    """The loop over K/V blocks ``block`` (an expression of ``var``)."""
    r, n = rows("m"), cols(block)
    k, v = f"k{suffix}", f"v{suffix}"
    mask = f" + {times(f'{r}*{n}', FP32_PER_MASKED_SCORE)}" if masked else ""
    return Loop(
        var,
        trips,
        (
            Load(k, "K", ("bh", block), f"{n}*d*e"),
            Load(v, "V", ("bh", block), f"{n}*d*e"),
            # -- S = Q K^T -------------------------------------------------------
            Mma(r, n, "d", w.dtype, deps=("q", k)),
            # -- online softmax: m_new, P = exp2(S*scale - m_new), l, acc *= alpha --
            Vector(
                exp=f"{r}*{n}",
                fp32=(
                    f"{r}*{n}*{FLASH_FP32_PER_SCORE}{mask} + {r}*{FLASH_FP32_PER_ROW_STEP}"
                    f" + {times(r + '*d', FLASH_FP32_PER_O_STEP)}"
                ),
            ),
            # -- acc += P V ------------------------------------------------------
            Mma(r, "d", n, w.dtype, deps=(v,)),
        ),
        prefetch=c.num_stages - 1,
    )
