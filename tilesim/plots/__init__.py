"""Pictures: the hierarchical roofline, Gantt charts of SM pipes, what-if facets.

* `roofline(gpu, points, path)`: each memory level against its own arithmetic
  intensity, predicted and measured points with the error between them, and the
  SFU and FP32 pipes as ceilings on a panel of their own (`roofline` module).
* `gantt(sources, path, sms=4, window=None)`: the first SMs' pipes over one time
  window shared by every panel (`gantt` module).
* `whatif_plot(result, path)`: one facet per varied field, its absolute values,
  the ideal scaling (`whatif` module).

Every writer saves atomically and byte-stably (`figure.save_figure`) and returns
the path it wrote.
"""

from .figure import ALGO_COLOURS, DPI, save_figure
from .gantt import (
    AUTO_WINDOW_OPS,
    LANES,
    MAX_GANTT_SMS,
    PIPE_COLOURS,
    PIPE_LABELS,
    check_sms,
    gantt,
    gantt_figure,
    parse_window,
    perfetto_of,
    shared_window,
)
from .roofline import RooflinePoint, roofline, roofline_figure, roofs
from .whatif import whatif_figure, whatif_plot

__all__ = [
    "ALGO_COLOURS",
    "AUTO_WINDOW_OPS",
    "DPI",
    "LANES",
    "MAX_GANTT_SMS",
    "PIPE_COLOURS",
    "PIPE_LABELS",
    "RooflinePoint",
    "check_sms",
    "gantt",
    "gantt_figure",
    "parse_window",
    "perfetto_of",
    "roofline",
    "roofline_figure",
    "roofs",
    "save_figure",
    "shared_window",
    "whatif_figure",
    "whatif_plot",
]
