"""Kernel configurations: the one default per workload and GPU, and the named schedules.

`default_config` is what tilesim's kernels run when none is given, so a
prediction and a measurement of the default describe the same grid and tiles.
Published schedules (FlashAttention-3's ping-pong, FlashAttention-2's CUDA
tiles, the released FlashAttention-1 kernel, the FlashAttention paper's Algorithm
1) are `NAMED_CONFIGS` a user selects by name; each names the kernel that runs it.
`describe_config` tells which of them a config is, or that no kernel has run it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from .serving import decode_config, is_decode
from .smem import smem_bytes
from .tiles import regs_estimate
from .workload import ALGOS, KernelConfig, Workload


def default_config(algo: str, workload: Workload, gpu: GPU) -> KernelConfig:
    """The configuration tilesim's kernels run when none is given."""
    check_algo(algo, workload, gpu)
    d = workload.head_dim
    hopper = gpu.has_wgmma
    path = "wgmma" if hopper else "mma_sync"
    if algo == "v1":
        return fa1_released(workload, gpu)
    if workload.pass_ != "fwd" and algo != "standard":
        # bwd and fwd_bwd (one config drives both passes of a fwd_bwd trace, so the
        # forward must fit it too; it needs less shared memory than the backward).
        return _backward_config(algo, d, hopper, path)
    if algo == "standard":
        # S = Q K^T tiles of block_m x block_n (k = d in one step); O = P V tiles of
        # block_m x d with a k-loop of block_n; the softmax kernel takes one row per CTA.
        return KernelConfig(128, 128 if d <= 128 else 64, 8 if hopper else 4, 2, path)
    if algo == "v2":
        if is_decode(workload):
            return decode_config(workload, gpu)
        if d <= 64:
            return KernelConfig(128, 128, 4 if not hopper else 8, 3, path)
        if d <= 128 and hopper:
            # 128 x 128, 3 stages measured faster than FA2's 128 x 64 on the H200
            # (experiments/2026-11-30-tuning/README.md)
            return KernelConfig(128, 128, 8, 3, path)
        if d <= 128:
            return KernelConfig(128, 64, 4, 3, path)
        return KernelConfig(64, 64, 4, 2, path)
    # v3 at d <= 128: the Gluon kernel (kernels/gluon/), a TMA producer warp
    # and two consumer warpgroups, no ping-pong, 3 stages; fp8 without the mask runs it
    # persistent (one CTA per SM looping over the Q tiles). At d = 256 the plain Triton
    # kernel: one warpgroup pair issuing its own TMA loads, 2 stages.
    if d <= 128:
        persistent = workload.dtype == "fp8" and not workload.causal
        return KernelConfig(
            128, 128, 8, 3, "wgmma", warp_specialize=True, pingpong=False, persistent=persistent
        )
    return KernelConfig(128, 64, 8, 2, "wgmma")


def _backward_config(algo: str, d: int, hopper: bool, path: str) -> KernelConfig:
    """Backward tiles: block_m rows of Q/dO, block_n rows of K/V, as the forward.

    The backward holds more tiles per CTA than the forward (v2's dK/dV launch
    keeps K_j, V_j and stages Q_i, dO_i, LSE_i, D_i; v1 also stages O_i and the
    fp32 dQ_i), so its blocks are smaller: 64 x 128 at d=64 and 64 x 64 at d=128
    (FlashAttention-2's backward uses 64 x 128 / 64 x 64 on Ampere), 32 x 32 at
    d=256 so that even the A100's 163 KiB per CTA holds them. Standard attention's
    backward is tiled GEMMs and keeps the forward's GEMM tiles.
    """
    warps = 8 if hopper else 4
    if d <= 128 and hopper:
        # measured on the H200 (experiments/2026-11-30-tuning/README.md):
        # 64 x 64, 4 warps, 3 stages ran
        # v2's backward 1.7x faster than 8 warps, 2 stages at d=128 (326 vs 182
        # TFLOPS, N=4k) and at d=64 (347 vs 206 TFLOPS, against 64 x 128, 8 warps)
        return KernelConfig(64, 64, 4, 3, path)
    if d <= 64:
        return KernelConfig(64, 128, warps, 2, path)
    if d <= 128:
        return KernelConfig(64, 64, warps, 2, path)
    return KernelConfig(32, 32, 4, 2, path)


