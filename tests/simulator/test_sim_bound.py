"""The ``bound`` label: what limits a run, from busy fractions, launch share and slot fill.

Toy GPU (conftest.py): 2 SMs, one CTA per SM at the default 150 KB of shared memory;
an Mma(128, 128, 64) takes 1048.576 cycles, an HBM load 500 cycles of latency.
"""

from __future__ import annotations

import pytest

from tilesim import predict
from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.simulator.prediction import BOUNDS, RESOURCES, bound_of
from tilesim.traces.ir import Load, Mma, Vector

MMA_CYCLES = 1048.576
IDLE = dict.fromkeys(RESOURCES, 0.0)


def mma(**kw):
    return Mma(128, 128, 64, "fp16", **kw)


def busy(**fractions) -> dict:
    return {**IDLE, **fractions}


# -- the rule, on numbers --------------------------------------------------------------


def test_every_label_is_defined_once():
    assert set(RESOURCES) | {"launch", "dispatch", "grid", "chain"} == set(BOUNDS)
    assert all(text and "\n" not in text for text in BOUNDS.values())


@pytest.mark.parametrize(
    ("utilisation", "launch_share", "slot_fill", "bound"),
    [
        (busy(tensor=0.7, sfu=0.6), 0.0, 1.0, "tensor"),  # the busiest of the busy
        (busy(hbm=0.5), 0.0, 0.1, "hbm"),  # half busy is enough, whatever the grid
        (busy(tensor=0.9), 0.6, 1.0, "launch"),  # launch overhead first
        (busy(tensor=0.2), 0.0, 0.25, "grid"),  # three quarters of the slots empty
        (busy(tensor=0.4), 0.0, 0.55, "grid"),  # a partial last wave: 45% empty > 15%
        (busy(tensor=0.4, sfu=0.45), 0.0, 0.97, "chain"),  # slots held, pipes in series
        (busy(hbm=0.05), 0.0, 1.0, "chain"),  # slots held, waiting on latency
        (busy(tensor=0.41), 0.39, 1.0, "launch"),  # the largest part of the idle time
        (busy(tensor=0.1), 0.33, 0.12, "grid"),  # launches cost less than the empty slots
    ],
)
def test_bound_of(utilisation, launch_share, slot_fill, bound):
    assert bound_of(utilisation, launch_share, slot_fill) == bound


@pytest.mark.parametrize(
    ("slot_fill", "dispatch_share", "bound"),
    [
        (0.45, 0.5, "dispatch"),  # half the time the slots wait for CTAs to be started
        (0.3, 0.2, "grid"),  # the rest of the empty slots (0.5) outweighs the pace's
        (0.8, 0.1, "chain"),
    ],
)
def test_empty_slots_split_into_dispatch_and_grid(slot_fill, dispatch_share, bound):
    assert bound_of(busy(hbm=0.3), 0.0, slot_fill, dispatch_share) == bound


def test_a_grid_of_many_short_ctas_is_dispatch_bound(kit):
    # 400 CTAs of 1 cycle on 2 SMs, started every 30 cycles: the slots sit empty waiting
    p = simulate(kit.trace(((("x", 400),), [("main", [Vector(fp32=100)])])), kit.gpu(
        cta_dispatch_cycles=30.0))  # fmt: skip
    assert p.bound == p.launches[0].bound == "dispatch"


# -- the engine's measurements, on hand-built traces ------------------------------------------


def test_a_busy_pipe_on_every_sm_is_the_bound(kit, gpu):
    p = simulate(kit.trace(((("x", 2),), [("main", [mma()])])), gpu)
    assert p.slot_fill == pytest.approx(1.0)
    assert p.bound == "tensor"


def test_one_cta_on_eight_sms_is_grid_bound(kit):
    # a load's latency and a short MMA on one SM of eight: 7 of 8 slots stay empty
    gpu = kit.gpu(sm_count=8)
    ops = [Load("a", "A", (0,), 1000), Vector(fp32=1000, deps=("a",))]
    p = simulate(kit.trace(((("x", 1),), [("main", ops)])), gpu)
    assert p.slot_fill == pytest.approx(1 / 8, rel=1e-12)
    assert p.launches[0].slot_fill == p.slot_fill
    assert max(p.utilisation.values()) < 0.5
    assert p.bound == "grid"


def test_a_partial_last_wave_is_grid_bound(kit):
    # 9 CTAs on 8 SMs: the second wave holds one slot of eight; each CTA waits 500
    # cycles for its tile, then keeps the tensor cores busy for 1049
    gpu = kit.gpu(sm_count=8)
    ops = [Load("a", "A", ("x",), 100), mma(deps=("a",))]
    p = simulate(kit.trace(((("x", 9),), [("main", ops)])), gpu)
    assert p.waves == 2
    assert p.slot_fill == pytest.approx(9 / 16, rel=0.01)  # the lone CTA loads a bit faster
    assert p.utilisation["tensor"] < 0.5
    assert p.bound == "grid"


