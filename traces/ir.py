"""The tile-schedule IR: what one kernel launch does, tile by tile.

A `Trace` is one or more `Launch`es; a launch is a grid of CTAs running one
`CtaProgram`, whose roles walk ops (`Load`, `Store`, `Mma`, `Vector`, `Wait`, `Arrive`,
`Loop`) with integer expressions of the grid coordinates, the trace's params and loop
variables (:mod:`tilesim.traces.expr`). The semantics the engine implements (order,
asynchrony, deps across roles and iterations) are in docs/engine.md, "The IR".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

Expr = Union[int, str]  # noqa: UP007 - an alias used in annotations throughout
TRACE_FORMAT = "tilesim-trace"
TRACE_VERSION = 1


@dataclass(frozen=True)
class Load:
    """Copy one tile from global memory (through L2) into shared memory."""

    id: str  # names the load for deps; unique within its role
    tensor: str  # a key of Trace.tensors
    tile: tuple[Expr, ...]  # tile coordinates: (tensor, tile) identifies the bytes for L2 reuse
    nbytes: Expr  # bytes moved
    tma: bool = False  # issued by the Tensor Memory Accelerator (needs has_tma)


@dataclass(frozen=True)
class Store:
    """Write one tile to global memory."""

    tensor: str
    tile: tuple[Expr, ...]
    nbytes: Expr
    deps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mma:
    """A tile matrix product on the tensor cores: (m x k) @ (k x n), 2*m*n*k FLOPs."""

    m: Expr
    n: Expr
    k: Expr
    dtype: str  # input element type: fp16 | bf16 | fp8
    deps: tuple[str, ...] = ()
    id: str | None = None
    async_: bool = False


@dataclass(frozen=True)
class Vector:
    """Element-wise work of a CTA: ``exp`` exponentials on the SFU, ``fp32`` other FP32 ops,
    and ``smem`` bytes the op moves through shared memory to change a tile's register
    layout (a tile converted once counts its bytes twice: written, then read back)."""

    exp: Expr = 0
    fp32: Expr = 0
    deps: tuple[str, ...] = ()
    id: str | None = None
    async_: bool = False
    smem: Expr = 0


@dataclass(frozen=True)
class Wait:
    """Block the role until every dep has completed."""

    deps: tuple[str, ...]


@dataclass(frozen=True)
class Arrive:
    """Mark a named event (a barrier arrival) for the current iteration."""

    name: str


@dataclass(frozen=True)
class Loop:
    """Run ``body`` ``trips`` times with ``var`` = 0, 1, ..., trips-1."""

    var: str
    trips: Expr
    body: tuple[Op, ...]
    prefetch: int = 0  # loads issued this many iterations ahead


Op = Union[Load, Store, Mma, Vector, Wait, Arrive, Loop]  # noqa: UP007


@dataclass(frozen=True)
class Role:
    """One sequential process of a CTA: all its warps, or one warpgroup of a
    warp-specialised kernel (a TMA producer, a consumer)."""

    name: str
    ops: tuple[Op, ...]
    warps: int  # warps in this role


@dataclass(frozen=True)
class CtaProgram:
    roles: tuple[Role, ...]


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str  # fp16 | bf16 | fp8 | fp32

    @property
    def nbytes(self) -> int:
        from ..hwmodels.gpu import DTYPE_BYTES

        n = DTYPE_BYTES[self.dtype]
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Launch:
    """One kernel launch: a grid of CTAs running one program."""

    name: str
    grid: tuple[tuple[str, int], ...]  # named dims, first varies fastest (CUDA's x)
    program: CtaProgram
    smem_bytes: int  # shared memory per CTA
    threads: int  # threads per CTA
    regs_per_thread: int  # registers per thread (occupancy)
    mma_path: str = "mma_sync"  # instruction path of its Mma ops: wgmma | mma_sync
    persistent_ctas: int = 0  # >0: that many CTAs loop over the grid's work items (c, c+P, ...)
    # Per step of its innermost loop with an Mma: for each time a warp waits on register
    # spills reloaded from local memory, the cycles it issued for since the reloads went
    # out (compiled SASS, the kernel profile). Each wait costs an L2 round trip less that.
    spill_reload_covers: tuple[int, ...] = ()
    # The instructions its warps issue besides memory and MMA, from the compiled SASS
    # (validate/issue.py, the kernel profile), in cycles at k = 1..4 warps per scheduler:
    # per step of its innermost loop with an Mma, and once per CTA for the rest of the
    # kernel (for a kernel without such a loop, all of it). Empty: the Vector ops' costs.
    issue_per_step: tuple[float, ...] = ()
    issue_per_cta: tuple[float, ...] = ()
    # Why its registers, spills and issue cycles are the generator's estimate ("" when
    # they come from the kernel profile, or from the author of a hand-written trace).
    estimated: str = ""

    @property
    def num_ctas(self) -> int:
        n = 1
        for _, size in self.grid:
            n *= size
        return n


@dataclass(frozen=True)
class Trace:
    algo: str  # standard | v1 | v2 | v3 | any name for a hand-written schedule
    tensors: tuple[TensorSpec, ...]
    launches: tuple[Launch, ...]
    params: dict = field(default_factory=dict)  # names usable in expressions
    workload: dict = field(default_factory=dict)  # for display only; the engine ignores it
    config: dict = field(default_factory=dict)  # for display only
    version: int = TRACE_VERSION
