"""Reading measured points out of results files.

Which files hold measurements (validate and bench files), which GPU and preset they
belong to, which validation set each measured, and the `Point`s they hold: a point
measured in several runs becomes one point with the mean of its runs' times.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...errors import TilesimError
from ...hwmodels import load_gpu
from ...hwmodels.presets import base_preset_for
from .. import paths as results_paths
from .. import schema
from ..grid import EXTERNAL_SCHEDULES
from .points import Point

MEASURED = ("validate", "bench")  # the kinds of results file the report reads
TIMINGS = {"eager": "time_s", "graph": "time_graph_s"}  # --timing -> the measured field


def default_paths(results_dir: Path | None = None) -> list[Path]:
    """Every validate file (each set and run) and every bench file that timed an
    external kernel the model predicts (``EXTERNAL_SCHEDULES``)."""
    validate, bench = [], []
    for path in sorted((results_dir or results_paths.raw()).glob("*.json")):
        kind = _kind(path)
        if kind == "validate":
            validate.append(path)
        elif kind == "bench" and _times_external(path):
            bench.append(path)
    return validate + bench


def _times_external(path: Path) -> bool:
    rows = schema.load_json(path).get("measurements", [])
    return any(row.get("impl") in EXTERNAL_SCHEDULES for row in rows)


def _kind(path: Path) -> str | None:
    """The ``kind`` of a JSON file (None: not a tilesim results file); a missing or
    malformed file is an error."""
    doc = schema.load_json(path)
    return doc.get("kind") if isinstance(doc, dict) else None


def preset_of(docs: Sequence[tuple[str, dict]]) -> str:
    """The datasheet preset of the GPU the measurements were taken on."""
    names = []
    for _, doc in docs:
        meta = doc["metadata"]
        name = (meta.get("device") or {}).get("name") or (meta.get("nvidia_smi_before") or {}).get(
            "name"
        )
        if name:
            names.append(name)
    if not names:
        raise TilesimError("the results files do not name their GPU: pass --gpu-preset")
    presets = sorted({base_preset_for(n) for n in names})
    if len(presets) > 1:
        raise TilesimError(
            f"the results files come from different GPUs ({', '.join(presets)}): report one "
            "GPU at a time"
        )
    return presets[0]


def best_preset(docs: Sequence[tuple[str, dict]]) -> str:
    """The calibrated preset of the measured GPU where one exists, else its datasheet one."""
    base = preset_of(docs)
    try:
        load_gpu(f"{base}.calibrated")
    except TilesimError:
        return base
    return f"{base}.calibrated"


def set_name(doc: dict) -> str:
    """The validation set a validate or bench file measured: "grid", "random (seed S)" or
    "serving (seed S)"."""
    meta = doc["metadata"]
    if meta.get("grid") in ("random", "serving"):
        return f"{meta['grid']} (seed {meta.get('seed')})"
    return "grid"


def collect_points(
    docs: Sequence[tuple[str, dict]], timing: str = "eager"
) -> tuple[list[Point], list[Point]]:
    """(tilesim points from validate files, external points from bench files).

    A point measured by several files (the same set, algorithm, workload and config:
    the same set re-measured in another run) is one point whose time is the mean of
    its runs', predicted once at their mean SM clock.
    """
    own, ext = _collect(docs, TIMINGS[timing])
    return _merge(own), _merge(ext)


def _merge(points: Sequence[Point]) -> list[Point]:
    merged: dict[tuple, Point] = {}
    for p in points:
        key = (p.set_name, p.algo, p.workload, p.config)
        first = merged.setdefault(key, p)
        if first is not p:
            first.runs.update(p.runs)
            first.run_clocks.update(p.run_clocks)
            first.run_counters.update(p.run_counters)
            first.parts_measured = _mean_parts(first, p)
    for p in merged.values():
        p.measured_s = sum(p.runs.values()) / len(p.runs)
        clocks = [c for c in p.run_clocks.values() if c]
        p.clock_MHz = sum(clocks) / len(clocks) if clocks else None
        # counted clocks only where every run counted one: a mean over some runs would
        # put the others' times at a clock they were not measured at
        counters = list(p.run_counters.values())
        p.counter_MHz = sum(counters) / len(counters) if counters and all(counters) else None
    return list(merged.values())


def _mean_parts(a: Point, b: Point) -> dict:
    """Each launch's time averaged over the runs (a's runs already include b's)."""
    n = len(a.runs) - 1  # a's runs before b joined
    if set(a.parts_measured) != set(b.parts_measured):
        return a.parts_measured
    return {k: (a.parts_measured[k] * n + b.parts_measured[k]) / (n + 1) for k in a.parts_measured}


def _collect(docs: Sequence[tuple[str, dict]], field_: str) -> tuple[list[Point], list[Point]]:
    own, ext = [], []
    for name, doc in docs:
        for i, row in enumerate(schema.ok_rows(doc)):
            if doc["kind"] == "validate" and not row.get(field_):
                continue  # not measured this way (graph timing: older files, uncapturable)
            where = f"{name}: measurements[{i}]"
            w = schema.workload_from_record(row, where)
            if doc["kind"] == "validate":
                cfg = schema.config_from_record(row, where)
                own.append(
                    Point(
                        name,
                        row["algo"],
                        row["algo"],
                        w,
                        cfg,
                        row[field_],
                        stored=row.get("predictions") or {},
                        clock_MHz=row.get("clock_sm_MHz"),
                        parts_measured=row.get("parts") or {},
                        set_name=set_name(doc),
                        runs={name: row[field_]},
                        run_clocks={name: row.get("clock_sm_MHz")},
                        run_counters={name: _counter(row, field_)},
                    )
                )
            elif (
                doc["kind"] == "bench"
                and row.get("impl") in EXTERNAL_SCHEDULES
                and EXTERNAL_SCHEDULES[row["impl"]](w)
                and row.get(field_)  # graph timing: older bench files have none
            ):
                impl = row["impl"]
                ext.append(
                    Point(
                        name,
                        impl,
                        impl,
                        w,
                        None,
                        row[field_],
                        clock_MHz=row.get("clock_sm_MHz"),
                        set_name=set_name(doc),
                        runs={name: row[field_]},
                        run_clocks={name: row.get("clock_sm_MHz")},
                        run_counters={name: _counter(row, field_)},
                    )
                )
    return own, ext


def _counter(row: dict, field_: str) -> float | None:
    """The counted clock of a row, for its graph time only: it was counted over the
    graph replays, and eager do_bench runs in another thermal state."""
    return row.get("clock_counter_MHz") if field_ == "time_graph_s" else None
