"""Tile schedules of the four attention algorithms, as traces the engine replays.

``build(algo, workload, gpu, config=None) -> Trace`` picks the generator from
``ALGORITHMS``; ``counters.counters(trace)`` counts its work; ``expand.expand``
unrolls one CTA; ``files.save`` / ``files.load`` read and write ``*.trace.json``
and ``files.validate(trace, gpu)`` checks a trace against a GPU. (The functions
``counters`` and ``expand`` are not re-exported here: they would hide the
modules of the same name.)
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
from . import flash_v1, flash_v2, flash_v3, standard
from .config import check_algo, check_fits, default_config, kernel_config
from .counters import Counters
from .expand import FlatOp
from .files import load, save, validate
from .ir import Trace
from .workload import KernelConfig, Workload

ALGORITHMS = {"standard": standard, "v1": flash_v1, "v2": flash_v2, "v3": flash_v3}


def build(algo: str, workload: Workload, gpu: GPU, config: KernelConfig | None = None) -> Trace:
    """The trace of ``algo`` on ``workload`` for ``gpu`` (``config`` None: the default)."""
    check_algo(algo, workload, gpu)
    if config is None:
        config = default_config(algo, workload, gpu)
    check_fits(algo, workload, config, gpu)
    return ALGORITHMS[algo].build(workload, config, gpu)


__all__ = [
    "ALGORITHMS",
    "Counters",
    "FlatOp",
    "KernelConfig",
    "Trace",
    "Workload",
    "build",
    "default_config",
    "kernel_config",
    "load",
    "save",
    "validate",
]
