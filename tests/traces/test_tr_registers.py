"""Compiled register counts: the table equals what Triton and Nsight Compute read, and
build uses it."""

from __future__ import annotations

import json
from pathlib import Path

from tilesim.hwmodels import load_gpu
from tilesim.traces import build, registers
from tilesim.traces.tiles import regs_estimate
from tilesim.traces.workload import KernelConfig, Workload

RESULTS = Path(__file__).resolve().parents[2] / "validate" / "results"


def _measured_kernels():
    """(algo, workload, config, launch, registers) of every kernel a results file read:
    Nsight Compute's cases and `validate.registers`' (whose Gluon kernels, which set
    their registers per warp, occupancy does not read)."""
    gpu = load_gpu("h200")
    paths = sorted(RESULTS.glob("*-ncu.json")) + sorted(RESULTS.glob("*-registers.json"))
    for path in paths:
        for case in json.loads(path.read_text())["cases"]:
            w, c = Workload(**case["workload"]), KernelConfig(**case["config"])
            if path.name.endswith("-registers.json") and c.warp_specialize:
                continue
            launches = build(case["algo"], w, gpu, c).launches
            for launch, kern in zip(launches, case["kernels"][-len(launches) :], strict=True):
                yield case["algo"], w, c, launch, int(kern["registers_per_thread"])


def test_table_is_what_was_measured_and_build_applies_it():
    seen = set()
    for algo, w, c, launch, regs in _measured_kernels():
        k = registers.key(algo, w, c, launch.name)
        assert registers.COMPILED_REGS[k] == regs, k
        assert launch.regs_per_thread == regs, k  # build() put it in the trace
        seen.add(k)
    assert seen == set(registers.COMPILED_REGS)  # no entry without its measurement


def test_unmeasured_kernels_keep_the_estimate(h100):
    # v2's backward at d=64 was measured with 3 stages (191 registers in dK/dV, causal);
    # a 2-stage build was not
    w = Workload(4, 32, 4096, 4096, 64, causal=True, pass_="bwd")

    def dkdv(stages):
        c = KernelConfig(64, 64, 4, stages, "wgmma")
        return next(x for x in build("v2", w, h100, c).launches if x.name == "bwd_dkdv")

    assert dkdv(2).regs_per_thread == regs_estimate(2 * 64 * 64 + 64 * 64, 128)
    assert dkdv(3).regs_per_thread == 191


def test_spill_table_is_what_the_sass_says_and_build_applies_it():
    """Each entry is the spill waits of the kernel's innermost MMA loop, as measured."""
    gpu = load_gpu("h200")
    seen = {}
    for path in sorted(RESULTS.glob("*-registers.json")):
        for case in json.loads(path.read_text())["cases"]:
            w, c = Workload(**case["workload"]), KernelConfig(**case["config"])
            launches = build(case["algo"], w, gpu, c).launches
            for launch, kern in zip(launches, case["kernels"][-len(launches) :], strict=True):
                mma = [x for x in kern["sass_loops"] if "HGMMA" in x["ops"]]
                inner = min(mma, key=lambda x: x["instructions"]) if mma else {}
                covers = tuple(inner.get("spill_reload_waits", ()))
                assert launch.spill_reload_covers == covers, (case["algo"], w, launch.name)
                if covers:
                    seen[registers.key(case["algo"], w, c, launch.name)] = covers
    assert seen == registers.SPILL_RELOAD_COVERS


def test_issue_table_is_the_replay_of_the_compiled_kernels_and_build_applies_it():
    """ISSUE_CYCLES equals validate/results/*-issue.json (validate/issue.py on the SASS
    dump), each row on the launch it was compiled for."""
    gpu = load_gpu("h200")
    kernels = {}
    for path in sorted(RESULTS.glob("*-registers.json")):
        for case in json.loads(path.read_text())["cases"]:
            kernels[json.dumps([case["algo"], case["workload"], case["config"]])] = len(
                case["kernels"]
            )
    seen = {}
    for path in sorted(RESULTS.glob("*-issue.json")):
        for row in json.loads(path.read_text())["kernels"]:
            w, c = Workload(**row["workload"]), KernelConfig(**row["config"])
            launches = build(row["algo"], w, gpu, c).launches
            n = kernels[json.dumps([row["algo"], row["workload"], row["config"]])]
            launch = launches[row["kernel_index"] - (n - len(launches))]
            step = tuple(round(x, 1) for x in row.get("loop", ()))
            cta = tuple(round(x, 1) for x in row.get("rest", row.get("kernel", ())))
            assert (launch.issue_per_step, launch.issue_per_cta) == (step, cta), launch.name
            seen[registers.issue_key(row["algo"], w, c, launch.name)] = (step, cta)
    assert seen == registers.ISSUE_CYCLES
