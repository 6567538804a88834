"""The SimPy engine: replays a tile-schedule trace on a GPU model and predicts its time.

>>> from tilesim.hwmodels import load_gpu
>>> from tilesim.traces import Workload, build
>>> from tilesim.simulator import simulate
>>> gpu = load_gpu("h100")
>>> trace = build("v2", Workload(4, 16, 4096, 4096, 128), gpu)
>>> p = simulate(trace, gpu)              # fidelity="fast"; "detailed" runs every iteration
>>> p.bound, round(p.tflops)              # doctest: +SKIP

Fidelity. ``detailed`` runs every loop iteration of every CTA. ``fast`` (the
default, within 2% of detailed on the test grid) cuts the work two ways, and its
cost grows far slower than the number of tiles:

* loops (``steps``): a loop of T iterations runs in O(log T) steps: a few exact
  iterations at each end, macro-steps ramping up to about four equal ones in the
  middle; each L2 lookup stays per tile, so shared tiles still cost O(T) dict
  operations per CTA (streaming tiles, read once, only O(1)). Loops that wait on
  their own loads every iteration (v1's inner loop) stay exact; a loop holding a
  loop (v1's outer one) runs its inner loop about four times, scaled.
* grids (``scheduler``): a launch of many waves simulates a steady head and the
  last waves and extrapolates the middle, so it costs O(a few waves + a period)
  CTAs however large the grid.

Modules: ``memory`` (HBM / L2 bandwidth servers, the L2 LRU), ``sm`` (SM pipes,
the role processes), ``scheduler`` (occupancy, grid order, wave sampling),
``steps`` (loop coalescing), ``program`` (compiling a launch), ``engine``
(`simulate`), ``prediction``, ``timeline`` (Perfetto export), ``bench``.
"""

from .prediction import SCHEMA_VERSION, LaunchPrediction, Prediction
from .steps import FIDELITIES
from .timeline import Timeline


def simulate(trace, gpu, fidelity: str = "fast", timeline: bool = False, **options) -> Prediction:
    """Predict how long ``trace`` runs on ``gpu`` (`engine.simulate`, which takes the
    timeline's ``options``). The engine, SimPy and numpy are imported on the first
    call, so that importing this package (the CLI's start-up) stays light."""
    from .engine import simulate as run

    return run(trace, gpu, fidelity, timeline, **options)


__all__ = ["FIDELITIES", "SCHEMA_VERSION", "LaunchPrediction", "Prediction", "Timeline", "simulate"]
