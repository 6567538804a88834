"""`tilesim report`: the model's accuracy against committed GPU measurements (CPU only).

The measurements in ``results/raw/*.json`` store each point's workload and
KernelConfig, so the report predicts every point again with the *current* model
(stored predictions are only a record of the day): a model change shows its
effect on accuracy at once, and the accuracy test in ``tests/validate`` keeps it
from getting worse.

One module per concept, each importing only those before it:

- `points`: `Point` and `Report`, and the figures computed over the points;
- `collect`: which results files hold measurements, and the points they hold;
- `build`: `build_report`, the points of the files predicted with a preset;
- `render`: the figures as table rows, markdown and a plot;
- `baseline`: the MAPE recorded for the accuracy test, written and read back.

This package re-exports the public names, so ``report.build_report(...)`` and the
like need no import of a submodule.
"""

from .baseline import BASELINE_SLACK_PCT, baseline_path, load_baseline, write_baseline
from .build import build_report
from .collect import (
    MEASURED,
    TIMINGS,
    best_preset,
    collect_points,
    default_paths,
    preset_of,
    set_name,
)
from .points import (
    ALGO_ORDER,
    ALGO_PASS_ORDER,
    BACKWARD_TARGET_MAPE_PCT,
    NOISY_SPREAD,
    PASS_ORDER,
    RATIOS,
    SMALL_POINT_S,
    Point,
    Report,
    launch_pairs,
    launch_summary,
    seqlens,
    spread_summary,
)
from .render import MARKERS, group_rows, summary_rows, to_markdown, write_png

__all__ = [
    "ALGO_ORDER",
    "ALGO_PASS_ORDER",
    "BACKWARD_TARGET_MAPE_PCT",
    "BASELINE_SLACK_PCT",
    "MARKERS",
    "MEASURED",
    "NOISY_SPREAD",
    "PASS_ORDER",
    "RATIOS",
    "SMALL_POINT_S",
    "TIMINGS",
    "Point",
    "Report",
    "baseline_path",
    "best_preset",
    "build_report",
    "collect_points",
    "default_paths",
    "group_rows",
    "launch_pairs",
    "launch_summary",
    "load_baseline",
    "preset_of",
    "seqlens",
    "set_name",
    "spread_summary",
    "summary_rows",
    "to_markdown",
    "write_baseline",
    "write_png",
]
