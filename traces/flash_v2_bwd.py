"""FlashAttention v2 backward: recompute P tile by tile; dK/dV and dQ in separate passes.

The forward kept only O and the per-row log-sum-exp (LSE); the backward recomputes
S = Q K^T and P = exp(S*scale - LSE) wherever it needs them, trading FLOPs for
HBM traffic. Three launches, as Triton's fused-attention tutorial (06) runs them,
with dQ in its own pass instead of atomic adds:

1. ``bwd_preprocess``: D = rowsum(dO * O), grid (m, bh) over Q blocks; each CTA
   loads O_m and dO_m and stores block_m fp32 values of D.
2. ``bwd_dkdv``: grid (n, bh) over K/V blocks, n fastest. K_n and V_n stay in
   shared memory; the loop over Q blocks i loads Q_i, dO_i, LSE_i, D_i (pipelined
   ``num_stages - 1`` ahead) and per block runs
   S^T = K_n Q_i^T, P^T = exp2(S^T*scale - LSE_i), dV += P^T dO_i,
   dP^T = V_n dO_i^T, dS^T = P^T * (dP^T - D_i), dK += dS^T Q_i;
   at the end dK *= scale and dK, dV are written once.
3. ``bwd_dq``: grid (m, bh) over Q blocks. Q_m, dO_m, LSE_m, D_m stay on chip; the
   loop over K/V blocks j loads K_j, V_j (pipelined) and runs S = Q_m K_j^T,
   P = exp2(S*scale - LSE), dP = dO_m V_j^T, dS = P * (dP - D), dQ += dS K_j; at
   the end dQ *= scale and dQ is written once.

Causal (N_q = N_kv: no shifted diagonal here, config.check_serving): ``bwd_dkdv``
visits only the Q blocks that see K block n — first the blocks straddling the
diagonal, which pay the mask, then the blocks that see it entirely; ``bwd_dq``
walks the K/V blocks its Q block sees entirely, then the diagonal ones, as the
forward does.

Closed forms (non-causal, N_q = N_kv = N, exact for any N including partial
tiles, since every (Q block, K block) pair is visited once per launch):

* matmul FLOPs: ``bwd_dkdv`` runs 4 GEMMs per pair (S, dV, dP, dK) and
  ``bwd_dq`` 3 (S and dP recomputed, dQ): 14·B·H·N²·d, i.e. 3.5x the forward's
  4·B·H·N²·d. The five distinct products the paper counts (S, dV, dP, dQ, dK)
  are 10·B·H·N²·d = 2.5x the forward; the separate dQ pass recomputes S and dP
  (4·B·H·N²·d more) to avoid atomics. Causal: the same per visible block pair.
* exponentials: 2·B·H·N² (P recomputed in both passes).
* HBM bytes, no reuse: the dK/dV pass reads Q and dO (and LSE, D) once per K/V
  block, T_c = cdiv(N, block_n) times, the dQ pass reads K and V once per Q
  block, T_r = cdiv(N, block_m) times; plus O, dO, D once for the
  preprocess, and dQ, dK, dV written once:
  reads = B·H·[N·d·(e_o + e) + T_c·N·(2·d·e + 8) + 2·N·d·e + N·(2·d·e + 8) + T_r·N·2·d·e],
  writes = B·H·[4·N + 3·N·d·e].
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from .ir import CtaProgram, Launch, Load, Loop, Mma, Op, Role, Store, TensorSpec, Trace, Vector
from .smem import backward_smem_bytes
from .tiles import (
    BWD_FP32_PER_D_ELEM,
    BWD_FP32_PER_GRAD_SCALE,
    BWD_FP32_PER_SCORE_DS,
    BWD_FP32_PER_SCORE_P,
    FLASH_FP32_PER_MASKED_SCORE,
    FP32_BYTES,
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
    bh = w.batch * w.heads
    threads = c.num_warps * 32
    smem = backward_smem_bytes("v2", w, c)
    r = rows("m")
    launches = (
        _preprocess(w, c, p, bh, threads),
        _dkdv(w, c, p, bh, threads, smem),
        _dq(w, c, p, bh, threads, smem, r),
    )
    return Trace(
        algo="v2",
        tensors=tuple(backward_tensors(w) + [row_stat("LSE", w)]),
        launches=launches,
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )


def backward_tensors(w: Workload) -> list[TensorSpec]:
    """Q, K, V, O, the incoming gradient dO, D and the gradients dQ, dK, dV."""
    bh = (w.batch, w.heads)
    q, k = (*bh, w.seqlen_q, w.head_dim), (*bh, w.seqlen_kv, w.head_dim)
    return qkvo_tensors(w) + [
        TensorSpec("dO", q, w.dtype),
        row_stat("D", w),
        TensorSpec("dQ", q, w.dtype),
        TensorSpec("dK", k, w.dtype),
        TensorSpec("dV", k, w.dtype),
    ]


def _preprocess(w: Workload, c: KernelConfig, p: dict, bh: int, threads: int) -> Launch:
    r = rows("m")
    tile = ("bh", "m")
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    Load("o", "O", tile, f"{r}*d*e_o"),
                    Load("do", "dO", tile, f"{r}*d*e"),
                    Vector(fp32=f"{r}*d*{BWD_FP32_PER_D_ELEM}", deps=("o", "do")),
                    Store("D", tile, f"{r}*{FP32_BYTES}"),
                ),
                c.num_warps,
            ),
        )
    )
    return Launch(
        name="bwd_preprocess",
        grid=(("m", p["T_r"]), ("bh", bh)),
        program=program,
        # a row kernel: O and dO go straight to registers; no shared tiles
        smem_bytes=0,
        threads=threads,
        regs_per_thread=regs_estimate(2 * c.block_m * w.head_dim, threads),
        mma_path=c.mma_path,
    )


def _dkdv(w: Workload, c: KernelConfig, p: dict, bh: int, threads: int, smem: int) -> Launch:
    n = cols("n")
    if w.causal:
        first = "block_n*n//block_m"  # first Q block that sees any column of block n
        # first Q block that sees every column of block n (its first row >= the last column)
        full = f"min(T_r, cdiv(block_n*n + {n} - 1, block_m))"
        # 0 for a K/V block that starts past the last query (N_kv > N_q): no row sees it
        seen = "min(1, max(0, N_q - block_n*n))"
        loops = (
            _q_loop(
                "i", f"({full} - {first})*{seen}", f"i + {first}", w, c, masked=True, suffix="d"
            ),
            _q_loop("ii", f"T_r - {full}", f"ii + {full}", w, c, masked=False),
        )
    else:
        loops = (_q_loop("i", "T_r", "i", w, c, masked=False),)
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    Load("kn", "K", ("bh", "n"), f"{n}*d*e"),
                    Load("vn", "V", ("bh", "n"), f"{n}*d*e"),
                    *loops,
                    Vector(fp32=times(f"{n}*d", BWD_FP32_PER_GRAD_SCALE)),
                    Store("dK", ("bh", "n"), f"{n}*d*e"),
                    Store("dV", ("bh", "n"), f"{n}*d*e"),
                ),
                c.num_warps,
            ),
        )
    )
    return Launch(
        name="bwd_dkdv",
        grid=(("n", p["T_c"]), ("bh", bh)),
        program=program,
        smem_bytes=smem,
        threads=threads,
        # accumulators dK, dV (block_n x d each) and the S / dP tile
        regs_per_thread=regs_estimate(2 * c.block_n * w.head_dim + c.block_m * c.block_n, threads),
        mma_path=c.mma_path,
    )


def _q_loop(
    var: str, trips: str, block: str, w: Workload, c: KernelConfig, *, masked: bool, suffix=""
) -> Op:
    """dK/dV's loop over Q blocks ``block`` (an expression of ``var``)."""
    r, n = rows(block), cols("n")
    q, do, lse, dd = (f"{x}{suffix}" for x in ("q", "do", "lse", "dd"))
    tile = ("bh", block)
    mask = f" + {times(f'{r}*{n}', FLASH_FP32_PER_MASKED_SCORE)}" if masked else ""
    return Loop(
        var,
        trips,
        (
            Load(q, "Q", tile, f"{r}*d*e"),
            Load(do, "dO", tile, f"{r}*d*e"),
            Load(lse, "LSE", tile, f"{r}*{FP32_BYTES}"),
            Load(dd, "D", tile, f"{r}*{FP32_BYTES}"),
            # -- S^T = K_n Q_i^T; P^T = exp2(S^T*scale - LSE_i) ----------------------
            Mma(n, r, "d", w.dtype, deps=("kn", q), id=f"s{suffix}"),
            Vector(exp=f"{r}*{n}", fp32=f"{r}*{n}*{BWD_FP32_PER_SCORE_P}{mask}", deps=(lse,)),
            # -- dV += P^T dO_i --------------------------------------------------------
            Mma(n, "d", r, w.dtype, deps=(do,), id=f"dv{suffix}"),
            # -- dP^T = V_n dO_i^T; dS^T = P^T * (dP^T - D_i) ---------------------------
            Mma(n, r, "d", w.dtype, deps=("vn", do), id=f"dp{suffix}"),
            Vector(fp32=f"{r}*{n}*{BWD_FP32_PER_SCORE_DS}", deps=(dd,)),
            # -- dK += dS^T Q_i ----------------------------------------------------------
            Mma(n, "d", r, w.dtype, id=f"dk{suffix}"),
        ),
        prefetch=c.num_stages - 1,
    )


