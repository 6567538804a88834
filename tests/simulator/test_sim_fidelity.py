"""``fast`` against ``detailed``, and bit-identical predictions run to run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from tilesim.hwmodels import load_gpu
from tilesim.hwmodels.schema import HBM_MIX_FIELDS
from tilesim.simulator import simulate
from tilesim.simulator.bench import FIDELITY_GRID
from tilesim.traces import Workload, build, build_external

TOLERANCE = 0.02  # DESIGN.md: fast stays within 2% of detailed


def _bwd(*shape, causal=False):
    return Workload(*shape, causal=causal, pass_="bwd")


# v2's causal dK/dV pass at d = 64 on an H100: 512 CTAs of a triangular grid (from 1 to
# 16 K/V blocks' worth of Q blocks), several resident per SM. Coalesced, each CTA's
# macro-steps lump a run of MMAs and then a run of issue work; CTAs that start
# together keep their lumps in phase, where one step at a time they fall into
# alternation, one CTA's MMAs under the other's issue. Fast is 10% slower than
# detailed with the issue cycles (dK/dV +10%, dQ +12%); with the Vector ops' costs
# the dK/dV launch alone was already 8% off and the trace passed because the two
# launches' errors cancelled. Simulated step by step (no coalescing) it matches.
_TRIANGLE = pytest.mark.xfail(
    reason="coalesced CTAs keep their MMA and issue lumps in phase (engine: steps.py)", strict=True
)

# v1's backward (the released structure) on grids of one CTA per SM (B1 H4 N1k: 16 CTAs;
# B1 H8 N2k: 128): fast 7% and 12% faster than detailed. Each step chains five MMAs, the
# issue cycles and an atomic dQ store; coalesced, a macro-step lumps them, and the store
# port and the L2 see one burst where step by step they pace the chain. On the grid's
# shapes (B·H >= 16, 2+ waves) the two agree within 2% (validate: report --fidelity).
_V1_BWD = pytest.mark.xfail(
    reason="coalesced steps lump v1's MMAs, issue and dQ atomics (engine: steps.py)", strict=True
)

# The backward's launches (issue 7): v2's dK/dV and dQ passes, v1's released backward,
# standard's five launches.
BACKWARD_GRID = (
    ("h100", "v2", _bwd(1, 8, 2048, 2048, 128)),
    ("h100", "v2", _bwd(1, 8, 2048, 2048, 128, causal=True)),
    pytest.param(("h100", "v2", _bwd(2, 8, 2048, 2048, 64, causal=True)), marks=_TRIANGLE),
    ("a100", "v2", _bwd(2, 8, 2048, 2048, 64)),
    pytest.param(("h100", "v1", _bwd(1, 4, 1024, 1024, 64, causal=True)), marks=_V1_BWD),
    pytest.param(("h100", "v1", _bwd(1, 8, 2048, 2048, 128)), marks=_V1_BWD),
    ("h100", "standard", _bwd(1, 4, 1024, 1024, 64)),
)


def _label(case):
    gpu, algo, w = case
    causal = "c" if w.causal else ""
    pass_ = "" if w.pass_ == "fwd" else f"-{w.pass_}"
    return f"{gpu}-{algo}-B{w.batch}H{w.heads}N{w.seqlen_q}d{w.head_dim}{causal}{pass_}"


# The grids' short names were drawn on the datasheet presets; the short names now load
# the best-founded presets, whose own misses are listed below.
DATASHEET = {"a100": "a100_sxm4_80gb", "h100": "h100_sxm5_80gb", "h200": "h200_sxm_141gb"}
# fast vs detailed on the presets the short names load (measured store port, CTA
# turnaround, loaded latencies): more than 2% apart (engine: steps.py / sm.py).
_MEASURED_PRESET = pytest.mark.xfail(
    reason="fast drifts from detailed with the measured store port and turnaround (engine)",
    strict=True,
)
BEST_FOUNDED_MISSES = (
    pytest.param(("h200", "v3", Workload(2, 8, 2048, 2048, 128)), marks=_MEASURED_PRESET),
)


# v3's default (the Gluon kernel: 3 stages, no ping-pong) on the datasheet H200, 2 x 8
# heads at N = 2048: fast is 4.4% off detailed since the default became this schedule
# (ping-pong with 2 stages was within 2%); the cause is not found yet (engine: steps.py).
_V3_DEFAULT = pytest.mark.xfail(
    reason="fast vs detailed 4.4% apart on v3's 3-stage default (engine, cause not found)",
    strict=True,
)


# v1 (the released structure) with few heads: the launcher splits a head's Q steps over
# many CTAs (B1 H4 N4k: 30), so each CTA walks every K/V block with a few steps; the
# outer walk's macro-steps lump several blocks' exposed K/V loads and their short inner
# walks, 3-10% off detailed. Running those outer loops exactly fixes it but costs the grid
# minutes per point (engine: steps.py).
_V1_FEW_HEADS = pytest.mark.xfail(
    reason="coalesced K/V walk of many-split v1 CTAs (engine: steps.py)", strict=True
)


def _marked(case):
    gpu, algo, w = case
    if algo == "v1" and w.batch * w.heads <= 8:
        return pytest.param(case, marks=_V1_FEW_HEADS)
    if (gpu, algo, w) == ("h200", "v3", Workload(2, 8, 2048, 2048, 128)):
        return pytest.param(case, marks=_V3_DEFAULT)
    return case


@pytest.mark.parametrize(
    "case", [_marked(c) for c in FIDELITY_GRID] + list(BACKWARD_GRID), ids=_label
)
def test_fast_is_within_two_percent_of_detailed(case):
    gpu_name, algo, workload = case
    _fast_matches_detailed(load_gpu(DATASHEET.get(gpu_name, gpu_name)), algo, workload)


@pytest.mark.parametrize("case", BEST_FOUNDED_MISSES, ids=_label)
def test_fast_is_within_two_percent_of_detailed_on_the_best_founded_presets(case):
    gpu_name, algo, workload = case
    _fast_matches_detailed(load_gpu(gpu_name), algo, workload)


def _fast_matches_detailed(gpu, algo, workload):
    trace = build(algo, workload, gpu)
    fast = simulate(trace, gpu, "fast")
    detailed = simulate(trace, gpu, "detailed")
    assert fast.time_s == pytest.approx(detailed.time_s, rel=TOLERANCE)
    assert fast.hbm_read_bytes == pytest.approx(detailed.hbm_read_bytes, rel=TOLERANCE)
    assert fast.hbm_write_bytes == pytest.approx(detailed.hbm_write_bytes, rel=TOLERANCE)
    assert fast.matmul_flops == detailed.matmul_flops
    assert fast.slot_fill == pytest.approx(detailed.slot_fill, rel=TOLERANCE)
    # the point of fast: fewer events (loops coalesced, waves sampled)
    assert fast.sim_events <= detailed.sim_events


def test_fast_really_samples_and_coalesces():
    gpu = load_gpu("h100_sxm5_80gb")
    trace = build("v2", Workload(4, 16, 4096, 4096, 128), gpu)
    fast, detailed = simulate(trace, gpu, "fast"), simulate(trace, gpu, "detailed")
    assert fast.launches[0].simulated_ctas < fast.launches[0].ctas
    assert detailed.launches[0].simulated_ctas == detailed.launches[0].ctas
    assert fast.sim_events * 3 < detailed.sim_events
    assert fast.time_s == pytest.approx(detailed.time_s, rel=TOLERANCE)


@pytest.mark.parametrize("algo", ["standard", "v1", "v2", "v3"])
def test_same_input_gives_a_bit_identical_prediction(algo):
    gpu = load_gpu("h100")
    trace = build(algo, Workload(2, 8, 2048, 2048, 64, causal=True), gpu)
    a, b = simulate(trace, gpu), simulate(trace, gpu)
    assert a == b  # every field but sim_wall_s
    assert a.fingerprint() == b.fingerprint()


_SCRIPT = """
import tilesim
for algo in ("standard", "v1", "v2", "v3"):
    p = tilesim.predict(gpu="h100", algo=algo, batch=2, heads=4, seqlen=1536, head_dim=64,
                        causal=True)
    print(p.fingerprint())
