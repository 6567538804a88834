"""Pieces the four trace generators share: tensors, params, tile-size expressions,
causal block bounds, and the per-element operation counts.

Every generator writes its CTA program once, as a template over the names
defined here, so a program stays a few dozen ops whatever the sequence length:

* params: ``B, H, N_q, N_kv, d, block_m, block_n, T_r = cdiv(N_q, block_m),
  T_c = cdiv(N_kv, block_n), e`` (bytes per input element) and ``e_o`` (bytes
  per output element);
* tile sizes: ``rows(i)`` rows of Q block i and ``cols(j)`` columns of K/V
  block j, smaller for the last block when a sequence length is not a multiple
  of the block — a partial tile moves and multiplies only the elements it has.

Causal masking is aligned bottom-right (traces/workload.py): query row r sees key
columns c <= r + N_kv - N_q (the shift is written into the expressions only when
it is not 0). A (Q block, K block) pair with no visible element is skipped by the
FlashAttention generators; a pair with some masked element pays
``FP32_PER_MASKED_SCORE`` per score.

Grouped-query heads (``kv_heads < heads``): K and V have ``H_kv`` heads and query
head h reads K/V head h // G (``G = H / H_kv``), so the K/V tiles of a launch
over (m, bh) are keyed ``bh//G``: the G query heads of a group read the same
tiles, which L2 can serve. Packed (FlashAttention-3's PackGQA, ``pack_gqa``), a
CTA takes the G heads of one K/V head together: its Q block is ``block_m`` of
the N_q·G (row, head) pairs, heads fastest, and its grid dim ``bh`` runs over
B·H_kv, so each K/V tile it loads serves all G heads at once.
"""

from __future__ import annotations

from ..hwmodels.gpu import DTYPE_BYTES
from .ir import TensorSpec
from .workload import KernelConfig, Workload

# -- per-element operation counts (FP32 lane ops: an FMA counts 2) ------------
# One exponential per score for every algorithm: exp_count is B*H*N_q*N_kv for a
# full (non-causal) attention. The online softmax's per-row correction
# exp2(m_old - m_new) (1/block_n as many) is counted with the FP32 ops below.

# Standard attention (PyTorch's math path).
STANDARD_FP32_PER_SCORE_SCALE = 1  # S = Q K^T * scale, in the first GEMM's epilogue
STANDARD_FP32_PER_SCORE_SOFTMAX = 4  # row max, subtract max, row sum, multiply by 1/sum
STANDARD_FP32_PER_SCORE_SECOND_PASS = 1  # two-pass rows: pass 1 max, FMA, sum; pass 2 FMA, multiply
FP32_PER_MASKED_SCORE = 1  # standard's softmax: the select of the scores past a row's end
# The flash kernels' mask, per masked score: column bounds, the causal compare, the
# select of -inf and the separate scale/subtract it costs (ncu on the H200, Triton 3.6:
# 12.0 non-MUFU instructions per score in v3's all-masked loop, 6.4 in v2's unmasked one)
FLASH_FP32_PER_MASKED_SCORE = 6

# Online softmax of the FlashAttention kernels, per score of an S tile.
FLASH_FP32_PER_SCORE = 4  # row max (1), scale-and-subtract FMA feeding exp2 (2), row sum (1)
# v2 / v3, per Q row per K/V block: new max (1), m_old - m_new (1), the correction
# exp2 (1), l = l * alpha + rowsum (FMA, 2).
FLASH_FP32_PER_ROW_STEP = 5
FLASH_FP32_PER_O_STEP = 1  # acc *= alpha, per output element per K/V block
FLASH_FP32_PER_O_FINAL = 1  # acc / l once at the end, per output element
FLASH_FP32_PER_ROW_FINAL = 2  # lse = m + log(l), per row
# v1 (Algorithm 1), per Q row per inner step: m_new (1), two differences (2), two
# correction exponentials (2), l_new = e^a l + e^b l~ (3), 1/l_new (1).
V1_FP32_PER_ROW_STEP = 9
# v1, per output element per inner step:
# O = diag(l_new)^-1 (diag(l) e^a O + e^b P~ V): scale old O (1), FMA with PV (2), divide (1).
V1_FP32_PER_O_STEP = 4

# The released v1 kernel, per Q row per step: lse of the block m + log2(l) (2), the
# larger lse (1), the two exponentials and their sum (3), the log and its add (2), the
# two factors' exponent differences (2).
FLASH_V1_FP32_PER_ROW_STEP = 10
# ... per output element per step: O = a O_old + b P V (multiply, FMA: 3).
FLASH_V1_FP32_PER_O_STEP = 3
FP32_BYTES = 4  # the softmax statistics (l, m, log-sum-exp) are fp32


