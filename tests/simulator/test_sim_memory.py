"""The bandwidth server (processor sharing), the L2 LRU and the loop step tables."""

from __future__ import annotations

import dataclasses
import math

import pytest
import simpy

from tilesim.hwmodels import load_gpu
from tilesim.hwmodels.gpu import interpolate
from tilesim.hwmodels.schema import HBM_MIX_FIELDS
from tilesim.simulator.memory import (
    C_HBM_BUSY,
    C_HBM_READ,
    C_HBM_WRITE,
    N_COUNTERS,
    L2Cache,
    Memory,
    PSServer,
)
from tilesim.simulator.sm import SM
from tilesim.simulator.steps import StepTables


def _run(jobs):
    """jobs: (arrival time, work); returns the finish time of each."""
    env = simpy.Environment()
    server = PSServer(env, "hbm")
    done = {}

    def arrive(i, at, work):
        yield env.timeout(at)
        server.add(work, 0, lambda arg, now: done.__setitem__(arg, now), i)

    for i, (at, work) in enumerate(jobs):
        env.process(arrive(i, at, work))
    env.run()
    return [done[i] for i in range(len(jobs))]


def test_one_transfer_gets_the_whole_rate():
    assert _run([(0, 100.0)]) == [pytest.approx(100.0)]


def test_equal_transfers_share_equally():
    assert _run([(0, 100.0), (0, 100.0)]) == [pytest.approx(200.0), pytest.approx(200.0)]


def test_processor_sharing_with_staggered_arrivals():
    # A (work 100) alone for 50 cycles (50 done); then A and B (work 20) at half
    # rate each: B done after 40 more (t=90), A has 30 left alone: t=120.
    assert _run([(0, 100.0), (50, 20.0)]) == [pytest.approx(120.0), pytest.approx(90.0)]


def test_short_transfer_overtakes_a_long_one():
    a, b, c = _run([(0, 1000.0), (0, 10.0), (5, 10.0)])
    assert b < c < a
    assert a == pytest.approx(1020.0)  # work conserving: the server never idles


def test_idle_gap_then_new_work():
    assert _run([(0, 10.0), (100, 10.0)]) == [pytest.approx(10.0), pytest.approx(110.0)]


def test_lru_evicts_least_recently_used_first():
    l2 = L2Cache(capacity=300)
    for key in ("a", "b", "c"):
        l2.insert(key, 100)
    l2.entries.move_to_end("a")  # a hit refreshes a
    l2.insert("d", 100)  # evicts b, the least recently used
    assert list(l2.entries) == ["c", "a", "d"]
    assert l2.used == 300


def test_reinserting_a_tile_refreshes_it_without_growing():
    l2 = L2Cache(capacity=1000)
    l2.insert("a", 100)
    l2.insert("b", 100)
    l2.insert("a", 100)
    assert list(l2.entries) == ["b", "a"] and l2.used == 200


