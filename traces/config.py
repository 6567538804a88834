"""Default kernel configurations per algorithm and GPU, and their shared-memory need.

One source of truth for both the trace generators and the Triton kernels: a
prediction and a measurement launched with ``default_config(...)`` describe the
same grid and tiles.
"""

from __future__ import annotations

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from .workload import ALGOS, KernelConfig, Workload


def default_config(algo: str, workload: Workload, gpu: GPU) -> KernelConfig:
    """The configuration tilesim's kernels use when none is given."""
    check_algo(algo, workload, gpu)
    d = workload.head_dim
    hopper = gpu.has_wgmma
    path = "wgmma" if hopper else "mma_sync"
    if workload.pass_ != "fwd" and algo != "standard":
        # bwd and fwd_bwd (one config drives both passes of a fwd_bwd trace, so the
        # forward must fit it too; it needs less shared memory than the backward).
        return _backward_config(algo, d, hopper, path)
    if algo == "standard":
        # S = Q K^T tiles of block_m x block_n (k = d in one step); O = P V tiles of
        # block_m x d with a k-loop of block_n; the softmax kernel takes one row per CTA.
        return KernelConfig(128, 128 if d <= 128 else 64, 8 if hopper else 4, 2, path)
    if algo == "v1":
        # Algorithm 1's block sizes, B_c = M / 4d and B_r = min(B_c, d), for M = 32 Ki
        # elements (64 KiB of fp16 shared memory): 64 x 128 at d=64, 64 x 64 at d=128;
        # B_r kept at 64 (d=256 would give 32 x 32 tiles, too small for the tensor cores).
        return KernelConfig(64, 128 if d <= 64 else 64, 4, 1, path)
    if algo == "v2":
        # FlashAttention-2's CUDA tiles: 128 x 128 at d=64, 128 x 64 at d=128 (Ampere);
        # 64 x 64 at d=256.
        if d <= 64:
            return KernelConfig(128, 128, 4 if not hopper else 8, 3, path)
        if d <= 128 and hopper:
            # measured on the H200: 128 x 128, 3 stages: 537 TFLOPS; 128 x 64: 502
            # (kernels/TUNING.md)
            return KernelConfig(128, 128, 8, 3, path)
        if d <= 128:
            return KernelConfig(128, 64, 4, 3, path)
        return KernelConfig(64, 64, 4, 2, path)
    # v3: FlashAttention-3's schedule: a TMA producer warpgroup + two consumer
    # warpgroups (8 consumer warps) that ping-pong, 2 stages.
    block_n = 128 if d <= 128 else 64
    return KernelConfig(
        128, block_n, 8, 2, "wgmma", warp_specialize=True, pingpong=True, persistent=False
    )


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
    if algo == "v1":
        # v1 stages four d-wide tiles per inner step (Q, O, dO and the fp32 dQ). At
        # d = 128 it keeps two 64 x 128 fp32 accumulators (dK_j, dV_j) across the inner
        # loop: with 4 warps they do not fit in registers and round-trip through local
        # memory every step (ncu on the H200: 5 GB of spill traffic at N = 1024,
        # validate/results/2026-11-30-h200-spill-ncu.json); 8 warps halve the share
        # of each thread.
        if d <= 64:
            return KernelConfig(64, 64, 4, 1, path)
        if d <= 128:
            return KernelConfig(64, 64, 8, 1, path)
        return KernelConfig(32, 32, 4, 1, path)
    if d <= 128 and hopper:
        # measured on the H200 (kernels/TUNING.md): 64 x 64, 4 warps, 3 stages ran
        # v2's backward 1.7x faster than 8 warps, 2 stages at d=128 (326 vs 182
        # TFLOPS, N=4k) and at d=64 (347 vs 206 TFLOPS, against 64 x 128, 8 warps)
        return KernelConfig(64, 64, 4, 3, path)
    if d <= 64:
        return KernelConfig(64, 128, warps, 2, path)
    if d <= 128:
        return KernelConfig(64, 64, warps, 2, path)
    return KernelConfig(32, 32, 4, 2, path)


