"""Accuracy statistics of predictions against measurements, in plain Python.

Errors are *relative errors of predicted time*: ``(predicted - measured) / measured``.
A positive error means the model predicts the kernel slower than it ran (it
over-estimates the time); a negative one means the model is too optimistic.

No scipy: Spearman's rank correlation is the Pearson correlation of the ranks,
with tied values given the mean of the ranks they span (the standard "fractional
ranking"), which is what ``scipy.stats.spearmanr`` computes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from ..errors import TilesimError


def rel_error(predicted: float, measured: float) -> float:
    """Signed relative error of one prediction (positive: predicted slower)."""
    if not measured > 0:
        raise TilesimError(f"measured time must be positive, got {measured!r}")
    return (predicted - measured) / measured


def rel_errors(predicted: Sequence[float], measured: Sequence[float]) -> list[float]:
    _same_length(predicted, measured)
    return [rel_error(p, m) for p, m in zip(predicted, measured, strict=True)]


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error, in percent."""
    errs = rel_errors(predicted, measured)
    if not errs:
        raise TilesimError("no points to compute an error over")
    return 100.0 * sum(abs(e) for e in errs) / len(errs)


def signed_mean_error(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean signed relative error, in percent (the model's bias)."""
    errs = rel_errors(predicted, measured)
    if not errs:
        raise TilesimError("no points to compute an error over")
    return 100.0 * sum(errs) / len(errs)


def max_abs_error(predicted: Sequence[float], measured: Sequence[float]) -> tuple[float, int]:
    """The largest |error| in percent, *with its sign*, and the index of that point.

    Ties go to the first point, so the answer is deterministic.
    """
    errs = rel_errors(predicted, measured)
    if not errs:
        raise TilesimError("no points to compute an error over")
    best = 0
    for i, e in enumerate(errs):
        if abs(e) > abs(errs[best]):
            best = i
    return 100.0 * errs[best], best


def ranks(values: Sequence[float]) -> list[float]:
    """1-based fractional ranks: tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2 + 1  # positions i..j hold ranks i+1..j+1
        for k in range(i, j + 1):
            out[order[k]] = mean_rank
        i = j + 1
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation; NaN when either side has no spread (undefined)."""
    _same_length(x, y)
    n = len(x)
    if n < 2:
        return math.nan
    mx = sum(x) / n
    my = sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return math.nan
    return sxy / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (ties by fractional ranking)."""
    _same_length(x, y)
    return pearson(ranks(x), ranks(y))


def group_by(keys: Iterable[Hashable], *columns: Sequence[float]) -> dict:
    """Split parallel columns by key: {key: (col1_values, col2_values, ...)}.

    Keys keep the order of their first appearance (deterministic output).
    """
    groups: dict = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, tuple([] for _ in columns))
        for col, values in zip(groups[key], columns, strict=True):
            col.append(values[i])
    return groups


@dataclass(frozen=True)
class ErrorSummary:
    """The accuracy figures of one set of (predicted, measured) points."""

    n: int
    mape_pct: float
    signed_mean_pct: float
    max_abs_pct: float  # with its sign
    max_abs_index: int  # index of that point in the input
    spearman: float

    def to_dict(self) -> dict:
        return {
            "n": self.n,
            "mape_pct": self.mape_pct,
            "signed_mean_pct": self.signed_mean_pct,
            "max_abs_pct": self.max_abs_pct,
            "max_abs_index": self.max_abs_index,
            "spearman": None if math.isnan(self.spearman) else self.spearman,
        }


def summarize(predicted: Sequence[float], measured: Sequence[float]) -> ErrorSummary:
    worst, index = max_abs_error(predicted, measured)
    return ErrorSummary(
        n=len(measured),
        mape_pct=mape(predicted, measured),
        signed_mean_pct=signed_mean_error(predicted, measured),
        max_abs_pct=worst,
        max_abs_index=index,
        spearman=spearman(predicted, measured),
    )


def argmin(values: Sequence[float], labels: Sequence[str]) -> str:
    """Label of the smallest value (first one on ties)."""
    _same_length(values, labels)
    best = min(range(len(values)), key=lambda i: (values[i], i))
    return labels[best]


def ratio_errors(
    points: Sequence[tuple[Hashable, str, float, float]],
    numerator: str,
    denominator: str,
) -> list[tuple[Hashable, float, float, float]]:
    """Speed-up ratios per shape: (shape, measured, predicted, relative error).

    ``points`` are (shape, algo, predicted_time, measured_time). The speed-up of
    ``numerator`` over ``denominator`` is t_denominator / t_numerator, e.g.
    ``numerator="v2", denominator="standard"`` is "v2 is x times faster than
    standard". Shapes where either algorithm is missing are left out.
    """
    times: dict = {}
    for shape, algo, pred, meas in points:
        times.setdefault(shape, {})[algo] = (pred, meas)
    out = []
    for shape, by_algo in times.items():
        if numerator in by_algo and denominator in by_algo:
            pn, mn = by_algo[numerator]
            pd, md = by_algo[denominator]
            measured = md / mn
            predicted = pd / pn
            out.append((shape, measured, predicted, (predicted - measured) / measured))
    return out


def fastest_agreement(
    points: Sequence[tuple[Hashable, str, float, float]],
    min_algos: int = 2,
) -> tuple[int, int]:
    """Over shapes with at least ``min_algos`` algorithms measured: how many times
    the predicted fastest algorithm is the measured fastest. Returns (agree, shapes)."""
    by_shape = group_by(
        [p[0] for p in points],
        [p[1] for p in points],
        [p[2] for p in points],
        [p[3] for p in points],
    )
    agree = total = 0
    for names, p_times, m_times in by_shape.values():
        if len(names) < min_algos:
            continue
        total += 1
        agree += argmin(p_times, names) == argmin(m_times, names)
    return agree, total


def _same_length(a: Sequence, b: Sequence) -> None:
    if len(a) != len(b):
        raise TilesimError(f"length mismatch: {len(a)} values vs {len(b)}")


def median(xs: Sequence[float]) -> float:
    """The median of a measurement's samples; no samples is an error, not a NaN."""
    if not xs:
        raise TilesimError("no samples")
    return float(statistics.median(xs))
