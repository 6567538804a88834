"""Registers per thread of tilesim's kernels as compiled, where they were measured.

A trace generator estimates a launch's registers from the accumulators it holds
(`tiles.regs_estimate`); only occupancy reads the figure, and the compiler decides
the real one. Where Nsight Compute has read a kernel's count on the H200
(``launch__registers_per_thread`` in ``validate/results/*-ncu.json``: Triton 3.6,
sm_90a), `build` uses that count instead, for every shape that compiles to the
same kernel: the same algorithm, pass, launch, head dim, mask, element type,
tiles and MMA path (and, for the standard softmax, the same row plan). The estimate was low by
10-100 registers, enough to give v1, v2's backward at d = 64 and two softmax
kernels one CTA per SM more than they get. ``tests/traces/test_tr_registers.py``
keeps this table equal to the ncu files.
"""

from __future__ import annotations

import dataclasses

from .ir import Trace
from .standard import softmax_fwd_plan
from .workload import KernelConfig, Workload

# (algo, pass, launch, head_dim, causal, dtype, block_m, block_n, num_warps, num_stages,
#  mma path, forward softmax plan (block, passes, warps, tiers) or None) -> registers
# per thread. Measured on sm_90 (wgmma path): an Ampere build (mma_sync) compiles to
# other code.
COMPILED_REGS: dict[tuple, int] = {
    ("standard", "fwd", "qk", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 117,
    (
        "standard",
        "fwd",
        "softmax",
        128,
        False,
        "fp16",
        128,
        128,
        8,
        2,
        "wgmma",
        (4096, 1, 8, 1),
    ): 32,
    ("standard", "fwd", "pv", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 128,
    ("standard", "fwd", "qk", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 113,
    (
        "standard",
        "fwd",
        "softmax",
        64,
        False,
        "fp16",
        128,
        128,
        8,
        2,
        "wgmma",
        (16384, 1, 16, 1),
    ): 63,
    ("standard", "fwd", "pv", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 88,
    ("standard", "fwd", "qk", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 113,
    ("standard", "fwd", "softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 2, 16, 1)): 40,
    ("standard", "fwd", "pv", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 88,
    ("v1", "fwd", "flash_v1", 128, False, "fp16", 64, 64, 4, 1, "wgmma", None): 236,
    ("v1", "fwd", "flash_v1", 64, False, "fp16", 64, 128, 4, 1, "wgmma", None): 180,
    ("v2", "fwd", "flash_v2", 64, False, "fp16", 128, 128, 8, 3, "wgmma", None): 166,
    ("v2", "fwd", "flash_v2", 128, True, "fp16", 128, 128, 8, 3, "wgmma", None): 219,
    ("v2", "fwd", "flash_v2", 128, False, "fp16", 128, 128, 8, 3, "wgmma", None): 188,
    ("v3", "fwd", "flash_v3", 64, True, "fp16", 128, 128, 8, 3, "wgmma", None): 163,
    ("v3", "fwd", "transpose_v", 128, False, "fp8", 128, 128, 8, 3, "wgmma", None): 32,
    ("v3", "fwd", "flash_v3", 128, False, "fp8", 128, 128, 8, 3, "wgmma", None): 175,
    ("v2", "bwd", "bwd_preprocess", 128, False, "fp16", 64, 64, 4, 3, "wgmma", None): 40,
    ("v2", "bwd", "bwd_dkdv", 128, False, "fp16", 64, 64, 4, 3, "wgmma", None): 255,
    ("v2", "bwd", "bwd_dq", 128, False, "fp16", 64, 64, 4, 3, "wgmma", None): 166,
    ("v2", "bwd", "bwd_preprocess", 128, True, "fp16", 64, 64, 4, 3, "wgmma", None): 40,
    ("v2", "bwd", "bwd_dkdv", 128, True, "fp16", 64, 64, 4, 3, "wgmma", None): 255,
    ("v2", "bwd", "bwd_dq", 128, True, "fp16", 64, 64, 4, 3, "wgmma", None): 183,
    ("standard", "bwd", "bwd_dv", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 123,
    ("standard", "bwd", "bwd_dp", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 117,
    ("standard", "bwd", "bwd_softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 48,
    ("standard", "bwd", "bwd_dq", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 127,
    ("standard", "bwd", "bwd_dk", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 123,
    ("v1", "bwd", "flash_v1_bwd", 128, False, "fp16", 64, 64, 4, 1, "wgmma", None): 255,
    ("v1", "bwd", "flash_v1_bwd", 64, False, "fp16", 64, 64, 4, 1, "wgmma", None): 255,
    ("v2", "bwd", "bwd_preprocess", 64, False, "fp16", 64, 64, 4, 3, "wgmma", None): 32,
    ("v2", "bwd", "bwd_dkdv", 64, False, "fp16", 64, 64, 4, 3, "wgmma", None): 189,
    ("v2", "bwd", "bwd_dq", 64, False, "fp16", 64, 64, 4, 3, "wgmma", None): 125,
    ("v1", "bwd", "flash_v1_bwd", 128, False, "fp16", 64, 64, 8, 1, "wgmma", None): 255,
}


def key(algo: str, workload: Workload, config: KernelConfig, launch: str) -> tuple:
    w, c = workload, config
    plan = tuple(softmax_fwd_plan(w.seqlen_kv, w.causal)) if launch == "softmax" else None
    return (
        algo,
        w.pass_,
        launch,
        w.head_dim,
        w.causal,
        w.dtype,
        c.block_m,
        c.block_n,
        c.num_warps,
        c.num_stages,
        c.mma_path,
        plan,
    )


def apply(algo: str, workload: Workload, config: KernelConfig, trace: Trace) -> Trace:
    """``trace`` with each launch's registers set to its compiled count where known."""
    if config.warp_specialize:  # the Gluon v3 sets its own (setmaxnreg): none measured
        return trace
    launches = tuple(
        dataclasses.replace(launch, regs_per_thread=regs)
        if (regs := COMPILED_REGS.get(key(algo, workload, config, launch.name))) is not None
        else launch
        for launch in trace.launches
    )
    return dataclasses.replace(trace, launches=launches)
