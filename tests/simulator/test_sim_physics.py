"""Consequences of the physics, on the real presets and trace generators.

None of these is a target the hardware parameters were tuned to: each follows
from a mechanism (bandwidth sharing, L2 reuse, overlap of the pipes, waves), and
each fails if that mechanism is missing or wrong.
"""

from __future__ import annotations

import dataclasses

import pytest

import tilesim
from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.simulator.scheduler import sm_speed
from tilesim.simulator.sm import SM, Executor
from tilesim.traces import Workload, build
from tilesim.traces.counters import counters
from tilesim.traces.ir import CtaProgram, Launch, Loop, Mma, Role, TensorSpec, Trace, Vector

ALGOS = ("standard", "v1", "v2", "v3")


def _cases():
    for gpu in ("a100", "h100"):
        for algo in ALGOS:
            if algo == "v3" and gpu == "a100":
                continue
            for causal in (False, True):
                # N=1000: partial last tiles; B=2 H=8 N=4096: coalesced loops, sampled waves
                yield gpu, algo, Workload(2, 4, 1000, 1000, 64, causal=causal), "detailed"
                yield gpu, algo, Workload(2, 8, 4096, 4096, 128, causal=causal), "fast"


@pytest.mark.parametrize("gpu_name,algo,workload,fidelity", list(_cases()))
def test_simulated_work_equals_the_traces_analytic_counts(gpu_name, algo, workload, fidelity):
    gpu = load_gpu(gpu_name)
    trace = build(algo, workload, gpu)
    c = counters(trace)
    p = simulate(trace, gpu, fidelity)
    # the same sums, up to float64 rounding: a coalesced step scales an inner loop's work
    # by a ratio of trip counts (a few ulps on 1e11, never a lost or doubled iteration)
    exact = pytest.approx
    assert p.matmul_flops == exact(c.matmul_flops, rel=1e-13, abs=0)
    assert p.exp_count == exact(c.exp_count, rel=1e-13, abs=0)
    assert p.fp32_ops == exact(c.fp32_ops, rel=1e-13, abs=0)
    assert p.hbm_read_bytes + p.hbm_write_bytes >= c.compulsory_hbm_bytes
    assert p.hbm_write_bytes >= c.compulsory_write_bytes
    assert p.compulsory_hbm_bytes == c.compulsory_hbm_bytes


def test_standard_attention_is_hbm_bound_and_grows_as_n_squared():
    t = {}
    for n in (4096, 8192):
        p = tilesim.predict(
            gpu="h100_sxm5_80gb", algo="standard", batch=1, heads=8, seqlen=n, head_dim=128
        )
        assert p.bound == "hbm"
        assert p.utilisation["hbm"] > 0.8
        t[n] = p.time_s
    assert 3.6 < t[8192] / t[4096] < 4.4


@pytest.mark.parametrize("n", [2048, 4096])
def test_v2_beats_v1_beats_standard_on_a100(n):
    # 16 x 16 heads fill the A100's 108 SMs. The FlashAttention papers' order: v1 (the
    # released kernel) faster than standard attention, v2 faster than v1. (The A100 has no
    # kernel profile: v1's step is costed from its trace's ops, without the issue cycles of
    # its compiled SASS that make it 2-4x v2's time on the H200.)
    t = {
        a: tilesim.predict(
            gpu="a100_sxm4_80gb", algo=a, batch=16, heads=16, seqlen=n, head_dim=64
        ).time_s
        for a in ("standard", "v1", "v2")
    }
    assert t["v2"] < t["v1"] < t["standard"]


# The model's v2 forward is 7-12% fast on the H200 at every size (docs/validation.md),
# so its v2/v3 reads 1.07-1.08 where our kernels measured 1.10-1.11 (grid, CUDA graphs).
_V2_FAST = pytest.mark.xfail(
    strict=True,
    reason="issue 21: the model's v2 forward is optimistic, so v2/v3 reads 1.07-1.08 here "
    "where our kernels measured 1.10 (N=4k) and 1.11 (N=8k)",
)


