"""Building a `Report`: the points of the results files, each predicted again.

The measurements store each point's workload and KernelConfig, so the report
predicts every point with the *current* model (through `runner.run_jobs`, at the
SM clock it was timed at) or, with ``stored``, takes the predictions the files kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...errors import TilesimError
from ...hwmodels import load_gpu
from ...runner import Job, run_jobs
from .. import paths as results_paths
from .. import schema
from .collect import MEASURED, TIMINGS, _kind, best_preset, collect_points, default_paths
from .points import Point, Report


def build_report(
    paths: Sequence[str | Path] | None = None,
    preset: str | None = None,
    fidelity: str = "fast",
    workers: int = 1,
    stored: bool = False,
    algos: Sequence[str] | None = None,
    measured_clock: bool = True,
    passes: Sequence[str] | None = None,
    progress=None,
    timing: str = "eager",
) -> Report:
    """Load results files and predict every measured point with ``preset`` (None: the
    calibrated preset of the measured GPU where one exists, else its datasheet one).

    Files that hold no measurement tilesim reads (calibrate, registers, ncu files, the
    accuracy baseline, other JSON) are passed over and named in ``Report.skipped``.
    ``progress(done, total)`` is called as predictions come in. ``timing``: "eager"
    compares with the do_bench time of the launches as Python issues them, "graph" with
    their CUDA-graph replay (the GPU's time alone; points measured without it are left out).

    ``algos``: only these algorithms' points (and no external kernels), of the
    forward unless ``passes`` says otherwise (the accuracy guard is per algorithm
    of the forward). ``passes``: only points of these passes.
    ``measured_clock``: predict each point with the SMs at the clock nvidia-smi read
    while it was timed (`GPU.at_clock`), as a GPU boosts or throttles under load;
    the preset's own clock where none was recorded.
    """
    paths = [Path(p) for p in paths] if paths else default_paths()
    if not paths:
        raise TilesimError(
            f"no results files in {results_paths.raw()} yet: run `tilesim validate` on a GPU first"
        )
    # `results/raw/*.json` also matches calibrate, registers, ncu files and the
    # accuracy baseline: they hold no kernel measurement, so they are passed over
    kinds = {p: _kind(p) for p in paths}
    skipped = [f"{p.name} (kind {kinds[p]!r})" for p in paths if kinds[p] not in MEASURED]
    paths = [p for p in paths if kinds[p] in MEASURED]
    docs = [(p.name, schema.load_results(p)) for p in paths]
    if not docs:
        more = f" and {len(skipped) - 4} more" if len(skipped) > 4 else ""
        shown = ", ".join(skipped[:4]) + more
        raise TilesimError(
            f"no validate or bench results among the files given: {shown} hold no kernel "
            "measurement"
        )
    preset = preset or best_preset(docs)
    load_gpu(preset)  # an unknown preset is one clear error now, not one per point
    if timing not in TIMINGS:
        raise TilesimError(f"unknown timing {timing!r} (choose eager or graph)")
    own, ext = collect_points(docs, timing)
    if algos is not None:
        own = [p for p in own if p.algo in algos]
        ext = []
        if passes is None:
            passes = ("fwd",)
    if passes is not None:
        own = [p for p in own if p.pass_ in passes]
        ext = [p for p in ext if p.pass_ in passes]
    if not own and not ext:
        names = ", ".join(name for name, _ in docs[:4]) + (" ..." if len(docs) > 4 else "")
        raise TilesimError(
            f"{names}: no successful measurement of a kernel tilesim has a schedule for"
            + (" with a CUDA-graph time" if timing == "graph" else "")
        )
    points = own + ext
    if stored:
        for p in own:
            _apply(p, *_stored(p.stored.get(preset)))
    else:
        gpu = load_gpu(preset)
        jobs = [
            Job(gpu, p.schedule, p.workload, p.config, fidelity, *_clock(p, measured_clock))
            for p in points
        ]
        answered = 0

        def tick(_index: int, _outcome) -> None:
            nonlocal answered
            answered += 1
            if progress is not None:
                progress(answered, len(jobs))

        outcomes, _ = run_jobs(jobs, workers=workers, on_result=tick)
        for p, outcome in zip(points, outcomes, strict=True):
            pred = outcome.prediction
            if pred is None:
                _apply(p, None, None, {}, outcome.error)
            else:
                launches = {launch.name: launch.time_s for launch in pred.launches}
                _apply(p, pred.time_s, pred.bound, launches)
    return Report(
        preset,
        fidelity,
        [p.name for p in paths],
        own,
        ext,
        stored=stored,
        measured_clock=measured_clock,
        skipped=skipped,
        timing=timing,
    )


def _clock(p: Point, measured_clock: bool) -> tuple[float | None, bool]:
    """(SM clock to predict ``p`` at, whether it was counted): the SMs' own counters
    where they were read, else nvidia-smi's reading (the preset's tensor_clock_ratio
    applies), else the preset's clock."""
    if not measured_clock:
        return None, False
    if p.counter_MHz:
        return p.counter_MHz * 1e6, True
    return (p.clock_MHz * 1e6 if p.clock_MHz else None), False


def _stored(pred: dict | None) -> tuple:
    """`_apply`'s arguments from a prediction a results file stored: a
    `Prediction.to_dict` (launches a list), or the summary of earlier files (launches
    by name)."""
    if not pred or "error" in pred or not pred.get("time_s"):
        return None, None, {}, (pred or {}).get("error", "no stored prediction")
    launches = pred.get("launches") or {}
    if isinstance(launches, list):
        launches = {launch["name"]: launch["time_s"] for launch in launches}
    return float(pred["time_s"]), pred.get("bound"), launches


def _apply(
    p: Point, time_s: float | None, bound: str | None, launches: dict, error: str | None = None
) -> None:
    if time_s is None:
        p.error = error or "no prediction"
        return
    p.predicted_s = float(time_s)
    p.bound = bound
    p.parts_predicted = launches