def kernel_config(algo: str, workload: Workload, gpu: GPU) -> KernelConfig:
    """The configuration tilesim's Triton kernels run when none is given.

    It equals `default_config` except where the kernels measured faster otherwise.
    v3 at d <= 128 runs the Gluon kernel (kernels/flash_v3_gluon.py): a TMA producer
    warp and two consumer warpgroups, warp-specialised, without ping-pong and with 3
    stages, which measured 0-3% faster on the H200 than ping-pong with 2 stages (and
    ping-pong slower at fp8; kernels/TUNING.md). FP8 without the causal mask runs it
    persistent (one CTA per SM looping over the Q tiles, the next tile's Q and K/V
    loaded while this one ends): 847 / 877 / 918 TFLOPS at N = 4k / 8k / 16k against
    797 / 852 / 893 (H200, d = 128); fp16 gained nothing from it and causal lost. At
    d = 256 (which the Gluon kernel does not take) v3 is the plain Triton kernel: one
    warpgroup pair with TMA loads, wgmma and 2 stages. Validation predicts exactly this config.
    """
    config = default_config(algo, workload, gpu)
    if algo == "v3":
        if workload.head_dim <= 128:
            config = config.replace(warp_specialize=True, pingpong=False, num_stages=3)
            if workload.dtype == "fp8" and not workload.causal:
                config = config.replace(persistent=True)
        else:
            config = config.replace(warp_specialize=False, pingpong=False, num_stages=2)
    return config


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
    if workload.dtype == "fp8":
        if algo != "v3":
            raise TilesimError(f"fp8 is supported by v3 only, not by {algo}")
        if not gpu.has_fp8:
            raise TilesimError(f"fp8 needs fp8 tensor cores, which {gpu.name} does not have")


def smem_bytes(algo: str, workload: Workload, config: KernelConfig) -> int:
    """Shared memory one CTA of ``algo`` needs with ``config`` (bytes).

    For ``pass_`` "bwd" the largest CTA of the backward launches; for "fwd_bwd"
    the larger of the forward's and the backward's.
    """
    if workload.pass_ == "bwd":
        return backward_smem_bytes(algo, workload, config)
    if workload.pass_ == "fwd_bwd":
        return max(
            forward_smem_bytes(algo, workload, config),
            backward_smem_bytes(algo, workload, config),
        )
    return forward_smem_bytes(algo, workload, config)


def backward_smem_bytes(algo: str, workload: Workload, config: KernelConfig) -> int:
    """Shared memory of the largest CTA of ``algo``'s backward launches (bytes)."""
    e = workload.elem_bytes
    d = workload.head_dim
    bm, bn, stages = config.block_m, config.block_n, config.num_stages
    stat = 4  # fp32 per-row statistics: LSE, D, l, m
    if algo == "standard":
        # The GEMMs dV = P^T dO, dQ = dS K, dK = dS^T Q pipeline a block_m x block_n
        # tile of P or dS and a d-wide tile num_stages deep; dP = dO V^T takes its
        # k = d in one step.
        return max((bm + bn) * d * e, stages * (bm * bn + max(bm, bn) * d) * e)
    if algo == "v1":
        # K_j, V_j resident; Q_i, O_i, dO_i, the fp32 dQ_i and l_i, m_i staged
        # each inner step (num_stages deep when the inner loop prefetches).
        per_step = bm * d * (3 * e + 4) + 2 * bm * stat
        return 2 * bn * d * e + stages * per_step
    # v2: the dK/dV launch keeps K_j, V_j and pipelines Q_i, dO_i, LSE_i, D_i; the
    # dQ launch keeps Q_i, dO_i, LSE_i, D_i and pipelines K_j, V_j.
    dkdv = 2 * bn * d * e + stages * (2 * bm * d * e + 2 * bm * stat)
    dq = 2 * bm * d * e + 2 * bm * stat + stages * 2 * bn * d * e
    return max(dkdv, dq)


def forward_smem_bytes(algo: str, workload: Workload, config: KernelConfig) -> int:
    """Shared memory one CTA of ``algo``'s forward needs with ``config`` (bytes)."""
    e = workload.elem_bytes
    d = workload.head_dim
    bm, bn, stages = config.block_m, config.block_n, config.num_stages
    if algo == "standard":
        # The larger CTA of the two GEMM launches: S = Q K^T takes its k = d in one
        # step (one Q tile and one K tile), O = P V pipelines P and V tiles
        # num_stages deep. (The softmax launch holds one row; see traces.standard.)
        return max((bm + bn) * d * e, stages * (bm * bn + bn * d) * e)
    if algo == "v1":
        # K_j, V_j resident; Q_i and O_i (and the fp32 l_i, m_i) staged each inner
        # step, num_stages deep when the inner loop prefetches.
        return (2 * bn * d + stages * 2 * bm * d) * e + stages * 2 * bm * 4
    # v2/v3: Q resident, K and V pipelined num_stages deep
    return (bm * d + stages * 2 * bn * d) * e


def check_fits(algo: str, workload: Workload, config: KernelConfig, gpu: GPU) -> int:
    """Return the CTA's shared memory, or raise naming both sizes if it does not fit."""
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