def params(workload: Workload, config: KernelConfig) -> dict:
    """The names every generator's expressions may use (``G`` and ``H_kv`` with
    grouped-query heads; ``S`` with a split KV sequence)."""
    w, bm, bn = workload, config.block_m, config.block_n
    out = {
        "B": w.batch,
        "H": w.heads,
        "N_q": w.seqlen_q,
        "N_kv": w.seqlen_kv,
        "d": w.head_dim,
        "block_m": bm,
        "block_n": bn,
        "T_r": -(-q_rows(w, config) // bm),
        "T_c": -(-w.seqlen_kv // bn),
        "e": w.elem_bytes,
        "e_o": output_bytes(w),
    }
    if w.group > 1:
        out.update(G=w.group, H_kv=w.num_kv_heads)
    if config.num_splits > 1:
        out["S"] = config.num_splits
    return out


def packed(workload: Workload, config: KernelConfig) -> bool:
    """Whether a CTA's Q block packs the G query heads of one K/V head (PackGQA)."""
    return config.pack_gqa and workload.group > 1


def q_rows(workload: Workload, config: KernelConfig) -> int:
    """Rows a launch tiles into Q blocks per grid head: N_q, or N_q·G packed."""
    return workload.seqlen_q * (workload.group if packed(workload, config) else 1)


def grid_heads(workload: Workload, config: KernelConfig) -> int:
    """The grid's head dim ``bh``: B·H, or B·H_kv packed."""
    return workload.batch * (workload.num_kv_heads if packed(workload, config) else workload.heads)


def kv_head(workload: Workload, config: KernelConfig) -> str:
    """The K/V tiles' head coordinate: ``bh`` (MHA, or packed), ``bh//G`` (grouped)."""
    return "bh//G" if workload.group > 1 and not packed(workload, config) else "bh"


def output_dtype(workload: Workload) -> str:
    """FP8 attention takes e4m3 inputs and writes fp16 (as FlashAttention-3 does)."""
    return "fp16" if workload.dtype == "fp8" else workload.dtype


def output_bytes(workload: Workload) -> int:
    return DTYPE_BYTES[output_dtype(workload)]


def qkvo_tensors(workload: Workload) -> list[TensorSpec]:
    w = workload
    bh, bkv = (w.batch, w.heads), (w.batch, w.num_kv_heads)
    return [
        TensorSpec("Q", (*bh, w.seqlen_q, w.head_dim), w.dtype),
        TensorSpec("K", (*bkv, w.seqlen_kv, w.head_dim), w.dtype),
        TensorSpec("V", (*bkv, w.seqlen_kv, w.head_dim), w.dtype),
        TensorSpec("O", (*bh, w.seqlen_q, w.head_dim), output_dtype(w)),
    ]


def row_stat(name: str, workload: Workload) -> TensorSpec:
    """A per-row fp32 statistic: log-sum-exp (v2/v3), or v1's running l and m."""
    return TensorSpec(name, (workload.batch, workload.heads, workload.seqlen_q), "fp32")


def rows(i: str, pack: int = 1) -> str:
    """Rows of Q block ``i`` (an expression): block_m, less for the last block
    (``pack`` = G: rows of the N_q·G packed (row, head) pairs)."""
    n = "N_q" if pack == 1 else "N_q*G"
    return f"min(block_m, {n} - block_m*{_wrap(i)})"


def cols(j: str) -> str:
    """Rows of K/V block ``j`` (columns of S): block_n, less for the last block."""
    return f"min(block_n, N_kv - block_n*{_wrap(j)})"


def causal_kv_blocks(m: str, shift: int = 0, pack: int = 1) -> str:
    """K/V blocks with at least one score visible to Q block ``m`` (its trip count).

    ``shift``: N_kv - N_q, the bottom-right diagonal's offset; ``pack`` = G when the
    Q block holds packed (row, head) pairs (query row = packed row // G)."""
    if pack == 1:
        last = f"min(block_m*({m} + 1), N_q)"  # one past the block's last query row
    else:
        last = f"cdiv(min(block_m*({m} + 1), N_q*G), G)"
    return f"min(T_c, cdiv({last}{_plus(shift)}, block_n))"


def causal_full_blocks(m: str, shift: int = 0, pack: int = 1) -> str:
    """Leading K/V blocks that Q block ``m`` sees entirely (no masked score)."""
    first = f"block_m*{_wrap(m)}" if pack == 1 else f"block_m*{_wrap(m)}//G"
    return f"min(T_c, ({first} + 1{_plus(shift)})//block_n)"


def _plus(shift: int) -> str:
    return f" + {shift}" if shift else ""


def through_smem(nbytes: str) -> str:
    """Shared-memory bytes of converting an ``nbytes`` register tile to another layout.

    Triton stores an MMA accumulator with plain (non-TMA) stores from a coalesced
    layout, and reads a tile loaded with plain loads into the layout an MMA needs, by
    writing it to shared memory and reading it back: ``nbytes`` twice. The H200 build
    (Triton 3.6, sm_90a) of the standard qk kernel, 128x128 fp16, moves exactly that
    in its epilogue: STSM 32 KB + LDS 32 KB per CTA.
    """
    return f"2*({nbytes})"


def times(e: str, k: int) -> str:
    """``e`` scaled by the constant ``k``, without a ``*1`` when k is 1."""
    return e if k == 1 else f"{e}*{k}"


def regs_estimate(fp32_per_cta: int, threads: int, overhead: int = 40) -> int:
    """Registers per thread for a CTA holding ``fp32_per_cta`` accumulator values.

    An estimate that only feeds occupancy (the compiler decides the real count):
    the values spread over the threads, plus addresses, indices and loop state,
    rounded up to the allocation granule of 8 and capped at the 255 a thread can
    address.
    """
    regs = -(-fp32_per_cta // threads) + overhead
    return min(255, -(-regs // 8) * 8)


def _wrap(x: str) -> str:
    return x if x.isidentifier() or x.isdigit() else f"({x})"


# -- backward pass (FP32 lane ops per element; an FMA counts 2) -----------------
# Recomputing P from the stored statistics, per score: v2 P = exp2(S*scale - LSE)
# (one FMA feeding the exp); v1 P = exp(S*scale - m) / l (FMA, then times 1/l).
BWD_FP32_PER_SCORE_P = 2
V1_BWD_FP32_PER_SCORE_P = 3
V1_BWD_FP32_PER_ROW_STEP = 1  # 1/l_i, per Q row per inner step
BWD_FP32_PER_SCORE_DS = 2  # dS = P * (dP - D): subtract, multiply
BWD_FP32_PER_D_ELEM = 2  # D = rowsum(dO * O): one FMA per element of O
BWD_FP32_PER_GRAD_SCALE = 1  # dQ, dK *= softmax scale, once per element
V1_BWD_FP32_PER_DQ_STEP = 2  # dQ_i(HBM) + scale * (dS K_j): one FMA per element
# Standard softmax backward, per score: rowsum(dP * P) (FMA, 2), dP - rowsum (1),
# times P (1).
STANDARD_BWD_FP32_PER_SCORE_SOFTMAX = 4


# Standard attention's rows of S and P (and the backward's dP, dS) are padded to a
# multiple of this in HBM: Triton specialises an integer argument divisible by 16, so
# the kernels' row strides and column bounds are known multiples of 16 and every access
# a 16-byte one; at a row length it cannot prove a multiple of 8, each is a 2-byte one.
ROW_PAD = 16


def padded_row(n_kv: int) -> int:
    """The length of a row of standard's S, P, dP and dS in HBM: ``n_kv`` rounded up
    to ROW_PAD."""
    return -(-n_kv // ROW_PAD) * ROW_PAD


def padded_cols(j: str) -> str:
    """Columns of S block ``j`` in the padded rows: block_n, the last block to N_pad."""
    return f"min(block_n, N_pad - block_n*{_wrap(j)})"


def kept_bytes(algo: str, workload: Workload) -> int:
    """Bytes the forward keeps in HBM for the backward, besides Q, K, V themselves.

    Standard attention keeps the probabilities P (N_q x N_pad, input dtype) — its
    backward reads them instead of recomputing; FlashAttention keeps only O and
    per-row softmax statistics and recomputes P tile by tile: v2/v3 one fp32
    log-sum-exp per row, v1 (Algorithm 2/4) the row max m and sum l.
    """
    w = workload
    rows_total = w.batch * w.heads * w.seqlen_q
    if algo == "standard":
        return rows_total * padded_row(w.seqlen_kv) * w.elem_bytes
    o = rows_total * w.head_dim * output_bytes(w)
    stats = 2 if algo == "v1" else 1
    return o + stats * rows_total * FP32_BYTES


def warpgroups(config) -> int:
    """Warpgroups that split a flash kernel's Q block between them, each with its own
    wgmma: 2 for Hopper's wgmma path with 8 warps on 128 rows (Triton's
    ``warpsPerCTA = [8, 1]``), else 1 (one role runs the whole tile)."""
    c = config
    if c.mma_path == "wgmma" and c.num_warps == 8 and c.block_m == 128:
        return 2
    return 1


def warpgroup_rows(config, i: int, wgs: int) -> str:
    """Rows of warpgroup ``i`` of ``wgs`` in Q block m: its share, fewer or none in the last."""
    share = config.block_m // wgs
    if i == 0:
        return f"min({share}, N_q - block_m*m)"
    return f"max(0, min({share}, N_q - block_m*m - {share * i}))"
