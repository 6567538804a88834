"""Predictions of measured points: the same workload and KernelConfig through the model.

A measured point stores its ``workload`` and ``config``; :func:`predict_point`
builds that exact trace and simulates it, so a prediction and a measurement
always describe the same grid and tiles. :func:`predict_many` runs a list of
jobs serially or in worker processes (spawned, so a CUDA process can use it
too); results come back in job order, so the output is deterministic.
"""

from __future__ import annotations

import functools
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from ..errors import TilesimError
from ..hwmodels import load_gpu
from ..traces.workload import KernelConfig, Workload


@dataclass(frozen=True)
class Job:
    """One prediction to make: a preset and a measured point's algo, workload, config."""

    preset: str
    algo: str  # an algorithm, or an external kernel (traces.EXTERNAL)
    workload: Workload
    config: KernelConfig | None  # None: an external kernel's own
    clock_hz: float | None = None  # SM clock to predict at (the one read while it was timed)
    counted: bool = False  # clock_hz is the SMs' own cycle counters' (no tensor_clock_ratio)


@functools.lru_cache(maxsize=16)
def _gpu(preset: str):
    return load_gpu(preset)


def predict_point(
    preset: str,
    algo: str,
    workload: Workload,
    config: KernelConfig,
    fidelity: str = "fast",
    clock_hz: float | None = None,
    counted: bool = False,
) -> dict:
    """{"time_s", "bound", "tflops", "launches": {name: time_s}, ...} of one point, or
    {"error": "..."} if the model cannot run it (a config that does not fit the preset,
    say). ``clock_hz``: predict with the SMs at this clock (`GPU.at_clock`) instead of
    the preset's; ``counted``: a clock the SMs' cycle counters measured
    (`GPU.at_counted_clock`)."""
    from ..simulator import simulate
    from ..traces import EXTERNAL, build, build_external

    try:
        gpu = _at(_gpu(preset), clock_hz, counted)
        if algo in EXTERNAL:
            trace = build_external(algo, workload, gpu)
        else:
            trace = build(algo, workload, gpu, config)
        pred = simulate(trace, gpu, fidelity=fidelity)
    except TilesimError as exc:
        return {"error": str(exc)}
    out = {
        "time_s": float(pred.time_s),
        "gpu": gpu.name,
        "launches": {launch.name: float(launch.time_s) for launch in pred.launches},
        "estimated_launches": [x["launch"] for x in pred.estimated_launches],
    }
    for key in ("bound", "tflops", "l2_hit_rate", "hbm_read_bytes", "hbm_write_bytes"):
        value = getattr(pred, key, None)
        if value is not None:
            out[key] = value if isinstance(value, str) else float(value)
    return out


def _run(job: Job, fidelity: str) -> dict:
    return predict_point(
        job.preset, job.algo, job.workload, job.config, fidelity, job.clock_hz, job.counted
    )


def _at(gpu, clock_hz: float | None, counted: bool):
    if not clock_hz:
        return gpu
    return gpu.at_counted_clock(clock_hz) if counted else gpu.at_clock(clock_hz)


def predict_many(
    jobs: Sequence[Job], fidelity: str = "fast", workers: int = 1, progress=None
) -> list[dict]:
    """Predict every job (equal jobs once); ``workers`` > 1 uses that many spawned
    processes, the longest jobs first (`tilesim.runner.work_estimate`). Results come
    back in job order.

    ``progress(done, total)``, if given, is called after each prediction.
    """
    unique = list(dict.fromkeys(jobs))
    done: dict[Job, dict] = {}

    def tick() -> None:
        if progress is not None:
            progress(len(done), len(unique))

    if workers <= 1 or len(unique) <= 1:
        for job in unique:
            done[job] = _run(job, fidelity)
            tick()
    else:
        cost = {job: _estimate(job, fidelity) for job in unique}
        with pool(workers) as ex:
            futures = {
                ex.submit(_run, job, fidelity): job
                for job in sorted(unique, key=lambda j: -cost[j])
            }
            for fut in as_completed(futures):
                done[futures[fut]] = fut.result()
                tick()
    return [done[job] for job in jobs]


def _estimate(job: Job, fidelity: str) -> int:
    """`work_estimate` of the job's trace (0 when it cannot be built: it fails fast)."""
    from ..runner import work_estimate
    from ..traces import build

    try:
        gpu = _at(_gpu(job.preset), job.clock_hz, job.counted)
        return work_estimate(build(job.algo, job.workload, gpu, job.config), fidelity)
    except TilesimError:
        return 0


def pool(workers: int) -> ProcessPoolExecutor:
    """Worker processes started by spawn: safe beside a process that holds a CUDA context."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def stop_pool(ex: ProcessPoolExecutor, shutdown: bool = True) -> None:
    """Stop a pool now, running jobs included: kill its workers, then shut it down.

    ``shutdown`` alone waits for running jobs at exit, and a worker orphaned by a
    parent that ends with ``os._exit`` would wait forever on its queue (holding
    the parent's stdout open). ``shutdown=False`` only kills: what a process
    about to ``os._exit`` from another thread wants (shutdown can block there).
    """
    for proc in list(getattr(ex, "_processes", {}).values()):  # no public handle on them
        proc.kill()
    if shutdown:
        ex.shutdown(wait=False, cancel_futures=True)


def submit(ex: ProcessPoolExecutor, job: Job, fidelity: str = "fast"):
    return ex.submit(_run, job, fidelity)
