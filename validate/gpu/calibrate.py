"""The GPU half of `tilesim calibrate`: run the micro-benchmark steps, return their rows.

:func:`run_calibration` builds one :class:`~tilesim.validate.gpu.microbench.Bench` and
calls the steps of :mod:`tilesim.validate.gpu.steps` chosen from
:data:`tilesim.validate.calibrate.STEPS`, in that order; a step that fails is logged and
its fields stay at the datasheet's. The CPU half, which turns the rows into a preset,
is :func:`tilesim.validate.calibrate.derive_preset`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..calibrate import check_steps
from ..schema import measurement
from .metadata import ClockSampler
from .microbench import Bench
from .steps import (
    clock,
    dispatch,
    hbm,
    hbm_mix,
    l2,
    latency,
    launch,
    power,
    tensor,
    tile,
    turnaround,
    vector,
)

# (key in STEPS, title logged before it, the step)
STEP_FUNCTIONS: tuple[tuple[str, str, Callable[[Bench], None]], ...] = (
    ("hbm", "HBM bandwidth", hbm.hbm),
    ("hbm_mix", "HBM reads and writes mixed", hbm_mix.hbm_mix),
    ("l2", "L2 bandwidth curve", l2.l2),
    ("latency", "latency (pointer chase)", latency.latency),
    ("loaded_latency", "latency under streaming load", latency.loaded_latency),
    ("tensor", "tensor cores (tl.dot loops)", tensor.tensor),
    ("mma_latency", "tensor-core latency (dependent tl.dot chains)", tensor.mma_latency),
    ("clock", "sustained SM clock", clock.sustained_clock),
    ("power", "SM clock under load", power.power),
    ("exp2", "exp2 (SFU)", vector.exp2),
    ("fp32", "FP32 FMA", vector.fp32),
    ("vector", "vector work vs warps per scheduler", vector.vector_latency),
    ("launch", "launch overhead", launch.launch),
    ("turnaround", "CTA turnaround on an SM slot", turnaround.turnaround),
    ("dispatch", "CTA start rate of the GPU", dispatch.dispatch),
    ("tile_latency", "HBM tile latency, one CTA per SM", tile.tile_latency),
    ("store_latency", "store acknowledgement, one CTA per SM", tile.store_latency),
)


def run_calibration(
    quick: bool = False, log: Callable[[str], None] = print, only: Sequence[str] | None = None
) -> list[dict]:
    """Run the micro-benchmarks on GPU 0 (``only``: a subset of
    :data:`~tilesim.validate.calibrate.STEPS`); returns the raw rows (a failed one is
    logged and skipped).

    Takes about a minute (``quick``: a third of that), most of it Triton compiling.
    """
    chosen = check_steps(only)
    props = torch.cuda.get_device_properties(0)
    rows = [
        measurement(
            "device_sm_count", props.multi_processor_count, "SMs", "torch device properties"
        )
    ]
    l2_bytes = int(getattr(props, "L2_cache_size", 0))
    if l2_bytes:
        rows.append(measurement("device_l2_bytes", l2_bytes, "B", "torch device properties"))
    with ClockSampler(interval_ms=50) as sampler:
        bench = Bench(sampler, quick=quick, log=log)
        for key, title, step in STEP_FUNCTIONS:
            if key not in chosen:
                continue
            log(f"{title}:")
            try:
                step(bench)
            except Exception as exc:  # a broken benchmark leaves its fields at the datasheet
                log(f"  failed: {' '.join(str(exc).split())[:200]}")
    return rows + bench.rows
