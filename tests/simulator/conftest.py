"""A toy GPU with round numbers and a tiny trace builder, so engine tests can check
exact cycle counts by hand.

Toy GPU (1 GHz, so 1 cycle = 1 ns): HBM reads 100 B/cycle, writes 50 B/cycle,
HBM latency 500 cycles; L2 hits 1000 B/cycle, latency 100; shared memory 100
B/cycle/SM; tensor cores 2000 FLOP/cycle/SM (wgmma); SFU 10 exp/cycle/SM; FP32
100 ops/cycle/SM; no launch overhead unless a test asks for it.
"""

from __future__ import annotations

import pytest

from tilesim.hwmodels.gpu import GPU
from tilesim.traces.ir import CtaProgram, Launch, Role, TensorSpec, Trace

TOY = dict(
    name="toy",
    display_name="Toy GPU",
    arch="hopper",
    sm_count=2,
    sm_clock_hz=1e9,
    tensor_clock_ratio=1.0,  # tensor-core launches run at sm_clock_hz
    max_ctas_per_sm=4,
    max_warps_per_sm=64,
    regs_per_sm=65536,
    smem_bytes_per_sm=200_000,
    smem_bytes_per_cta_max=200_000,
    smem_bandwidth_B_per_clk_per_sm=100.0,
    cta_turnaround_cycles=0.0,
    cta_dispatch_cycles=0.0,
    clock_max_hz=0.0,  # no clock model: every launch at sm_clock_hz
    clock_power_per_GHz=0.0,
    clock_power_fp16_per_PFLOPs=0.0,
    clock_power_bf16_per_PFLOPs=0.0,
    clock_power_fp8_per_PFLOPs=0.0,
    clock_power_l2_per_10TBps=0.0,
    clock_power_hbm_per_10TBps=0.0,
    clock_power_fp32_per_10Tops=0.0,
    tensor_fp16_mma_sync_flop_per_clk_per_sm=1000.0,
    tensor_fp16_wgmma_flop_per_clk_per_sm=2000.0,
    tensor_fp8_wgmma_flop_per_clk_per_sm=4000.0,
    wgmma_latency_cycles=0.0,
    sfu_ops_per_clk_per_sm=10.0,
    fp32_ops_per_clk_per_sm=100.0,
    warp_schedulers_per_sm=4,
    vector_warps_per_scheduler=1.0,
    l2_bytes=1_000_000,
    l2_bandwidth_Bps=1e12,
    l2_hit_latency_cycles=100.0,
    l2_hit_latency_50_cycles=100.0,  # flat: the toy's latencies do not grow with load
    l2_hit_latency_75_cycles=100.0,
    l2_hit_latency_95_cycles=100.0,
    hbm_bytes=10**10,
    hbm_bandwidth_Bps=1e11,
    hbm_read_efficiency=1.0,
    hbm_write_efficiency=0.5,
    hbm_mix_25_efficiency=0.0,  # no mix points: each byte at its direction's cost
    hbm_mix_50_efficiency=0.0,
    hbm_mix_75_efficiency=0.0,
    hbm_mix_90_efficiency=0.0,
    hbm_latency_cycles=500.0,
    hbm_latency_50_cycles=500.0,
    hbm_latency_75_cycles=500.0,
    hbm_latency_95_cycles=500.0,
    hbm_tile_extra_cycles=0.0,
    hbm_tile_extra_2KiB_cycles=0.0,
    hbm_tile_extra_8KiB_cycles=0.0,
    store_bandwidth_B_per_clk_per_sm=0.0,
    launch_overhead_s=0.0,
    has_tma=True,
    has_wgmma=True,
    has_fp8=True,
)


def toy_gpu(**changes) -> GPU:
    return GPU(**{**TOY, **changes})


def toy_trace(*launch_specs, tensors=("A", "B", "C"), params=None) -> Trace:
    """A trace from ``(grid, roles)`` pairs; roles are ``(name, ops)``; one CTA per SM
    unless a spec has a third element (smem bytes per CTA)."""
    launches = []
    for i, spec in enumerate(launch_specs):
        grid, roles = spec[0], spec[1]
        smem = spec[2] if len(spec) > 2 else 150_000
        persistent = spec[3] if len(spec) > 3 else 0
        launches.append(
            Launch(
                name=f"L{i}",
                grid=tuple(grid),
                program=CtaProgram(tuple(Role(n, tuple(ops), 4) for n, ops in roles)),
                smem_bytes=smem,
                threads=128 * len(roles),
                regs_per_thread=32,
                mma_path="wgmma",
                persistent_ctas=persistent,
            )
        )
    return Trace(
        algo="toy",
        tensors=tuple(TensorSpec(t, (1 << 20,), "fp16") for t in tensors),
        launches=tuple(launches),
        params=dict(params or {}),
    )


@pytest.fixture
def gpu():
    return toy_gpu()


@pytest.fixture
def kit():
    """The builders, as a fixture (test modules cannot import a conftest by name)."""
    from types import SimpleNamespace

    return SimpleNamespace(gpu=toy_gpu, trace=toy_trace)
