"""Triton attention kernels (standard, v1, v2, v3) and a float32 torch reference.

Public API::

    from tilesim.kernels import attention, reference
    out = attention(q, k, v, causal=True, algo="v2")          # q, k, v: [B, H, N, d]
    ref = reference(q, k, v, causal=True)                      # float32

    out, runs = launches(q, k, v, algo="standard")              # time each kernel:
    for name, run in runs: run()                                # qk, softmax, pv

This package is the only part of tilesim that needs torch and triton
(``pip install 'tilesim[kernels]'``). Importing it works without them; calling
anything then raises a one-line :class:`~tilesim.errors.TilesimError`.
"""

from __future__ import annotations

import importlib
import importlib.util

from ..errors import TilesimError
from ..traces.workload import ALGOS

__all__ = ["ALGOS", "attention", "launches", "quantize_fp8", "reference", "rel_error"]


def _require(module: str):
    """Import ``tilesim.kernels.<module>``, or explain which package is missing."""
    missing = [name for name in ("torch", "triton") if importlib.util.find_spec(name) is None]
    if missing:
        raise TilesimError(
            f"tilesim.kernels needs {' and '.join(missing)}: pip install 'tilesim[kernels]'"
        )
    return importlib.import_module(f"{__name__}.{module}")


def attention(q, k, v, **kwargs):
    """softmax(Q Kᵀ · scale) V with a Triton kernel; see :func:`tilesim.kernels.api.attention`."""
    return _require("api").attention(q, k, v, **kwargs)


def launches(q, k, v, **kwargs):
    """(out, [(name, run)]): the kernel launches of one call; see :func:`.api.launches`."""
    return _require("api").launches(q, k, v, **kwargs)


def quantize_fp8(x):
    """Per-tensor e4m3 quantisation: (x8, scale) with x ≈ x8 × scale."""
    return _require("api").quantize_fp8(x)


def reference(q, k, v, causal=False, sm_scale=None, **scales):
    """Attention in float32 math (the correctness reference); see :mod:`.reference`."""
    return _require("reference").reference(q, k, v, causal, sm_scale, **scales)


def rel_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ (inf if ``out`` holds NaN or Inf)."""
    return _require("reference").rel_error(out, ref)
