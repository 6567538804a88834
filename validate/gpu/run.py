"""`tilesim validate`: time tilesim's kernels over the grid and predict every point.

For each point of :func:`tilesim.validate.grid.validate_grid`: fresh inputs,
the output checked against the float32 reference, a ``do_bench`` median (a
backward point: the backward's launches only, its gradients checked against
float32 autograd, and each launch timed alone as ``parts``), then
predictions with each preset (the datasheet ``h200`` and, if present, the
calibrated ``h200-cal``) from the *same* KernelConfig the kernel ran with. The
predictions run in spawned worker processes while the GPU times the next
points, so the whole grid fits in a few minutes.

The results file is rewritten (atomically) every few points, so a run cut short
still leaves a valid file holding what it measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ...errors import TilesimError
from ...hwmodels import load_gpu
from ...runner import Job, Pool
from .. import schema
from ..grid import GridPoint
from . import metadata, timing

CHECKPOINT_EVERY = 1  # points between rewrites of the results file (a kill loses one point)
POINT_LIMIT_S = 45.0  # a point not done by then is taken for a hung kernel
MEMORY_MARGIN = 1.25  # scratch must fit in free memory with this margin


def run_validate(
    points: Sequence[GridPoint],
    out_path: Path,
    presets: Sequence[str],
    *,
    warmup_ms: float = 10,
    rep_ms: float = 40,
    time_budget_s: float | None = None,
    predict_workers: int = 8,
    log: Callable[[str], None] = print,
    meta_extra: dict | None = None,
) -> dict:
    """Run the grid on GPU 0 and write ``out_path``; returns the results document."""
    import torch

    meta = metadata.collect(
        {
            "command": "validate",
            "presets": list(presets),
            "timing": {
                "function": "triton.testing.do_bench",
                "return_mode": "median",
                "repeats": timing.REPEATS,
                "time_s": "smallest of the repeated do_bench medians",
                "time_graph_s": "median of CUDA-graph replays of the point's launches, L2 "
                "flushed before each: the GPU's time without the host's launch cost",
                "clock_counter_MHz": timing.COUNTER_CLOCK,
                "warmup_ms": warmup_ms,
                "rep_ms": rep_ms,
                "l2_flushed": True,
            },
            "tolerance": timing.TOLERANCE,
            "grad_tolerance": timing.GRAD_TOLERANCE,
            "check": "rel. L2 error vs float32 reference on the first and last (batch, head); "
            "backward points: the worst of dq, dk, dv vs float32 autograd",
            "backward": "backward points time only the backward launches "
            "(backward_launches; the forward runs once, untimed); parts: each launch alone",
            **(meta_extra or {}),
        }
    )
    doc = schema.new_results("validate", meta)
    rows = doc["measurements"]
    t_start = time.perf_counter()
    ex = Pool(predict_workers) if predict_workers > 0 and presets else None
    gpus = {preset: load_gpu(preset) for preset in presets} if ex is not None else {}
    futures: list[tuple[int, str, object]] = []

    def on_hang(what: str) -> None:
        i = len(rows)
        rows.append(
            _record(
                points[i],
                "error",
                note=f"no result after {POINT_LIMIT_S:.0f} s (hung kernel?); the run stopped here",
            )
        )
        rows.extend(
            _record(p, "skipped", note="not run: an earlier point hung") for p in points[i + 1 :]
        )
        log(f"{what}: no result after {POINT_LIMIT_S:.0f} s; results saved, exiting")
        schema.save_results(doc, out_path)
        # children must not outlive us: they would hold our stdout open
        for s in samplers:
            s.__exit__(None, None, None)
        if ex is not None:
            ex.stop(shutdown=False)

    watchdog = timing.Watchdog(POINT_LIMIT_S, on_hang)
    samplers = []
    with metadata.ClockSampler(interval_ms=100) as sampler:
        samplers.append(sampler)
        try:
            for i, p in enumerate(points):
                elapsed = time.perf_counter() - t_start
                if time_budget_s is not None and elapsed > time_budget_s:
                    rows.append(
                        _record(p, "skipped", note=f"time budget of {time_budget_s:.0f} s spent")
                    )
                    continue
                watchdog.arm(p.label)
                row = _measure(p, i, warmup_ms, rep_ms, torch, sampler)
                timing.release()  # the point's inputs and scratch are garbage now
                watchdog.disarm()
                rows.append(row)
                log(f"[{i + 1}/{len(points)} {elapsed:5.0f}s] {p.label}: {_describe(row)}")
                if ex is not None and row["status"] == "ok":
                    for preset in presets:
                        job = Job(gpus[preset], p.algo, p.workload, p.config)
                        futures.append((len(rows) - 1, preset, ex.submit(job)))
                if (i + 1) % CHECKPOINT_EVERY == 0:
                    schema.save_results(doc, out_path)
            for index, preset, fut in futures:
                try:
                    result = fut.result(timeout=max(5.0, _remaining(t_start, time_budget_s, 20)))
                    pred = result.get("prediction") or {"error": result["error"]}
                except Exception as exc:  # a slow or failed prediction: recorded, not fatal
                    pred = {"error": timing.first_line(exc)}
                rows[index].setdefault("predictions", {})[preset] = pred
        finally:
            if ex is not None:
                ex.stop()
    metadata.finish(meta)
    schema.save_results(doc, out_path)
    return doc


def _remaining(t_start: float, budget: float | None, extra: float) -> float:
    if budget is None:
        return 600.0
    return budget + extra - (time.perf_counter() - t_start)


def _times(run, warmup_ms, rep_ms, sampler) -> dict:
    """A checked point's timing fields: do_bench's time and medians, the CUDA-graph
    replay's time (where the launches can be captured), the SM clock nvidia-smi read
    meanwhile and the one the SMs' cycle counters ran at over the replays."""
    t0 = time.perf_counter()
    t, medians = timing.bench_repeat(run, warmup_ms, rep_ms)
    graph = timing.bench_graph_s(run, warmup_ms, rep_ms)
    out = {"time_s": t, "time_medians_s": medians, "clock_sm_MHz": timing.clock_during(sampler, t0)}
    if graph is not None:
        out["time_graph_s"] = graph
        counter = timing.counter_clock_hz(run)
        if counter:
            out["clock_counter_MHz"] = counter / 1e6
    return out


