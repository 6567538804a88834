"""The accuracy baseline: the MAPE the accuracy test holds the model to.

`write_baseline` records a recomputed report's MAPE (overall, per forward algorithm,
per pass) in ``results/derived/accuracy.json``; `load_baseline` reads it back for the
test in ``tests/validate``, which allows each figure to rise by ``BASELINE_SLACK_PCT``.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import TilesimError
from .. import paths as results_paths
from .. import schema
from .points import Report

BASELINE_SLACK_PCT = 1.0  # the accuracy test allows MAPE to rise this many points


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
