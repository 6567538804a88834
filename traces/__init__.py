"""Tile schedules of the four attention algorithms, as traces the engine replays.

``build(algo, workload, gpu, config=None) -> Trace`` picks the generator from
``ALGORITHMS``; ``counters.counters(trace)`` counts its work; ``expand.expand``
unrolls one CTA; ``files.save`` / ``files.load`` read and write ``*.trace.json``
and ``files.validate(trace, gpu)`` checks a trace against a GPU.

``workload.pass_`` picks the pass: "fwd" the forward generators, "bwd" the
backward ones in ``BACKWARD`` (``standard_bwd``, ``flash_v1_bwd``,
``flash_v2_bwd``), "fwd_bwd" one trace of the forward's launches followed by the
backward's, tensors merged by name and one config for both. (The functions
``counters`` and ``expand`` are not re-exported here: they would hide the
modules of the same name.)
"""

from __future__ import annotations

import dataclasses

from ..hwmodels.gpu import GPU
from . import flash_v1, flash_v1_bwd, flash_v2, flash_v2_bwd, flash_v3, standard, standard_bwd
from .config import check_algo, check_fits, default_config, kernel_config
from .counters import Counters
from .expand import FlatOp
from .files import load, save, validate
from .ir import Trace
from .tiles import kept_bytes
from .workload import KernelConfig, Workload

ALGORITHMS = {"standard": standard, "v1": flash_v1, "v2": flash_v2, "v3": flash_v3}
# v3's backward is not modelled yet (check_algo says so)
BACKWARD = {"standard": standard_bwd, "v1": flash_v1_bwd, "v2": flash_v2_bwd}


def build(algo: str, workload: Workload, gpu: GPU, config: KernelConfig | None = None) -> Trace:
    """The trace of ``algo`` on ``workload`` for ``gpu`` (``config`` None: the default)."""
    check_algo(algo, workload, gpu)
    if config is None:
        config = default_config(algo, workload, gpu)
    check_fits(algo, workload, config, gpu)
    if workload.pass_ == "fwd":
        return ALGORITHMS[algo].build(workload, config, gpu)
    bwd = BACKWARD[algo].build(dataclasses.replace(workload, pass_="bwd"), config, gpu)
    if workload.pass_ == "bwd":
        return bwd
    fwd = ALGORITHMS[algo].build(dataclasses.replace(workload, pass_="fwd"), config, gpu)
    return _concat(fwd, bwd, workload)


def _concat(fwd: Trace, bwd: Trace, workload: Workload) -> Trace:
    """One trace running ``fwd``'s launches then ``bwd``'s; a tensor both use is one tensor."""
    tensors = {t.name: t for t in fwd.tensors}
    for t in bwd.tensors:
        if tensors.setdefault(t.name, t) != t:  # the generators name tensors consistently
            raise ValueError(f"tensor {t.name} differs between the forward and the backward")
    if fwd.params != bwd.params:
        raise ValueError("the forward and the backward were built with different params")
    return dataclasses.replace(
        fwd,
        tensors=tuple(tensors.values()),
        launches=fwd.launches + bwd.launches,
        workload=workload.to_dict(),
    )


__all__ = [
    "ALGORITHMS",
    "BACKWARD",
    "Counters",
    "FlatOp",
    "KernelConfig",
    "Trace",
    "Workload",
    "build",
    "default_config",
    "kernel_config",
    "kept_bytes",
    "load",
    "save",
    "validate",
]