def _fa1_algorithm1(workload: Workload, gpu: GPU) -> KernelConfig:
    """The FlashAttention paper's Algorithm 1 (and its backward, Algorithm 4).

    Forward: B_c = M / 4d, B_r = min(B_c, d); for M = 32 Ki elements (64 KiB of fp16
    shared memory) 64 x 128 at d=64, 64 x 64 at d=128; B_r kept at 64 (d=256 would
    give 32 x 32 tiles, too small for the tensor cores).

    Backward: four d-wide tiles are staged per inner step (Q, O, dO and the fp32 dQ),
    so 64 x 64 (32 x 32 at d=256). At d = 128 the two 64 x 128 fp32 accumulators
    (dK_j, dV_j) do not fit in the registers of 4 warps and round-trip through local
    memory every step (ncu on the H200: 5 GB of spill traffic at N = 1024,
    results/raw/2026-11-30-h200-spill-ncu.json); 8 warps halve each thread's share.
    """
    d = workload.head_dim
    path = "wgmma" if gpu.has_wgmma else "mma_sync"
    if workload.pass_ == "fwd":
        return KernelConfig(64, 128 if d <= 64 else 64, 4, 1, path)
    if d <= 64:
        return KernelConfig(64, 64, 4, 1, path)
    if d <= 128:
        return KernelConfig(64, 64, 8, 1, path)
    return KernelConfig(32, 32, 4, 1, path)


# The released FlashAttention-1 kernel (flash-attn 1.0.x, csrc/flash_attn/src; docs/fa1.md):
FA1_STEP_ROWS = 16  # Q rows per inner step (kernel traits' STEP)
FA1_KV_ELEMS = 256 * 64  # one K/V block: 256 keys at d <= 64, 128 at d = 128 (fmha_api.cpp)
FA1_FWD_WARPS, FA1_BWD_WARPS = 4, 8  # the forward's and backward's kernel traits
FA1_MAX_HEAD_DIM = 128  # fmha_api.cpp: head_size <= 128
FA1_MAX_SPLITS = 30  # num_splits_heuristic_fwd's cap
FA1_SPLIT_EFFICIENCY = 0.95  # the fewest splits within this share of the best wave efficiency


