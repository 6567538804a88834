"""`tilesim report`: the model's accuracy against committed GPU measurements (CPU only).

The measurements in ``results/raw/*.json`` store each point's workload and
KernelConfig, so the report predicts every point again with the *current* model
(stored predictions are only a record of the day): a model change shows its
effect on accuracy at once, and the accuracy test in ``tests/validate`` keeps it
from getting worse.

Figures: MAPE; the largest |error| with its sign; signed mean error (the bias)
by algorithm, head dim and mask; Spearman rank correlation of predicted and
measured times; the error of predicted speed-ups (v2 over standard, v3 over v2,
v2 over v1); the share of shapes whose predicted fastest algorithm is the
measured fastest; and, from bench files, the same for PyTorch SDPA's `flash`
backend, predicted as the FlashAttention-2 schedule it runs — a check on a
kernel nobody here wrote.

Backward points (workload ``pass_`` "bwd": the backward launches alone) are
predicted with the backward schedule and reported per pass: ``by_pass`` (the
issue's target for the backward is a MAPE of at most 15%) and ``by_pass_algo``.
``by_algo`` stays the forward's, the figure the accuracy guard holds per
algorithm; speed-up ratios and the fastest-algorithm share compare points of one
pass only.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TilesimError
from ..hwmodels import load_gpu
from ..hwmodels.presets import base_preset_for
from ..runner import Job, run_jobs
from ..traces.workload import KernelConfig, Workload
from . import paths as results_paths
from . import schema, stats
from .grid import EXTERNAL_SCHEDULES

RATIOS = (("v2", "standard"), ("v3", "v2"), ("v2", "v1"))
PASS_ORDER = ("fwd", "bwd", "fwd_bwd")
BACKWARD_TARGET_MAPE_PCT = 15.0  # issue 7's target for the backward's predictions
ALGO_ORDER = ("standard", "v1", "v2", "v3")
BASELINE_SLACK_PCT = 1.0  # the accuracy test allows MAPE to rise this many points
MEASURED = ("validate", "bench")  # the kinds of results file the report reads


@dataclass
class Point:
    """One measured kernel run and its prediction."""

    source: str  # results file name
    algo: str  # standard | v1 | v2 | v3, or an external impl ("sdpa-flash")
    schedule: str  # the algorithm whose trace predicts it
    workload: Workload
    config: KernelConfig
    measured_s: float
    predicted_s: float | None = None
    bound: str | None = None
    error: str | None = None  # why there is no prediction
    stored: dict = field(default_factory=dict)  # predictions kept in the file, by preset
    clock_MHz: float | None = None  # median SM clock read while it was timed
    # the SMs' own cycle counters over the graph replays (MHz): the clock it really ran at
    counter_MHz: float | None = None
    # each launch timed on its own (backward points: kernels.api launch names) and predicted
    # (trace launch names)
    parts_measured: dict = field(default_factory=dict)
    parts_predicted: dict = field(default_factory=dict)
    set_name: str = "grid"  # the validation set: "grid" or "random (seed S)"
    # the point's time in each run that measured it (file name -> s); measured_s is their mean
    runs: dict = field(default_factory=dict)
    run_clocks: dict = field(default_factory=dict)  # file name -> SM clock read (MHz)
    run_counters: dict = field(default_factory=dict)  # file name -> counter clock (MHz)

    @property
    def spread(self) -> float | None:
        """(slowest - fastest) / mean over the runs that measured the point (None: one run)."""
        if len(self.runs) < 2:
            return None
        times = list(self.runs.values())
        return (max(times) - min(times)) / (sum(times) / len(times))

    @property
    def pass_(self) -> str:
        return self.workload.pass_

    @property
    def shape(self) -> tuple:
        w = self.workload
        return (w.pass_, w.dtype, w.head_dim, w.seqlen_q, w.causal, w.batch, w.heads)

    @property
    def rel_error(self) -> float:
        return stats.rel_error(self.predicted_s, self.measured_s)

    def to_dict(self) -> dict:
        w = self.workload
        return {
            "source": self.source,
            "algo": self.algo,
            "pass": w.pass_,
            "dtype": w.dtype,
            "head_dim": w.head_dim,
            "seqlen": w.seqlen_q,
            "causal": w.causal,
            "batch": w.batch,
            "heads": w.heads,
            "measured_s": self.measured_s,
            "predicted_s": self.predicted_s,
            "error_pct": None if self.predicted_s is None else 100 * self.rel_error,
            "bound": self.bound,
            "note": self.error,
            "set": self.set_name,
            "runs": dict(self.runs),
            "spread_pct": None if self.spread is None else 100 * self.spread,
            "clock_sm_MHz": self.clock_MHz,
            "clock_counter_MHz": self.counter_MHz,
        }


@dataclass
class Report:
    preset: str
    fidelity: str
    files: list[str]
    points: list[Point]  # tilesim's kernels
    external: list[Point] = field(default_factory=list)  # kernels others wrote
    stored: bool = False
    measured_clock: bool = True  # predicted at the SM clock read while each point was timed
    skipped: list[str] = field(default_factory=list)  # files given that hold no measurement
    timing: str = "eager"  # which measured time: do_bench's ("eager") or a graph replay's

    def counted_summary(self) -> dict | None:
        """How many points were predicted at their counted SM clock, and that clock
        over nvidia-smi's reading per algorithm and pass (None: no point counted): the
        part of each prediction's clock that the preset's tensor_clock_ratio stands for."""
        counted = [p for p in self.points + self.external if p.counter_MHz and p.clock_MHz]
        if not self.measured_clock or not counted:
            return None
        by = collections.defaultdict(list)
        for p in counted:
            by[_algo_pass(p)].append(p.counter_MHz / p.clock_MHz)
        return {
            "points": len(counted),
            "of": len(self.points) + len(self.external),
            "counter_over_smi": {k: _range(sorted(v)) for k, v in sorted(by.items())},
        }

    def predicted(self, points: Sequence[Point] | None = None) -> list[Point]:
        return [p for p in (self.points if points is None else points) if p.predicted_s]

    # -- figures --------------------------------------------------------------------
    def summary(self) -> dict:
        # the headline figures are tilesim's kernels', or the external kernels' alone
        pts = self.predicted() or self.predicted(self.external)
        if not pts:
            raise TilesimError("no point could be predicted: nothing to report")
        out = {
            "preset": self.preset,
            "fidelity": self.fidelity,
            "recomputed": not self.stored,
            "sm_clock": "measured" if self.measured_clock else "preset",
            "timing": self.timing,
            "files": self.files,
            "points": len(self.points),
            "not_predicted": len(self.points) - len(pts),
            "overall": _summ(pts),
            # the forward's, per algorithm: what the accuracy guard holds (test_accuracy)
            "by_algo": _by([p for p in pts if p.pass_ == "fwd"], lambda p: p.algo, ALGO_ORDER),
            "by_pass": _by(pts, lambda p: p.pass_, PASS_ORDER),
            "by_pass_algo": {
                pass_: _by([p for p in pts if p.pass_ == pass_], lambda p: p.algo, ALGO_ORDER)
                for pass_ in PASS_ORDER
                if pass_ != "fwd" and any(p.pass_ == pass_ for p in pts)
            },
            "by_head_dim": _by(pts, lambda p: str(p.workload.head_dim)),
            "by_mask": _by(pts, lambda p: "causal" if p.workload.causal else "full"),
            "by_dtype": _by(pts, lambda p: p.workload.dtype),
            "by_launch": launch_summary(pts),
            "by_set": {
                name: {
                    "overall": _summ(sel),
                    "by_algo": _by(sel, _algo_pass, ALGO_PASS_ORDER),
                    "spread": spread_summary(sel),
                }
                for name, sel in _sets(pts).items()
            },
            "ratios": self.ratio_summary(),
            "fastest": self.fastest(),
        }
        clocks = sorted(p.clock_MHz for p in self.points if p.clock_MHz)
        out["clock_sm_MHz"] = _range(clocks)
        out["clock_counted"] = self.counted_summary()
        worst = pts[out["overall"]["max_abs_index"]]
        out["overall"]["max_abs_point"] = _label(worst)
        ext, ext_sets = {}, {}
        for impl in sorted({p.algo for p in self.external}):
            ok = self.predicted([p for p in self.external if p.algo == impl])
            if ok:
                ext[impl] = _summ(ok)
                for name, sel in _sets(ok).items():
                    ext_sets.setdefault(name, {})[impl] = {
                        **_summ(sel),
                        "spread": spread_summary(sel),
                    }
        out["external"] = ext
        out["external_by_set"] = ext_sets
        return out

    def ratio_summary(self) -> dict:
        tuples = [(p.shape, p.algo, p.predicted_s, p.measured_s) for p in self.predicted()]
        out = {}
        for num, den in RATIOS:
            errs = stats.ratio_errors(tuples, num, den)
            if not errs:
                continue
            e = [x[3] for x in errs]
            out[f"{num}/{den}"] = {
                "n": len(e),
                "mean_abs_pct": 100 * sum(abs(x) for x in e) / len(e),
                "signed_mean_pct": 100 * sum(e) / len(e),
                "measured_mean": sum(x[1] for x in errs) / len(errs),
                "predicted_mean": sum(x[2] for x in errs) / len(errs),
            }
        return out

    def fastest(self) -> dict:
        tuples = [(p.shape, p.algo, p.predicted_s, p.measured_s) for p in self.predicted()]
        agree, total = stats.fastest_agreement(tuples)
        return {"agree": agree, "shapes": total, "share": agree / total if total else None}


def _summ(points: Sequence[Point]) -> dict:
    return stats.summarize(
        [p.predicted_s for p in points], [p.measured_s for p in points]
    ).to_dict()


def _by(points: Sequence[Point], key, order: Sequence[str] = ()) -> dict:
    groups = stats.group_by([key(p) for p in points], list(points))
    names = [k for k in order if k in groups] + sorted(k for k in groups if k not in order)
    return {name: _summ(groups[name][0]) for name in names}


ALGO_PASS_ORDER = tuple(f"{a} {p}" for p in PASS_ORDER for a in ALGO_ORDER)
SMALL_POINT_S = 50e-6  # kernels this short scatter most between runs
NOISY_SPREAD = 0.25  # a short point whose runs differ by more is left out of the max


def _algo_pass(p: Point) -> str:
    return f"{p.algo} {p.pass_}"


def _sets(points: Sequence[Point]) -> dict[str, list[Point]]:
    """Points by validation set, the grid first."""
    out: dict[str, list[Point]] = {}
    for p in sorted(points, key=lambda p: p.set_name != "grid"):
        out.setdefault(p.set_name, []).append(p)
    return out


def spread_summary(points: Sequence[Point]) -> dict | None:
    """How far the runs that measured the same points differ: the measurement's own error.

    ``run_scatter_pct``: the mean |t_run - t_mean| / t_mean over every point and run, the
    MAPE a model that predicted each point's mean time exactly would still show against a
    single run. ``max_abs_pct_clean``: the model's largest |error| leaving out the points
    under 50 µs whose own runs differ by more than 25%.
    """
    multi = [p for p in points if p.spread is not None]
    if not multi:
        return None
    spreads = sorted(100 * p.spread for p in multi)
    scatter = [abs(t - p.measured_s) / p.measured_s for p in multi for t in p.runs.values()]
    clean = [
        p for p in points if not (p.measured_s < SMALL_POINT_S and (p.spread or 0.0) > NOISY_SPREAD)
    ]
    return {
        "points": len(multi),
        "runs": max(len(p.runs) for p in multi),
        "median_spread_pct": spreads[len(spreads) // 2],
        "max_spread_pct": spreads[-1],
        "run_scatter_pct": 100 * sum(scatter) / len(scatter),
        "left_out_of_max": len(points) - len(clean),
        "max_abs_pct_clean": _summ(clean)["max_abs_pct"] if clean else None,
    }


def _label(p: Point) -> str:
    w = p.workload
    mask = "causal" if w.causal else "full"
    algo = p.algo if w.pass_ == "fwd" else f"{p.algo} {w.pass_}"
    return f"{algo} {w.dtype} d={w.head_dim} N={seqlens(w)} {mask}"


def seqlens(w) -> str:
    """``N`` of a square shape; ``N_q/N_kv`` (and ``H_kv`` K/V heads) of a serving one."""
    n = str(w.seqlen_q) if w.seqlen_kv == w.seqlen_q else f"{w.seqlen_q}/{w.seqlen_kv}"
    return n if w.group == 1 else f"{n} H_kv={w.num_kv_heads}"


# -- inputs ---------------------------------------------------------------------------------


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


TIMINGS = {"eager": "time_s", "graph": "time_graph_s"}  # --timing -> the measured field


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


def _range(values: Sequence[float]) -> dict | None:
    """{"median", "min", "max"} of sorted ``values`` (None: none)."""
    if not values:
        return None
    return {"median": values[len(values) // 2], "min": values[0], "max": values[-1]}


def _counter(row: dict, field_: str) -> float | None:
    """The counted clock of a row, for its graph time only: it was counted over the
    graph replays, and eager do_bench runs in another thermal state."""
    return row.get("clock_counter_MHz") if field_ == "time_graph_s" else None


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


def _clock_basis(summary: dict) -> str:
    """The clock the points were predicted at, in words (the counted share, and how far
    the counters ran below nvidia-smi's reading)."""
    if summary.get("sm_clock") != "measured":
        return "the preset's clock (its clock model where it has one: what predict uses)"
    counted = summary.get("clock_counted")
    if not counted:
        return "the SM clock nvidia-smi read while each point was timed"
    ratios = ", ".join(
        f"{k} {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})"
        for k, r in counted["counter_over_smi"].items()
    )
    rest = counted["of"] - counted["points"]
    return (
        f"the SM clock the SMs' cycle counters ran at ({counted['points']} points"
        + (f"; nvidia-smi's reading for {rest}" if rest else "")
        + f"); counters over nvidia-smi: {ratios}"
    )


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


def launch_pairs(p: Point) -> list[tuple[str, float, float]]:
    """(launch, predicted s, measured s) of each launch of ``p`` timed on its own.

    The kernels' launch names carry the algorithm ("standard_bwd_dv", "v1_bwd") and the
    traces' may carry the kernel ("bwd_dv", "flash_v1_bwd"): a pair is a measured and a
    predicted name one of which ends with the other. A point whose launches do not pair
    up one to one (a forward-and-backward point's "forward" part) gives none."""
    pairs = []
    for name, predicted in p.parts_predicted.items():
        got = [m for m in p.parts_measured if m.endswith(name) or name.endswith(m)]
        if len(got) != 1:
            return []
        pairs.append((name, predicted, p.parts_measured[got[0]]))
    return pairs if len(pairs) == len(p.parts_measured) else []


def launch_summary(points: Sequence[Point]) -> dict:
    """{"<algo> <launch>": error summary} over the points with launches timed one by
    one (the backward's: its launch names say so): which kernel of a multi-launch point
    the model gets wrong."""
    keys, pred, meas = [], [], []
    for p in points:
        for name, predicted, measured in launch_pairs(p):
            keys.append(f"{p.algo} {name}")
            pred.append(predicted)
            meas.append(measured)
    groups = stats.group_by(keys, pred, meas)
    return {k: stats.summarize(*groups[k]).to_dict() for k in sorted(groups)}


# -- outputs ------------------------------------------------------------------------


def _fmt(x, spec: str = ".1f", none: str = "-") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    return format(x, spec)


def summary_rows(summary: dict) -> list[tuple[str, str]]:
    """The headline figures as (name, value) pairs."""
    o = summary["overall"]
    rows = [
        ("preset", summary["preset"]),
        ("points predicted", f"{o['n']} of {summary['points']}"),
        ("MAPE", f"{o['mape_pct']:.1f}%"),
        ("max |error|", f"{o['max_abs_pct']:+.1f}% ({o['max_abs_point']})"),
        ("signed mean error", f"{o['signed_mean_pct']:+.1f}%"),
        ("Spearman rank corr.", _fmt(o["spearman"], ".3f")),
    ]
    for name, r in summary["ratios"].items():
        rows.append(
            (
                f"speed-up {name} error",
                f"{r['mean_abs_pct']:.1f}% mean |err|, {r['signed_mean_pct']:+.1f}% signed "
                f"(n={r['n']}; measured {r['measured_mean']:.2f}x, predicted "
                f"{r['predicted_mean']:.2f}x)",
            )
        )
    by_pass = summary.get("by_pass") or {}
    if len(by_pass) > 1 or any(k != "fwd" for k in by_pass):
        for pass_, s in by_pass.items():
            target = f"; target <= {BACKWARD_TARGET_MAPE_PCT:.0f}%" if pass_ == "bwd" else ""
            rows.append(
                (
                    f"MAPE {pass_}",
                    f"{s['mape_pct']:.1f}% (n={s['n']}, signed {s['signed_mean_pct']:+.1f}%"
                    f"{target})",
                )
            )
    sets = summary.get("by_set") or {}
    if len(sets) > 1 or any(k != "grid" for k in sets):
        for name, group in sets.items():
            o = group["overall"]
            rows.append(
                (
                    f"MAPE {name}",
                    f"{o['mape_pct']:.1f}% (n={o['n']}, signed {o['signed_mean_pct']:+.1f}%, "
                    f"max {o['max_abs_pct']:+.1f}%)",
                )
            )
    for name, group in sets.items():
        sp = group.get("spread")
        if sp:
            clean = _fmt(sp["max_abs_pct_clean"], "+.1f")
            rows.append(
                (
                    f"runs of {name}",
                    f"{sp['points']} points in {sp['runs']} runs: spread median "
                    f"{sp['median_spread_pct']:.1f}%, max {sp['max_spread_pct']:.1f}%; one run "
                    f"scatters {sp['run_scatter_pct']:.1f}% about the mean; max |error| "
                    f"{clean}% without {sp['left_out_of_max']} short noisy points",
                )
            )
    c = summary.get("clock_sm_MHz")
    if c:
        rows.append(
            (
                "SM clock while timed",
                f"{c['median']:.0f} MHz median ({c['min']:.0f}-{c['max']:.0f})",
            )
        )
    rows.append(
        (
            "measured time",
            "CUDA-graph replay of the launches (the GPU's time alone)"
            if summary.get("timing") == "graph"
            else "do_bench of the launches as Python issues them",
        )
    )
    rows.append(("predicted at", _clock_basis(summary)))
    f = summary["fastest"]
    if f["shapes"]:
        rows.append(
            (
                "fastest algo right",
                f"{f['agree']} of {f['shapes']} shapes ({100 * f['share']:.0f}%)",
            )
        )
    for name, by_impl in (summary.get("external_by_set") or {}).items():
        for impl, s in by_impl.items():
            rows.append(
                (
                    f"{impl} (external), {name}",
                    f"MAPE {s['mape_pct']:.1f}%, signed {s['signed_mean_pct']:+.1f}%, "
                    f"max {s['max_abs_pct']:+.1f}%, n={s['n']}",
                )
            )
    return rows


def group_rows(summary: dict) -> list[tuple[str, str, int, str, str, str]]:
    """(grouping, group, n, MAPE, signed mean, max |err|) for the by-algo/d/mask/dtype/launch
    tables."""
    out = []
    groups = [("algorithm", summary["by_algo"])]
    if any(k != "fwd" for k in summary.get("by_pass") or {}):
        # the forward's algorithms, the passes, then each backward pass's algorithms
        groups = [("algorithm (fwd)", summary["by_algo"]), ("pass", summary["by_pass"])]
        groups += [(f"algorithm ({k})", v) for k, v in summary["by_pass_algo"].items()]
    groups += [
        ("head dim", summary["by_head_dim"]),
        ("mask", summary["by_mask"]),
        ("dtype", summary["by_dtype"]),
        # the kernels of multi-launch points, each timed on its own (the backward's)
        ("launch", summary.get("by_launch") or {}),
    ]
    sets = summary.get("by_set") or {}
    if len(sets) > 1 or any(k != "grid" for k in sets):
        groups += [(f"set: {name}", group["by_algo"]) for name, group in sets.items()]
    for title, group in groups:
        for name, s in group.items():
            out.append(
                (
                    title,
                    name,
                    s["n"],
                    f"{s['mape_pct']:.1f}%",
                    f"{s['signed_mean_pct']:+.1f}%",
                    f"{s['max_abs_pct']:+.1f}%",
                )
            )
    return out


def to_markdown(report: Report) -> str:
    summary = report.summary()
    lines = [
        f"# tilesim accuracy: {summary['preset']}",
        "",
        f"Predictions recomputed with the current model ({summary['fidelity']} fidelity)"
        if not report.stored
        else "Predictions as stored in the results files",
        f"from {', '.join(summary['files'])}. Error = (predicted - measured) / measured:",
        "positive means the model predicts the kernel slower than it ran.",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    lines += [f"| {_md(k)} | {_md(v)} |" for k, v in summary_rows(summary)]
    lines += ["", "| by | group | n | MAPE | signed mean | max abs |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_md(x) for x in r) + " |" for r in group_rows(summary)]
    lines += [
        "",
        "| set | algo | dtype | d | N | mask | B | H | measured ms | runs' spread | predicted ms "
        "| error | bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in report.points + report.external:
        w = p.workload
        algo = p.algo if w.pass_ == "fwd" else f"{p.algo} {w.pass_}"
        spread = "-" if p.spread is None else f"{100 * p.spread:.1f}% ({len(p.runs)})"
        lines.append(
            f"| {p.set_name} | {algo} | {w.dtype} | {w.head_dim} | {seqlens(w)} | "
            f"{'causal' if w.causal else 'full'} | {w.batch} | {w.heads} | "
            f"{p.measured_s * 1e3:.3f} | {spread} | "
            f"{_fmt(p.predicted_s and p.predicted_s * 1e3, '.3f')} | "
            f"{_fmt(p.predicted_s and 100 * p.rel_error, '+.1f')}{'%' if p.predicted_s else ''} | "
            f"{p.bound or (p.error or '-')} |"
        )
    return "\n".join(lines) + "\n"


def _md(x) -> str:
    """A markdown table cell: a literal ``|`` would split the cell."""
    return str(x).replace("|", "\\|")


MARKERS = {"standard": "o", "v1": "s", "v2": "^", "v3": "D", "sdpa-flash": "x"}


def write_png(report: Report, path: str | Path) -> Path:
    """Predicted vs measured time, log-log, one marker per algorithm, y = x and ±10%."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = report.predicted() + report.predicted(report.external)
    summary = report.summary()
    fig, ax = plt.subplots(figsize=(6.5, 6), dpi=120)
    lo = min(min(p.measured_s, p.predicted_s) for p in pts) * 1e3 / 1.5
    hi = max(max(p.measured_s, p.predicted_s) for p in pts) * 1e3 * 1.5
    xs = [lo, hi]
    ax.fill_between(xs, [x * 0.9 for x in xs], [x * 1.1 for x in xs], color="0.85", label="±10%")
    ax.plot(xs, xs, color="0.3", lw=1, label="y = x")
    names = [*ALGO_ORDER, *sorted({p.algo for p in report.external})]
    for pass_ in PASS_ORDER:
        for name in names:
            sel = [p for p in pts if p.algo == name and p.pass_ == pass_]
            if not sel:
                continue
            # the backward: the same marker, hollow
            ax.scatter(
                [p.measured_s * 1e3 for p in sel],
                [p.predicted_s * 1e3 for p in sel],
                marker=MARKERS.get(name, "o"),
                s=28,
                label=f"{name}{'' if pass_ == 'fwd' else ' ' + pass_} ({len(sel)})",
                alpha=0.85,
                **(
                    {}
                    if pass_ == "fwd"
                    else {"facecolors": "none", "edgecolors": f"C{names.index(name)}"}
                ),
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured time (ms)")
    ax.set_ylabel("predicted time (ms)")
    o = summary["overall"]
    ax.set_title(
        f"tilesim vs measured, {summary['preset']}\nMAPE {o['mape_pct']:.1f}%, "
        f"Spearman {_fmt(o['spearman'], '.3f')}, n={o['n']}",
        fontsize=10,
    )
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    from ..atomic import write_atomic

    try:
        return write_atomic(path, lambda fh: fig.savefig(fh, format="png"), option="--png")
    finally:
        plt.close(fig)


def baseline_path() -> Path:
    return results_paths.derived() / schema.ACCURACY_FILE


def write_baseline(report: Report, path: Path | None = None) -> dict:
    """Record the current MAPE as the figure the accuracy test holds the model to."""
    if report.stored:
        raise TilesimError("--update-baseline needs recomputed predictions (drop --stored)")
    summary = report.summary()
    doc = {
        "schema_version": schema.SCHEMA_VERSION,
        "kind": "accuracy",
        "preset": report.preset,
        "fidelity": report.fidelity,
        "sm_clock": "measured" if report.measured_clock else "preset",
        "files": report.files,
        "points": summary["overall"]["n"],
        "mape_pct": round(summary["overall"]["mape_pct"], 3),
        # per algorithm of the forward, so the test can check each on its own (in
        # parallel); each within its figure + slack keeps the forward's MAPE within its
        # figure + slack
        "by_algo": {
            algo: {"n": s["n"], "mape_pct": round(s["mape_pct"], 3)}
            for algo, s in summary["by_algo"].items()
        },
        # the same per pass, and per algorithm of each other pass (the backward's)
        "by_pass": {
            k: {"n": s["n"], "mape_pct": round(s["mape_pct"], 3)}
            for k, s in summary["by_pass"].items()
        },
        "by_pass_algo": {
            k: {a: {"n": s["n"], "mape_pct": round(s["mape_pct"], 3)} for a, s in group.items()}
            for k, group in summary["by_pass_algo"].items()
        },
        "slack_pct": BASELINE_SLACK_PCT,
    }
    schema.save_json(doc, path or baseline_path())
    return doc


def load_baseline(path: Path | None = None) -> dict | None:
    path = path or baseline_path()
    if not path.exists():
        return None
    doc = schema.load_json(path)
    if not isinstance(doc, dict) or doc.get("kind") != "accuracy" or "mape_pct" not in doc:
        raise TilesimError(f"{path}: not an accuracy baseline (rewrite it with --update-baseline)")
    return doc