@pytest.mark.parametrize(
    "n,batch", [pytest.param(4096, 4, marks=_V2_FAST), pytest.param(8192, 2, marks=_V2_FAST)]
)
def test_v3_beats_v2_on_h100(n, batch):
    # FlashAttention-3 (warp-specialised, ping-pong) against a v2 that already uses
    # wgmma with two independent warpgroups: FA3's gain is the softmax it hides under
    # the GEMMs. Measured on the H200 (results/raw/2026-11-30-h200-bench.json,
    # d=128, N >= 4k): cuDNN's FA3-style kernel 1.08-1.13x our Triton v2; the FA3
    # paper's ~740 TFLOPS on an H100 is ~1.25x it. Hiding all of the softmax could
    # give at most (GEMMs + softmax) / GEMMs, about 1.8x.
    # Our own v2 over our v3, fp16 d=128 without a mask, CUDA graphs
    # (results/raw/2026-12-03-h200-run13-grid.json): 1.09 at N=2k to 1.13 at 16k,
    # v3 at a 6-9% lower counted clock than v2.
    t = {
        a: tilesim.predict(gpu="h100", algo=a, batch=batch, heads=16, seqlen=n, head_dim=128).time_s
        for a in ("v2", "v3")
    }
    assert 1.1 <= t["v2"] / t["v3"] <= 1.6


def test_doubling_hbm_bandwidth_helps_standard_not_v2():
    speedup = {}
    for algo in ("standard", "v2"):
        kw = dict(gpu="h100_sxm5_80gb", algo=algo, batch=2, heads=16, seqlen=8192, head_dim=128)
        base = tilesim.predict(**kw).time_s
        fast = tilesim.predict(**kw, overrides={"hbm_bandwidth_Bps": "2x"}).time_s
        speedup[algo] = base / fast
    assert speedup["standard"] >= 1.5
    assert 1.0 <= speedup["v2"] <= 1.15


def _one_cta_per_sm_grid(gpu, ctas: int) -> Trace:
    launch = Launch(
        name="k",
        grid=(("x", ctas),),
        program=CtaProgram((Role("main", (Mma(128, 128, 4096, "fp16"),), 8),)),
        smem_bytes=gpu.smem_bytes_per_cta_max,
        threads=256,
        regs_per_thread=64,
        mma_path="wgmma",
    )
    return Trace("toy", (TensorSpec("A", (1,), "fp16"),), (launch,))


def test_one_cta_more_than_the_sms_takes_two_waves():
    # at one clock: the clock model would speed the lone CTA's wave (simulator/clock.py)
    gpu = dataclasses.replace(load_gpu("h100"), launch_overhead_s=0.0, clock_max_hz=0.0)
    assert gpu.sm_count == 132
    full = simulate(_one_cta_per_sm_grid(gpu, 132), gpu)
    one_more = simulate(_one_cta_per_sm_grid(gpu, 133), gpu)
    assert full.waves == 1 and one_more.waves == 2
    assert one_more.time_s / full.time_s == pytest.approx(2.0, rel=0.02)


def _v2_reads_over_compulsory(batch, heads, n):
    gpu = load_gpu("h100")
    trace = build("v2", Workload(batch, heads, n, n, 128), gpu)
    return simulate(trace, gpu).hbm_read_bytes / counters(trace).compulsory_read_bytes


def test_kv_reuse_in_l2_keeps_v2_reads_near_compulsory():
    # 32 Q-block CTAs of a head read the same K/V tiles at about the same time
    assert _v2_reads_over_compulsory(4, 16, 4096) <= 1.05


def test_v2_rereads_kv_when_a_head_outgrows_l2():
    # N = 64k: 512 Q blocks of a head span four waves; its 32 MiB of K and V plus
    # the Q and O traffic in between no longer stay in the 50 MiB L2
    assert _v2_reads_over_compulsory(1, 2, 65536) >= 1.25


def _toy_loop(body, ctas=1, steps=50, **fields) -> Trace:
    """One role of 4 warps looping ``steps`` times over ``body``; ``fields`` of the Launch."""
    launch = Launch(
        name="k",
        grid=(("x", ctas),),
        program=CtaProgram((Role("main", (Loop("i", steps, body),), 4),)),
        smem_bytes=0,
        threads=128,
        regs_per_thread=128,
        mma_path="wgmma",
        **fields,
    )
    return Trace("toy", (TensorSpec("A", (1,), "fp16"),), (launch,))


def _spilling_loop(gpu, covers: tuple[int, ...]) -> Trace:
    return _toy_loop((Mma(64, 64, 64, "fp16"),), spill_reload_covers=covers)