def _dq(w: Workload, c: KernelConfig, p: dict, bh: int, threads: int, smem: int, r: str) -> Launch:
    if w.causal:
        full, seen = causal_full_blocks("m"), causal_kv_blocks("m")
        loops = (
            _kv_loop("j", full, "j", w, c, masked=False),
            _kv_loop("jd", f"{seen} - {full}", f"{full} + jd", w, c, masked=True, suffix="d"),
        )
    else:
        loops = (_kv_loop("j", "T_c", "j", w, c, masked=False),)
    tile = ("bh", "m")
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    Load("q", "Q", tile, f"{r}*d*e"),
                    Load("do", "dO", tile, f"{r}*d*e"),
                    Load("lse", "LSE", tile, f"{r}*{FP32_BYTES}"),
                    Load("dd", "D", tile, f"{r}*{FP32_BYTES}"),
                    *loops,
                    Vector(fp32=times(f"{r}*d", BWD_FP32_PER_GRAD_SCALE)),
                    Store("dQ", tile, f"{r}*d*e"),
                ),
                c.num_warps,
            ),
        )
    )
    return Launch(
        name="bwd_dq",
        grid=(("m", p["T_r"]), ("bh", bh)),
        program=program,
        smem_bytes=smem,
        threads=threads,
        # accumulator dQ (block_m x d) and the S / dP tile
        regs_per_thread=regs_estimate(c.block_m * w.head_dim + c.block_m * c.block_n, threads),
        mma_path=c.mma_path,
    )


