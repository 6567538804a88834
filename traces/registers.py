"""Registers per thread of tilesim's kernels as compiled, where they were measured.

A trace generator estimates a launch's registers from the accumulators it holds
(`tiles.regs_estimate`); only occupancy reads the figure, and the compiler decides
the real one. For every kernel variant of the validation grid (Triton 3.6,
sm_90a, on the H200) the compiled count is known: Triton's compiled kernel
(``validate/registers.py``, ``validate/results/*-registers.json``) and Nsight
Compute (``launch__registers_per_thread`` in ``validate/results/*-ncu.json``)
read it, and agree wherever both did. `build` uses that count instead of the
estimate for every shape that compiles to the same kernel: the same algorithm,
pass, launch, head dim, mask, element type, tiles and MMA path (and, for the
standard softmax kernels, the same row plan). The estimate was low by 10-100
registers, enough to give v1, v2's backward and the causal kernels one CTA per SM
more than they get (v1's causal forward at d = 64: 235, the estimate 136).
``tests/traces/test_tr_registers.py`` keeps this table equal to those files.

The same files hold each kernel's SASS loop bodies (``validate/sass.py``). Where
the compiler spilled registers inside the loop that holds the MMAs, the warps wait
on reloads from local memory every step: ``SPILL_RELOAD_COVERS`` lists, per such
wait, the cycles the warp issued for after its reloads went out. v1's backward at
d = 128 (8 warps, 255 registers, 44 bytes of spills per thread) waits 8 times a
step (6 causal). On the H200 the eight instructions that wait on them hold 23%
of the kernel's Nsight Compute stall samples, all "long scoreboard" (one of them
also waits on a tile load; ``validate/results/logs/*-src-sass.json``): the reloads
go to L2, the kernel's tiles streaming through L1 having evicted the spilled lines.
v1's d = 64 build reloads outside that loop only. The simulator charges each wait an L2 round trip at the
L2's present load, less its cover (``simulator/sm.py``).
"""

from __future__ import annotations

import dataclasses

from .ir import Trace
from .standard import softmax_fwd_plan, softmax_plan
from .workload import KernelConfig, Workload

