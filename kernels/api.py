"""The one entry point to the kernels: check the inputs, pick the config, launch.

``attention`` runs an algorithm end to end. ``launches`` returns the same work
as named launches (standard attention has three kernels; v3 with fp8 has a V
transpose before its kernel) so a benchmark can time each one.

Backward (standard, v1, v2): ``attention`` is differentiable when q, k or v
requires grad (:mod:`tilesim.kernels.autograd`); ``backward_launches`` runs the
forward once and returns the gradients with the named backward launches that
fill them, so a benchmark can time the backward alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..errors import TilesimError
from ..traces.workload import ALGOS
from . import flash_v1, flash_v2, flash_v3, standard
from ._common import check_inputs, check_out, is_hopper, launch_errors, resolve_config
from .autograd import AttentionFunction, backward_runs, empty_grads, forward_saving
from .reference import default_scale

ALGORITHMS = {"standard": standard, "v1": flash_v1, "v2": flash_v2, "v3": flash_v3}


def _check_scalar(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TilesimError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise TilesimError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


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
    if algo not in ALGORITHMS:
        raise TilesimError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")
    dtype = check_inputs(q, k, v, algo)
    if not isinstance(causal, bool):
        raise TilesimError(f"causal must be True or False, got {causal!r}")
    d = q.shape[-1]
    sm_scale = default_scale(d) if sm_scale is None else _check_scalar("sm_scale", sm_scale)
    if algo == "v3" and not is_hopper(q.device):
        where = torch.cuda.get_device_name(q.device) if q.device.type == "cuda" else "the CPU"
        raise TilesimError(
            f"v3 needs an NVIDIA Hopper GPU (sm_90: TMA, wgmma), not {where} (use v2)"
        )
    scales = {"q_scale": q_scale, "k_scale": k_scale, "v_scale": v_scale}
    extra = {}
    if dtype == "fp8":
        extra = {n: 1.0 if s is None else _check_scalar(n, s) for n, s in scales.items()}
    elif any(s is not None for s in scales.values()):
        raise TilesimError("q_scale, k_scale and v_scale apply to fp8 inputs only")
    config = resolve_config(algo, q, k, causal, dtype, config)
    if algo == "v3":
        problem = flash_v3.check_config(config)
        if problem:
            raise TilesimError(problem)
    out_dtype = torch.float16 if dtype == "fp8" else q.dtype
    batch, heads, n_q, _ = q.shape
    out = check_out(out, (batch, heads, n_q, d), out_dtype, q.device)
    runs = ALGORITHMS[algo].launches(q, k, v, causal, sm_scale, config, out, **extra)

    def guarded(run):
        def call():
            with launch_errors(algo, config):
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

    q: [B, H, Nq, d]; k, v: [B, H, Nk, d]; fp16 or bf16 (fp8 e4m3 for v3), on a
    CUDA GPU (or on the CPU under ``TRITON_INTERPRET=1``). d in 64, 128, 256.
    ``causal`` masks column j > row i (top-left aligned, as torch's ``is_causal``).
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
    """
    if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in (q, k, v)):
        if out is not None:
            raise TilesimError("out= cannot be used when q, k or v requires grad")
        if any(s is not None for s in (q_scale, k_scale, v_scale)):
            raise TilesimError("q_scale, k_scale and v_scale apply to fp8 inputs only")
        _check_backward_algo(algo, q)
        dtype = check_inputs(q, k, v, algo)
        causal, sm_scale = _check_causal_scale(causal, sm_scale, q.shape[-1])
        fwd_config = resolve_config(algo, q, k, causal, dtype, config)
        bwd_config = resolve_config(algo, q, k, causal, dtype, bwd_config, pass_="bwd")
        return AttentionFunction.apply(q, k, v, causal, sm_scale, algo, fwd_config, bwd_config)
    if bwd_config is not None:
        raise TilesimError("bwd_config applies only when q, k or v requires grad")
    out, runs = launches(
        q,
        k,
        v,
        causal=causal,
        sm_scale=sm_scale,
        algo=algo,
        config=config,
        out=out,
        q_scale=q_scale,
        k_scale=k_scale,
        v_scale=v_scale,
    )
    for _, run in runs:
        run()
    return out


def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per-tensor e4m3 quantisation: (x / scale as float8_e4m3fn, scale), amax mapped to 448."""
    amax = float(x.abs().max().float())
    scale = amax / 448.0 if amax > 0 else 1.0
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def _check_backward_algo(algo, q) -> None:
    """One-line errors for what has no backward kernel: v3, fp8, unknown names."""
    if algo not in ALGORITHMS:
        raise TilesimError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")
    if algo == "v3":
        raise TilesimError("v3 has no backward kernel; use v2 for gradients")
    if getattr(q, "dtype", None) == torch.float8_e4m3fn:
        raise TilesimError("the backward kernels take fp16 or bf16, not fp8")


def _check_causal_scale(causal, sm_scale, d: int) -> tuple[bool, float]:
    if not isinstance(causal, bool):
        raise TilesimError(f"causal must be True or False, got {causal!r}")
    return causal, default_scale(d) if sm_scale is None else _check_scalar("sm_scale", sm_scale)


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
    _check_backward_algo(algo, q)
    dtype = check_inputs(q, k, v, algo)
    if not isinstance(do, torch.Tensor):
        raise TilesimError(f"do must be a torch.Tensor, got {type(do).__name__}")
    if tuple(do.shape) != tuple(q.shape) or do.dtype != q.dtype or do.device != q.device:
        raise TilesimError(
            f"do must be {q.dtype} {tuple(q.shape)} on {q.device} like q, got {do.dtype} "
            f"{tuple(do.shape)} on {do.device}"
        )
    causal, sm_scale = _check_causal_scale(causal, sm_scale, q.shape[-1])
    config = resolve_config(algo, q, k, causal, dtype, config, pass_="bwd")
    fwd_config = resolve_config(algo, q, k, causal, dtype, None)
    # the backward kernels of v2 index contiguous [B, H, N, d]; copy once, here
    q, k, v, do = (t.detach().contiguous() for t in (q, k, v, do))
    out, state = forward_saving(q, k, v, causal, sm_scale, algo, fwd_config)
    grads = empty_grads(q, k)
    runs = backward_runs(q, k, v, do, out, state, causal, sm_scale, algo, config, *grads)
    return grads, runs
