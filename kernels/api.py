"""The entry points to the kernels: check the inputs, pick the config, launch.

``attention`` runs an algorithm end to end; what it checks and sets up is made once per
call signature (:mod:`tilesim.kernels.plans`), so a repeated call costs a lookup, its
allocations and the launches. ``launches`` returns the same work as named launches
(standard attention has three kernels; v3 with fp8 has a V transpose before its kernel)
so a benchmark can time each one.

Backward (standard, v1, v2): ``attention`` is differentiable when q, k or v requires
grad, through the custom operator of :mod:`tilesim.kernels.ops`; ``backward_launches``
runs the forward once and returns the gradients with the named backward launches that
fill them, so a benchmark can time the backward alone.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..errors import TilesimError
from . import ops
from ._common import check_inputs, check_out, launch_errors, resolve_config
from .autograd import backward_runs, empty_grads
from .plans import (
    ALGORITHMS,
    backward_config,
    check_backward_algo,
    check_causal_scale,
    config_key,
    forward_plan,
    remember,
)
from .reference import default_scale

_grad_enabled = torch.is_grad_enabled
_compiling = torch.compiler.is_compiling
_CALLS: dict = {}  # call signature -> the function that runs it


def launches(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    algo: str = "v2",
    config=None,
    out: torch.Tensor | None = None,
    q_scale: float | None = None,
    k_scale: float | None = None,
    v_scale: float | None = None,
) -> tuple[torch.Tensor, list[tuple[str, Callable[[], None]]]]:
    """Check everything, allocate ``out``; return it and the launches [(name, run)] that fill it.

    Running every ``run()`` in order computes the attention into ``out``; nothing
    runs before that. Arguments as for :func:`attention`.
    """
    plan = forward_plan(q, k, v, causal, sm_scale, algo, config, q_scale, k_scale, v_scale)
    out = check_out(out, plan.out_shape, plan.out_dtype, q.device)
    module = ALGORITHMS[algo]
    runs = module.launches(q, k, v, plan.causal, plan.sm_scale, plan.config, out, **plan.scales)

    def guarded(run):
        def call():
            with launch_errors(algo, plan.config):
                run()

        return call

    return out, [(name, guarded(run)) for name, run in runs]


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    algo: str = "v2",
    config=None,
    out: torch.Tensor | None = None,
    q_scale: float | None = None,
    k_scale: float | None = None,
    v_scale: float | None = None,
    bwd_config=None,
) -> torch.Tensor:
    """softmax(Q Kᵀ · sm_scale) V with one of tilesim's Triton kernels.

    q: [B, H, Nq, d]; k, v: [B, H_kv, Nk, d] (H a multiple of H_kv: grouped-query heads,
    v2 and v3); fp16 or bf16 (fp8 e4m3 for v3), on a CUDA GPU (or on the CPU under
    ``TRITON_INTERPRET=1``). d in 64, 128, 256. ``causal`` masks column j > row
    i + Nk - Nq (aligned bottom-right, as FlashAttention >= 2.1; Nq > Nk is refused).
    ``sm_scale`` defaults to 1/sqrt(d). ``algo``: standard, v1, v2, v3 (Hopper only).
    ``config``: a KernelConfig; default ``traces.config.default_config`` for this
    workload and GPU (predict with the same config to compare). ``out``: an optional
    contiguous output buffer.

    fp8 (v3 only): q, k, v are ``torch.float8_e4m3fn`` with per-tensor descale
    factors ``q_scale``, ``k_scale``, ``v_scale`` (real value = stored x scale,
    default 1.0); the output is fp16. Returns ``out``.

    Gradients: when grad mode is on and q, k or v requires grad, the result is
    differentiable (standard, v1, v2): ``attention(q, k, v).backward(g)`` runs the
    same algorithm's backward kernels, with ``bwd_config`` (default: the backward
    tiles of ``traces.config.default_config`` with ``pass_="bwd"``). v3, fp8 and an
    ``out`` buffer are refused then, at forward time. Inputs that need no grad take
    the forward-only path, unchanged.

    The checks, the config and the launches' set-up are made on the first call of each
    signature (shapes, strides, dtypes, devices and options; :mod:`.plans`); later calls
    allocate the output and launch. Differentiable calls, and every call that
    ``torch.compile`` traces, go through the custom operator ``torch.ops.tilesim.attention``
    (:mod:`.ops`). Nothing here synchronises: once a signature has run, its calls can be
    captured in a CUDA graph, forward and backward.
    """
    if _compiling():
        return _traced(
            q, k, v, causal, sm_scale, algo, config, out, q_scale, k_scale, v_scale, bwd_config
        )
    try:
        key = (
            algo, causal, causal.__class__, sm_scale, sm_scale.__class__, config, bwd_config,
            q_scale, q_scale.__class__, k_scale, k_scale.__class__, v_scale, v_scale.__class__,
            _grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad),
            q.shape, q.stride(), q.dtype, q.device,
            k.shape, k.stride(), k.dtype, k.device,
            v.shape, v.stride(), v.dtype, v.device,
            None if out is None else (out.shape, out.stride(), out.dtype, out.device),
        )  # fmt: skip
        call = _CALLS[key]
    except KeyError:
        call = _new_call(
            q, k, v, causal, sm_scale, algo, config, out, q_scale, k_scale, v_scale, bwd_config
        )
        remember(_CALLS, key, call)
    except (AttributeError, TypeError):  # not tensors, an unhashable config: the checks say
        call = _new_call(
            q, k, v, causal, sm_scale, algo, config, out, q_scale, k_scale, v_scale, bwd_config
        )
    return call(q, k, v, out)


def _new_call(q, k, v, causal, sm_scale, algo, config, out, q_scale, k_scale, v_scale, bwd_config):
    """Check a call of ``attention`` (one-line TilesimErrors); the function that runs it."""
    if _grad_enabled() and any(getattr(t, "requires_grad", False) for t in (q, k, v)):
        if out is not None:
            raise TilesimError("out= cannot be used when q, k or v requires grad")
        if any(s is not None for s in (q_scale, k_scale, v_scale)):
            raise TilesimError("q_scale, k_scale and v_scale apply to fp8 inputs only")
        check_backward_algo(algo, q)
        check_inputs(q, k, v, algo)
        causal, sm_scale = check_causal_scale(causal, sm_scale, q.shape[-1])
        plan = forward_plan(q, k, v, causal, sm_scale, algo, config, None, None, None)
        backward_config(q, k, causal, algo, bwd_config)  # checked now, not at backward time
        args = (causal, sm_scale, algo, config_key(config), config_key(bwd_config), 1.0, 1.0, 1.0)
        op = torch.ops.tilesim.attention.default

        def differentiable(q, k, v, out):
            return op(q, k, v, *args)[0]

        return differentiable
    if bwd_config is not None:
        raise TilesimError("bwd_config applies only when q, k or v requires grad")
    plan = forward_plan(q, k, v, causal, sm_scale, algo, config, q_scale, k_scale, v_scale)
    if out is not None:
        check_out(out, plan.out_shape, plan.out_dtype, q.device)
    return plan.output


def _traced(q, k, v, causal, sm_scale, algo, config, out, q_scale, k_scale, v_scale, bwd_config):
    """``attention`` as torch.compile sees it: the custom operator, checked when it runs."""
    if _grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        check_backward_algo(algo, q)
    scale = default_scale(q.shape[-1]) if sm_scale is None else float(sm_scale)
    result, _ = ops.attention(
        q,
        k,
        v,
        causal,
        scale,
        algo,
        config_key(config),
        config_key(bwd_config),
        1.0 if q_scale is None else float(q_scale),
        1.0 if k_scale is None else float(k_scale),
        1.0 if v_scale is None else float(v_scale),
    )
    if out is None:
        return result
    return out.copy_(result)


def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per-tensor e4m3 quantisation: (x / scale as float8_e4m3fn, scale), amax mapped to 448."""
    amax = float(x.abs().max().float())
    scale = amax / 448.0 if amax > 0 else 1.0
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def backward_launches(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    algo: str = "v2",
    config=None,
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], list[tuple[str, Callable[[], None]]]]:
    """Check everything, run the forward once, allocate dq, dk, dv; return them and
    the backward launches [(name, run)] that fill them.

    ``do`` is dL/dO, shaped and typed as q. The forward (``algo``'s default
    forward tiles) runs here, before this returns, and keeps what the backward
    reads (P, ℓ and m, or the LSE: :mod:`tilesim.kernels.autograd`); it is not
    one of the returned launches. Running every ``run()`` in order computes
    dq, dk, dv; each run may be repeated (a benchmark times them). ``config``:
    the backward's KernelConfig, default ``traces.config.default_config`` for the
    workload with ``pass_="bwd"`` (predict with the same config to compare).
    Launch names: standard_bwd_{dv,dp,softmax,dq,dk}, v1_bwd,
    v2_bwd_{preprocess,dkdv,dq}. Algorithms: standard, v1, v2 (v3 and fp8: error).
    """
    check_backward_algo(algo, q)
    dtype = check_inputs(q, k, v, algo)
    if not isinstance(do, torch.Tensor):
        raise TilesimError(f"do must be a torch.Tensor, got {type(do).__name__}")
    if tuple(do.shape) != tuple(q.shape) or do.dtype != q.dtype or do.device != q.device:
        raise TilesimError(
            f"do must be {q.dtype} {tuple(q.shape)} on {q.device} like q, got {do.dtype} "
            f"{tuple(do.shape)} on {do.device}"
        )
    causal, sm_scale = check_causal_scale(causal, sm_scale, q.shape[-1])
    config = resolve_config(algo, q, k, causal, dtype, config, pass_="bwd")
    # the backward kernels of v2 index contiguous [B, H, N, d]; copy once, here
    q, k, v, do = (t.detach().contiguous() for t in (q, k, v, do))
    out, state = forward_plan(q, k, v, causal, sm_scale, algo, None, None, None, None)(q, k, v)
    grads = empty_grads(q, k)
    runs = backward_runs(q, k, v, do, out, state, causal, sm_scale, algo, config, *grads)
    return grads, runs
