"""The two software inputs: what attention to compute, and how the kernel tiles it.

`Workload` is the problem (shapes, causal, dtype, pass). `KernelConfig` is the
launch configuration shared by the trace generators and the Triton kernels, so
that a prediction and a measurement always describe the same grid and tiles.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import TilesimError, shown

ALGOS = ("standard", "v1", "v2", "v3")
DTYPES = ("fp16", "bf16", "fp8")
PASSES = ("fwd", "bwd", "fwd_bwd")  # forward, backward, or both in one trace
# Head dims the kernels and the trace generators support.
HEAD_DIMS = (64, 128, 256)
# Largest sizes a simulation finishes in minutes: a longer sequence is refused, not
# left running for hours (a grid's CTA count has its own limit, traces/check.py).
MAX_SEQLEN = 1 << 16
MAX_BATCH_HEADS = (1 << 31) - 1  # CUDA's grid limit


@dataclass(frozen=True)
class Workload:
    batch: int
    heads: int
    seqlen_q: int
    seqlen_kv: int
    head_dim: int
    causal: bool = False
    dtype: str = "fp16"  # element type of Q, K, V and O ("fp8": e4m3 inputs, fp16 output)
    pass_: str = "fwd"  # "fwd", "bwd" (gradients from dO) or "fwd_bwd" (both)

    def __post_init__(self) -> None:
        for name in ("batch", "heads", "seqlen_q", "seqlen_kv"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TilesimError(f"{name} must be a positive integer, got {value!r}")
            limit = MAX_SEQLEN if name.startswith("seqlen") else MAX_BATCH_HEADS
            if value > limit:
                raise TilesimError(f"{name} must be at most {limit}, got {shown(value)}")
        if self.batch * self.heads > MAX_BATCH_HEADS:
            raise TilesimError(
                f"batch x heads must be at most {MAX_BATCH_HEADS} (CUDA's grid limit), "
                f"got {self.batch * self.heads}"
            )
        if isinstance(self.head_dim, bool) or not isinstance(self.head_dim, int):
            raise TilesimError(f"head_dim must be an integer, got {self.head_dim!r}")
        if not isinstance(self.causal, bool):
            raise TilesimError(f"causal must be true or false, got {self.causal!r}")
        for name in ("dtype", "pass_"):
            if not isinstance(getattr(self, name), str):
                raise TilesimError(f"{name} must be a string, got {getattr(self, name)!r}")
        if self.head_dim not in HEAD_DIMS:
            raise TilesimError(
                f"head_dim {self.head_dim} is not supported (supported: "
                f"{', '.join(map(str, HEAD_DIMS))})"
            )
        if self.dtype not in DTYPES:
            raise TilesimError(f"unknown dtype {self.dtype!r} (choose from {', '.join(DTYPES)})")
        if self.pass_ not in PASSES:
            raise TilesimError(f"unknown pass {self.pass_!r} (choose from {', '.join(PASSES)})")

    @property
    def elem_bytes(self) -> int:
        return 1 if self.dtype == "fp8" else 2

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class KernelConfig:
    block_m: int  # rows of Q per tile
    block_n: int  # rows of K/V per tile
    num_warps: int  # warps per CTA
    num_stages: int  # software-pipelining depth of the K/V loads
    mma_path: str = "mma_sync"  # "wgmma" (Hopper) or "mma_sync" (Ampere-style)
    # v3 only: producer/consumer warp specialisation, ping-pong of two consumer
    # warpgroups, persistent grid.
    warp_specialize: bool = False
    pingpong: bool = False
    persistent: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "num_warps", "num_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise TilesimError(f"{name} must be a positive integer, got {value!r}")
            # tile sizes and warp counts are powers of two (tl.arange, warpgroups);
            # a pipeline depth is any count (Triton's usual num_stages is 3)
            if name != "num_stages" and value & (value - 1):
                raise TilesimError(f"{name} must be a power of two, got {value}")
        if self.mma_path not in ("wgmma", "mma_sync"):
            raise TilesimError(f"unknown mma_path {self.mma_path!r} (choose wgmma or mma_sync)")
        for name in ("warp_specialize", "pingpong", "persistent"):
            if not isinstance(getattr(self, name), bool):
                raise TilesimError(f"{name} must be true or false, got {getattr(self, name)!r}")

    def replace(self, **changes) -> KernelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
