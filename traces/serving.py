"""The serving shapes' schedule choices: when to pack the heads of a group, how many KV splits.

Decode (a few query rows against a long KV cache) gives v2's grid one CTA per
(batch, head): too few to fill the GPU, each walking the whole cache alone.
tilesim's decode kernel (kernels/flash_decode.py; the ``flash_decode`` launch of
traces/flash_v2.py) takes the G query heads of a K/V head together in one Q
block (FlashAttention-3's PackGQA: each K/V tile loaded once serves all G heads)
and splits the KV sequence over ``num_splits`` CTAs, then combines their partial
outputs (Flash-Decoding). The split count is FlashAttention's
``num_splits_heuristic`` (hopper/heuristics.h): enough CTAs to fill the SMs, the
fewest splits within 85% of the best wave efficiency; then only the splits that
get K/V blocks (FlashAttention-2's heuristic skips counts that leave some empty).
"""

from __future__ import annotations

import math

from ..hwmodels.gpu import GPU
from .smem import forward_smem_bytes
from .workload import MAX_SPLITS, KernelConfig, Workload

# The decode kernel runs when the packed query rows fit one small Q block and the
# cache is longer than the queries (a square prefill keeps v2's kernel).
DECODE_MAX_ROWS = 64
DECODE_MIN_BLOCK_M = 16  # tl.dot's smallest M
DECODE_WARPS = 4
DECODE_STAGES = 3
# FlashAttention's split heuristic: no split when the Q blocks fill this share of
# the CTA slots, nor when the cache has this few K/V blocks
FILL_SHARE = 0.8
MIN_SPLIT_BLOCKS = 4
NEAR_BEST = 0.85  # the fewest splits whose wave efficiency is this close to the best


def is_decode(workload: Workload) -> bool:
    """Whether ``workload`` is run by the decode kernel (packed rows <= DECODE_MAX_ROWS,
    more keys than queries, the fp16/bf16 forward)."""
    w = workload
    return (
        w.pass_ == "fwd"
        and w.dtype in ("fp16", "bf16")
        and w.seqlen_q * w.group <= DECODE_MAX_ROWS
        and w.seqlen_kv > w.seqlen_q
    )


def decode_block_n(head_dim: int) -> int:
    return 128 if head_dim <= 128 else 64


def num_splits_heuristic(
    total_mblocks: int,
    slots: int,
    n_blocks: int,
    m_blocks: int,
    kv_head_bytes: int,
    l2_bytes: int,
    causal: bool,
    max_splits: int = MAX_SPLITS,
) -> int:
    """FlashAttention's split count for ``total_mblocks`` Q blocks on ``slots`` CTA slots.

    Filled already (>= 80% of the slots): one split, unless one K/V head is larger
    than L2 and enough Q blocks re-read it (not causal). Otherwise the fewest
    splits whose wave efficiency (waves / ceil(waves)) is within 85% of the best.
    """
    if total_mblocks >= FILL_SHARE * slots:
        if kv_head_bytes > l2_bytes and m_blocks >= 2 * slots and not causal:
            return min(-(-kv_head_bytes // l2_bytes), max_splits)
        return 1
    if n_blocks <= MIN_SPLIT_BLOCKS:
        return 1
    most = min(max_splits, slots, n_blocks)
    eff = []
    for s in range(1, most + 1):
        waves = total_mblocks * s / slots
        eff.append(waves / math.ceil(waves))
    best = max(eff)
    return next(s for s, e in enumerate(eff, start=1) if e >= NEAR_BEST * best)


def decode_config(workload: Workload, gpu: GPU) -> KernelConfig:
    """The decode kernel's tiles, split count and packing for ``workload`` on ``gpu``."""
    w = workload
    rows = w.seqlen_q * w.group
    block_m = max(DECODE_MIN_BLOCK_M, 1 << (rows - 1).bit_length())
    base = KernelConfig(
        block_m,
        decode_block_n(w.head_dim),
        DECODE_WARPS,
        DECODE_STAGES,
        "mma_sync",
        pack_gqa=w.group > 1,
    )
    per_sm = max(1, gpu.smem_bytes_per_sm // forward_smem_bytes("v2", w, base))
    per_sm = min(per_sm, gpu.max_ctas_per_sm)
    m_blocks = -(-rows // block_m)
    n_blocks = -(-w.seqlen_kv // base.block_n)
    splits = num_splits_heuristic(
        total_mblocks=w.batch * w.num_kv_heads * m_blocks,
        slots=gpu.sm_count * per_sm,
        n_blocks=n_blocks,
        m_blocks=m_blocks,
        kv_head_bytes=2 * w.seqlen_kv * w.head_dim * w.elem_bytes,
        l2_bytes=gpu.l2_bytes,
        causal=w.causal,
    )
    # the splits that get blocks: cdiv(T_c, S) blocks each leaves the last ones empty
    # (64 blocks in 15 splits: 13 of 5); launching those would only add combine work
    per = -(-n_blocks // splits)
    return base.replace(num_splits=-(-n_blocks // per))
