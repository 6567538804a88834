"""Call plans: what a call of the kernels needs that depends only on its signature, made once.

A signature is all that the input checks and the config read: the algorithm, the mask,
the scales, the config, and the shapes, strides, dtypes and devices of q, k and v. The
first call of a signature checks it, resolves its config (``default_config`` for the
GPU's preset) and fixes each launch's grid, constexprs and TMA descriptor layouts; every
later call only allocates its outputs and launches (:mod:`tilesim.kernels.launch`).
Environment switches (``TRITON_INTERPRET``, ``TILESIM_V3_WARP_SPECIALIZE``) are read when
a plan is made.
"""

from __future__ import annotations

import functools
import math

import torch
import triton

from ..errors import TilesimError
from ..traces.tiles import padded_row
from ..traces.workload import ALGOS, KernelConfig
from . import flash_v1, flash_v2, flash_v3, standard
from ._common import check_inputs, is_hopper, resolve_config, resources_error
from .reference import default_scale

ALGORITHMS = {"standard": standard, "v1": flash_v1, "v2": flash_v2, "v3": flash_v3}
PLAN_LIMIT = 1024  # signatures kept; a process that sees more starts over


def check_scalar(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TilesimError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise TilesimError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def check_causal_scale(causal, sm_scale, d: int) -> tuple[bool, float]:
    if not isinstance(causal, bool):
        raise TilesimError(f"causal must be True or False, got {causal!r}")
    return causal, default_scale(d) if sm_scale is None else check_scalar("sm_scale", sm_scale)


def check_algo(algo) -> None:
    if algo not in ALGORITHMS:
        raise TilesimError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")


def check_backward_algo(algo, q) -> None:
    """One-line errors for what has no backward kernel: v3, fp8, unknown names."""
    check_algo(algo)
    if algo == "v3":
        raise TilesimError("v3 has no backward kernel; use v2 for gradients")
    if getattr(q, "dtype", None) == torch.float8_e4m3fn:
        raise TilesimError("the backward kernels take fp16 or bf16, not fp8")


def state_shape(algo: str, q_shape, n_kv) -> tuple:
    """What a forward keeps for its backward, beside O (kernels/autograd.py): standard's
    P [B·H, Nq, Nk_pad], v1's ℓ and m [2, B·H, Nq], v2's (and v3's) log-sum-exp [B·H, Nq]."""
    batch, heads, n_q = q_shape[0], q_shape[1], q_shape[2]
    if algo == "standard":
        return (batch * heads, n_q, padded_row(n_kv))
    if algo == "v1":
        return (2, batch * heads, n_q)
    return (batch * heads, n_q)


def state_dtype(algo: str, q_dtype: torch.dtype) -> torch.dtype:
    return q_dtype if algo == "standard" else torch.float32


def out_dtype(q_dtype: torch.dtype) -> torch.dtype:
    """fp16 out of fp8 inputs; the inputs' dtype otherwise."""
    return torch.float16 if q_dtype == torch.float8_e4m3fn else q_dtype


class ForwardPlan:
    """One signature's forward: ``plan(q, k, v[, out]) -> (out, state)``, or
    ``plan.output(q, k, v[, out]) -> out`` where nothing will read the state."""

    def __init__(self, algo, causal, sm_scale, config, scales, q, k, v):
        self.algo, self.causal, self.sm_scale, self.config = algo, causal, sm_scale, config
        self.scales = scales  # q_scale, k_scale, v_scale for fp8; empty otherwise
        batch, heads, n_q, d = q.shape
        self.out_shape = (batch, heads, n_q, d)
        self.out_dtype = out_dtype(q.dtype)
        self.state_shape = state_shape(algo, q.shape, k.shape[2])
        self.state_dtype = state_dtype(algo, q.dtype)
        self.device = q.device
        self.scratch = None  # v2 and v3: a log-sum-exp buffer for the calls of ``output``
        if algo == "v2":
            self.run = flash_v2.forward_runner(q, k, v, causal, sm_scale, config).run
        elif algo == "v3":
            self.run = flash_v3.forward_runner(q, k, v, causal, sm_scale, config, **scales).run
        else:
            self.run = self._run_launches

    def __call__(self, q, k, v, out=None):
        if out is None:
            out = torch.empty(self.out_shape, dtype=self.out_dtype, device=self.device)
        state = torch.empty(self.state_shape, dtype=self.state_dtype, device=self.device)
        try:
            self.run(q, k, v, out, state)
        except triton.runtime.errors.OutOfResources as exc:
            raise resources_error(self.algo, self.config, exc) from None
        return out, state

    def output(self, q, k, v, out=None):
        """O alone. v2 and v3 write their log-sum-exp, which no one reads then, into one
        buffer that every such call reuses (not one made while a CUDA graph is captured:
        that memory belongs to the graph)."""
        if out is None:
            out = torch.empty(self.out_shape, dtype=self.out_dtype, device=self.device)
        state = self.scratch
        if state is None:
            state = torch.empty(self.state_shape, dtype=self.state_dtype, device=self.device)
            if self.algo in ("v2", "v3") and not _capturing(self.device):
                self.scratch = state
        try:
            self.run(q, k, v, out, state)
        except triton.runtime.errors.OutOfResources as exc:
            raise resources_error(self.algo, self.config, exc) from None
        return out

    def _run_launches(self, q, k, v, out, state):
        """standard and v1: their modules' own launch lists (state: P, or ℓ and m)."""
        keep = {"p": state} if self.algo == "standard" else {"lm": state}
        module = ALGORITHMS[self.algo]
        for _, run in module.launches(
            q, k, v, self.causal, self.sm_scale, self.config, out, **keep
        ):
            run()


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def make_forward(q, k, v, causal, sm_scale, algo, config, q_scale, k_scale, v_scale):
    """Check a forward call (one-line TilesimErrors) and make its plan."""
    check_algo(algo)
    dtype = check_inputs(q, k, v, algo)
    causal, sm_scale = check_causal_scale(causal, sm_scale, q.shape[-1])
    if algo == "v3" and not is_hopper(q.device):
        where = torch.cuda.get_device_name(q.device) if q.device.type == "cuda" else "the CPU"
        raise TilesimError(
            f"v3 needs an NVIDIA Hopper GPU (sm_90: TMA, wgmma), not {where} (use v2)"
        )
    scales = {"q_scale": q_scale, "k_scale": k_scale, "v_scale": v_scale}
    if dtype == "fp8":
        scales = {n: 1.0 if s is None else check_scalar(n, s) for n, s in scales.items()}
    elif any(s is not None for s in scales.values()):
        raise TilesimError("q_scale, k_scale and v_scale apply to fp8 inputs only")
    else:
        scales = {}
    config = resolve_config(algo, q, k, causal, dtype, config)
    if algo == "v3":
        problem = flash_v3.check_config(config)
        if problem:
            raise TilesimError(problem)
    return ForwardPlan(algo, causal, sm_scale, config, scales, q, k, v)


_FORWARD: dict = {}


def signature(t: torch.Tensor) -> tuple:
    return (t.shape, t.stride(), t.dtype, t.device)


def forward_plan(q, k, v, causal, sm_scale, algo, config, q_scale, k_scale, v_scale):
    """The checked plan of a forward call, made on its signature's first call."""
    try:
        key = (
            algo, causal, type(causal), sm_scale, type(sm_scale), config,
            q_scale, type(q_scale), k_scale, type(k_scale), v_scale, type(v_scale),
            signature(q), signature(k), signature(v),
        )  # fmt: skip
        plan = _FORWARD.get(key)
    except (AttributeError, TypeError):  # not tensors, an unhashable config: the checks say
        return make_forward(q, k, v, causal, sm_scale, algo, config, q_scale, k_scale, v_scale)
    if plan is None:
        plan = make_forward(q, k, v, causal, sm_scale, algo, config, q_scale, k_scale, v_scale)
        remember(_FORWARD, key, plan)
    return plan


def remember(cache: dict, key, value) -> None:
    if len(cache) >= PLAN_LIMIT:
        cache.clear()
    cache[key] = value


_BACKWARD: dict = {}


def backward_config(q, k, causal: bool, algo: str, config) -> KernelConfig:
    """``config`` or the backward's default tiles for this workload, checked to fit."""
    key = (algo, causal, config, q.shape, k.shape, q.dtype, q.device)
    resolved = _BACKWARD.get(key)
    if resolved is None:
        dtype = check_inputs(q, k, k, algo)
        resolved = resolve_config(algo, q, k, causal, dtype, config, pass_="bwd")
        remember(_BACKWARD, key, resolved)
    return resolved


def config_key(config) -> str:
    """A KernelConfig as the string a custom op carries ("" for the default)."""
    if config is None:
        return ""
    if not isinstance(config, KernelConfig):
        raise TilesimError(f"config must be a KernelConfig, got {type(config).__name__}")
    key = (
        f"{config.block_m},{config.block_n},{config.num_warps},{config.num_stages},"
        f"{config.mma_path},{int(config.warp_specialize)},{int(config.pingpong)},"
        f"{int(config.persistent)}"
    )
    if config.num_splits > 1 or config.pack_gqa:
        key += f",{config.num_splits},{int(config.pack_gqa)}"
    return key


@functools.lru_cache(maxsize=256)
def config_of(key: str) -> KernelConfig | None:
    """The KernelConfig of a :func:`config_key` string."""
    if not key:
        return None
    bm, bn, warps, stages, path, ws, pp, persistent, *serving = key.split(",")
    splits, pack = serving or ("1", "0")
    return KernelConfig(
        int(bm), int(bn), int(warps), int(stages), path, ws == "1", pp == "1", persistent == "1",
        num_splits=int(splits), pack_gqa=pack == "1",
    )  # fmt: skip
