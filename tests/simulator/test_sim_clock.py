"""The clock under load (simulator/clock.py): each launch at the clock its work gives it.

On the toy GPU with a clock model (sm_clock_hz 1 GHz, clock_max_hz 2 GHz, MMA ceiling
0.9 x that): a compute-bound launch's work per cycle does not move with its clock, so
its clock must solve the budget equation exactly; a launch without MMAs runs at
clock_max_hz; a given clock (`GPU.at_clock`) switches the model off; a what-if clock
scales it. `clock_fit.derive` recovers known shares from rows that obey them.
"""

from __future__ import annotations

import pytest

from tilesim.simulator import clock, simulate
from tilesim.traces.ir import Mma, Vector
from tilesim.validate import clock_fit

ONE = (("x", 1),)
MODEL = dict(
    clock_max_hz=2e9,
    tensor_clock_ratio=0.9,
    clock_power_per_GHz=0.4,
    clock_power_fp16_per_PFLOPs=100.0,  # the toy's 2 SMs do little: 2e-10 per Hz at full rate
    clock_power_bf16_per_PFLOPs=0.3,
    clock_power_fp8_per_PFLOPs=0.2,
    clock_power_l2_per_10TBps=0.1,
    clock_power_hbm_per_10TBps=0.3,
    clock_power_fp32_per_10Tops=0.05,
)


def _mma_trace(kit, n=64):
    return kit.trace((ONE, [("main", [Mma(128, 128, 64, "fp16") for _ in range(n)])]))


def test_the_budget_equation_sets_a_busy_mma_launch_clock(kit):
    gpu = kit.gpu(**MODEL)
    # 1e13 FLOP in 1 s at 1.5 GHz: f x (0.4/GHz + 100 x FLOP/clk / 1e15) = 1
    f = clock.launch_clock_hz(gpu, "fp16", 1.0, 1e13, 0.0, 0.0, 0.0, 1.5e9)
    per_clk = 0.4e-9 + 100 * 1e13 / 1.5e9 / 1e15
    assert f == pytest.approx(1 / per_clk, rel=1e-12)
    # the HBM term takes its share per second: 10 TB/s leaves 0.7 of the budget
    g = clock.launch_clock_hz(gpu, "fp16", 1.0, 1e13, 0.0, 1e13, 0.0, 1.5e9)
    assert g == pytest.approx(0.7 / per_clk, rel=1e-12)
    # light work: held by the ceiling; no MMAs: clock_max_hz
    assert clock.launch_clock_hz(gpu, "bf16", 1.0, 1e12, 0, 0, 0, 1.8e9) == pytest.approx(1.8e9)
    assert clock.launch_clock_hz(gpu, None, 1.0, 0, 0, 1e13, 1e13, 2e9) == 2e9


def test_a_compute_bound_launch_runs_at_the_solution_of_the_budget(kit):
    gpu = kit.gpu(**MODEL)
    p = simulate(_mma_trace(kit), gpu, "detailed")
    (lp,) = p.launches
    per_sm = gpu.tensor_fp16_wgmma_flop_per_clk_per_sm  # one CTA per SM, MMAs back to back
    flop_per_clk = lp.matmul_flops / (lp.cycles * lp.clock_hz / gpu.sm_clock_hz)
    assert flop_per_clk == pytest.approx(per_sm, rel=1e-9)  # the tensor pipe always busy
    want = 1 / (0.4e-9 + 100 * flop_per_clk / 1e15)
    assert want < 0.9 * 2e9  # below the ceiling: the model holds it
    assert lp.clock_hz == pytest.approx(want, rel=1e-9)
    assert p.time_s == pytest.approx(lp.matmul_flops / (per_sm * want), rel=1e-9)


def test_a_launch_without_mmas_runs_at_the_top_clock(kit):
    gpu = kit.gpu(**MODEL)
    p = simulate(kit.trace((ONE, [("main", [Vector(fp32=10_000)])])), gpu)
    assert p.launches[0].clock_hz == 2e9
    assert p.time_s == pytest.approx(100 / 2e9, rel=1e-12)  # 100 cycles at 100 ops/clk


def test_a_given_clock_switches_the_model_off_and_a_what_if_clock_scales_it(kit):
    gpu = kit.gpu(**MODEL)
    base = simulate(_mma_trace(kit), gpu)
    fixed = gpu.at_clock(1.5e9)
    assert fixed.clock_max_hz == 0
    assert simulate(_mma_trace(kit), fixed).launches[0].clock_hz == pytest.approx(1.35e9)
    # the same chip at 2x its clocks, with the budget to run them: twice as fast
    fast = gpu.with_overrides({"sm_clock_hz": "2x"})
    assert fast.clock_max_hz == 4e9
    twice = simulate(_mma_trace(kit), fast)
    assert twice.launches[0].clock_hz == pytest.approx(2 * base.launches[0].clock_hz, rel=1e-9)
    assert twice.time_s == pytest.approx(base.time_s / 2, rel=1e-9)
    # naming a clock field keeps the rest as given
    assert gpu.with_overrides({"sm_clock_hz": "2x", "clock_max_hz": 3e9}).clock_max_hz == 3e9


def _rows(shares: dict, top: float = 1.98e9, ratio: float = 0.9) -> list[dict]:
    rows = [{"name": f"clock_plain_{i}", "value": top, "mma": False} for i in range(3)]
    for i, (dtype, flops, l2, hbm, fp32) in enumerate(
        (d, t, l2, h, o)
        for d in ("fp16", "bf16", "fp8")
        for t in (0.3e15, 0.9e15)
        for l2, h, o in ((0, 0, 0), (5e12, 0, 0), (0, 4e12, 0), (0, 0, 3e12))
    ):
        k = shares[f"clock_power_{dtype}_per_PFLOPs"]
        rest = (
            k * flops / 1e15
            + shares["clock_power_l2_per_10TBps"] * l2 / 1e13
            + shares["clock_power_hbm_per_10TBps"] * hbm / 1e13
            + shares["clock_power_fp32_per_10Tops"] * fp32 / 1e13
        )
        f = (1 - rest) / shares["clock_power_per_GHz"] * 1e9
        assert f < ratio * top * clock_fit.CEILING_MARGIN
        rows.append(
            {
                "name": f"clock_dot_{i}",
                "value": f,
                "mma": True,
                "dtype": dtype,
                "data": "random",
                "tensor_flop_per_s": flops,
                "l2_hit_bytes_per_s": l2,
                "hbm_bytes_per_s": hbm,
                "fp32_ops_per_s": fp32,
            }
        )
    return rows


def test_the_fit_recovers_the_shares_rows_obey():
    shares = {k: v for k, v in MODEL.items() if k.startswith("clock_power_")}
    shares.update(clock_power_per_GHz=0.55, clock_power_fp16_per_PFLOPs=0.25)
    fields, top_src, share_src = clock_fit.derive(_rows(shares), 0.9)
    assert fields["clock_max_hz"] == 1.98e9
    for key, value in shares.items():
        assert fields[key] == pytest.approx(value, rel=1e-3), key
    assert "3 launches without MMAs" in top_src and "24 tl.dot loops" in share_src
    # too few loops to fix seven shares: no model rather than a guess
    assert clock_fit.derive(_rows(shares)[:8], 0.9) is None
