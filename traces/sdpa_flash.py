"""PyTorch SDPA's `flash` backend: FlashAttention-2's CUDA forward, as PyTorch 2.11 runs it.

``mha_fwd`` (aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp) asks
``num_splits_heuristic`` whether to split the K/V sequence: when B*H*ceil(N_q/64)
Q blocks of 64 rows fill less than 80% of twice the SMs (its count of 128-thread
CTAs the GPU holds), it picks the fewest splits whose waves are at least 85% as
full as the best. One split: ``flash_fwd_kernel`` with the `fa2` config's tiles
(tilesim's v2 schedule, predicted as such; `traces.build_external` builds it). More:
``flash_fwd_splitkv_kernel``, grid (Q blocks of 64, splits, B*H), each CTA walking its
share of the K/V blocks (256 rows at d = 64, 128 at d = 128) and writing a float32
partial O and its log-sum-exp, then ``flash_fwd_splitkv_combine_kernel`` merging the
splits (flash_fwd_launch_template.h); this module builds that pair. The torch profiler
on the H200 shows both paths (experiments/2026-12-01-sdpa-kernels/).
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from .flash_v2 import kv_loop
from .ir import CtaProgram, Launch, Load, Role, Store, TensorSpec, Trace, Vector
from .tiles import (
    FLASH_FP32_PER_O_FINAL,
    FLASH_FP32_PER_ROW_FINAL,
    FP32_BYTES,
    causal_full_blocks,
    params,
    qkvo_tensors,
    row_stat,
    rows,
    times,
)
from .workload import KernelConfig, Workload

SPLIT_BLOCK_M = 64  # run_mha_fwd_splitkv_dispatch: kBlockM, every head dim
SPLIT_WARPS = 4
MAX_SPLITS = 128
SPLIT_REGS = 255  # the profiled split kernels, as the unsplit ones
COMBINE_THREADS = 128
COMBINE_REGS = 54


def split_block_n(head_dim: int) -> int:
    return 256 if head_dim <= 64 else (128 if head_dim <= 128 else 64)


def num_splits(workload: Workload, gpu: GPU) -> int:
    """FlashAttention-2's ``num_splits_heuristic`` as ``set_params_splitkv`` calls it."""
    w = workload
    blocks = w.batch * w.heads * -(-w.seqlen_q // SPLIT_BLOCK_M)
    sms = 2 * gpu.sm_count  # "we're using 128 threads per block"
    n_blocks = -(-w.seqlen_kv // split_block_n(w.head_dim))
    if blocks >= 0.8 * sms:
        return 1
    most = min(MAX_SPLITS, sms, n_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or -(-n_blocks // s) != -(-n_blocks // (s - 1))

    eff = {}
    for s in range(1, most + 1):
        if eligible(s):
            waves = blocks * s / sms
            eff[s] = waves / -(-waves // 1)
    best = max(eff.values(), default=0.0)
    return next((s for s in sorted(eff) if eff[s] >= 0.85 * best), 1)


def split_config(workload: Workload) -> KernelConfig:
    """The split kernel's tiles: Flash_fwd_kernel_traits<d, 64, block_n, 4>."""
    return KernelConfig(SPLIT_BLOCK_M, split_block_n(workload.head_dim), SPLIT_WARPS, 2, "mma_sync")


def build_split(workload: Workload, gpu: GPU, splits: int) -> Trace:
    """The split-KV launch and the combine launch, for ``splits`` > 1."""
    w, c = workload, split_config(workload)
    p = params(w, c)
    p["S"] = splits
    p["nbps"] = -(-p["T_c"] // splits)  # n_blocks_per_split
    r = rows("m")
    lo = "s*nbps"
    hi = "min(T_c, (s + 1)*nbps)"
    if w.causal:
        # a Q block sees K/V blocks below cdiv((m + 1)*block_m, block_n); those before
        # its first masked block entirely
        seen = "min(T_c, cdiv(min(block_m*(m + 1), N_q), block_n))"
        full = causal_full_blocks("m")
        n_full = f"max(0, min({hi}, {full}) - {lo})"
        first_masked = f"max({lo}, {full})"
        n_masked = f"max(0, min({hi}, {seen}) - {first_masked})"
        loops = [
            kv_loop("j", n_full, f"{lo} + j", w, c, masked=False),
            kv_loop("jd", n_masked, f"{first_masked} + jd", w, c, masked=True, suffix="d"),
        ]
    else:
        loops = [kv_loop("j", f"max(0, {hi} - {lo})", f"{lo} + j", w, c, masked=False)]
    main = Role(
        "main",
        (
            Load("q", "Q", ("bh", "m"), f"{r}*d*e"),
            *loops,
            Vector(
                fp32=f"{times(r + '*d', FLASH_FP32_PER_O_FINAL)}"
                f" + {times(r, FLASH_FP32_PER_ROW_FINAL)}"
            ),
            # the partial O and log-sum-exp of this split, in float32
            Store("Oacc", ("bh", "s", "m"), f"{r}*d*{FP32_BYTES}"),
            Store("LSEacc", ("bh", "s", "m"), f"{r}*{FP32_BYTES}"),
        ),
        c.num_warps,
    )
    split = Launch(
        name="flash_fwd_splitkv",
        grid=(("m", p["T_r"]), ("s", splits), ("bh", w.batch * w.heads)),
        program=CtaProgram((main,)),
        smem_bytes=(c.block_m + 2 * c.block_n) * w.head_dim * w.elem_bytes,  # Q, K, V
        threads=c.num_warps * 32,
        regs_per_thread=SPLIT_REGS,
        mma_path=c.mma_path,
        estimated="FlashAttention-2's split-KV kernel: not in the kernel profile",
    )
    # -- combine: kBlockM rows per CTA read every split's O and LSE -------------------
    per_cta = 4 if w.head_dim % 128 == 0 else (8 if w.head_dim % 64 == 0 else 16)
    total = w.batch * w.heads * w.seqlen_q
    cr = f"min({per_cta}, {total} - {per_cta}*c)"
    combine = Launch(
        name="flash_fwd_splitkv_combine",
        grid=(("c", -(-total // per_cta)),),
        program=CtaProgram(
            (
                Role(
                    "main",
                    (
                        Load("l", "LSEacc", ("c",), f"{cr}*S*{FP32_BYTES}"),
                        Load("o", "Oacc", ("c",), f"{cr}*S*d*{FP32_BYTES}"),
                        Vector(exp=f"{cr}*S", fp32=f"{cr}*S*(d + 4)", deps=("l", "o")),
                        Store("O", ("c",), f"{cr}*d*e"),
                        Store("LSE", ("c",), f"{cr}*{FP32_BYTES}"),
                    ),
                    COMBINE_THREADS // 32,
                ),
            )
        ),
        smem_bytes=0,
        threads=COMBINE_THREADS,
        regs_per_thread=COMBINE_REGS,
        estimated="FlashAttention-2's split-KV combine kernel: not in the kernel profile",
    )
    bh_shape = (w.batch, w.heads)
    tensors = qkvo_tensors(w) + [
        row_stat("LSE", w),
        TensorSpec("Oacc", (splits, *bh_shape, w.seqlen_q, w.head_dim), "fp32"),
        TensorSpec("LSEacc", (splits, *bh_shape, w.seqlen_q), "fp32"),
    ]
    return Trace(
        algo="sdpa-flash",
        tensors=tuple(tensors),
        launches=(split, combine),
        params=p,
        workload=w.to_dict(),
        config={**c.to_dict(), "num_splits": splits},
    )
