"""The backward pass wired into torch autograd, and the forward run that keeps its state.

What each forward keeps for its backward (beside Q, K, V and O):

* ``standard``: P, the [B·H, Nq, Nk_pad] probabilities in the input dtype;
* ``v1``: the final row statistics ℓ and m, float32 [2, B·H, Nq];
* ``v2``: the natural-log log-sum-exp of each row, float32 [B·H, Nq].

The forward-only timing path (:func:`tilesim.kernels.launches`) keeps none of
this: its buffers are temporaries, as before. Functions here take inputs that
:mod:`tilesim.kernels.api` has already checked.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import flash_v1, flash_v1_bwd, flash_v2, flash_v2_bwd, standard, standard_bwd
from ._common import launch_errors
from .reference import _no_tf32, _scores, default_scale

BACKWARD_ALGOS = ("standard", "v1", "v2")  # v3 has no backward kernel


def forward_saving(q, k, v, causal, sm_scale, algo, config):
    """Run ``algo``'s forward once; return (O, the state its backward reads)."""
    batch, heads, n_q, d = q.shape
    out = torch.empty((batch, heads, n_q, d), dtype=q.dtype, device=q.device)
    bh = batch * heads
    if algo == "standard":
        state = standard.probs_buffer(q, k.shape[2])
        runs = standard.launches(q, k, v, causal, sm_scale, config, out, p=state)
    elif algo == "v1":
        state = torch.empty((2, bh, n_q), dtype=torch.float32, device=q.device)
        runs = flash_v1.launches(q, k, v, causal, sm_scale, config, out, lm=state)
    else:
        state = torch.empty((bh, n_q), dtype=torch.float32, device=q.device)
        runs = flash_v2.launches(q, k, v, causal, sm_scale, config, out, lse=state)
    with launch_errors(algo, config):
        for _, run in runs:
            run()
    return out, state


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


class AttentionFunction(torch.autograd.Function):
    """softmax(Q Kᵀ·scale) V with a tilesim forward and the same algorithm's backward.

    ``apply(q, k, v, causal, sm_scale, algo, fwd_config, bwd_config)``, all checked.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, algo, fwd_config, bwd_config):
        out, state = forward_saving(q, k, v, causal, sm_scale, algo, fwd_config)
        ctx.save_for_backward(q, k, v, out, state)
        ctx.causal, ctx.sm_scale, ctx.algo, ctx.bwd_config = causal, sm_scale, algo, bwd_config
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        q, k, v, out, state = ctx.saved_tensors
        q, k, v, do = (t.contiguous() for t in (q, k, v, do))
        dq, dk, dv = empty_grads(q, k)
        runs = backward_runs(
            q, k, v, do, out, state, ctx.causal, ctx.sm_scale, ctx.algo, ctx.bwd_config,
            dq, dk, dv,
        )  # fmt: skip
        for _, run in runs:
            run()
        return dq, dk, dv, None, None, None, None, None


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
