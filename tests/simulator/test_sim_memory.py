"""The bandwidth server (processor sharing), the L2 LRU and the loop step tables."""

from __future__ import annotations

import math

import pytest
import simpy

from tilesim.hwmodels.gpu import interpolate
from tilesim.simulator.memory import L2Cache, PSServer
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