def _kv_loop(
    var: str, trips: str, block: str, w: Workload, c: KernelConfig, *, masked: bool, suffix=""
) -> Op:
    """dQ's loop over K/V blocks ``block`` (an expression of ``var``)."""
    r, n = rows("m"), cols(block)
    k, v = f"k{suffix}", f"v{suffix}"
    mask = f" + {times(f'{r}*{n}', FLASH_FP32_PER_MASKED_SCORE)}" if masked else ""
    return Loop(
        var,
        trips,
        (
            Load(k, "K", ("bh", block), f"{n}*d*e"),
            Load(v, "V", ("bh", block), f"{n}*d*e"),
            # -- recompute S = Q K_j^T and P = exp2(S*scale - LSE) ---------------------
            Mma(r, n, "d", w.dtype, deps=("q", k), id=f"s{suffix}"),
            Vector(exp=f"{r}*{n}", fp32=f"{r}*{n}*{BWD_FP32_PER_SCORE_P}{mask}", deps=("lse",)),
            # -- recompute dP = dO V_j^T; dS = P * (dP - D) -----------------------------
            Mma(r, n, "d", w.dtype, deps=("do", v), id=f"dp{suffix}"),
            Vector(fp32=f"{r}*{n}*{BWD_FP32_PER_SCORE_DS}", deps=("dd",)),
            # -- dQ += dS K_j ------------------------------------------------------------
            Mma(r, "d", n, w.dtype, id=f"dq{suffix}"),
        ),
        prefetch=c.num_stages - 1,
    )
