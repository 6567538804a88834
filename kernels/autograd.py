"""The backward launches, and the forward run that keeps the state they read.

What each forward keeps for its backward (beside Q, K, V and O):

* ``standard``: P, the [B·H, Nq, Nk_pad] probabilities in the input dtype;
* ``v1``: the final row statistics ℓ and m, float32 [2, B·H, Nq];
* ``v2``: the natural-log log-sum-exp of each row, float32 [B·H, Nq].

The forward's plan (:mod:`tilesim.kernels.plans`) returns it beside O; autograd
reaches the backward through the custom operators of :mod:`tilesim.kernels.ops`.
Functions here take inputs that have already been checked.
"""

from __future__ import annotations

import torch

from . import flash_v1_bwd, flash_v2_bwd, standard_bwd
from ._common import launch_errors
from .reference import _no_tf32, _scores, default_scale

BACKWARD_ALGOS = ("standard", "v1", "v2")  # v3 has no backward kernel


def backward_runs(q, k, v, do, out, state, causal, sm_scale, algo, config, dq, dk, dv):
    """The named backward launches of ``algo`` that fill dq, dk, dv (contiguous inputs)."""
    if algo == "standard":
        runs = standard_bwd.launches(q, k, v, do, state, causal, sm_scale, config, dq, dk, dv)
    elif algo == "v1":
        runs = flash_v1_bwd.launches(q, k, v, do, out, state, causal, sm_scale, config, dq, dk, dv)
    else:
        runs = flash_v2_bwd.launches(q, k, v, do, out, state, causal, sm_scale, config, dq, dk, dv)

    def guarded(run):
        def call():
            with launch_errors(f"{algo} backward", config):
                run()

        return call

    return [(name, guarded(run)) for name, run in runs]


def empty_grads(q, k):
    """Contiguous dq (like q) and dk, dv (like k)."""
    return (
        torch.empty(q.shape, dtype=q.dtype, device=q.device),
        torch.empty(k.shape, dtype=k.dtype, device=k.device),
        torch.empty(k.shape, dtype=k.dtype, device=k.device),
    )


def reference_grads(q, k, v, do, causal=False, sm_scale=None):
    """(dq, dk, dv) of softmax(Q Kᵀ·scale) V in float32 torch autograd, one (b, h) at a time.

    The float32 reference the backward kernels are checked against (masking as
    :func:`tilesim.kernels.reference`).
    """
    sm_scale = default_scale(q.shape[-1]) if sm_scale is None else sm_scale
    grads = [torch.empty(t.shape, dtype=torch.float32, device=t.device) for t in (q, k, v)]
    with _no_tf32(), torch.enable_grad():
        for b in range(q.shape[0]):
            for h in range(q.shape[1]):
                qs, ks, vs = (t[b, h].float().requires_grad_() for t in (q, k, v))
                p = torch.softmax(_scores(qs, ks, causal, sm_scale), dim=-1)
                gs = torch.autograd.grad(p @ vs, (qs, ks, vs), do[b, h].float())
                for g, gt in zip(grads, gs, strict=True):
                    g[b, h] = gt
    return tuple(grads)
