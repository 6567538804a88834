"""tilesim's attention as PyTorch custom operators, so that torch.compile can trace a model
that calls it and autograd differentiates it.

``torch.ops.tilesim.attention(q, k, v, causal, sm_scale, algo, config, bwd_config, q_scale,
k_scale, v_scale) -> (out, state)`` runs a forward; ``state`` is what the backward reads
(:func:`~tilesim.kernels.plans.state_shape`) and has no gradient.
``torch.ops.tilesim.attention_backward(do, q, k, v, out, state, causal, sm_scale, algo,
config) -> (dq, dk, dv)`` runs the same algorithm's backward. Configs travel as strings
(:func:`~tilesim.kernels.plans.config_key`, "" for the default); scales are floats (1.0
unless fp8). Both ops allocate only their outputs and never synchronise, so a CUDA graph
can capture them once their kernels are compiled (run them once first).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import autograd
from .plans import backward_config, config_of, forward_plan, out_dtype, state_dtype, state_shape

FP8 = torch.float8_e4m3fn


@torch.library.custom_op("tilesim::attention", mutates_args=())
def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool,
    sm_scale: float,
    algo: str,
    config: str,
    bwd_config: str,
    q_scale: float,
    k_scale: float,
    v_scale: float,
) -> tuple[Tensor, Tensor]:
    scales = (q_scale, k_scale, v_scale) if q.dtype == FP8 else (None, None, None)
    plan = forward_plan(q, k, v, causal, sm_scale, algo, config_of(config), *scales)
    return plan(q, k, v)


@attention.register_fake
def _(q, k, v, causal, sm_scale, algo, config, bwd_config, q_scale, k_scale, v_scale):
    out = q.new_empty((*q.shape[:3], v.shape[3]), dtype=out_dtype(q.dtype))
    state = q.new_empty(state_shape(algo, q.shape, k.shape[2]), dtype=state_dtype(algo, q.dtype))
    return out, state


@torch.library.custom_op("tilesim::attention_backward", mutates_args=())
def attention_backward(
    do: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    state: Tensor,
    causal: bool,
    sm_scale: float,
    algo: str,
    config: str,
) -> tuple[Tensor, Tensor, Tensor]:
    # the backward kernels index contiguous [B, H, N, d]
    q, k, v, do = (t.contiguous() for t in (q, k, v, do))
    resolved = backward_config(q, k, causal, algo, config_of(config))
    grads = autograd.empty_grads(q, k)
    for _, run in autograd.backward_runs(
        q, k, v, do, out, state, causal, sm_scale, algo, resolved, *grads
    ):
        run()
    return grads


@attention_backward.register_fake
def _(do, q, k, v, out, state, causal, sm_scale, algo, config):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(k.shape)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, sm_scale, algo, _config, bwd_config = inputs[:8]
    out, state = output
    ctx.save_for_backward(q, k, v, out, state)
    ctx.args = (causal, sm_scale, algo, bwd_config)
    ctx.mark_non_differentiable(state)
    ctx.set_materialize_grads(False)  # no zeros for the state's (absent) gradient


def _backward(ctx, dout, _dstate):
    if dout is None:
        return (None,) * 11
    q, k, v, out, state = ctx.saved_tensors
    dq, dk, dv = attention_backward(dout, q, k, v, out, state, *ctx.args)
    return (dq, dk, dv) + (None,) * 8


attention.register_autograd(_backward, setup_context=_setup_context)
