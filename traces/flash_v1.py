"""FlashAttention v1: the released kernel (the default) and the paper's Algorithm 1.

Both walk the K/V blocks j in the outer loop and Q in the inner loop, and keep
the partial output in an fp32 HBM workspace ``Acc`` between K/V blocks (rounding
it to fp16 on each of the T_c round trips would lose accuracy the algorithm does
not): HBM traffic Theta(N^2 d^2 / M), Acc read and written once per K/V block.

``config.v1_kernel == "released"`` (`released`): the released FlashAttention-1
kernel's loops (flash-attn 1.0.x, docs/fa1.md) as tilesim's Triton kernel
(kernels/flash_v1.py) runs them. Grid (bh, z): ``num_splits`` CTAs per head, CTA
z taking the 16-row Q steps z, z+S, z+2S, ... of every K/V block. The block
(block_n keys) is loaded once and its K and V fragments stay in the warps'
registers while the CTA walks its steps; the ``num_warps`` warps split its keys
for S = Q K^T, meet in shared memory for the row max and sum, exchange P there
for P V (each warp computing d / num_warps columns of O), and take Q from there.
The first K/V block reads no Acc and no log-sum-exp; the last one a step sees
writes O (and l = 1 beside the log-sum-exp, kept as the backward's L and M)
instead of Acc. The next step's Q,
Acc and LSE load during this one (``num_stages`` 2). Acc and LSE, loaded and
stored with plain loads and stores, change layout through shared memory.

``"algorithm1"``: the paper's Algorithm 1 as written. One CTA per (batch, head):
the grid has only B*H CTAs, so a small batch leaves SMs idle — the limitation v2
removed. The inner loop walks Q blocks i and, every step, loads Q_i, O_i, l_i,
m_i from HBM, computes S_ij = Q_i K_j^T, the online-softmax statistics, P~_ij
V_j, rescales O_i and writes O_i, l_i, m_i back. As in tilesim's Triton kernel
(kernels/flash_v1_algorithm1.py) the CTA itself first initialises Acc = 0, l = 0,
m = -inf (line 2 of the algorithm), and the last K/V block a Q block sees also
writes its O, in the output type. Tiles come from the config (block_m = B_r,
block_n = B_c).

Causal (both): the inner loop of block j starts at the first Q block (step) that
sees any of its columns (blocks fully above the diagonal are skipped); the blocks
straddling the diagonal pay the mask. K/V blocks no query sees are not loaded.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from ..hwmodels.gpu import GPU
from .config import v1_released_fp32_per_cta
from .ir import (
    CtaProgram,
    Launch,
    Load,
    Loop,
    Mma,
    Role,
    Store,
    TensorSpec,
    Trace,
    Vector,
)
from .smem import smem_bytes
from .tiles import (
    FLASH_FP32_PER_MASKED_SCORE,
    FLASH_FP32_PER_SCORE,
    FLASH_V1_FP32_PER_O_STEP,
    FLASH_V1_FP32_PER_ROW_STEP,
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
    if config.v1_kernel == "released":
        return released(workload, config, gpu)
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


def _step_ops(w: Workload, q: str, j: str, sfx: str, seen: bool) -> tuple:
    """One 16-row step q of K/V block j: its loads, MMAs, softmax, combine and stores (the
    mask's work of the steps on the diagonal is the block's, `_block_ops`)."""
    dtype = w.dtype
    r, n = rows(f"({q})"), cols(j)
    tile = ("bh", q)
    o_tile = f"{r}*d*{FP32_BYTES}"
    if w.causal:
        is_last = f"min(1, max(0, {j} - ({causal_kv_blocks(f'({q})')} - 2)))"
    else:
        is_last = f"min(1, max(0, {j} - (T_c - 2)))"
    loads = (Load(f"q{sfx}", "Q", tile, f"{r}*d*e"),)
    deps = ()
    if seen:  # the first K/V block reads no Acc, no lse
        loads += (
            Load(f"o{sfx}", "Acc", tile, o_tile),
            Load(f"lse{sfx}", "M", tile, f"{r}*{FP32_BYTES}"),
        )
        deps = (f"o{sfx}", f"lse{sfx}")
    return (
        *loads,
        # -- S = Q K_j^T: Q through shared memory (every warp reads all of it), K_j's
        # fragments in registers, each warp its block_n / W keys -----------------------
        Vector(smem=f"(1 + W)*{r}*d*e", deps=(f"q{sfx}",)),
        Mma(r, n, "d", dtype, deps=("kj",)),
        # -- m, P = exp(S - m), l: the warps' row maxima and sums meet in shared memory;
        # P goes there for P V, where every warp reads all of it -----------------------
        Vector(
            exp=f"{r}*{n}",
            fp32=f"{r}*{n}*{FLASH_FP32_PER_SCORE}",
            smem=f"(1 + W)*{r}*{n}*e + {through_smem(f'2*W*{r}*{FP32_BYTES}')}",
        ),
        # -- P V_j: each warp d / W columns of O, over all the block's keys ----------------
        Mma(r, "d", n, dtype, deps=("vj",)),
        # -- lse' = log(e^lse + e^m l), O = e^(lse - lse') O + e^(m - lse') P V: the loaded
        # Acc and lse into the accumulator's layout, the new ones out of it (smem) --------
        Vector(
            fp32=f"{r}*d*{FLASH_V1_FP32_PER_O_STEP} + {times(r, FLASH_V1_FP32_PER_ROW_STEP)}",
            smem=through_smem(f"({o_tile} + {r}*{FP32_BYTES})*{2 if seen else 1}"),
            deps=deps,
        ),
        Store("Acc", tile, f"{o_tile}*(1 - {is_last})"),
        Store("O", tile, f"{r}*d*e_o*{is_last}"),
        Store("M", tile, f"{r}*{FP32_BYTES}"),
        Store("L", tile, f"{r}*{FP32_BYTES}*{is_last}"),
    )


def _block_ops(w: Workload, c: KernelConfig, j: str, sfx: str, seen: bool) -> tuple:
    """K/V block j of CTA z: its load, and the walk over the CTA's steps q = first + S*i of
    it (first: the first step = z mod S that reaches the block)."""
    n = cols(j)
    begin = f"block_n*{_paren(j)}//block_m" if w.causal else "0"
    first = f"({begin} + (z - {begin}) % S)" if w.causal else "z"
    trips = f"cdiv(T_r - {first}, S)"
    ops = [
        Load("kj" if not sfx else f"kj{sfx}", "K", ("bh", j), f"{n}*d*e"),
        Load("vj" if not sfx else f"vj{sfx}", "V", ("bh", j), f"{n}*d*e"),
    ]
    kj, vj = ops[0].id, ops[1].id
    # K_j and V_j into the warps' fragments, through shared memory
    ops.append(Vector(smem=through_smem(f"2*{n}*d*e"), deps=(kj, vj)))
    q = f"{first} + S*i"
    if w.causal:
        # the steps whose first row is left of the block's last column run the mask: the
        # CTA's first ones of the block, counted here (full 16-row steps: N_q >= their rows)
        masked_end = f"cdiv(block_n*({j} + 1) - 1, block_m)"
        masked = f"min({trips}, max(0, cdiv({masked_end} - {first}, S)))"
        score = f"block_m*{n}"
        ops.append(Vector(fp32=f"{masked}*{times(score, FLASH_FP32_PER_MASKED_SCORE)}"))
    body = tuple(_rename_deps(op, {"kj": kj, "vj": vj}) for op in _step_ops(w, q, j, sfx, seen))
    ops.append(Loop("i", trips, body, prefetch=c.num_stages - 1))
    return tuple(ops)


def _rename_deps(op, names: dict):
    deps = getattr(op, "deps", None)
    if not deps:
        return op
    return dataclasses.replace(op, deps=tuple(names.get(x, x) for x in deps))


def _paren(x: str) -> str:
    return x if x.isidentifier() or x.isdigit() else f"({x})"


def released(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    """The released FlashAttention-1 forward (see the module docstring)."""
    w, c = workload, config
    p = dict(params(w, c), S=c.num_splits, W=c.num_warps)
    # K/V blocks some query sees; the first reads no Acc and no lse
    blocks = "min(T_c, cdiv(N_q, block_n))" if w.causal else "T_c"
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    *_block_ops(w, c, "0", "0", False),
                    Loop("j", f"{blocks} - 1", _block_ops(w, c, "(j + 1)", "", True)),
                ),
                c.num_warps,
            ),
        )
    )
    threads = c.num_warps * 32
    launch = Launch(
        name="flash_v1",
        grid=(("bh", w.batch * w.heads), ("z", c.num_splits)),
        program=program,
        smem_bytes=smem_bytes("v1", w, c),
        threads=threads,
        regs_per_thread=regs_estimate(v1_released_fp32_per_cta(w, c), threads),
        mma_path=c.mma_path,
    )
    acc = TensorSpec("Acc", (w.batch, w.heads, w.seqlen_q, w.head_dim), "fp32")
    # the row statistics the backward reads: l = 1 (L) and m = the log-sum-exp (M)
    tensors = qkvo_tensors(w) + [acc, row_stat("L", w), row_stat("M", w)]
    return Trace(
        algo="v1",
        tensors=tuple(tensors),
        launches=(launch,),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )
