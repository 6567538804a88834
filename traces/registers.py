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


# ``issue_key``s -> the kernel's issue cycles at 1..4 warps per scheduler (validate/issue.py on
# validate/results/*-issue.json): per step of its innermost MMA loop, and once per CTA
# (the rest of the kernel; all of it where it has no such loop, and then no per-step).
# For the Gluon v3 (warp-specialised): its consumer partition, its mask once per CTA.
# fmt: off
ISSUE_CYCLES: dict[tuple, tuple[tuple[float, ...], tuple[float, ...]]] = {
    ('standard', 'bwd', 'bwd_dk', 128, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((487.0, 778.0, 1090.5, 1417.0), (1043.0, 1871.0, 2699.0, 3549.0)),
    ('standard', 'bwd', 'bwd_dk', 128, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((487.0, 778.0, 1090.5, 1417.0), (1043.0, 1871.0, 2699.0, 3549.0)),
    ('standard', 'bwd', 'bwd_dk', 64, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((559.0, 814.0, 1147.0, 1488.0), (802.0, 1423.0, 2069.0, 2733.0)),
    ('standard', 'bwd', 'bwd_dk', 64, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((559.0, 814.0, 1147.0, 1488.0), (802.0, 1423.0, 2069.0, 2733.0)),
    ('standard', 'bwd', 'bwd_dp', 128, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (1142.0, 1800.0, 2521.0, 3282.0)),
    ('standard', 'bwd', 'bwd_dp', 128, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (1142.0, 1800.0, 2521.0, 3282.0)),
    ('standard', 'bwd', 'bwd_dp', 64, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (972.0, 1506.0, 2130.0, 2762.0)),
    ('standard', 'bwd', 'bwd_dp', 64, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (972.0, 1506.0, 2130.0, 2762.0)),
    ('standard', 'bwd', 'bwd_dq', 128, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((583.0, 706.0, 905.5, 1138.0), (1261.0, 1924.0, 2710.0, 3543.0)),
    ('standard', 'bwd', 'bwd_dq', 128, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((583.0, 706.0, 905.5, 1138.0), (1261.0, 1924.0, 2710.0, 3543.0)),
    ('standard', 'bwd', 'bwd_dq', 64, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((413.0, 522.0, 695.0, 867.5), (901.0, 1367.0, 1920.0, 2501.0)),
    ('standard', 'bwd', 'bwd_dq', 64, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((413.0, 522.0, 695.0, 867.5), (901.0, 1367.0, 1920.0, 2501.0)),
    ('standard', 'bwd', 'bwd_dv', 128, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((487.0, 778.0, 1090.5, 1417.0), (1043.0, 1871.0, 2699.0, 3549.0)),
    ('standard', 'bwd', 'bwd_dv', 128, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((487.0, 778.0, 1090.5, 1417.0), (1043.0, 1871.0, 2699.0, 3549.0)),
    ('standard', 'bwd', 'bwd_dv', 64, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((559.0, 814.0, 1147.0, 1488.0), (802.0, 1423.0, 2069.0, 2733.0)),
    ('standard', 'bwd', 'bwd_dv', 64, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((559.0, 814.0, 1147.0, 1488.0), (802.0, 1423.0, 2069.0, 2733.0)),
    ('standard', 'fwd', 'pv', 128, False, 'bf16', 128, 128, 8, 2, 'wgmma', None, False):
        ((602.0, 727.0, 918.0, 1137.5), (1158.0, 1703.0, 2334.0, 3043.0)),
    ('standard', 'fwd', 'pv', 128, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((602.0, 727.0, 918.0, 1137.5), (1158.0, 1703.0, 2334.0, 3043.0)),
    ('standard', 'fwd', 'pv', 128, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((602.0, 727.0, 918.0, 1137.5), (1158.0, 1703.0, 2334.0, 3043.0)),
    ('standard', 'fwd', 'pv', 64, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((423.0, 534.0, 694.0, 870.5), (876.0, 1299.0, 1801.0, 2380.0)),
    ('standard', 'fwd', 'pv', 64, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((423.0, 534.0, 694.0, 870.5), (876.0, 1299.0, 1801.0, 2380.0)),
    ('standard', 'fwd', 'qk', 128, False, 'bf16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (1142.0, 1800.0, 2521.0, 3282.0)),
    ('standard', 'fwd', 'qk', 128, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (1142.0, 1800.0, 2521.0, 3282.0)),
    ('standard', 'fwd', 'qk', 128, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (1142.0, 1800.0, 2521.0, 3282.0)),
    ('standard', 'fwd', 'qk', 64, False, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (972.0, 1506.0, 2130.0, 2762.0)),
    ('standard', 'fwd', 'qk', 64, True, 'fp16', 128, 128, 8, 2, 'wgmma', None, False):
        ((), (972.0, 1506.0, 2130.0, 2762.0)),
    ('v1', 'bwd', 'flash_v1_bwd', 128, False, 'fp16', 64, 64, 8, 1, 'wgmma', None, False):
        ((3082.0, 4441.0, 6033.0, 7448.5), (1597.0, 2489.0, 3469.0, 4489.0)),
    ('v1', 'bwd', 'flash_v1_bwd', 128, True, 'fp16', 64, 64, 8, 1, 'wgmma', None, False):
        ((3279.0, 4760.0, 6297.5, 8003.0), (1634.0, 2560.0, 3547.0, 4578.0)),
    ('v1', 'bwd', 'flash_v1_bwd', 64, False, 'fp16', 64, 64, 4, 1, 'wgmma', None, False):
        ((2519.0, 3828.0, 5336.0, 6846.0), (1300.0, 2061.0, 2920.0, 3769.0)),
    ('v1', 'bwd', 'flash_v1_bwd', 64, True, 'fp16', 64, 64, 4, 1, 'wgmma', None, False):
        ((2688.0, 4038.0, 5408.0, 6738.0), (1343.0, 2152.0, 2939.0, 3887.0)),
    ('v1', 'fwd', 'flash_v1', 128, False, 'bf16', 64, 64, 4, 1, 'wgmma', None, False):
        ((3283.0, 4903.0, 6740.0, 8746.0), (939.0, 1540.0, 2186.0, 2827.0)),
    ('v1', 'fwd', 'flash_v1', 128, False, 'fp16', 64, 64, 4, 1, 'wgmma', None, False):
        ((3283.0, 4903.0, 6740.0, 8746.0), (939.0, 1540.0, 2186.0, 2827.0)),
    ('v1', 'fwd', 'flash_v1', 128, True, 'fp16', 64, 64, 4, 1, 'wgmma', None, False):
        ((3416.0, 5035.0, 7010.0, 9058.5), (979.0, 1590.0, 2243.0, 2930.0)),
    ('v1', 'fwd', 'flash_v1', 64, False, 'fp16', 64, 128, 4, 1, 'wgmma', None, False):
        ((3434.0, 4768.0, 6542.0, 8517.0), (923.0, 1503.0, 2126.0, 2767.0)),
    ('v1', 'fwd', 'flash_v1', 64, True, 'fp16', 64, 128, 4, 1, 'wgmma', None, False):
        ((3570.0, 5131.0, 7128.0, 9299.0), (994.0, 1593.0, 2262.0, 2927.0)),
    ('v2', 'bwd', 'bwd_dkdv', 128, False, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((1013.0, 1465.0, 2040.0, 2579.5), (1899.0, 2759.0, 3739.0, 4794.0)),
    ('v2', 'bwd', 'bwd_dkdv', 128, True, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((1071.0, 1539.0, 2133.0, 2670.0), (2710.0, 4081.0, 5657.0, 7396.5)),
    ('v2', 'bwd', 'bwd_dkdv', 64, False, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((896.0, 1325.0, 1855.0, 2383.0), (1090.0, 1617.0, 2184.0, 2792.0)),
    ('v2', 'bwd', 'bwd_dkdv', 64, True, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((912.0, 1352.0, 1881.0, 2415.0), (1695.0, 2450.0, 3340.0, 4242.0)),
    ('v2', 'bwd', 'bwd_dq', 128, False, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((708.0, 1120.0, 1579.0, 2038.5), (1148.0, 1730.0, 2391.0, 3114.0)),
    ('v2', 'bwd', 'bwd_dq', 128, True, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((789.0, 1274.0, 1792.0, 2282.5), (1667.0, 2500.5, 3442.0, 4442.0)),
    ('v2', 'bwd', 'bwd_dq', 64, False, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((583.0, 980.0, 1369.0, 1727.0), (735.0, 1132.0, 1547.0, 2026.0)),
    ('v2', 'bwd', 'bwd_dq', 64, True, 'fp16', 64, 64, 4, 3, 'wgmma', None, False):
        ((588.0, 952.0, 1346.0, 1757.0), (1017.0, 1547.0, 2116.0, 2741.5)),
    ('v2', 'fwd', 'flash_v2', 128, False, 'bf16', 128, 128, 8, 3, 'wgmma', None, False):
        ((1364.0, 2034.0, 2667.0, 3273.0), (2381.0, 3466.0, 4594.0, 5758.0)),
    ('v2', 'fwd', 'flash_v2', 128, False, 'fp16', 128, 128, 8, 3, 'wgmma', None, False):
        ((1364.0, 2034.0, 2667.0, 3273.0), (2381.0, 3466.0, 4594.0, 5758.0)),
    ('v2', 'fwd', 'flash_v2', 128, True, 'fp16', 128, 128, 8, 3, 'wgmma', None, False):
        ((1323.0, 2057.0, 2848.0, 3385.0), (2995.0, 4548.0, 6016.0, 7827.0)),
    ('v2', 'fwd', 'flash_v2', 64, False, 'fp16', 128, 128, 8, 3, 'wgmma', None, False):
        ((1248.0, 1951.0, 2623.0, 3195.0), (2011.0, 2727.0, 3489.0, 4291.0)),
    ('v2', 'fwd', 'flash_v2', 64, True, 'fp16', 128, 128, 8, 3, 'wgmma', None, False):
        ((1269.0, 1914.0, 2549.0, 3074.0), (2484.0, 3629.0, 4834.0, 6272.0)),
    ('v3', 'fwd', 'flash_v3', 128, False, 'bf16', 128, 128, 8, 3, 'wgmma', None, True):
        ((1329.0, 2217.0, 3120.0, 4031.5), (2063.0, 3430.0, 4782.0, 6151.0)),
    ('v3', 'fwd', 'flash_v3', 128, False, 'fp16', 128, 128, 8, 3, 'wgmma', None, True):
        ((1329.0, 2217.0, 3120.0, 4031.5), (2063.0, 3430.0, 4782.0, 6151.0)),
    ('v3', 'fwd', 'flash_v3', 128, False, 'fp8', 128, 128, 8, 3, 'wgmma', None, True):
        ((1290.0, 2199.0, 3103.5, 4038.0), (2230.0, 3641.0, 5055.0, 6457.0)),
    ('v3', 'fwd', 'flash_v3', 128, True, 'fp16', 128, 128, 8, 3, 'wgmma', None, True):
        ((1352.0, 2096.5, 2924.0, 3773.0), (2981.0, 4860.0, 6465.0, 8298.0)),
    ('v3', 'fwd', 'flash_v3', 128, True, 'fp8', 128, 128, 8, 3, 'wgmma', None, True):
        ((1311.0, 2119.0, 2997.0, 3854.5), (3082.0, 5075.0, 6772.0, 8432.0)),
    ('v3', 'fwd', 'flash_v3', 64, False, 'fp16', 128, 128, 8, 3, 'wgmma', None, True):
        ((1221.0, 2037.0, 2874.0, 3713.0), (1719.0, 2836.0, 3964.0, 5004.0)),
    ('v3', 'fwd', 'flash_v3', 64, False, 'fp8', 128, 128, 8, 3, 'wgmma', None, True):
        ((1189.0, 1907.0, 2703.5, 3506.0), (1844.0, 2869.0, 3985.0, 5141.0)),
    ('v3', 'fwd', 'flash_v3', 64, True, 'fp16', 128, 128, 8, 3, 'wgmma', None, True):
        ((1234.0, 1933.0, 2710.0, 3499.5), (2657.0, 4234.0, 5593.0, 7005.0)),
    ('v3', 'fwd', 'flash_v3', 64, True, 'fp8', 128, 128, 8, 3, 'wgmma', None, True):
        ((1242.0, 2007.0, 2839.5, 3701.0), (2794.0, 4550.0, 5974.0, 7478.0)),
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


def issue_key(algo: str, workload: Workload, config: KernelConfig, launch: str) -> tuple:
    """``key`` and whether the kernel is warp-specialised: a Gluon v3 and a Triton v3
    of the same tiles are different code."""
    return (*key(algo, workload, config, launch), config.warp_specialize)


def apply(algo: str, workload: Workload, config: KernelConfig, trace: Trace) -> Trace:
    """``trace`` with each launch's registers set to its compiled count, its spill
    reloads and its issue cycles, where known."""
    launches = []
    for launch in trace.launches:
        k = key(algo, workload, config, launch.name)
        # the Gluon v3 sets its partitions' registers itself (setmaxnreg): none measured
        regs = None if config.warp_specialize else COMPILED_REGS.get(k)
        step, cta = ISSUE_CYCLES.get(issue_key(algo, workload, config, launch.name), ((), ()))
        if regs is not None:
            launch = dataclasses.replace(
                launch,
                regs_per_thread=regs,
                spill_reload_covers=SPILL_RELOAD_COVERS.get(k, ()),
            )
        if step or cta:
            launch = dataclasses.replace(launch, issue_per_step=step, issue_per_cta=cta)
        launches.append(launch)
    return dataclasses.replace(trace, launches=tuple(launches))