# (algo, pass, launch, head_dim, causal, dtype, block_m, block_n, num_warps, num_stages,
#  mma path, softmax row plan or None) -> registers per thread. Measured on sm_90 (wgmma
# path): an Ampere build (mma_sync) compiles to other code.
# fmt: off
COMPILED_REGS: dict[tuple, int] = {
    ("standard", "bwd", "bwd_dk", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 64,
    ("standard", "bwd", "bwd_dp", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 113,
    ("standard", "bwd", "bwd_dq", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 88,
    ("standard", "bwd", "bwd_dv", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 64,
    ("standard", "bwd", "bwd_softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4)): 31,
    ("standard", "bwd", "bwd_softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4)): 48,
    ("standard", "bwd", "bwd_softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8)): 48,
    ("standard", "bwd", "bwd_softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4)): 21,
    ("standard", "bwd", "bwd_softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16)): 48,
    ("standard", "bwd", "bwd_softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (8192, 2, 16)): 39,
    ("standard", "bwd", "bwd_dk", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 64,
    ("standard", "bwd", "bwd_dp", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 113,
    ("standard", "bwd", "bwd_dq", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 88,
    ("standard", "bwd", "bwd_dv", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 64,
    ("standard", "bwd", "bwd_softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4)): 31,
    ("standard", "bwd", "bwd_softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4)): 48,
    ("standard", "bwd", "bwd_softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8)): 48,
    ("standard", "bwd", "bwd_softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4)): 21,
    ("standard", "bwd", "bwd_softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16)): 48,
    ("standard", "bwd", "bwd_softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 2, 16)): 39,
    ("standard", "bwd", "bwd_dk", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 123,
    ("standard", "bwd", "bwd_dp", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 117,
    ("standard", "bwd", "bwd_dq", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 127,
    ("standard", "bwd", "bwd_dv", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 123,
    ("standard", "bwd", "bwd_softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4)): 31,
    ("standard", "bwd", "bwd_softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4)): 48,
    ("standard", "bwd", "bwd_softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8)): 48,
    ("standard", "bwd", "bwd_softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4)): 21,
    ("standard", "bwd", "bwd_softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16)): 48,
    ("standard", "bwd", "bwd_softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (8192, 2, 16)): 39,
    ("standard", "bwd", "bwd_dk", 128, True, "fp16", 128, 128, 8, 2, "wgmma", None): 123,
    ("standard", "bwd", "bwd_dp", 128, True, "fp16", 128, 128, 8, 2, "wgmma", None): 117,
    ("standard", "bwd", "bwd_dq", 128, True, "fp16", 128, 128, 8, 2, "wgmma", None): 127,
    ("standard", "bwd", "bwd_dv", 128, True, "fp16", 128, 128, 8, 2, "wgmma", None): 123,
    ("standard", "bwd", "bwd_softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4)): 31,
    ("standard", "bwd", "bwd_softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4)): 48,
    ("standard", "bwd", "bwd_softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8)): 48,
    ("standard", "bwd", "bwd_softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4)): 21,
    ("standard", "bwd", "bwd_softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16)): 48,
    ("standard", "bwd", "bwd_softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 2, 16)): 39,
    ("standard", "fwd", "pv", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 88,
    ("standard", "fwd", "qk", 64, False, "fp16", 128, 128, 8, 2, "wgmma", None): 113,
    ("standard", "fwd", "softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4, 1)): 22,
    ("standard", "fwd", "softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (16384, 1, 16, 1)): 63,
    ("standard", "fwd", "softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4, 1)): 30,
    ("standard", "fwd", "softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8, 1)): 32,
    ("standard", "fwd", "softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4, 1)): 19,
    ("standard", "fwd", "softmax", 64, False, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16, 1)): 32,
    ("standard", "fwd", "pv", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 88,
    ("standard", "fwd", "qk", 64, True, "fp16", 128, 128, 8, 2, "wgmma", None): 113,
    ("standard", "fwd", "softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4, 3)): 26,
    ("standard", "fwd", "softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4, 3)): 32,
    ("standard", "fwd", "softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8, 3)): 32,
    ("standard", "fwd", "softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4, 3)): 21,
    ("standard", "fwd", "softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16, 3)): 32,
    ("standard", "fwd", "softmax", 64, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 2, 16, 1)): 40,
    ("standard", "fwd", "pv", 128, False, "bf16", 128, 128, 8, 2, "wgmma", None): 128,
    ("standard", "fwd", "qk", 128, False, "bf16", 128, 128, 8, 2, "wgmma", None): 117,
    ("standard", "fwd", "softmax", 128, False, "bf16", 128, 128, 8, 2, "wgmma", (1024, 1, 4, 1)): 22,
    ("standard", "fwd", "softmax", 128, False, "bf16", 128, 128, 8, 2, "wgmma", (8192, 1, 16, 1)): 32,
    ("standard", "fwd", "pv", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 128,
    ("standard", "fwd", "qk", 128, False, "fp16", 128, 128, 8, 2, "wgmma", None): 117,
    ("standard", "fwd", "softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4, 1)): 22,
    ("standard", "fwd", "softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (16384, 1, 16, 1)): 63,
    ("standard", "fwd", "softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4, 1)): 30,
    ("standard", "fwd", "softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8, 1)): 32,
    ("standard", "fwd", "softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4, 1)): 19,
    ("standard", "fwd", "softmax", 128, False, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16, 1)): 32,
    ("standard", "fwd", "pv", 128, True, "fp16", 128, 128, 8, 2, "wgmma", None): 128,
    ("standard", "fwd", "qk", 128, True, "fp16", 128, 128, 8, 2, "wgmma", None): 117,
    ("standard", "fwd", "softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (1024, 1, 4, 3)): 26,
    ("standard", "fwd", "softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (2048, 1, 4, 3)): 32,
    ("standard", "fwd", "softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (4096, 1, 8, 3)): 32,
    ("standard", "fwd", "softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (512, 1, 4, 3)): 21,
    ("standard", "fwd", "softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 1, 16, 3)): 32,
    ("standard", "fwd", "softmax", 128, True, "fp16", 128, 128, 8, 2, "wgmma", (8192, 2, 16, 1)): 40,
    ("v1", "bwd", "flash_v1_bwd", 64, False, "fp16", 64, 64, 4, 1, "wgmma", None): 255,
    ("v1", "bwd", "flash_v1_bwd", 64, True, "fp16", 64, 64, 4, 1, "wgmma", None): 255,
    ("v1", "bwd", "flash_v1_bwd", 128, False, "fp16", 64, 64, 4, 1, "wgmma", None): 255,
    ("v1", "bwd", "flash_v1_bwd", 128, False, "fp16", 64, 64, 8, 1, "wgmma", None): 255,
    ("v1", "bwd", "flash_v1_bwd", 128, True, "fp16", 64, 64, 8, 1, "wgmma", None): 255,
    ("v1", "fwd", "flash_v1", 64, False, "fp16", 64, 128, 4, 1, "wgmma", None): 180,
    ("v1", "fwd", "flash_v1", 64, True, "fp16", 64, 128, 4, 1, "wgmma", None): 235,
    ("v1", "fwd", "flash_v1", 128, False, "bf16", 64, 64, 4, 1, "wgmma", None): 236,
    ("v1", "fwd", "flash_v1", 128, False, "fp16", 64, 64, 4, 1, "wgmma", None): 236,
    ("v1", "fwd", "flash_v1", 128, True, "fp16", 64, 64, 4, 1, "wgmma", None): 239,
    ("v2", "bwd", "bwd_dkdv", 64, False, "fp16", 64, 64, 4, 3, "wgmma", None): 189,
    ("v2", "bwd", "bwd_dq", 64, False, "fp16", 64, 64, 4, 3, "wgmma", None): 125,
    ("v2", "bwd", "bwd_preprocess", 64, False, "fp16", 64, 64, 4, 3, "wgmma", None): 32,
    ("v2", "bwd", "bwd_dkdv", 64, True, "fp16", 64, 64, 4, 3, "wgmma", None): 191,
    ("v2", "bwd", "bwd_dq", 64, True, "fp16", 64, 64, 4, 3, "wgmma", None): 126,
    ("v2", "bwd", "bwd_preprocess", 64, True, "fp16", 64, 64, 4, 3, "wgmma", None): 32,
    ("v2", "bwd", "bwd_dkdv", 128, False, "fp16", 64, 64, 4, 3, "wgmma", None): 255,
    ("v2", "bwd", "bwd_dq", 128, False, "fp16", 64, 64, 4, 3, "wgmma", None): 166,
    ("v2", "bwd", "bwd_preprocess", 128, False, "fp16", 64, 64, 4, 3, "wgmma", None): 40,
    ("v2", "bwd", "bwd_dkdv", 128, True, "fp16", 64, 64, 4, 3, "wgmma", None): 255,
    ("v2", "bwd", "bwd_dq", 128, True, "fp16", 64, 64, 4, 3, "wgmma", None): 183,
    ("v2", "bwd", "bwd_preprocess", 128, True, "fp16", 64, 64, 4, 3, "wgmma", None): 40,
    ("v2", "fwd", "flash_v2", 64, False, "fp16", 128, 128, 8, 3, "wgmma", None): 166,
    ("v2", "fwd", "flash_v2", 64, True, "fp16", 128, 128, 8, 3, "wgmma", None): 169,
    ("v2", "fwd", "flash_v2", 128, False, "bf16", 128, 128, 8, 3, "wgmma", None): 188,
    ("v2", "fwd", "flash_v2", 128, False, "fp16", 128, 128, 8, 3, "wgmma", None): 188,
    ("v2", "fwd", "flash_v2", 128, True, "fp16", 128, 128, 8, 3, "wgmma", None): 219,
    ("v3", "fwd", "flash_v3", 64, True, "fp16", 128, 128, 8, 3, "wgmma", None): 163,
    ("v3", "fwd", "flash_v3", 128, False, "fp8", 128, 128, 8, 3, "wgmma", None): 175,
    ("v3", "fwd", "transpose_v", 128, False, "fp8", 128, 128, 8, 3, "wgmma", None): 32,
}
# fmt: on

# Same keys -> per step of the kernel's innermost MMA loop, the issue cycles covering
# each wait on spill reloads (the ``spill_reload_waits`` of that loop's SASS body).
# fmt: off
SPILL_RELOAD_COVERS: dict[tuple, tuple[int, ...]] = {
    ("v1", "bwd", "flash_v1_bwd", 128, False, "fp16", 64, 64, 8, 1, "wgmma", None):
        (1, 195, 79, 9, 127, 44, 33, 9),
    ("v1", "bwd", "flash_v1_bwd", 128, True, "fp16", 64, 64, 8, 1, "wgmma", None):
        (11, 95, 71, 42, 24, 270),
}
# fmt: on


def key(algo: str, workload: Workload, config: KernelConfig, launch: str) -> tuple:
    w, c = workload, config
    # the softmax kernels compile per row plan (block, passes, warps, ...): their
    # registers change with N
    plan = (
        tuple(softmax_fwd_plan(w.seqlen_kv, w.causal))
        if launch == "softmax"
        else tuple(softmax_plan(w.seqlen_kv))
        if launch == "bwd_softmax"
        else None
    )
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
    """``trace`` with each launch's registers set to its compiled count, and its spill
    reloads, where known."""
    if config.warp_specialize:  # the Gluon v3 sets its own (setmaxnreg): none measured
        return trace
    launches = []
    for launch in trace.launches:
        k = key(algo, workload, config, launch.name)
        regs = COMPILED_REGS.get(k)
        if regs is not None:
            launch = dataclasses.replace(
                launch, regs_per_thread=regs, spill_reload_covers=SPILL_RELOAD_COVERS.get(k, ())
            )
        launches.append(launch)
    return dataclasses.replace(trace, launches=tuple(launches))