def test_step_tables_cover_every_iteration_once():
    tables = StepTables("fast")
    for trips in (1, 5, 10, 11, 30, 64, 256, 4096, 100_000):
        for nested in (False, True):
            t = tables.table(trips, nested)
            assert sum(t.counts) == trips
            assert t.starts == [sum(t.counts[:i]) for i in range(len(t.counts))]
            for i in range(0, trips, max(1, trips // 50)):
                s = t.step_of(i)
                assert t.starts[s] <= i < t.starts[s] + t.counts[s]


def test_fast_steps_grow_logarithmically():
    tables = StepTables("fast")
    assert len(tables.table(64)) < 14
    assert len(tables.table(100_000)) < 50  # a ramp of 1.25x: log base 1.25 (steps.RAMP)
    assert tables.table(8).counts == [1] * 8  # short loops stay exact
    assert tables.table(8, exposed=True).counts == [1] * 8
    assert tables.table(64, exposed=True).counts == [1] * 64  # waits on its own loads


def test_detailed_is_one_step_per_iteration():
    t = StepTables("detailed").table(300)
    assert t.counts == [1] * 300 and t.step_of(123) == 123


def test_busy_fraction_averages_over_the_window():
    env = simpy.Environment()
    server = PSServer(env, "hbm", window=100.0)
    server.add(1000.0, 0, lambda arg, now: None, None)
    # busy from t=0: after 100 cycles (one window) 1 - 1/e of the average is busy
    assert server.busy_at(100.0) == pytest.approx(1 - math.exp(-1.0), rel=1e-12)
    env.run()  # the transfer ends at t=1000; then the server idles
    assert server.busy_at(1000.0) == pytest.approx(1 - math.exp(-10.0), rel=1e-12)
    assert server.busy_at(1100.0) == pytest.approx((1 - math.exp(-10.0)) / math.e, rel=1e-12)
    assert PSServer(simpy.Environment(), "l2").busy_at(50.0) == 0.0  # never busy


def test_latency_is_read_off_the_loaded_curve():
    curve = ((0.0, 500.0), (0.5, 1500.0), (0.75, 2000.0), (0.95, 3000.0))
    assert interpolate(curve, 0.0) == 500.0
    assert interpolate(curve, 0.25) == pytest.approx(1000.0)
    assert interpolate(curve, 0.85) == pytest.approx(2500.0)
    assert interpolate(curve, 0.99) == 3000.0  # flat past the last point
    assert interpolate(((0.0, 500.0),), 0.9) == 500.0


# -- loads and stores through Memory ------------------------------------------------------
# A GPU whose HBM latency climbs steeply with load (500 idle, 3000 cycles at 95% busy),
# no tile extra, so that the drain and the queue are told apart.
STEEP = dict(
    hbm_latency_cycles=500.0,
    hbm_latency_50_cycles=1500.0,
    hbm_latency_75_cycles=2000.0,
    hbm_latency_95_cycles=3000.0,
    hbm_tile_extra_cycles=0.0,
    hbm_tile_extra_2KiB_cycles=0.0,
    hbm_tile_extra_8KiB_cycles=0.0,
)


def _memory(**fields):
    env = simpy.Environment()
    gpu = dataclasses.replace(load_gpu("h200"), **{**STEEP, **fields})
    return env, Memory(env, gpu)


def _load_at(env, mem, sm, key, nbytes, at, ready):
    def go():
        yield env.timeout(at)
        ev = simpy.Event(env)
        ev.callbacks.append(lambda _ev: ready.__setitem__(key, env.now))
        mem.load(sm, ((key, nbytes),), 0, 0.0, False, ev, [0.0] * N_COUNTERS)

    env.process(go())


def test_a_burst_waits_for_its_drain_then_the_flight_not_a_loaded_queue_on_top():
    # 256 CTAs load 64 KiB each at once: processor sharing ends them all at the drain D;
    # each is ready one idle latency later (the queue it waited in is the drain itself)
    env, mem = _memory()
    ready = {}
    for i in range(256):
        _load_at(env, mem, SM(i), ("t", i), 65536, 0.0, ready)
    env.run()
    drain = 256 * 65536 * mem.read_cost
    assert drain > 3000.0  # longer than the loaded latency: the drain decides
    assert sorted(ready.values()) == pytest.approx([drain + 500.0] * 256, rel=1e-9)


def test_a_small_load_into_a_busy_hbm_waits_the_loaded_latency():
    # a long transfer keeps the HBM busy; a 256 B load issued later gets through its
    # share at once and is ready the loaded latency after its issue
    env, mem = _memory()
    ready = {}
    _load_at(env, mem, SM(0), "big", 1 << 30, 0.0, ready)
    _load_at(env, mem, SM(1), "row", 256, 2000.0, ready)
    env.run(until=20000.0)
    busy = mem.hbm.busy_at(2000.0)
    assert busy > 0.9
    want = 2000.0 + interpolate(mem.hbm_curve, busy)
    assert ready["row"] == pytest.approx(want, rel=1e-3)
    assert ready["row"] > 2000.0 + 2500.0  # not the idle 500


def _store_at(env, mem, sm, key, nbytes, acked):
    def done(arg, now):
        acked[arg] = now

    mem.store(sm, ((key, nbytes),), 0.0, 0.0, False, done, key, [0.0] * N_COUNTERS)


@pytest.mark.parametrize("rate", [32.0, 0.0])
def test_an_sms_stores_leave_through_its_port_in_issue_order(rate):
    # two 32 KiB stores from one SM at 32 B/clk: the port sends them by 1024 and 2048
    # cycles (the idle HBM takes them in ~15 each); one from another SM has its own
    # port. Each is acknowledged an L2 latency after its port and HBM transfers; with
    # no port (0), after its HBM transfer.
    env, mem = _memory(store_bandwidth_B_per_clk_per_sm=rate)
    acked = {}
    a, b = SM(0), SM(1)
    _store_at(env, mem, a, "a1", 32768, acked)
    _store_at(env, mem, a, "a2", 32768, acked)
    _store_at(env, mem, b, "b1", 32768, acked)
    env.run()
    l2 = mem.l2_latency  # the L2 is idle: no loads
    if rate:
        assert acked["a1"] == pytest.approx(1024.0 + l2)
        assert acked["a2"] == pytest.approx(2048.0 + l2)
        assert acked["b1"] == pytest.approx(1024.0 + l2)
    else:
        hbm = 3 * 32768 * mem.write_cost  # three equal transfers sharing the HBM
        assert sorted(acked.values()) == pytest.approx([hbm + l2] * 3)
        assert hbm < 100.0


def test_a_transfer_of_copies_shares_the_server_as_that_many_transfers():
    env = simpy.Environment()
    server = PSServer(env, "hbm")
    done = {}
    server.add(100.0, 0, lambda arg, now: done.__setitem__(arg, now), "three", 3)
    server.add(100.0, 0, lambda arg, now: done.__setitem__(arg, now), "one")
    assert server.n == 4
    env.run()
    assert done == {"three": pytest.approx(400.0), "one": pytest.approx(400.0)}
    assert server.n == 0 and server.classes == [0]


# -- reads and writes mixed ----------------------------------------------------------------
# read 0.9, write 0.9 of peak alone; a half-and-half stream 0.6 (the other points between)
MIX = dict(
    hbm_read_efficiency=0.9,
    hbm_write_efficiency=0.9,
    hbm_mix_25_efficiency=0.75,
    hbm_mix_50_efficiency=0.6,
    hbm_mix_75_efficiency=0.75,
    hbm_mix_90_efficiency=0.85,
)


def _mixed_stream(mem, env, pairs, nbytes):
    """``pairs`` loads and stores of ``nbytes`` each, alternating, from as many SMs at
    t = 0; returns the counters (their C_HBM_BUSY: the HBM's work in cycles)."""
    ctr = [0.0] * N_COUNTERS
    for i in range(pairs):
        ev = simpy.Event(env)
        mem.load(SM(i), ((("r", i), nbytes),), 0, 0.0, False, ev, ctr)
        mem.store(SM(i), ((("w", i), nbytes),), 0.0, 0.0, False, lambda a, n: None, None, ctr)
    env.run()
    return ctr


def test_a_mix_of_reads_and_writes_costs_the_mix_curves_time_per_byte():
    env, mem = _memory(**MIX)
    ctr = _mixed_stream(mem, env, 200, 65536)
    peak_cost = mem.read_cost * 0.9  # cycles per byte at the datasheet peak
    # the stream's running write share settles at one half: 1/0.6 of the peak's time
    per_byte = ctr[C_HBM_BUSY] / (ctr[C_HBM_READ] + ctr[C_HBM_WRITE])
    assert per_byte == pytest.approx(peak_cost / 0.6, rel=0.02)
    # without mix points each byte costs its own direction's alone: 1/0.9
    env, mem = _memory(**{**MIX, **dict.fromkeys(HBM_MIX_FIELDS, 0.0)})
    ctr = _mixed_stream(mem, env, 200, 65536)
    per_byte = ctr[C_HBM_BUSY] / (ctr[C_HBM_READ] + ctr[C_HBM_WRITE])
    assert per_byte == pytest.approx(peak_cost / 0.9, rel=1e-12)


def test_the_mix_is_the_recent_one_a_lone_store_later_costs_a_writes_time():
    env, mem = _memory(**MIX)
    _mixed_stream(mem, env, 50, 65536)
    ctr = [0.0] * N_COUNTERS
    env.run(until=env.now + 50 * mem.mix_window)  # the mix decays over one window
    mem.store(SM(0), ((("late", 0), 4096),), 0.0, 0.0, False, lambda a, n: None, None, ctr)
    assert ctr[C_HBM_BUSY] == pytest.approx(4096 * mem.write_cost, rel=1e-9)
