"""The engine's semantics on hand-built traces, with cycle counts worked out by hand.

Toy GPU (conftest.py): HBM 100 B/cycle read, 50 write, latency 500; L2 hits
1000 B/cycle, latency 100; smem 100 B/cycle; tensor 2000 FLOP/cycle; SFU 10/cycle;
FP32 100/cycle; one CTA per SM (2 SMs). An Mma(128, 128, 64) is 2,097,152 FLOPs:
1048.576 cycles.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from tilesim.errors import TilesimError
from tilesim.simulator import simulate
from tilesim.traces.ir import Arrive, Load, Loop, Mma, Store, Vector, Wait

MMA = 1048.576  # cycles of Mma(128, 128, 64) on the toy GPU
ONE = (("x", 1),)


def mma(**kw):
    return Mma(128, 128, 64, "fp16", **kw)


def cycles(pred) -> float:
    return pred.cycles


def test_one_mma_takes_its_service_time(kit, gpu):
    p = simulate(kit.trace((ONE, [("main", [mma()])])), gpu)
    assert cycles(p) == pytest.approx(MMA, rel=1e-12)
    assert p.time_s == pytest.approx(MMA * 1e-9, rel=1e-12)
    assert p.matmul_flops == 2 * 128 * 128 * 64
    assert p.utilisation["tensor"] == pytest.approx(0.5, rel=1e-9)  # one SM of two busy
    assert p.bound == "tensor"


def test_a_tile_from_hbm_waits_for_its_slowest_request(kit):
    # 20000 B: 200 cycles of transfer, latency 500, plus a 16 KiB tile's extra 300; an L2
    # hit (the second load of the same tile) pays no extra: 20 cycles + 100
    gpu = kit.gpu(hbm_tile_extra_cycles=300.0)
    ops = [Load("a", "A", (0,), 20_000), mma(deps=("a",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(200 + 500 + 300 + MMA, rel=1e-12)
    ops = [Load("a", "A", (0,), 20_000), Wait(("a",)), Load("b", "A", (0,), 20_000)]
    p = simulate(kit.trace((ONE, [("main", ops + [mma(deps=("b",))])])), gpu)
    assert cycles(p) == pytest.approx(1000 + 200 + 100 + MMA, rel=1e-12)  # smem 200..400


@pytest.mark.parametrize(
    ("nbytes", "extra"),
    [
        (256, 0.0),  # a row's statistics: no slowest of many requests
        (2048, 40.0),
        (4096, 100.0),  # halfway from 2 to 8 KiB on the log of the size
        (8192, 160.0),
        (12288, 160.0 + 140.0 * math.log2(1.5)),  # between 8 and 16 KiB, likewise
        (65536, 300.0),  # flat from 16 KiB
    ],
)
def test_a_smaller_load_waits_for_fewer_requests(kit, nbytes, extra):
    gpu = kit.gpu(
        hbm_tile_extra_cycles=300.0,
        hbm_tile_extra_2KiB_cycles=40.0,
        hbm_tile_extra_8KiB_cycles=160.0,
    )
    ops = [Load("a", "A", (0,), nbytes), mma(deps=("a",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    # the transfer (nbytes / 100 cycles) then the latency and the extra; the shared-memory
    # writes (500 .. 500 + nbytes / 100) end before that
    assert cycles(p) == pytest.approx(nbytes / 100 + 500 + extra + MMA, rel=1e-12)


def test_load_miss_then_mma(kit, gpu):
    # 10000 B at 100 B/cycle = 100, + latency 500; smem writes 500..600: ready at 600
    ops = [Load("a", "A", (0,), 10_000), mma(deps=("a",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(600 + MMA, rel=1e-12)
    assert p.hbm_read_bytes == 10_000
    assert p.l2_hit_rate == 0.0


def test_a_load_waits_the_later_of_its_flight_and_the_loaded_latency(kit):
    # Latency 500 idle, 1500 / 2000 / 3000 cycles when the HBM was busy 50 / 75 / 95%
    # of the last 500 cycles (one idle latency).
    gpu = kit.gpu(hbm_latency_50_cycles=1500.0, hbm_latency_75_cycles=2000.0)
    gpu = gpu.with_overrides({"hbm_latency_95_cycles": 3000.0})
    # 10000 B: 100 cycles of transfer, so the HBM was busy 1 - e^(-100/500) of the window;
    # the loaded latency from issue (862) outlasts the transfer and flight (100 + 500)
    ops = [Load("a", "A", (0,), 10_000), mma(deps=("a",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    u = 1 - math.exp(-100 / 500)
    assert cycles(p) == pytest.approx(500 + 1000 * u / 0.5 + MMA, rel=1e-12)
    # 1 MB: 10000 cycles of transfer (the queue the 95% latency stands for, and more),
    # then the last byte's flight, the idle latency
    ops = [Load("a", "A", (0,), 1_000_000), mma(deps=("a",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(10_000 + 500 + MMA, rel=1e-6)


def test_concurrent_misses_on_one_tile_share_one_fill(kit, gpu):
    # Two CTAs (two SMs) ask for the same tile at once: one HBM read; the second
    # joins the fill in flight and is ready with it.
    ops = [Load("a", "A", (0,), 10_000), mma(deps=("a",))]
    p = simulate(kit.trace(((("x", 2),), [("main", ops)])), gpu)
    assert p.hbm_read_bytes == 10_000
    assert p.l2_hit_rate == pytest.approx(0.5)
    assert cycles(p) == pytest.approx(600 + MMA, rel=1e-12)


def test_concurrent_transfers_share_bandwidth(kit, gpu):
    # Two different tiles at once: each gets 50 B/cycle, both done at 200 (+500).
    ops = [Load("a", "A", ("x",), 10_000), mma(deps=("a",))]
    p = simulate(kit.trace(((("x", 2),), [("main", ops)])), gpu)
    assert p.hbm_read_bytes == 20_000
    assert cycles(p) == pytest.approx(700 + MMA, rel=1e-12)


def test_store_drains_before_the_cta_ends(kit, gpu):
    # 5000 B at 50 B/cycle, then the L2's acknowledgement: its idle latency, 100
    p = simulate(kit.trace((ONE, [("main", [Store("C", (0,), 5_000)])])), gpu)
    assert cycles(p) == pytest.approx(100 + 100, rel=1e-12)
    assert p.hbm_write_bytes == 5_000
    assert p.utilisation["hbm"] == pytest.approx(0.5)


def test_stored_tile_hits_in_the_next_launch(kit, gpu):
    # Launch 0 writes the tile (200 cycles at 50 B/cycle, acknowledged 100 later);
    # launch 1 reads it from L2: 10 cycles at 1000 B/cycle + latency 100, but smem
    # takes 100..200.
    store = (ONE, [("main", [Store("A", (0,), 10_000)])])
    load = (ONE, [("main", [Load("a", "A", (0,), 10_000), mma(deps=("a",))])])
    p = simulate(kit.trace(store, load), gpu)
    assert p.hbm_read_bytes == 0
    assert p.l2_hit_rate == 1.0
    assert cycles(p) == pytest.approx(200 + 100 + 200 + MMA, rel=1e-12)
    assert [lp.name for lp in p.launches] == ["L0", "L1"]
    assert p.launches[1].hbm_read_bytes == 0


@pytest.mark.parametrize("l2_bytes,reads", [(1_000_000, 1_800_000), (2_000_000, 1_200_000)])
def test_l2_is_lru_with_a_byte_capacity(kit, l2_bytes, reads):
    # a, b (600 KB each), then a again: with 1 MB of L2, b evicted a.
    ops = [
        Load("a", "A", (0,), 600_000),
        Wait(("a",)),
        Load("b", "A", (1,), 600_000),
        Wait(("b",)),
        Load("c", "A", (0,), 600_000),
        Wait(("c",)),
    ]
    p = simulate(kit.trace((ONE, [("main", ops)])), kit.gpu(l2_bytes=l2_bytes))
    assert p.hbm_read_bytes == reads


def test_vector_runs_sfu_then_fp32_work(kit, gpu):
    p = simulate(kit.trace((ONE, [("main", [Vector(exp=1000, fp32=5000)])])), gpu)
    assert cycles(p) == pytest.approx(150, rel=1e-12)  # 1000/10 + 5000/100
    assert p.exp_count == 1000 and p.fp32_ops == 5000


def test_vector_smem_bytes_follow_its_arithmetic_on_the_shared_memory_pipe(kit, gpu):
    # 5000 FP32 ops at 100/cycle, then 2000 B at 100 B/cycle; the second op's
    # conversion waits for the pipe (free at 70), not for its own arithmetic (ends 60)
    ops = [Vector(fp32=5000, smem=2000), Vector(fp32=1000, smem=1000)]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(50 + 20 + 10 + 10, rel=1e-12)
    assert p.utilisation["smem"] == pytest.approx(30 / 90 / 2, rel=1e-9)  # one SM of two


def test_vector_smem_is_shared_by_the_ctas_of_an_sm(kit, gpu):
    # two CTAs on the same SM (smem 50 KB: up to 4 per SM; 2 SMs, 4 CTAs): each SM
    # converts 2 x 1000 B back to back
    p = simulate(kit.trace(((("x", 4),), [("main", [Vector(smem=1000)])], 50_000)), gpu)
    assert cycles(p) == pytest.approx(20, rel=1e-12)


@pytest.mark.parametrize("async_,expected", [(True, MMA), (False, MMA + 1000)])
def test_async_mma_overlaps_the_next_op(kit, gpu, async_, expected):
    ops = [mma(id="s", async_=async_), Vector(exp=10_000), Wait(("s",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("fidelity", ["fast", "detailed"])
@pytest.mark.parametrize(
    "prefetch,expected",
    [
        # every iteration waits for its own load: 8 x (600 + MMA)
        (0, 8 * (600 + MMA)),
        # loads 0, 1 (before the loop) and 2 (at iteration 0) share HBM until 300,
        # ready at 800; later loads are hidden behind the Mmas
        (2, 800 + 8 * MMA),
    ],
)
def test_loop_prefetch(kit, gpu, prefetch, expected, fidelity):
    loop = Loop("j", 8, (Load("k", "A", ("j",), 10_000), mma(deps=("k",))), prefetch=prefetch)
    p = simulate(kit.trace((ONE, [("main", [loop])])), gpu, fidelity)
    assert cycles(p) == pytest.approx(expected, rel=1e-12)
    assert p.hbm_read_bytes == 80_000


def _ring(depth: int):
    producer = [Loop("j", 4, (Wait((f"free@-{depth}",)), Load("k", "A", ("j",), 10_000)))]
    consumer = [Loop("j", 4, (mma(deps=("k",)), Arrive("free")))]
    return [("producer", producer), ("consumer", consumer)]


def test_producer_consumer_ring_of_one(kit, gpu):
    # the producer refills only after the consumer released the previous tile
    p = simulate(kit.trace((ONE, _ring(1))), gpu)
    assert cycles(p) == pytest.approx(4 * (600 + MMA), rel=1e-12)


def test_producer_consumer_ring_of_two(kit, gpu):
    # k0, k1 issued at once (ready 700); k2 after Mma 0 (1748.576 + 600), hidden
    p = simulate(kit.trace((ONE, _ring(2))), gpu)
    assert cycles(p) == pytest.approx(700 + 4 * MMA, rel=1e-12)


def test_dep_after_a_loop_waits_for_its_last_iteration(kit, gpu):
    ops = [Loop("j", 3, (mma(id="m", async_=True),)), Wait(("m",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(3 * MMA, rel=1e-12)


def test_zero_trip_loop_defines_nothing_to_wait_for(kit, gpu):
    ops = [Loop("j", 0, (mma(id="m"),)), Wait(("m",)), Vector(fp32=100)]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(1, rel=1e-12)
    assert p.matmul_flops == 0


def test_store_waits_for_its_deps(kit, gpu):
    ops = [mma(id="m", async_=True), Store("C", (0,), 5_000, deps=("m",))]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(MMA + 100 + 100, rel=1e-12)  # + the acknowledgement


@pytest.mark.parametrize("ctas,waves", [(2, 1), (3, 2), (4, 2), (5, 3)])
def test_waves_on_one_cta_per_sm(kit, gpu, ctas, waves):
    p = simulate(kit.trace(((("x", ctas),), [("main", [mma()])])), gpu)
    assert cycles(p) == pytest.approx(waves * MMA, rel=1e-12)
    assert p.waves == waves and p.ctas_per_sm == 1


@pytest.mark.parametrize("fidelity", ["fast", "detailed"])
def test_a_wgmma_result_comes_its_latency_after_its_pipe_time(kit, fidelity):
    # a chain of 200 Mmas, each on the last one's result (fast fidelity coalesces its
    # steady middle): one CTA per SM waits out the latency 200 times; with 4 CTAs on an
    # SM (smem 50 KB) the pipe serves the others meanwhile, so only the last one's shows
    chain = Loop("j", 200, (mma(id="c", deps=("c@-1",)),))
    gpu = kit.gpu(wgmma_latency_cycles=100.0)
    alone = simulate(kit.trace((ONE, [("main", [chain])])), gpu, fidelity)
    assert cycles(alone) == pytest.approx(200 * (MMA + 100), rel=1e-12)
    shared = simulate(kit.trace(((("x", 8),), [("main", [chain])], 50_000)), gpu, fidelity)
    assert shared.ctas_per_sm == 4
    assert cycles(shared) == pytest.approx(800 * MMA + 100, rel=1e-12)
    # mma.sync: not modelled
    trace = kit.trace((ONE, [("main", [chain])]))
    launch = dataclasses.replace(trace.launches[0], mma_path="mma_sync")
    sync = simulate(dataclasses.replace(trace, launches=(launch,)), gpu, fidelity)
    assert cycles(sync) == pytest.approx(200 * 2 * MMA, rel=1e-12)  # half wgmma's rate


def test_resident_ctas_share_their_sm_pipes(kit, gpu):
    # smem 50 KB: 4 CTAs per SM (max_ctas_per_sm); 8 CTAs fill both SMs at once,
    # and each SM's tensor pipe serves its 4 Mmas one after another.
    p = simulate(kit.trace(((("x", 8),), [("main", [mma()])], 50_000)), gpu)
    assert p.ctas_per_sm == 4 and p.waves == 1
    assert cycles(p) == pytest.approx(4 * MMA, rel=1e-12)


def test_persistent_ctas_loop_over_work_items(kit, gpu):
    # 5 items on 2 persistent CTAs: CTA 0 runs items 0, 2, 4
    p = simulate(kit.trace(((("x", 5),), [("main", [mma()])], 150_000, 2)), gpu)
    assert cycles(p) == pytest.approx(3 * MMA, rel=1e-12)
    assert p.launches[0].persistent_ctas == 2


def test_grid_coordinates_reach_expressions(kit, gpu):
    # CTA x loads x*1000 bytes: tiles (x) are distinct, bytes 0+1000
    ops = [Load("a", "A", ("x",), "1000*x"), Wait(("a",))]
    p = simulate(kit.trace(((("x", 2),), [("main", ops)])), gpu)
    assert p.hbm_read_bytes == 1000


def test_launch_overhead_and_launch_bound(kit):
    gpu = kit.gpu(launch_overhead_s=1e-6)  # 1000 cycles per launch
    launch = (ONE, [("main", [Vector(fp32=100)])])
    p = simulate(kit.trace(launch, launch), gpu)
    assert cycles(p) == pytest.approx(2 * (1000 + 1), rel=1e-12)
    assert p.bound == "launch"
    assert p.launches[0].time_s == pytest.approx(1001e-9)


def test_bytes_at_each_memory_level(kit, gpu):
    # a 20 KB tile loaded twice (the second an L2 hit) and a 5 KB store: HBM moves
    # the tile once and the store; the L2 serves both loads and takes the store;
    # shared memory takes both loads
    ops = [
        Load("a", "A", (0,), 20_000),
        Wait(("a",)),
        Load("b", "A", (0,), 20_000),
        mma(id="m", deps=("b",)),
        Store("C", (0,), 5_000, deps=("m",)),
    ]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert p.hbm_bytes == 25_000
    assert p.l2_bytes == 45_000
    assert p.smem_bytes == pytest.approx(40_000, rel=1e-12)


def test_deadlock_is_a_clear_error(kit, gpu):
    roles = [
        ("a", [Wait(("b_done",)), Arrive("a_done")]),
        ("b", [Wait(("a_done",)), Arrive("b_done")]),
    ]
    with pytest.raises(TilesimError, match="deadlock"):
        simulate(kit.trace((ONE, roles)), gpu)


def test_malformed_trace_is_rejected_before_simulation(kit, gpu):
    trace = kit.trace((ONE, [("main", [Load("a", "NOPE", (0,), 100)])]))
    with pytest.raises(TilesimError) as exc:
        simulate(trace, gpu)
    assert "NOPE" in str(exc.value) and "\n" not in str(exc.value)


def test_gpu_without_the_features_a_trace_needs(kit):
    trace = kit.trace((ONE, [("main", [Mma(64, 64, 64, "fp8")])]))
    with pytest.raises(TilesimError, match="fp8"):
        simulate(trace, kit.gpu(has_fp8=False))
    big = kit.trace((ONE, [("main", [mma()])], 300_000))
    with pytest.raises(TilesimError, match="shared memory"):
        simulate(big, kit.gpu())


def test_unknown_fidelity(kit, gpu):
    with pytest.raises(TilesimError, match="fidelity"):
        simulate(kit.trace((ONE, [("main", [mma()])])), gpu, "approximate")


def test_utilisation_is_a_fraction(kit, gpu):
    ops = [
        Load("a", "A", ("x",), 50_000),
        mma(deps=("a",)),
        Vector(exp=5000, fp32=5000),
        Store("C", ("x",), 20_000),
    ]
    p = simulate(kit.trace(((("x", 6),), [("main", ops)])), gpu)
    for name, value in p.utilisation.items():
        assert 0.0 <= value <= 1.0 + 1e-9, name


def test_empty_work_completes_at_once(kit, gpu):
    # traces/ir.py: a Load/Store of 0 bytes, an Mma with a zero size, a Vector with
    # no work complete at once (generators fold pipeline prologues into loops so)
    ops = [
        Load("a", "A", (0,), 0),
        Mma(0, 128, 64, "fp16", deps=("a",)),
        Vector(exp=0, fp32=0),
        Store("C", (0,), 0),
        Vector(fp32=100),
    ]
    p = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    assert cycles(p) == pytest.approx(1, rel=1e-12)
    assert p.hbm_read_bytes == 0 and p.hbm_write_bytes == 0


@pytest.mark.parametrize("need, expected", [(1.0, 150), (3.0, 450), (0.5, 150)])
def test_few_warps_per_scheduler_slow_a_roles_vector_work(kit, need, expected):
    # a 4-warp role puts one warp on each of the 4 schedulers: it runs its vector work
    # max(1, need / 1) times slower than the pipes would
    gpu = kit.gpu(vector_warps_per_scheduler=need)
    p = simulate(kit.trace((ONE, [("main", [Vector(exp=1000, fp32=5000)])])), gpu)
    assert cycles(p) == pytest.approx(expected, rel=1e-12)


def test_slow_issue_leaves_the_pipes_to_other_ctas(kit):
    # 4 CTAs per SM, each 3x slower than its SFU time (100): the SFU serves them at
    # 100, 200, 300, 400; each ends no sooner than 300 after its start
    gpu = kit.gpu(vector_warps_per_scheduler=3.0)
    p = simulate(kit.trace(((("x", 8),), [("main", [Vector(exp=1000)])], 50_000)), gpu)
    assert p.ctas_per_sm == 4
    assert cycles(p) == pytest.approx(400, rel=1e-12)


def test_vector_slowdown_by_warps(kit):
    from tilesim.simulator.sm import vector_slowdown

    gpu = kit.gpu(vector_warps_per_scheduler=3.0)
    # 1 warp reaches one scheduler of 4; 4 warps: 1 per scheduler; 8: 2; 16: 4 (enough)
    assert [vector_slowdown(w, gpu) for w in (1, 2, 4, 8, 16)] == [12.0, 6.0, 3.0, 1.5, 1.0]


def test_tensor_launches_run_at_the_tensor_clock(kit):
    # tensor_clock_ratio 0.5: a launch with an Mma gets half of each SM
    # pipe per cycle (its tensor and vector work take twice the cycles); a launch
    # without one runs at the full clock; memory latency (ns) does not change
    gpu = kit.gpu(tensor_clock_ratio=0.5)
    with_mma = (ONE, [("main", [mma(), Vector(fp32=10_000)])])
    vector_only = (ONE, [("main", [Vector(fp32=10_000)])])
    base = simulate(kit.trace(with_mma), kit.gpu())
    slow = simulate(kit.trace(with_mma), gpu)
    assert cycles(slow) == pytest.approx(2 * cycles(base), rel=1e-12)
    assert cycles(simulate(kit.trace(vector_only), gpu)) == pytest.approx(100, rel=1e-12)
    ops = [Load("a", "A", (0,), 100), mma(deps=("a",))]
    loaded = simulate(kit.trace((ONE, [("main", ops)])), gpu)
    unloaded = simulate(kit.trace((ONE, [("main", ops)])), kit.gpu())
    # the Mma twice as long, and the load's 100 B into shared memory (1 cycle at 100
    # B/cycle) too: shared memory is on the SM clock; the 500-cycle HBM latency is not
    assert cycles(loaded) - cycles(unloaded) == pytest.approx(MMA + 1, rel=1e-9)


def test_a_freed_slot_takes_its_next_cta_after_the_turnaround(kit):
    # 4 CTAs of 100 cycles of FP32 work on 2 SMs, one CTA per SM: two waves; the second
    # starts 50 cycles after the first ends; no gap after the last CTA
    launch = ((("x", 4),), [("main", [Vector(fp32=10_000)])])
    assert cycles(simulate(kit.trace(launch), kit.gpu())) == pytest.approx(200, rel=1e-12)
    slow = simulate(kit.trace(launch), kit.gpu(cta_turnaround_cycles=50.0))
    assert cycles(slow) == pytest.approx(250, rel=1e-12)


def test_the_gpu_starts_ctas_no_faster_than_its_dispatch_rate(kit):
    # 40 CTAs of 1 cycle on 2 SMs: the front end starts one every 30 cycles, so the last
    # starts at 39 x 30 and ends a cycle later, whatever the SMs could do (20 cycles)
    short = ((("x", 40),), [("main", [Vector(fp32=100)])])
    for fidelity in ("fast", "detailed"):
        paced = simulate(kit.trace(short), kit.gpu(cta_dispatch_cycles=30.0), fidelity)
        assert cycles(paced) == pytest.approx(39 * 30 + 1, rel=1e-12)
        assert cycles(simulate(kit.trace(short), kit.gpu(), fidelity)) == pytest.approx(20)
    # CTAs much longer than the pace: the slots' time (two waves of 100 cycles) stands
    launch = ((("x", 4),), [("main", [Vector(fp32=10_000)])])
    assert cycles(simulate(kit.trace(launch), kit.gpu(cta_dispatch_cycles=30.0))) == (
        pytest.approx(200, rel=1e-12)
    )
