"""The kernel profile: compiled on the CPU, it equals what the GPU compiled and measured,
covers every variant the CLI selects, and build applies it (or says it estimated)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.profiles import for_arch, from_dict
from tilesim.traces import build
from tilesim.traces.compiled import NO_PROFILE, NOT_COVERED, variant_of
from tilesim.traces.config import default_config
from tilesim.traces.tiles import regs_estimate
from tilesim.traces.workload import KernelConfig, Workload

RESULTS = Path(__file__).resolve().parents[2] / "results" / "raw"
DERIVED = RESULTS.parent / "derived"
GMMA = ("HGMMA", "QGMMA")


@pytest.fixture(scope="module")
def profile():
    return for_arch("hopper")


@pytest.fixture(scope="module")
def h200():
    return load_gpu("h200")


def _measured(pattern: str):
    """(algo, workload, config, launch, measured kernel) of every kernel a results file read,
    on the trace launch it ran (a backward case's forward kernels left out)."""
    gpu = load_gpu("h200")
    for path in sorted(RESULTS.glob(pattern)):
        for case in json.loads(path.read_text())["cases"]:
            w, c = Workload(**case["workload"]), KernelConfig(**case["config"])
            launches = build(case["algo"], w, gpu, c).launches
            for launch, kern in zip(launches, case["kernels"][-len(launches) :], strict=True):
                yield case["algo"], w, c, launch, kern


def test_profile_is_what_the_gpu_compiled_and_build_applies_it(profile):
    """Registers, spills and SASS loop sizes of every kernel the H200 compiled (Triton 3.6)."""
    n = 0
    for algo, w, c, launch, kern in _measured("*-registers.json"):
        facts = profile.get(variant_of(algo, w, c, launch.name))
        assert facts is not None, (algo, w, launch.name)
        assert facts.registers_per_thread == kern["registers_per_thread"]
        # the file's field holds Triton's n_spills: 4-byte words
        assert facts.local_bytes_per_thread == 4 * kern["local_bytes_per_thread"]
        assert list(facts.sass_loop_instructions) == [x["instructions"] for x in kern["sass_loops"]]
        assert launch.estimated == ""
        if not c.warp_specialize:  # the Gluon v3 keeps its setmaxnreg figure
            assert launch.regs_per_thread == facts.registers_per_thread
        n += 1
    assert n == 237


def test_profile_registers_equal_nsight_computes(profile):
    """Registers Nsight Compute read, unless a later GPU compile of the same variant
    (a registers file of a later date: the kernel changed since) says otherwise."""
    newest = {}  # variant -> (file date, registers)
    for pattern in ("*-ncu.json", "*-registers.json"):
        for path in sorted(RESULTS.glob(pattern)):
            date = path.name[:10]
            for algo, w, c, launch, kern in _measured(path.name):
                v = variant_of(algo, w, c, launch.name)
                if v not in newest or newest[v][0] < date:
                    newest[v] = (date, kern["registers_per_thread"])
    n = 0
    for algo, w, c, launch, _ in _measured("*-ncu.json"):
        facts = profile.get(variant_of(algo, w, c, launch.name))
        assert facts.registers_per_thread == newest[variant_of(algo, w, c, launch.name)][1], (
            algo,
            launch.name,
        )
        n += 1
    assert n > 40


def test_spill_covers_are_the_sass_waits_and_build_applies_them(profile):
    seen = 0
    for algo, w, c, launch, kern in _measured("*-registers.json"):
        mma = [x for x in kern["sass_loops"] if any(op.startswith(GMMA) for op in x["ops"])]
        inner = min(mma, key=lambda x: x["instructions"]) if mma else {}
        covers = tuple(inner.get("spill_reload_waits", ()))
        assert profile.get(variant_of(algo, w, c, launch.name)).spill_reload_covers == covers
        assert launch.spill_reload_covers == covers
        seen += bool(covers)
    assert seen == 2  # v1's backward at d = 128, causal and not


def test_issue_cycles_are_the_replay_of_the_gpu_compiled_sass(profile):
    """Equal to results/derived/*-issue.json (validate/issue.py on the H200's SASS dump)."""
    gpu = load_gpu("h200")
    kernels = {}
    for path in sorted(RESULTS.glob("*-registers.json")):
        for case in json.loads(path.read_text())["cases"]:
            kernels[json.dumps([case["algo"], case["workload"], case["config"]])] = len(
                case["kernels"]
            )
    rows = 0
    for path in sorted(DERIVED.glob("*-issue.json")):
        for row in json.loads(path.read_text())["kernels"]:
            w, c = Workload(**row["workload"]), KernelConfig(**row["config"])
            launches = build(row["algo"], w, gpu, c).launches
            n = kernels[json.dumps([row["algo"], row["workload"], row["config"]])]
            launch = launches[row["kernel_index"] - (n - len(launches))]
            step = tuple(round(x, 1) for x in row.get("loop", ()))
            cta = tuple(round(x, 1) for x in row.get("rest", row.get("kernel", ())))
            facts = profile.get(variant_of(row["algo"], w, c, launch.name))
            assert (facts.issue_per_step_cycles, facts.issue_per_cta_cycles) == (step, cta)
            assert (launch.issue_per_step, launch.issue_per_cta) == (step, cta), launch.name
            rows += 1
    assert rows == 179


def test_profile_covers_every_variant_the_cli_selects(profile):
    """Every default, kernel and named config of every algorithm, pass, head dim, dtype,
    mask and row plan is in the profile, or listed as failing to compile."""
    from tilesim.validate.profile import selectable_cases

    gpus = [load_gpu("h200"), load_gpu("h100")]
    missing = set()
    for algo, w, c in selectable_cases(gpus):
        for launch in build(algo, w, gpus[0], c, profile=None).launches:
            v = variant_of(algo, w, c, launch.name)
            if profile.get(v) is None and profile.failure(v) is None:
                missing.add(v)
    assert not missing, sorted(missing)[:5]


def test_a_variant_outside_the_profile_keeps_the_estimate_and_says_so(h100):
    # v2's backward at d=64 runs 3 stages by default; a 2-stage build is not in the profile
    w = Workload(4, 32, 4096, 4096, 64, causal=True, pass_="bwd")

    def dkdv(stages):
        c = KernelConfig(64, 64, 4, stages, "wgmma")
        return next(x for x in build("v2", w, h100, c).launches if x.name == "bwd_dkdv")

    assert dkdv(2).regs_per_thread == regs_estimate(2 * 64 * 64 + 64 * 64, 128)
    assert dkdv(2).estimated == NOT_COVERED
    assert dkdv(3).regs_per_thread == 191
    assert dkdv(3).estimated == ""


def test_without_a_profile_every_launch_is_estimated(a100, h200):
    w = Workload(2, 16, 2048, 2048, 128)
    assert {x.estimated for x in build("standard", w, a100).launches} == {
        NO_PROFILE.format(arch="ampere")
    }
    assert all(x.estimated for x in build("v2", w, h200, profile=None).launches)
    assert not any(x.estimated for x in build("v2", w, h200).launches)


def test_newly_covered_variants_take_their_compiled_facts(profile, h200):
    """bf16 with the causal mask, d = 256, bf16 backward: compiled, not estimated."""
    for algo, w in (
        ("v2", Workload(2, 16, 4096, 4096, 128, causal=True, dtype="bf16")),
        ("v2", Workload(2, 8, 4096, 4096, 256)),
        ("v2", Workload(2, 16, 4096, 4096, 128, dtype="bf16", pass_="bwd")),
        ("v3", Workload(2, 8, 4096, 4096, 256, dtype="fp8")),
    ):
        config = default_config(algo, w, h200)  # v3 at d = 256: the Triton kernel
        for launch in build(algo, w, h200, config).launches:
            assert launch.estimated == "", (algo, w, launch.name)


def test_profile_provenance_names_its_toolchain_and_target(profile):
    p = profile.provenance
    assert p.target == "sm_90a"
    assert p.toolchain.startswith("triton 3.6")
    assert "validate.profile" in p.command
    assert p.date and p.notes


def test_profile_round_trips_and_rejects_bad_files(profile):
    doc = profile.to_dict()
    assert from_dict(json.loads(json.dumps(doc))) == profile
    with pytest.raises(TilesimError, match="kind"):
        from_dict({**doc, "kind": "trace"})
    bad = dict(doc["entries"][0], variant={**doc["entries"][0]["variant"], "tiles": 3})
    with pytest.raises(TilesimError, match=r"entries\[0\]\.variant"):
        from_dict({**doc, "entries": [bad]})


def test_a_failed_variant_is_estimated_with_the_compile_error(profile, h200):
    if not profile.failures:
        pytest.skip("every variant compiled")
    v = min(profile.failures)
    n = {v.block_m: 1024, 16: 1040, 1: 1000}[v.seqlen_q_align]  # a shape of its class
    heads = 1 if v.single_head else 2048 // v.head_dim
    w = Workload(2, heads, n, n, v.head_dim, v.causal, v.dtype, v.pass_)
    fields = {
        f.name: getattr(v, f.name) for f in dataclasses.fields(KernelConfig) if hasattr(v, f.name)
    }
    c = KernelConfig(**{**fields, "v1_kernel": v.v1_kernel or "algorithm1"})
    launch = next(x for x in build(v.algo, w, h200, c).launches if x.name == v.launch)
    assert profile.failure(v) in launch.estimated


def test_an_n_off_the_tiles_takes_the_code_it_compiles_to(h200):
    """N = 1000 (not a multiple of 16) compiles bounds-checked code: v2's kernel holds 206
    registers, not 188. Standard's kernels compile the same code at any N (their rows
    are padded to 16: every bound they see is a multiple of 16)."""

    def launch(algo, n, i):
        return build(algo, Workload(2, 16, n, n, 128), h200).launches[i]

    aligned, ragged = launch("v2", 1024, 0), launch("v2", 1000, 0)
    assert (aligned.regs_per_thread, ragged.regs_per_thread) == (188, 206)
    assert aligned.issue_per_cta != ragged.issue_per_cta
    assert aligned.estimated == ragged.estimated == ""
    for i in range(3):
        a, r = launch("standard", 1024, i), launch("standard", 1000, i)
        assert (a.regs_per_thread, a.issue_per_step, a.issue_per_cta) == (
            r.regs_per_thread,
            r.issue_per_step,
            r.issue_per_cta,
        )


@pytest.mark.parametrize(
    "algo, n, causal, masked",
    [
        ("v2", 1024, False, False),
        ("v2", 1000, False, True),  # the partial last block: kernels/flash_v2.py's 2nd loop
        ("v2", 1040, False, True),
        ("v2", 1024, True, True),  # the diagonal
        ("v3", 1000, False, False),  # Gluon/Triton v3 masks inside its one loop
        ("v1", 1000, False, False),
    ],
)
def test_the_masked_loop_replay_follows_the_trace(algo, n, causal, masked, h200):
    """The profile charges a second MMA loop's issue once per CTA exactly where the
    trace (and so the kernel) has one."""
    from tilesim.validate.profile import _masked_loop

    (launch, *_) = build(algo, Workload(2, 16, n, n, 64, causal), h200, profile=None).launches
    assert _masked_loop(launch) is masked