def _record(p: GridPoint, status: str, **kw) -> dict:
    return schema.kernel_record(p.algo, p.workload, p.config, status, group=p.group, **kw)


def _measure(p: GridPoint, seed: int, warmup_ms, rep_ms, torch, sampler) -> dict:
    w = p.workload
    if w.pass_ != "fwd":
        return _measure_backward(p, seed, warmup_ms, rep_ms, torch, sampler)
    if p.algo == "standard":
        need = timing.standard_scratch_bytes(w) * MEMORY_MARGIN
        if need > timing.free_bytes():
            return _record(
                p,
                "skipped",
                note=f"S and P need {need / 2**30:.1f} GiB, more than the GPU has free",
            )
    try:
        q, k, v, scales = timing.make_inputs(w, seed)
        out, run = timing.kernel_run(p.algo, q, k, v, w.causal, p.config, scales)
        err = timing.check_output(run, q, k, v, w.causal, scales, w.dtype, out=out)
        if not err <= timing.TOLERANCE[w.dtype]:
            return _record(
                p,
                "wrong",
                rel_error=err,
                note=f"rel. error {err:.3g} over {timing.TOLERANCE[w.dtype]:g}",
            )
        return _record(p, "ok", rel_error=err, **_times(run, warmup_ms, rep_ms, sampler))
    except TilesimError as exc:  # the kernel refuses this point (e.g. an unsupported dtype)
        return _record(p, "skipped", note=timing.first_line(exc))
    except torch.cuda.OutOfMemoryError as exc:
        return _record(p, "skipped", note="out of GPU memory: " + timing.first_line(exc, 120))
    except Exception as exc:  # compile or launch failure: recorded, the grid goes on
        return _record(p, "error", note=f"{type(exc).__name__}: {timing.first_line(exc)}")


def _measure_backward(p: GridPoint, seed: int, warmup_ms, rep_ms, torch, sampler) -> dict:
    """Time the backward's launches only: the forward runs once, untimed, inside
    ``backward_launches``; dq, dk, dv are checked against float32 autograd first.
    A fwd_bwd point times the forward's launches, then the backward's, in one run
    (the forward's output checked too); its parts are the launches of both."""
    w = p.workload
    if p.algo == "standard":
        need = timing.standard_backward_scratch_bytes(w) * MEMORY_MARGIN
        if need > timing.free_bytes():
            return _record(
                p, "skipped", note=f"S, P, dP, dS need {need / 2**30:.1f} GiB, more than is free"
            )
    try:
        q, k, v, _ = timing.make_inputs(w, seed)
        do = timing.make_grad_output(w, seed)
        grads, run, runs = timing.backward_run(p.algo, q, k, v, do, w.causal, p.config)
        err = timing.check_grads(run, q, k, v, do, w.causal, grads)
        tol = timing.GRAD_TOLERANCE[w.dtype]
        if not err <= tol:
            return _record(
                p, "wrong", rel_error=err, note=f"grad rel. error {err:.3g} over {tol:g}"
            )
        if w.pass_ == "fwd_bwd":
            out, fwd = timing.kernel_run(p.algo, q, k, v, w.causal, None, {})
            err_f = timing.check_output(fwd, q, k, v, w.causal, {}, w.dtype, out=out)
            if not err_f <= timing.TOLERANCE[w.dtype]:
                return _record(p, "wrong", rel_error=err_f, note=f"output rel. error {err_f:.3g}")
            bwd = run
            runs = [("forward", fwd), *runs]

            def run():
                fwd()
                return bwd()

        times = _times(run, warmup_ms, rep_ms, sampler)
        parts = timing.bench_parts(runs, warmup_ms, rep_ms)
        return _record(p, "ok", rel_error=err, parts=parts, **times)
    except TilesimError as exc:
        return _record(p, "skipped", note=timing.first_line(exc))
    except torch.cuda.OutOfMemoryError as exc:
        return _record(p, "skipped", note="out of GPU memory: " + timing.first_line(exc, 120))
    except Exception as exc:  # compile or launch failure: recorded, the grid goes on
        return _record(p, "error", note=f"{type(exc).__name__}: {timing.first_line(exc)}")


def _describe(row: dict) -> str:
    if row["status"] == "ok":
        return (
            f"{row['time_s'] * 1e3:8.3f} ms {row['tflops']:6.1f} TFLOPS "
            f"(err {row['rel_error']:.1e})"
        )
    return f"{row['status'].upper()}: {row['note']}"


def default_presets(device_name: str) -> list[str]:
    """The datasheet preset of this GPU and its calibrated variant when one exists (a GPU
    with no datasheet preset: the one `tilesim calibrate` built for it)."""
    from ...hwmodels import list_presets
    from ...hwmodels.presets import base_preset_for, calibrated_name
    from ..device import device_slug

    try:
        base = base_preset_for(device_name)
    except TilesimError:  # a GPU with no datasheet preset: the one `tilesim calibrate` built
        mine = calibrated_name(device_slug(device_name))
        if mine in list_presets():
            return [mine]
        raise
    presets = [base]
    if calibrated_name(base) in list_presets():
        presets.append(calibrated_name(base))
    return presets
