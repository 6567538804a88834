"""The accuracy guard: the model must not predict the committed GPU measurements worse.

Predictions are recomputed (fast fidelity, nothing cached) for every measured
point in the validate files that ``results/derived/accuracy.json`` names, with
the preset it names, and each algorithm's MAPE, forward and backward apart, must
stay within its committed figure + ``slack_pct`` (1 point); together these keep
the overall MAPE within its committed figure + 1. One test per algorithm and
pass (the backward's first: they take longest), each predicting on two processes of its
own: pytest-xdist runs them side by side, and the last one left still has both cores.
To accept a deliberate change of accuracy: ``tilesim report --update-baseline`` (and
commit accuracy.json).

Skipped while no measurement file is committed yet.
"""

import pytest

from tilesim.traces.workload import ALGOS
from tilesim.validate import paths as results_paths
from tilesim.validate import report, schema


def _validate_files():
    files = []
    for path in sorted(results_paths.raw().glob("*.json")):
        if path.name == schema.ACCURACY_FILE:
            continue
        doc = schema.load_json(path)
        if isinstance(doc, dict) and doc.get("kind") == "validate":
            files.append(path)
    return files


WORKERS = 2  # prediction processes per test (the suite runs on two cores)


@pytest.mark.parametrize(
    "algo, pass_", [(a, "bwd") for a in ALGOS if a != "v3"] + [(a, "fwd") for a in ALGOS]
)
def test_accuracy_has_not_regressed(algo, pass_):
    if not _validate_files():
        pytest.skip("no GPU measurements committed in results/raw/ yet")
    baseline = report.load_baseline()
    assert baseline is not None, (
        "results/raw/ holds measurements but no accuracy.json: run "
        "`tilesim report --update-baseline` and commit it"
    )
    if pass_ == "fwd":
        committed = baseline.get("by_algo", {}).get(algo)
    else:
        committed = baseline.get("by_pass_algo", {}).get(pass_, {}).get(algo)
    if committed is None:
        pytest.skip(f"the baseline has no measured {algo} {pass_} point")
    paths = [results_paths.raw() / name for name in baseline["files"]]
    missing = [p.name for p in paths if not p.exists()]
    assert not missing, f"accuracy.json names files that are gone: {missing}"

    result = report.build_report(
        paths,
        preset=baseline["preset"],
        fidelity="fast",
        workers=WORKERS,
        algos=(algo,),
        passes=(pass_,),
        measured_clock=baseline.get("sm_clock", "measured") == "measured",
    )
    predicted = result.predicted()
    # a point the model can no longer predict is a regression too
    assert len(predicted) == committed["n"], (
        f"{algo} {pass_}: {len(predicted)} points predicted, the baseline had {committed['n']}: "
        + "; ".join(f"{p.workload} {p.error}" for p in result.points if p.predicted_s is None)
    )
    mape = result.summary()["overall"]["mape_pct"]
    limit = committed["mape_pct"] + baseline.get("slack_pct", report.BASELINE_SLACK_PCT)
    assert mape <= limit, (
        f"{algo} {pass_}: MAPE {mape:.2f}% against the committed measurements is above "
        f"the committed {committed['mape_pct']:.2f}% + slack; if the change is deliberate, run "
        "`tilesim report --update-baseline`"
    )