def test_held_slots_waiting_on_latency_are_chain_bound(kit, gpu):
    # every slot held (two waves of two CTAs), each CTA mostly waiting on its load
    ops = [Load("a", "A", ("x",), 100), Vector(fp32=1000, deps=("a",))]
    p = simulate(kit.trace(((("x", 4),), [("main", ops)])), gpu)
    assert p.slot_fill == pytest.approx(1.0)
    assert max(p.utilisation.values()) < 0.1
    assert p.bound == "chain"


def test_tensor_and_vector_work_in_series_are_chain_bound(kit, gpu):
    # each CTA's MMA, then its exponentials, then its FP32 work (equal times): a third
    # of the time on each pipe, none half busy, all slots held
    exp = round(MMA_CYCLES * gpu.sfu_ops_per_clk_per_sm)
    fp32 = round(MMA_CYCLES * gpu.fp32_ops_per_clk_per_sm)
    ops = [mma(id="s"), Vector(exp=exp, deps=("s",), id="e"), Vector(fp32=fp32, deps=("e",))]
    p = simulate(kit.trace(((("x", 2),), [("main", ops)])), gpu)
    for pipe in ("tensor", "sfu", "fp32"):
        assert p.utilisation[pipe] == pytest.approx(1 / 3, rel=1e-3), pipe
    assert p.bound == "chain"


def test_launch_overhead_as_the_largest_idle_part_is_launch_bound(kit):
    # 1000 cycles of launch, then a load (501) and an MMA (1049) on both SMs: 39% of
    # the time launching, the tensor cores 41% busy, every slot held
    gpu = kit.gpu(launch_overhead_s=1e-6)
    ops = [Load("a", "A", ("x",), 100), mma(deps=("a",))]
    p = simulate(kit.trace(((("x", 2),), [("main", ops)])), gpu)
    assert 0.35 < p.utilisation["tensor"] < 0.5
    assert p.slot_fill == pytest.approx(1.0)
    assert p.bound == "launch"


@pytest.mark.parametrize("fidelity", ["fast", "detailed"])
def test_skipped_waves_count_as_held(kit, gpu, fidelity):
    # 400 CTAs on 2 slots: fast skips the middle waves; either way every slot is held
    # but for the turnaround-free gaps of nothing
    ops = [Load("a", "A", ("x",), 100), mma(deps=("a",))]
    p = simulate(kit.trace(((("x", 400),), [("main", ops)])), gpu, fidelity)
    assert (p.launches[0].simulated_ctas < 400) == (fidelity == "fast")
    assert p.slot_fill == pytest.approx(1.0, rel=1e-9)


def test_persistent_ctas_hold_their_slots_through_skipped_items(kit, gpu):
    ops = [Load("a", "A", ("x",), 100), mma(deps=("a",))]
    trace = kit.trace(((("x", 400),), [("main", ops)], 150_000, 2))
    fast, detailed = (simulate(trace, gpu, f) for f in ("fast", "detailed"))
    assert fast.launches[0].simulated_ctas < 400
    assert fast.slot_fill == pytest.approx(detailed.slot_fill, rel=1e-6)
    assert detailed.slot_fill == pytest.approx(1.0, rel=1e-9)


# -- the cases the labels were split for -------------------------------------------------


def test_v3_with_a_full_grid_is_tensor_bound():
    p = predict(gpu="h100", algo="v3", batch=4, heads=16, seqlen=4096, head_dim=128)
    assert p.slot_fill > 0.9
    assert p.bound == "tensor"


def test_v3_on_one_head_is_grid_bound_though_its_sms_are_busy():
    # the README's Gantt shape: 32 CTAs for 132 SMs; the SMs drawn are busy, most are not
    p = predict(gpu="h100", algo="v3", batch=1, heads=1, seqlen=4096, head_dim=128)
    # each CTA holds its slot for its own time; the launch lasts that plus the 31 paces
    # of the front end between the first CTA's start and the last's
    gpu = load_gpu("h100")
    (launch,) = p.launches
    stagger = 31 * gpu.cta_dispatch_cycles / (launch.clock_hz / gpu.sm_clock_hz)
    cycles = launch.cycles - gpu.s_to_cycles(gpu.launch_overhead_s)  # the CTAs' part
    assert p.slot_fill == pytest.approx(32 * (cycles - stagger) / (132 * cycles), rel=1e-6)
    assert p.bound == "grid"


def test_fp8_v3_is_chain_bound():
    # every slot held, its exponentials as long as its GEMMs, neither pipe half busy
    p = predict(gpu="h100", algo="v3", batch=4, heads=16, seqlen=4096, head_dim=128, dtype="fp8")
    assert p.slot_fill > 0.9
    assert max(p.utilisation.values()) < 0.5
    assert p.bound == "chain"
