"""Compiled register counts: the table equals what Nsight Compute read, and build uses it."""

from __future__ import annotations

import json
from pathlib import Path

from tilesim.hwmodels import load_gpu
from tilesim.traces import build, registers
from tilesim.traces.tiles import regs_estimate
from tilesim.traces.workload import KernelConfig, Workload

RESULTS = Path(__file__).resolve().parents[2] / "validate" / "results"


def _ncu_kernels():
    gpu = load_gpu("h200")
    for path in sorted(RESULTS.glob("*-ncu.json")):
        for case in json.loads(path.read_text())["cases"]:
            w, c = Workload(**case["workload"]), KernelConfig(**case["config"])
            launches = build(case["algo"], w, gpu, c).launches
            for launch, kern in zip(launches, case["kernels"][-len(launches) :], strict=True):
                yield case["algo"], w, c, launch, int(kern["registers_per_thread"])


def test_table_is_what_ncu_read_and_build_applies_it():
    seen = set()
    for algo, w, c, launch, regs in _ncu_kernels():
        k = registers.key(algo, w, c, launch.name)
        assert registers.COMPILED_REGS[k] == regs, k
        assert launch.regs_per_thread == regs, k  # build() put it in the trace
        seen.add(k)
    assert seen == set(registers.COMPILED_REGS)  # no entry without its measurement


def test_unmeasured_kernels_keep_the_estimate(h100):
    # v2's backward at d=64 non-causal was measured (189 registers in dK/dV); causal was not
    w = Workload(4, 32, 4096, 4096, 64, causal=True, pass_="bwd")
    c = KernelConfig(64, 64, 4, 3, "wgmma")
    dkdv = next(x for x in build("v2", w, h100, c).launches if x.name == "bwd_dkdv")
    assert dkdv.regs_per_thread == regs_estimate(2 * 64 * 64 + 64 * 64, 128)
    full = next(
        x
        for x in build("v2", Workload(4, 32, 4096, 4096, 64, pass_="bwd"), h100, c).launches
        if x.name == "bwd_dkdv"
    )
    assert full.regs_per_thread == 189
