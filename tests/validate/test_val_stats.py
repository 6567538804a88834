"""Accuracy statistics against values computed by hand."""

import math

import pytest

from tilesim.errors import TilesimError
from tilesim.validate import stats


def test_mape_signed_and_max_error():
    pred, meas = [1.1, 0.9, 2.0], [1.0, 1.0, 1.0]  # errors +10%, -10%, +100%
    assert stats.mape(pred, meas) == pytest.approx(40.0)
    assert stats.signed_mean_error(pred, meas) == pytest.approx(100.0 / 3)
    assert stats.max_abs_error(pred, meas) == (pytest.approx(100.0), 2)


def test_max_abs_error_keeps_the_sign():
    worst, index = stats.max_abs_error([1.05, 0.5, 1.2], [1.0, 1.0, 1.0])
    assert worst == pytest.approx(-50.0)
    assert index == 1


def test_errors_are_relative_to_the_measurement():
    # predicting 2 ms for a 4 ms kernel is -50%, not -100%
    assert stats.rel_error(2.0, 4.0) == pytest.approx(-0.5)
    with pytest.raises(TilesimError):
        stats.rel_error(1.0, 0.0)
    with pytest.raises(TilesimError):
        stats.mape([], [])
    with pytest.raises(TilesimError):
        stats.mape([1.0], [1.0, 2.0])


def test_ranks_share_the_mean_rank_on_ties():
    assert stats.ranks([10, 30, 20, 30]) == [1.0, 3.5, 2.0, 3.5]
    assert stats.ranks([5, 5, 5]) == [2.0, 2.0, 2.0]


def test_spearman_without_ties_matches_the_textbook_formula():
    # d = (0, 1, -1, 0): rho = 1 - 6 * 2 / (4 * (16 - 1)) = 0.8
    assert stats.spearman([10, 20, 30, 40], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert stats.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    # monotone but not linear: rank correlation is exactly 1
    assert stats.spearman([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)


def test_spearman_with_ties_by_hand():
    # ranks x = (1, 2.5, 2.5, 4), ranks y = (1, 3, 2, 4): deviations from 2.5 give
    # sxy = 4.5, sxx = 4.5, syy = 5  ->  4.5 / sqrt(22.5)
    assert stats.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))


def test_spearman_undefined_without_spread():
    assert math.isnan(stats.spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(stats.spearman([1], [2]))


def test_summary_dict_has_no_nan():
    s = stats.summarize([1.0, 1.0], [1.0, 2.0])
    d = s.to_dict()
    assert d["n"] == 2
    assert d["mape_pct"] == pytest.approx(25.0)
    assert d["spearman"] is None  # predictions have no spread


def test_ratio_errors_per_shape():
    points = [
        ("a", "standard", 10.0, 8.0),
        ("a", "v2", 2.0, 2.0),  # measured speed-up 4, predicted 5: +25%
        ("b", "standard", 6.0, 6.0),
        ("b", "v2", 3.0, 2.0),  # measured 3, predicted 2: -33%
        ("c", "v2", 1.0, 1.0),  # no standard: left out
    ]
    out = stats.ratio_errors(points, "v2", "standard")
    assert [(s, m, p) for s, m, p, _ in out] == [("a", 4.0, 5.0), ("b", 3.0, 2.0)]
    assert [e for *_, e in out] == [pytest.approx(0.25), pytest.approx(-1 / 3)]


def test_fastest_agreement_counts_shapes_with_two_or_more_algos():
    points = [
        ("a", "v1", 3.0, 3.0),
        ("a", "v2", 1.0, 2.0),  # both say v2 is fastest
        ("b", "v1", 1.0, 3.0),
        ("b", "v2", 2.0, 2.0),  # predicted v1, measured v2
        ("c", "v2", 1.0, 1.0),  # alone: not counted
    ]
    assert stats.fastest_agreement(points) == (1, 2)


def test_group_by_keeps_first_appearance_order():
    groups = stats.group_by(["x", "y", "x"], [1, 2, 3], [4, 5, 6])
    assert list(groups) == ["x", "y"]
    assert groups["x"] == ([1, 3], [4, 6])