def fa1_released(workload: Workload, gpu: GPU) -> KernelConfig:
    """The released FlashAttention-1 kernel's structure, as tilesim's v1 kernel runs it.

    16-row Q steps against a K/V block held on chip (256 keys at d <= 64, 128 at d =
    128), mma.sync, the block's keys split across the warps (4 forward, 8 backward);
    num_splits by the released launchers' heuristics. The released kernel took
    d <= 128 only: at d = 256 v1 runs the paper's Algorithm 1 (``fa1-algorithm1``).
    """
    d = workload.head_dim
    if d > FA1_MAX_HEAD_DIM:
        return _fa1_algorithm1(workload, gpu)
    block_n = min(256, FA1_KV_ELEMS // d)
    warps = FA1_FWD_WARPS if workload.pass_ == "fwd" else FA1_BWD_WARPS
    config = KernelConfig(FA1_STEP_ROWS, block_n, warps, 2, "mma_sync", v1_kernel="released")
    return config.replace(num_splits=fa1_num_splits(workload, config, gpu))


def fa1_num_splits(workload: Workload, config: KernelConfig, gpu: GPU) -> int:
    """CTAs per (batch, head) by the released launchers' heuristics (fmha_fwd_launch_template.h,
    fmha_bwd_launch_template.h), from the SMs and the CTAs one SM holds.

    Forward: of 1..30 splits of the Q steps, the fewest whose wave efficiency (waves /
    ceil(waves)) is within 95% of the best. Backward: one CTA per head, or one per K/V
    block when that fills the waves better after a discount of 1 + block_n / N (half of
    it causal, and always from 10 blocks on, causal).
    """
    w = workload
    slots = gpu.sm_count * max(1, _ctas_per_sm("v1", w, config.replace(num_splits=1), gpu))
    bh = w.batch * w.heads

    def efficiency(ctas: int) -> float:
        waves = ctas / slots
        return waves / -(-ctas // slots)

    if w.pass_ == "fwd":
        steps = -(-w.seqlen_q // config.block_m)
        effs = [efficiency(bh * s) for s in range(1, min(FA1_MAX_SPLITS, steps) + 1)]
        best = max(effs)
        return next(s for s, e in enumerate(effs, 1) if e > FA1_SPLIT_EFFICIENCY * best)
    blocks = -(-w.seqlen_kv // config.block_n)
    if blocks <= 1:
        return 1
    if w.causal and blocks >= 10:
        return blocks
    discount = 1 + (0.5 if w.causal else 1.0) * config.block_n / w.seqlen_kv
    return 1 if efficiency(bh) >= efficiency(bh * blocks) / discount else blocks


def _ctas_per_sm(algo: str, workload: Workload, config: KernelConfig, gpu: GPU) -> int:
    """Resident CTAs per SM by shared memory, estimated registers and warps."""
    threads = 32 * config.num_warps
    regs = regs_estimate(v1_released_fp32_per_cta(workload, config), threads)
    smem = smem_bytes(algo, workload, config)
    return min(
        gpu.max_ctas_per_sm,
        gpu.smem_bytes_per_sm // smem,
        gpu.regs_per_sm // (regs * threads),
        gpu.max_warps_per_sm // config.num_warps,
    )


def v1_released_fp32_per_cta(workload: Workload, config: KernelConfig) -> int:
    """32-bit values a released-v1 CTA holds in registers: the K/V block (fp16 pairs),
    the S and partial-O accumulators of its warps, and, backward, dK_j and dV_j."""
    d, bm, bn, w = workload.head_dim, config.block_m, config.block_n, config.num_warps
    kv = 2 * bn * d * workload.elem_bytes // 4
    if workload.pass_ == "fwd":
        return kv + bm * bn + w * bm * d
    return kv + 2 * bn * d + 2 * bm * bn + w * bm * d


def _fa2_cuda(workload: Workload, gpu: GPU | None) -> KernelConfig | None:
    """FlashAttention-2's CUDA forward tiles (its kernel traits for A100/H100).

    mma.sync on every GPU, 4 warps, K/V double-buffered with cp.async: 128 x 128
    at d=64, 128 x 64 at d=128; 128 x 64 with 8 warps at d=256, whatever the GPU.
    PyTorch SDPA's `flash` backend is this code.
    """
    if workload.pass_ != "fwd":
        return None
    tiles = {64: (128, 128, 4), 128: (128, 64, 4), 256: (128, 64, 8)}
    block_m, block_n, warps = tiles[workload.head_dim]
    return KernelConfig(block_m, block_n, warps, 2, "mma_sync")


def _fa3_pingpong(workload: Workload, gpu: GPU) -> KernelConfig | None:
    """FlashAttention-3's schedule: a TMA producer, two consumer warpgroups that
    ping-pong (one's softmax under the other's GEMMs), 2 stages, 128 x 128 tiles
    at d <= 128 (128 x 64 at d = 256)."""
    if workload.pass_ != "fwd" or not gpu.has_wgmma:
        return None
    block_n = 128 if workload.head_dim <= 128 else 64
    return KernelConfig(128, block_n, 8, 2, "wgmma", warp_specialize=True, pingpong=True)


@dataclass(frozen=True)
class NamedConfig:
    """A published schedule, selectable by name, and the kernel that runs it."""

    algo: str  # the algorithm whose schedule it is
    about: str  # one line: whose schedule
    ran_by: str  # the kernel that runs it (validation times that kernel)
    make: Callable[[Workload, GPU], KernelConfig | None]  # None: not defined for the workload
    runs: Callable[[Workload], bool] = lambda w: True  # whether that kernel takes the workload


NAMED_CONFIGS: dict[str, NamedConfig] = {
    "fa3": NamedConfig(
        "v3",
        "FlashAttention-3's ping-pong schedule (TMA producer, two consumer warpgroups, 2 stages)",
        "tilesim's Gluon v3 kernel with ping-pong on",
        _fa3_pingpong,
        runs=lambda w: w.head_dim <= 128,
    ),
    "fa2": NamedConfig(
        "v2",
        "FlashAttention-2's CUDA tiles (mma.sync, cp.async double buffering)",
        "PyTorch SDPA's flash backend (FlashAttention-2's CUDA kernel)",
        _fa2_cuda,
        runs=lambda w: w.dtype != "fp8",
    ),
    "fa1": NamedConfig(
        "v1",
        "the released FlashAttention-1 kernel (16-row Q steps, keys split over warps, num_splits)",
        "tilesim's v1 Triton kernel",
        fa1_released,
    ),
    "fa1-algorithm1": NamedConfig(
        "v1",
        "the FlashAttention paper's Algorithm 1 (one CTA per head, B_c = M/4d)",
        "tilesim's Algorithm 1 v1 Triton kernel",
        _fa1_algorithm1,
    ),
}
# other spellings of the same schedules
CONFIG_ALIASES = {"sdpa-flash": "fa2"}
DEFAULT_RAN_BY = {
    "standard": "tilesim's standard-attention Triton kernels",
    "v1": "tilesim's v1 Triton kernel",
    "v2": "tilesim's v2 Triton kernel",
    "v3": "tilesim's Gluon v3 kernel (d <= 128) or its Triton v3 kernel (d = 256)",
}


def config_names() -> list[str]:
    """Every name `named_config` takes: "default", the named schedules, their aliases."""
    return ["default", *NAMED_CONFIGS, *CONFIG_ALIASES]


def named_config(name: str, algo: str, workload: Workload, gpu: GPU) -> KernelConfig:
    """The config called ``name`` for ``algo`` on ``workload`` ("default": `default_config`)."""
    key = CONFIG_ALIASES.get(name, name)
    if key == "default":
        return default_config(algo, workload, gpu)
    if key not in NAMED_CONFIGS:
        raise TilesimError(f"unknown config {name!r} (choose from {', '.join(config_names())})")
    named = NAMED_CONFIGS[key]
    if named.algo != algo:
        raise TilesimError(f"config {name!r} is a schedule of {named.algo}, not of {algo}")
    check_algo(algo, workload, gpu)
    config = named.make(workload, gpu)
    if config is None:
        raise TilesimError(
            f"config {name!r} ({named.about}) is not defined for a {workload.pass_} pass on "
            f"{gpu.name}"
        )
    return config


def describe_config(algo: str, workload: Workload, gpu: GPU, config: KernelConfig | None) -> str:
    """Which schedule ``config`` is and which kernel runs it, or that none has run it.

    ``config`` None: each pass its own default (a fwd_bwd trace).
    """
    if config is None or config == default_config(algo, workload, gpu):
        return f"default: what {DEFAULT_RAN_BY[algo]} run{'' if algo == 'standard' else 's'}"
    for name, named in NAMED_CONFIGS.items():
        if named.algo == algo and named.make(workload, gpu) == config:
            if named.runs(workload):
                return f"{name}: {named.about}, as {named.ran_by} runs it"
            return f"{name}: {named.about}; no kernel runs it for this workload"
    return "custom: no kernel has run this configuration (the prediction is the model's alone)"


def check_algo(algo: str, workload: Workload, gpu: GPU) -> None:
    """Raise a one-line error if ``algo`` cannot run ``workload`` on ``gpu``."""
    if algo not in ALGOS:
        raise TilesimError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")
    if algo == "v3" and not (gpu.has_tma and gpu.has_wgmma):
        raise TilesimError(
            f"v3 needs Hopper's TMA and wgmma, which {gpu.name} does not have (use v2)"
        )
    if algo == "v3" and workload.pass_ != "fwd":
        raise TilesimError("v3 backward is not modelled yet; use v2")
    check_serving(algo, workload)
    if workload.dtype == "fp8":
        if algo != "v3":
            raise TilesimError(f"fp8 is supported by v3 only, not by {algo}")
        if not gpu.has_fp8:
            raise TilesimError(f"fp8 needs fp8 tensor cores, which {gpu.name} does not have")


def check_serving(algo: str, workload: Workload) -> None:
    """One line if ``algo`` has no schedule for ``workload``'s serving features: grouped
    heads (the v2 and v3 forward), a causal diagonal shifted by N_kv - N_q (those and
    standard attention, whose backward reads the masked P)."""
    w = workload
    on = f"{algo}{'' if w.pass_ == 'fwd' else ' ' + w.pass_}"
    forward = algo in ("v2", "v3") and w.pass_ == "fwd"
    if w.group > 1 and not forward:
        raise TilesimError(
            f"kv_heads {w.num_kv_heads} < heads {w.heads} (grouped-query heads) is modelled for "
            f"the v2 and v3 forward only, not {on}"
        )
    if w.causal and w.causal_shift and not (forward or algo == "standard"):
        raise TilesimError(
            f"causal with seqlen_q {w.seqlen_q} < seqlen_kv {w.seqlen_kv} (bottom-right) is "
            f"modelled for standard and the v2 and v3 forward only, not {on}"
        )
    if w.varlen or w.page_size:
        raise TilesimError(
            "varlen (seqlens_kv) and paged (page_size) workloads have no schedule yet"
        )


def check_split(algo: str, workload: Workload, config: KernelConfig) -> None:
    """Split-KV and packed heads: v2's forward only (tilesim's decode kernel); v1's
    released kernel splits each (batch, head) over ``num_splits`` CTAs of its own."""
    if config.num_splits == 1 and not config.pack_gqa:
        return
    if algo == "v1" and not config.pack_gqa:
        if config.v1_kernel != "released":
            raise TilesimError(
                "num_splits belongs to v1_kernel='released'; Algorithm 1 runs one CTA "
                "per (batch, head)"
            )
        return
    if algo != "v2" or workload.pass_ != "fwd":
        raise TilesimError(
            f"num_splits and pack_gqa are a schedule of the v2 forward (the decode kernel), "
            f"not of {algo}{'' if workload.pass_ == 'fwd' else ' ' + workload.pass_}"
        )
    blocks = -(-workload.seqlen_kv // config.block_n)
    if config.num_splits > blocks:
        raise TilesimError(
            f"num_splits {config.num_splits} is more than the {blocks} K/V blocks of "
            f"{config.block_n} rows (seqlen_kv {workload.seqlen_kv})"
        )


def check_fits(algo: str, workload: Workload, config: KernelConfig, gpu: GPU) -> int:
    """Return the CTA's shared memory, or raise naming both sizes if it does not fit."""
    check_split(algo, workload, config)
    need = smem_bytes(algo, workload, config)
    if need > gpu.smem_bytes_per_cta_max:
        raise TilesimError(
            f"{algo}{'' if workload.pass_ == 'fwd' else ' ' + workload.pass_} tiles "
            f"block_m={config.block_m} block_n={config.block_n} "
            f"num_stages={config.num_stages} at d={workload.head_dim} need {need / 1024:.0f} KiB "
            f"of shared memory per CTA; {gpu.name} allows "
            f"{gpu.smem_bytes_per_cta_max / 1024:.0f} KiB"
        )
    return need
