"""What the sections of `tilesim explain` read and write: the story's types and scenarios.

`Story` holds the GPU and the runs (`Run`: a prediction with its trace and
counters); each section turns it into a `Section` (prose plus the numbers it cites),
and `Explanation` is the whole, with the side-by-side table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..hwmodels.gpu import GPU
from ..traces import default_config
from ..traces.ir import Load, Loop, Trace
from ..traces.workload import Workload

if TYPE_CHECKING:
    from ..traces.counters import Counters  # numpy: imported where counters are counted

NAMES = {
    "standard": "standard attention",
    "v1": "FlashAttention v1",
    "v2": "FlashAttention-2",
    "v3": "FlashAttention-3",
    "v3_fp8": "FlashAttention-3 (fp8)",
}
DECODE_KV = (8192, 32768)  # KV-cache lengths of the decode scenario
PAGE_ROWS = 16  # rows of K/V per page of the decode section's paged cache (vLLM's default)
PAGE_ENTRY_BYTES = 4  # one int32 page-table entry
SHORT_SEQLEN = 128  # the launch-bound scenario: one short sequence
WIDE_HEAD_DIM = 256  # the head dim whose tiles crowd shared memory
OWN_TENSORS = ("Q", "K", "V", "O")  # inputs and output; anything else is extra memory


@dataclass
class Section:
    key: str
    title: str
    paragraphs: list[str]
    numbers: dict  # every figure the paragraphs cite, unrounded

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "title": self.title,
            "paragraphs": list(self.paragraphs),
            "numbers": dict(self.numbers),
        }


@dataclass
class Explanation:
    gpu: str
    gpu_display: str
    workload: dict
    sections: list[Section]
    table: list[dict]  # one row per algorithm, the side-by-side comparison
    errors: dict = field(default_factory=dict)  # run -> why it has no prediction

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)

    def to_dict(self) -> dict:
        return {
            "gpu": self.gpu,
            "gpu_display": self.gpu_display,
            "workload": dict(self.workload),
            "sections": [s.to_dict() for s in self.sections],
            "table": list(self.table),
            "errors": dict(self.errors),
        }


@dataclass
class Run:
    algo: str
    workload: Workload
    trace: Trace | None = None
    counters: Counters | None = None
    pred: object = None  # Prediction
    error: str | None = None


def tensor_bytes(trace: Trace) -> dict[str, int]:
    return {t.name: t.nbytes for t in trace.tensors}


def extra_tensors(trace: Trace) -> dict[str, int]:
    return {k: v for k, v in tensor_bytes(trace).items() if k not in OWN_TENSORS}


NXN_TENSORS = ("S", "P", "dP", "dS")  # the N x N matrices: forward's and backward's


def score_traffic(c: Counters) -> int:
    """Bytes of the N x N matrices (S, P; dP, dS in a backward) through HBM, as the trace
    moves them."""
    return sum(
        c.read_bytes_by_tensor.get(t, 0) + c.write_bytes_by_tensor.get(t, 0) for t in NXN_TENSORS
    )


def uses_tma(trace: Trace) -> int:
    def count(ops) -> int:
        n = 0
        for op in ops:
            if isinstance(op, Load) and op.tma:
                n += 1
            elif isinstance(op, Loop):
                n += count(op.body)
        return n

    return sum(count(r.ops) for launch in trace.launches for r in launch.program.roles)


class Story:
    """What every section reads: the GPU, the runs, the main shape and its peak."""

    def __init__(self, gpu: GPU, runs: dict[str, Run]) -> None:
        self.gpu = gpu
        self.runs = runs
        self.w = runs["standard"].workload
        self.hopper = gpu.has_tma and gpu.has_wgmma
        self.path = default_config("v2", self.w, gpu).mma_path
        self.peak = gpu.peak_tensor_flops(self.w.dtype, self.path)
        self.ridge = gpu.ridge_point_flop_per_byte(self.w.dtype, self.path)

    def p(self, name: str):
        return self.runs[name].pred

    def missing(self, key: str, title: str, names: tuple[str, ...]) -> Section | None:
        bad = [n for n in names if self.runs.get(n) is None or self.runs[n].pred is None]
        if not bad:
            return None
        why = "; ".join(f"{n}: {self.runs[n].error}" for n in bad if n in self.runs)
        return Section(
            key,
            title,
            [f"Not predicted on this GPU and shape ({why})."],
            {"errors": {n: self.runs[n].error for n in bad if n in self.runs}},
        )
