"""The SM clock a launch runs at under load, from a power model of its work per second.

The SMs' own cycle counters run a launch with MMAs below the clock nvidia-smi reports,
the more so the harder it works, and a launch without MMAs at the full clock whatever it
streams (docs/model.md). So, where the preset has the model (``GPU.clock_max_hz`` > 0): a launch
without MMAs runs at ``clock_max_hz``; one with MMAs at the highest clock f, at most
``tensor_clock_ratio x clock_max_hz``, at which

    f x (per_GHz + k_dtype x FLOP/clk + k_l2 x L2 B/clk + k_fp32 x FP32 ops/clk)
      + k_hbm x HBM B/s  <=  1                                   (the whole budget)

Work per clock holds as the clock moves (a compute-bound launch's cycles do not change);
HBM traffic is per second. The shares come from micro-benchmarks (tl.dot loops of each
dtype with their operands in registers, the L2 or HBM, diluted by FMAs), never from an
attention timing. The engine simulates a launch at its ceiling, reads its work, and
runs it again at the clock this gives (simulator/engine.py).
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU

# k per unit of each rate, in the preset's units
_FLOP_UNIT, _BYTES_UNIT, _OPS_UNIT = 1e15, 1e13, 1e13


def modelled(gpu: GPU) -> bool:
    """Whether ``gpu`` has a clock model (else every launch at ``sm_clock_hz``)."""
    return gpu.clock_max_hz > 0


def ceiling_hz(gpu: GPU, mma: bool) -> float:
    """The clock a launch runs at before its work holds it back."""
    if not modelled(gpu):
        return gpu.sm_clock_hz * (gpu.tensor_clock_ratio if mma else 1.0)
    return gpu.clock_max_hz * (gpu.tensor_clock_ratio if mma else 1.0)


def launch_clock_hz(
    gpu: GPU,
    dtype: str | None,
    seconds: float,
    flops: float,
    l2_bytes: float,
    hbm_bytes: float,
    fp32_ops: float,
    at_hz: float,
) -> float:
    """The clock of a launch that did this work in ``seconds`` at ``at_hz``; ``dtype`` is
    its MMAs' input type (None: no MMAs)."""
    top = ceiling_hz(gpu, dtype is not None)
    if not modelled(gpu) or dtype is None or seconds <= 0:
        return top
    cycles = seconds * at_hz
    k_tensor = {
        "fp16": gpu.clock_power_fp16_per_PFLOPs,
        "bf16": gpu.clock_power_bf16_per_PFLOPs,
        "fp8": gpu.clock_power_fp8_per_PFLOPs,
    }[dtype]
    per_clock = (
        gpu.clock_power_per_GHz / 1e9
        + k_tensor * flops / cycles / _FLOP_UNIT
        + gpu.clock_power_l2_per_10TBps * l2_bytes / cycles / _BYTES_UNIT
        + gpu.clock_power_fp32_per_10Tops * fp32_ops / cycles / _OPS_UNIT
    )  # budget per Hz
    left = 1.0 - gpu.clock_power_hbm_per_10TBps * hbm_bytes / seconds / _BYTES_UNIT
    # beyond what was measured (a what-if's huge rates): never below a quarter of the top
    return min(top, max(0.25 * top, left / per_clock))
