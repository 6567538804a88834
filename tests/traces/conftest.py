"""Shared fixtures of the traces tests: the three GPU presets and small helpers."""

from __future__ import annotations

import pytest

from tilesim.hwmodels import load_gpu
from tilesim.traces import Workload, build
from tilesim.traces.expand import expand


@pytest.fixture(scope="session")
def gpus():
    return {name: load_gpu(name) for name in ("a100", "h100", "h200")}


@pytest.fixture(scope="session")
def h100(gpus):
    return gpus["h100"]


@pytest.fixture(scope="session")
def h200(gpus):
    return gpus["h200"]


@pytest.fixture(scope="session")
def a100(gpus):
    return gpus["a100"]


@pytest.fixture(scope="session")
def make():
    return _make


@pytest.fixture(scope="session")
def all_flat():
    return _all_flat


def _make(algo, gpu, config=None, **shape):
    """Build ``algo`` on a small default shape, overridden by ``shape``."""
    kw = {"batch": 2, "heads": 3, "seqlen_q": 1024, "seqlen_kv": 1024, "head_dim": 64}
    kw.update(shape)
    return build(algo, Workload(**kw), gpu, config)


def _all_flat(trace, launch_index=None):
    """Every CTA of every launch (or of one), unrolled: [(launch, coords, flat ops)]."""
    out = []
    indices = range(len(trace.launches)) if launch_index is None else [launch_index]
    for li in indices:
        for c in range(trace.launches[li].num_ctas):
            out.append((li, c, expand(trace, li, c)))
    return out
