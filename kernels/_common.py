"""What every kernel wrapper shares: input checks, the GPU behind a tensor, defaults, launch errors.

Only kernels/ imports torch and triton; this module is imported lazily by
:mod:`tilesim.kernels` so that ``import tilesim.kernels`` works without them.
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch
import triton

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from ..hwmodels.presets import device_alias, load_gpu
from ..traces.config import check_fits, check_serving, default_config
from ..traces.workload import HEAD_DIMS, KernelConfig, Workload

LOG2E = 1.4426950408889634  # 1 / ln 2: the kernels compute exp(x) as exp2(x * LOG2E)
LN2 = 0.6931471805599453

# torch dtype -> tilesim dtype name (traces/workload.py DTYPES)
DTYPE_NAMES = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "fp8",
}


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_inputs(q, k, v, algo: str) -> str:
    """Validate q [B, H, Nq, d] and k, v [B, H_kv, Nk, d] (H a multiple of H_kv); return the
    dtype name. One-line errors."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TilesimError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise TilesimError(
                f"{name} must be 4-D [batch, heads, seqlen, head_dim], got shape {tuple(t.shape)}"
            )
        if t.numel() == 0:
            raise TilesimError(f"{name} is empty (shape {tuple(t.shape)})")
    if q.shape[0] != k.shape[0] or k.shape != v.shape or q.shape[1] % k.shape[1]:
        raise TilesimError(
            f"shapes disagree: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
            "(want q [B, H, Nq, d] and k, v [B, H_kv, Nk, d], H a multiple of H_kv)"
        )
    if q.shape[3] != k.shape[3]:
        raise TilesimError(f"head dims disagree: q has {q.shape[3]}, k and v have {k.shape[3]}")
    d = q.shape[3]
    if d not in HEAD_DIMS:
        raise TilesimError(
            f"head_dim {d} is not supported (supported: {', '.join(map(str, HEAD_DIMS))})"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TilesimError(f"dtypes disagree: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    dtype = DTYPE_NAMES.get(q.dtype)
    if dtype is None:
        supported = ", ".join(str(t) for t in DTYPE_NAMES)
        raise TilesimError(f"dtype {q.dtype} is not supported (supported: {supported})")
    if dtype == "fp8" and algo != "v3":
        raise TilesimError(f"fp8 inputs are supported by v3 only, not by {algo}")
    if not (q.device == k.device == v.device):
        raise TilesimError(f"tensors are on different devices: {q.device}, {k.device}, {v.device}")
    if q.device.type == "cuda":
        if interpreting():
            raise TilesimError("TRITON_INTERPRET=1 runs kernels on the CPU: pass CPU tensors")
    elif q.device.type == "cpu":
        if not interpreting():
            raise TilesimError(
                "tensors are on the CPU: Triton needs a CUDA GPU (or TRITON_INTERPRET=1 "
                "set before triton is imported, to run the kernels slowly on the CPU)"
            )
    else:
        raise TilesimError(f"device {q.device} is not supported (use a CUDA GPU)")
    return dtype


def is_hopper(device: torch.device) -> bool:
    """True for an sm_90 GPU (TMA, wgmma, fp8 tensor cores); False on the interpreter."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9


@functools.cache
def device_gpu(device: torch.device) -> GPU:
    """The GPU preset (its alias: the best-founded one) that matches ``device``; another
    sm_90 counts as an H100, any other GPU and the interpreter as an A100 (the
    interpreter runs the Ampere-style pointer-load code paths).

    Read once per device: loading a preset parses its TOML files."""
    alias = "a100"
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9:
        alias = device_alias(torch.cuda.get_device_name(device)) or "h100"
    return load_gpu(alias)


def resolve_config(
    algo: str, q: torch.Tensor, k: torch.Tensor, causal: bool, dtype: str, config, pass_="fwd"
) -> KernelConfig:
    """``config`` or the shared default for this workload and device, checked to fit.

    ``pass_``: "fwd", or "bwd" for the backward kernels' tiles (traces.config).
    """
    batch, heads, n_q, d = q.shape
    workload = Workload(
        batch, heads, n_q, k.shape[2], d, causal=causal, dtype=dtype, pass_=pass_,
        kv_heads=k.shape[1],
    )  # fmt: skip
    check_serving(algo, workload)
    gpu = device_gpu(q.device)
    if config is None:
        config = default_config(algo, workload, gpu)
    elif not isinstance(config, KernelConfig):
        raise TilesimError(f"config must be a KernelConfig, got {type(config).__name__}")
    if min(config.block_m, config.block_n) < 16:
        raise TilesimError(
            f"block_m and block_n must be at least 16 (tensor-core tiles), got "
            f"{config.block_m} x {config.block_n}"
        )
    if config.num_warps > 16:
        raise TilesimError(f"num_warps must be at most 16, got {config.num_warps}")
    check_fits(algo, workload, config, gpu)
    return config


def resources_error(algo: str, config: KernelConfig, exc: Exception) -> TilesimError:
    """Triton's out-of-resources failure as one line."""
    return TilesimError(
        f"{algo} with block_m={config.block_m} block_n={config.block_n} "
        f"num_warps={config.num_warps} num_stages={config.num_stages} does not fit: {exc}"
    )


@contextlib.contextmanager
def launch_errors(algo: str, config: KernelConfig):
    """Turn Triton's out-of-resources failure into a one-line TilesimError."""
    try:
        yield
    except triton.runtime.errors.OutOfResources as exc:
        raise resources_error(algo, config, exc) from None


def check_out(out, shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``out`` if it is a fitting, contiguous buffer; a new one if ``out`` is None."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if not isinstance(out, torch.Tensor):
        raise TilesimError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or out.device != device:
        raise TilesimError(
            f"out must be {dtype} {tuple(shape)} on {device}, got {out.dtype} "
            f"{tuple(out.shape)} on {out.device}"
        )
    if not out.is_contiguous():
        raise TilesimError("out must be contiguous")
    return out


def strides(t: torch.Tensor) -> tuple[int, int, int, int]:
    """The four element strides of a [B, H, N, d] tensor."""
    s = t.stride()
    return s[0], s[1], s[2], s[3]
