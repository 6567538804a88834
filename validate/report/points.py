"""The report's data: each measured point with its prediction, and the figures over them.

A `Point` is one measured kernel run and what the model predicts for it; a `Report`
holds the points of one run of `tilesim report` and computes its figures, so every
output (table, markdown, plot, baseline) reads the same numbers.

Figures: MAPE; the largest |error| with its sign; signed mean error (the bias)
by algorithm, head dim and mask; Spearman rank correlation of predicted and
measured times; the error of predicted speed-ups (v2 over standard, v3 over v2,
v2 over v1); the share of shapes whose predicted fastest algorithm is the
measured fastest; and, from bench files, the same for PyTorch SDPA's `flash`
backend, predicted as the FlashAttention-2 schedule it runs — a check on a
kernel nobody here wrote.

Backward points (workload ``pass_`` "bwd": the backward launches alone) are
predicted with the backward schedule and reported per pass: ``by_pass`` (the
target for the backward is a MAPE of at most 15%) and ``by_pass_algo``.
``by_algo`` stays the forward's, the figure the accuracy guard holds per
algorithm; speed-up ratios and the fastest-algorithm share compare points of one
pass only.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import TilesimError
from ...traces.workload import KernelConfig, Workload
from .. import stats

RATIOS = (("v2", "standard"), ("v3", "v2"), ("v2", "v1"))
PASS_ORDER = ("fwd", "bwd", "fwd_bwd")
BACKWARD_TARGET_MAPE_PCT = 15.0  # issue 7's target for the backward's predictions
ALGO_ORDER = ("standard", "v1", "v2", "v3")
ALGO_PASS_ORDER = tuple(f"{a} {p}" for p in PASS_ORDER for a in ALGO_ORDER)
SMALL_POINT_S = 50e-6  # kernels this short scatter most between runs
NOISY_SPREAD = 0.25  # a short point whose runs differ by more is left out of the max


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


def _algo_pass(p: Point) -> str:
    return f"{p.algo} {p.pass_}"


def _sets(points: Sequence[Point]) -> dict[str, list[Point]]:
    """Points by validation set, the grid first."""
    out: dict[str, list[Point]] = {}
    for p in sorted(points, key=lambda p: p.set_name != "grid"):
        out.setdefault(p.set_name, []).append(p)
    return out


def _range(values: Sequence[float]) -> dict | None:
    """{"median", "min", "max"} of sorted ``values`` (None: none)."""
    if not values:
        return None
    return {"median": values[len(values) // 2], "min": values[0], "max": values[-1]}


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


def _label(p: Point) -> str:
    w = p.workload
    mask = "causal" if w.causal else "full"
    algo = p.algo if w.pass_ == "fwd" else f"{p.algo} {w.pass_}"
    return f"{algo} {w.dtype} d={w.head_dim} N={seqlens(w)} {mask}"


def seqlens(w) -> str:
    """``N`` of a square shape; ``N_q/N_kv`` (and ``H_kv`` K/V heads) of a serving one."""
    n = str(w.seqlen_q) if w.seqlen_kv == w.seqlen_q else f"{w.seqlen_q}/{w.seqlen_kv}"
    return n if w.group == 1 else f"{n} H_kv={w.num_kv_heads}"
