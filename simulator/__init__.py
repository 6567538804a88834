"""The SimPy engine: replays a tile-schedule trace on a GPU model and predicts its time.

>>> from tilesim.hwmodels import load_gpu
>>> from tilesim.traces import Workload, build
>>> from tilesim.simulator import simulate
>>> gpu = load_gpu("h100")
>>> trace = build("v2", Workload(4, 16, 4096, 4096, 128), gpu)
>>> p = simulate(trace, gpu)              # fidelity="fast"; "detailed" runs every iteration
>>> p.bound, round(p.tflops)              # doctest: +SKIP

Modules: ``memory`` (HBM / L2 bandwidth servers, the L2 LRU), ``sm`` (SM pipes,
the role processes), ``scheduler`` (occupancy, grid order, wave sampling),
``steps`` (loop coalescing), ``program`` (compiling a launch), ``engine``
(`simulate`), ``prediction``, ``timeline`` (Perfetto export), ``bench``.
"""

from .engine import simulate
from .prediction import SCHEMA_VERSION, LaunchPrediction, Prediction
from .steps import FIDELITIES
from .timeline import Timeline

__all__ = ["FIDELITIES", "SCHEMA_VERSION", "LaunchPrediction", "Prediction", "Timeline", "simulate"]