"""


def test_prediction_does_not_depend_on_the_hash_seed():
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run(
            [sys.executable, "-c", _SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        outs.append(res.stdout)
    assert outs[0] == outs[1]
    assert len(outs[0].splitlines()) == 4
    json.loads(outs[0].splitlines()[0])


# Known misses on the calibrated H200 (its kernels replay SASS issue cycles), kept
# strict so a fix shows: fast is within 2% of detailed on none of them.
# * v2: the loop coalesced with issue cycles, -4% (without them fast == detailed; the
#   two warpgroups' MMA and issue lumps keep a phase per-iteration steps do not).
# * standard at B = 2, H = 8, N = 2048, d = 128 (the first shape of `make bench --whatif`):
#   +2.5%, and the same on its what-if variants (L2 size and bandwidth 0.5-4x).
# * standard at B = 1, H = 1, N = 5085, d = 128: +2.9% since the clock model runs its
#   softmax at 1980 MHz (+0.3% before): its pv reads what the sampled softmax left in
#   the L2, not what every wave would have (the skipped waves' L2 touches are not
#   replayed: docs/model.md).
# (standard's pv at B = 1, H = 2, N = 4096, d = 64 on the H100 was one: +1.7% now.)
KNOWN_MISSES = (
    ("h200-cal", "v2", Workload(2, 16, 2048, 2048, 128)),
    ("h200-cal", "standard", Workload(2, 8, 2048, 2048, 128)),
    ("h200-cal", "standard", Workload(1, 1, 5085, 5085, 128)),
)
WERE_MISSES = (("h100", "standard", Workload(1, 2, 4096, 4096, 64)),)


@pytest.mark.parametrize("case", WERE_MISSES, ids=_label)
def test_former_misses_of_fast_on_the_calibrated_h200_are_within_two_percent(case):
    gpu_name, algo, workload = case
    _fast_matches_detailed(load_gpu(gpu_name), algo, workload)


@pytest.mark.slow
@pytest.mark.parametrize("case", KNOWN_MISSES, ids=_label)
def test_known_misses_of_fast_on_the_calibrated_h200_are_still_misses(case):
    gpu_name, algo, workload = case
    gpu = load_gpu(gpu_name)
    trace = build(algo, workload, gpu)
    fast = simulate(trace, gpu, "fast")
    detailed = simulate(trace, gpu, "detailed")
    assert abs(fast.time_s / detailed.time_s - 1) > TOLERANCE


def _lock_step_case(gpu):
    trace = build_external("sdpa-math", Workload(1, 2, 2048, 2048, 128, causal=True), gpu)
    keep = ("mask_where", "add_mask")
    trace = dataclasses.replace(trace, launches=tuple(x for x in trace.launches if x.name in keep))
    return trace, simulate(trace, gpu, "fast"), simulate(trace, gpu, "detailed")


# h200-cal without its HBM mix points (the next test: with them)
NO_MIX = dict.fromkeys(HBM_MIX_FIELDS, 0.0)


def test_one_sm_stands_for_all_in_a_lock_step_launch():
    # PyTorch SDPA's math backend (causal): the mask written to L2, then added to every
    # head's scores (its tiles shared across heads: L2 hits). Both are elementwise
    # launches of 16k-33k identical CTAs: fast simulates one SM's share (scheduler.py).
    gpu = dataclasses.replace(load_gpu("h200-cal"), **NO_MIX)
    trace, fast, detailed = _lock_step_case(gpu)
    for f, d in zip(fast.launches, detailed.launches, strict=True):
        assert f.simulated_ctas * gpu.sm_count < 2 * f.ctas  # about one SM's share
        assert f.time_s == pytest.approx(d.time_s, rel=TOLERANCE)
        assert f.hbm_read_bytes == pytest.approx(d.hbm_read_bytes, rel=1e-9)
        assert f.hbm_write_bytes == pytest.approx(d.hbm_write_bytes, rel=1e-9)
        assert f.slot_fill == pytest.approx(d.slot_fill, rel=TOLERANCE)
    assert fast.l2_hit_rate > 0.1
    assert fast.l2_hit_rate == pytest.approx(detailed.l2_hit_rate, rel=1e-9)
    assert fast.fp32_ops == pytest.approx(detailed.fp32_ops, rel=1e-12)
    assert fast.sim_events * 20 < detailed.sim_events
    # a timeline draws every SM: there each SM runs its own CTAs
    drawn = simulate(trace, gpu, "fast", timeline=True)
    assert drawn.launches[0].simulated_ctas > gpu.sm_count * fast.launches[0].simulated_ctas / 2


@pytest.mark.xfail(strict=True, reason="known miss: the HBM mix in lock step")
def test_a_lock_step_launch_with_the_hbm_mix_stays_within_two_percent():
    # One SM's share issues all its SMs' reads at once, then all their writes: the recent
    # write share swings between the phases, where the detailed run's CTAs drift apart
    # and mix them. add_mask reads +3% slow in fast fidelity (-1.5% without the mix).
    _, fast, detailed = _lock_step_case(load_gpu("h200-cal"))
    for f, d in zip(fast.launches, detailed.launches, strict=True):
        assert f.time_s == pytest.approx(d.time_s, rel=TOLERANCE)