def test_each_wait_on_spill_reloads_costs_an_l2_round_trip_less_its_cover():
    gpu = dataclasses.replace(load_gpu("h200"), launch_overhead_s=0.0)
    trip = gpu.l2_hit_latency_cycles  # nothing else loads the L2
    base = simulate(_spilling_loop(gpu, ()), gpu, fidelity="detailed").time_s
    spills = simulate(_spilling_loop(gpu, (0, 40, 10_000)), gpu, fidelity="detailed").time_s
    # a cover longer than the round trip hides it
    expected = 50 * (trip + (trip - 40)) / gpu.sm_clock_hz
    assert spills - base == pytest.approx(expected, rel=1e-9)
    # coalesced steps (fast fidelity) pay the same
    fast = simulate(_spilling_loop(gpu, (0, 40, 10_000)), gpu, fidelity="fast").time_s
    assert fast - simulate(_spilling_loop(gpu, ()), gpu, fidelity="fast").time_s == (
        pytest.approx(expected, rel=1e-9)
    )


def _issue_loop(gpu, step=(), cta=(), ctas=1, vector=True) -> Trace:
    mma = Mma(16, 16, 16, "fp16")  # 2 tensor cycles: the pipes stay out of the way
    body = (mma, Vector(exp=64 * 64, fp32=10 * 64 * 64)) if vector else (mma,)
    return _toy_loop(body, ctas, issue_per_step=step, issue_per_cta=cta)


def test_issue_cycles_replace_the_vector_ops_and_follow_the_warps_per_scheduler():
    # the MMAs' own latency is left out: this is the schedulers' share of the issue work
    # (the latency has its own test in test_sim_engine.py)
    gpu = dataclasses.replace(
        load_gpu("h200"), launch_overhead_s=0.0, wgmma_latency_cycles=0.0, clock_max_hz=0.0
    )
    speed = sm_speed(_issue_loop(gpu).launches[0], gpu)

    def cycles(trace):
        return simulate(trace, gpu, fidelity="detailed").time_s * gpu.sm_clock_hz

    base = cycles(_issue_loop(gpu, vector=False))
    # the Vector ops cost something on their own...
    assert cycles(_issue_loop(gpu)) > base + 1000
    # ...and nothing once the issue cycles stand for the kernel's instructions: one CTA
    # of 4 warps per SM is one warp per scheduler
    step, cta = (100.0, 160.0, 250.0, 330.0), (1000.0, 1500.0, 2100.0, 2600.0)
    one = cycles(_issue_loop(gpu, step, cta))
    assert one - base == pytest.approx((50 * 100 + 1000) / speed, rel=1e-9)
    # 264 CTAs: two resident per SM, two warps per scheduler. The schedulers are the
    # SM's: each CTA's work holds them for its half of the k = 2 figures (k = 1 would
    # give 6100 cycles in all, k = 3 14100), so the two CTAs take at least the
    # schedulers' time for both, 9500 cycles, and their MMAs (200 cycles in all)
    # overlap the other's issue
    two = cycles(_issue_loop(gpu, step, cta, ctas=264))
    assert (50 * 160 + 1500) / speed <= two < (50 * 160 + 1500 + 200) / speed


def test_a_launch_without_mma_pays_its_issue_cycles_per_cta():
    # a hand-written trace may give issue cycles to a launch with no MMA role: its
    # warps are then all the CTA's (one per scheduler here), and its Vector ops (over
    # 1000 cycles of exponentials on their own) only book their pipe
    gpu = dataclasses.replace(load_gpu("h200"), launch_overhead_s=0.0, clock_max_hz=0.0)
    vector = (Vector(exp=64 * 64),)
    assert simulate(_toy_loop(vector), gpu, "detailed").time_s * gpu.sm_clock_hz > 1000
    paid = simulate(_toy_loop(vector, issue_per_cta=(1000.0, 0, 0, 0)), gpu, "detailed")
    assert paid.time_s * gpu.sm_clock_hz == pytest.approx(1000.0, rel=1e-9)


def test_the_schedulers_share_their_issue_work():
    sm = SM(0)
    # idle schedulers: the work takes its length, or its own chain's if longer
    assert Executor.issue(sm, 0.0, 100.0, 0.0) == 100.0
    assert sm.issue_free == 100.0
    # 40 cycles of earlier work left: the two share the schedulers while both run
    assert Executor.issue(sm, 60.0, 100.0, 0.0) == 60.0 + 100.0 + 40.0
    assert sm.issue_free == 200.0
    # a short request inside a long backlog runs at half rate: twice its length
    assert Executor.issue(sm, 100.0, 30.0, 0.0) == 160.0
    assert sm.issue_free == 230.0
    # its own dependent chain can be longer than that
    assert Executor.issue(sm, 100.0, 30.0, 500.0) == 600.0
