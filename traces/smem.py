"""Shared memory one CTA of each algorithm needs, from its tiles (bytes).

The trace generators give it to their launches, `traces.config.check_fits` holds it
against the GPU's limit, and the serving heuristics count the CTAs it leaves room for.
"""

from __future__ import annotations

from .workload import KernelConfig, Workload


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
    if algo == "v1" and config.v1_kernel == "released":
        # K_j, V_j held; Q_i, dO_i, LSE_i, D_i staged; the warps' fp32 dQ partials summed
        # through shared memory; P^T and dS^T transposed there for dV's and dK's GEMMs.
        w = config.num_warps
        per_step = 2 * bm * d * e + 2 * bm * stat
        return 2 * bn * d * e + stages * per_step + w * bm * d * 4 + 2 * bm * bn * e
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
    if algo == "v1" and config.v1_kernel == "released":
        # K_j and V_j for the whole block, and the scratch where the warps' partial
        # sums meet, two fp32 Q steps (reused: the compiled sm_90 kernel holds 72 KiB
        # at d = 64 and 80 KiB at d = 128); the next step's inputs wait in registers.
        return 2 * bn * d * e + 2 * bm * d * 4
    if algo == "v1":
        # K_j, V_j resident; Q_i and O_i (and the fp32 l_i, m_i) staged each inner
        # step, num_stages deep when the inner loop prefetches.
        return (2 * bn * d + stages * 2 * bm * d) * e + stages * 2 * bm * 4
    # v2/v3: Q resident, K and V pipelined num_stages deep
    return (bm * d + stages * 2 * bn * d) * e
