"""Triton attention kernels (standard, v1, v2, v3) and a float32 torch reference.

Public API::

    from tilesim.kernels import attention, reference
    out = attention(q, k, v, causal=True, algo="v2")          # q, k, v: [B, H, N, d]
    ref = reference(q, k, v, causal=True)                      # float32

    out, runs = launches(q, k, v, algo="standard")              # time each kernel:
    for name, run in runs: run()                                # qk, softmax, pv

    (dq, dk, dv), runs = backward_launches(q, k, v, do, algo="v2")  # forward runs here
    for name, run in runs: run()                                # preprocess, dkdv, dq
    attention(q.requires_grad_(), k, v).backward(do)            # or through autograd

``attention`` sets a call signature up once (:mod:`.plans`) and is the custom operator
``torch.ops.tilesim.attention`` (:mod:`.ops`): torch.compile traces it, CUDA graphs
capture it.

This package is the only part of tilesim that needs torch and triton
(``pip install 'tilesim[kernels]'``). Importing it works without them; calling
anything then raises a one-line :class:`~tilesim.errors.TilesimError`.
"""

from __future__ import annotations

import importlib.util

from ..errors import TilesimError
from ..traces.workload import ALGOS

__all__ = [
    "ALGOS",
    "attention",
    "backward_launches",
    "launches",
    "quantize_fp8",
    "reference",
    "reference_grads",
    "rel_error",
]

_MISSING = [name for name in ("torch", "triton") if importlib.util.find_spec(name) is None]

if not _MISSING:
    from .api import attention, backward_launches, launches, quantize_fp8
    from .autograd import reference_grads
    from .reference import reference, rel_error
else:

    def _missing(*_args, **_kwargs):
        raise TilesimError(
            f"tilesim.kernels needs {' and '.join(_MISSING)}: pip install 'tilesim[kernels]'"
        )

    attention = launches = quantize_fp8 = reference = rel_error = _missing
    backward_launches = reference_grads = _missing
