"""The one entry point to the kernels: check the inputs, pick the config, launch.

``attention`` runs an algorithm end to end. ``launches`` returns the same work
as named launches (standard attention has three kernels; v3 with fp8 has a V
transpose before its kernel) so a benchmark can time each one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..errors import TilesimError
from ..traces.workload import ALGOS
from . import flash_v1, flash_v2, flash_v3, standard
from ._common import check_inputs, check_out, is_hopper, launch_errors, resolve_config
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
) -> torch.Tensor:
    """softmax(Q Kᵀ · sm_scale) V with one of tilesim's Triton kernels.

    q: [B, H, Nq, d]; k, v: [B, H, Nk, d]; fp16 or bf16 (fp8 e4m3 for v3), on a
    CUDA GPU (or on the CPU under ``TRITON_INTERPRET=1``). d in 64, 128, 256.
    ``causal`` masks column j > row i (top-left aligned, as torch's ``is_causal``).
    ``sm_scale`` defaults to 1/sqrt(d). ``algo``: standard, v1, v2, v3 (Hopper only).
    ``config``: a KernelConfig; default ``traces.config.kernel_config`` for this
    workload and GPU (predict with the same config to compare). ``out``: an optional
    contiguous output buffer.

    fp8 (v3 only): q, k, v are ``torch.float8_e4m3fn`` with per-tensor descale
    factors ``q_scale``, ``k_scale``, ``v_scale`` (real value = stored x scale,
    default 1.0); the output is fp16. Returns ``out``.
    """
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
