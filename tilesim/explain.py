"""`tilesim explain`: the story of attention on one GPU and shape, told with simulated numbers.

Standard attention writes the N x N score matrix to HBM and reads it back;
FlashAttention v1 keeps it on chip (tiling + online softmax) but re-reads its
output; v2 parallelises over the sequence and does less non-matmul work; v3
uses Hopper's TMA, warp specialisation and ping-pong to hide the exponentials,
and FP8. Then where the technique stops paying: decode, very short sequences,
wide heads. Every number comes from this shape's predictions (`simulate`), its
traces' analytic counters (`traces.counters`) or the GPU's figures — none is
written into the text.

The explanation is data first (`build_explanation` -> `Explanation`: sections,
each with its prose and the numbers the prose cites, plus the side-by-side
table). The sections are written in `tilesim.explain_algorithms` (the shape, standard
attention, v1, v2, v3) and `tilesim.explain_limits` (decode, short sequences, wide
heads, what FlashAttention is not); `tilesim.explain_render` renders the result for
the terminal and as Markdown, and `Explanation.to_dict` is the ``--json`` output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import TilesimError
from .hwmodels.gpu import GPU
from .runner import Job, run_jobs
from .traces import build, default_config
from .traces.config import check_algo, named_config
from .traces.ir import Load, Loop, Trace
from .traces.workload import Workload
from .whatif import default_batch_heads

if TYPE_CHECKING:
    from .traces.counters import Counters  # numpy: imported where counters are counted

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


# -- formatting -----------------------------------------------------------------------


def fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_x(r: float) -> str:
    return f"{r:.2f}x" if r < 10 else f"{r:.0f}x"


def fmt_speed(time_s: float, other_s: float, other: str) -> str:
    """``1.46x faster than v2`` / ``1.10x slower than v2`` / ``as fast as v2``."""
    r = other_s / time_s
    if abs(r - 1) < 0.005:
        return f"as fast as {other}"
    return f"{fmt_x(r)} faster than {other}" if r > 1 else f"{fmt_x(1 / r)} slower than {other}"


def fmt_pct(r: float) -> str:
    if 0 < r < 0.005:
        return "<1%"
    return f"{100 * r:.0f}%"


def fmt_si(n: float) -> str:
    """A count with an SI prefix, 3 significant digits: 83.9 M, 1.07 G."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def fmt_count(n: float) -> str:
    return f"{n:,.0f}"


# -- the runs the story cites --------------------------------------------------------------


@dataclass
class Run:
    algo: str
    workload: Workload
    trace: Trace | None = None
    counters: Counters | None = None
    pred: object = None  # Prediction
    error: str | None = None


def main_workload(
    gpu: GPU,
    seqlen: int,
    head_dim: int,
    batch: int | None,
    heads: int | None,
    causal: bool,
    dtype: str,
    seqlen_kv: int | None = None,
    pass_: str = "fwd",
    kv_heads: int | None = None,
) -> Workload:
    b, h = default_batch_heads(seqlen, head_dim)
    return Workload(
        b if batch is None else batch,
        h if heads is None else heads,
        seqlen,
        seqlen if seqlen_kv is None else seqlen_kv,
        head_dim,
        causal,
        dtype,
        pass_,
        kv_heads=kv_heads,
    )


def _plan(gpu: GPU, w: Workload) -> dict[str, tuple[str, Workload, object]]:
    hopper = gpu.has_tma and gpu.has_wgmma
    plan: dict[str, tuple[str, Workload, object]] = {}
    base = Workload(
        w.batch,
        w.heads,
        w.seqlen_q,
        w.seqlen_kv,
        w.head_dim,
        w.causal,
        "fp16" if w.dtype == "fp8" else w.dtype,
    )
    for algo in ("standard", "v1", "v2"):
        plan[algo] = (algo, base, None)
    if hopper:
        plan["v3"] = ("v3", base, None)
        if base.head_dim <= 128:
            # FlashAttention-3's ping-pong schedule, which the Gluon kernel runs when asked
            plan["v3_fa3"] = ("v3", base, named_config("fa3", "v3", base, gpu))
        if gpu.has_fp8:
            plan["v3_fp8"] = ("v3", _with(base, dtype="fp8"), None)
    fast = ("standard", "v2") + (("v3",) if hopper else ())
    for kv in DECODE_KV:
        dec = _with(base, seqlen_q=1, seqlen_kv=kv, causal=False)
        for algo in fast:
            plan[f"decode{kv}_{algo}"] = (algo, dec, None)
        # v2's grid of one CTA per (batch, head), not split: what the split-KV schedule beats
        whole = default_config("v2", dec, gpu).replace(num_splits=1, pack_gqa=False)
        plan[f"decode{kv}_v2_whole"] = ("v2", dec, whole)
        # grouped-query heads: the user's, or 8 query heads per K/V head
        plan[f"decode{kv}_v2_gqa"] = ("v2", _with(dec, kv_heads=decode_kv_heads(w)), None)
    for algo in fast:
        plan[f"short_{algo}"] = (
            algo,
            _with(base, batch=1, seqlen_q=SHORT_SEQLEN, seqlen_kv=SHORT_SEQLEN),
            None,
        )
    other = WIDE_HEAD_DIM if base.head_dim != WIDE_HEAD_DIM else 64
    for algo in ("v2",) + (("v3",) if hopper else ()):
        heads = max(1, base.heads * base.head_dim // other)  # same H*d: same FLOPs
        plan[f"wide_{algo}"] = (algo, _with(base, head_dim=other, heads=heads), None)
    return plan


DECODE_GROUP = 8  # query heads per K/V head of the decode section's GQA run (Llama-style)


def decode_kv_heads(w: Workload) -> int:
    """K/V heads of the decode section's grouped-query run: the workload's own when it
    groups its heads, else heads / 8 (the largest divisor of heads at most that)."""
    if w.group > 1:
        return w.num_kv_heads
    group = max(g for g in range(1, DECODE_GROUP + 1) if w.heads % g == 0)
    return w.heads // group


def _with(w: Workload, **changes) -> Workload:
    d = w.to_dict()
    d.update(changes)
    return Workload(**d)


def gather(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> dict[str, Run]:
    """Every prediction the story needs, with its trace and counters."""
    from .traces.counters import counters

    plan = _plan(gpu, w)
    runs: dict[str, Run] = {}
    jobs, names = [], []
    for name, (algo, wl, config) in plan.items():
        run = Run(algo, wl)
        try:
            run.trace = build(algo, wl, gpu, config)
            run.counters = counters(run.trace)
        except TilesimError as exc:
            run.error = str(exc)
        runs[name] = run
        if run.error is None:
            jobs.append(Job(gpu, algo, wl, config, fidelity))
            names.append(name)
    outcomes, _ = run_jobs(jobs, workers=workers, cache_dir=cache_dir, progress=progress)
    for name, out in zip(names, outcomes, strict=True):
        runs[name].pred = out.prediction
        runs[name].error = out.error
    return runs


# -- the story -------------------------------------------------------------------------------


def build_explanation(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> Explanation:
    """Predict everything the story cites and write it (see the module docstring).

    With ``w.dtype == "fp8"`` the story runs at fp16 and adds v3's fp8 variant (only v3
    takes fp8); on a GPU without fp8 that is an error, not a silent fp16 story.
    """
    if w.dtype == "fp8":
        check_algo("v3", w, gpu)
    runs = gather(
        gpu, w, workers=workers, cache_dir=cache_dir, progress=progress, fidelity=fidelity
    )
    for key in ("standard", "v2"):
        if runs[key].pred is None:
            raise TilesimError(f"cannot explain this shape: {key} fails: {runs[key].error}")
    from . import explain_algorithms as algorithms
    from . import explain_limits as limits

    story = Story(gpu, runs)
    sections = [
        algorithms.setup(story),
        algorithms.standard(story),
        algorithms.v1(story),
        algorithms.v2(story),
        algorithms.v3(story),
        limits.decode(story),
        limits.short(story),
        limits.wide(story),
        limits.is_not(story),
    ]
    return Explanation(
        gpu=gpu.name,
        gpu_display=gpu.display_name,
        workload=runs["standard"].workload.to_dict(),
        sections=sections,
        table=_table(story),
        errors={k: r.error for k, r in sorted(runs.items()) if r.error},
    )


def tensor_bytes(trace: Trace) -> dict[str, int]:
    return {t.name: t.nbytes for t in trace.tensors}


def _extra_tensors(trace: Trace) -> dict[str, int]:
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


# -- the side-by-side table ------------------------------------------------------------


def _table(st: Story) -> list[dict]:
    rows = []
    for name in ("standard", "v1", "v2", "v3", "v3_fp8"):
        run = st.runs.get(name)
        if run is None:
            continue
        row = {"algo": name, "name": NAMES[name], "error": run.error}
        if run.pred is None:
            rows.append(row)
            continue
        p, trace = run.pred, run.trace
        cfg = trace.config
        extra = _extra_tensors(trace)
        features = [cfg["mma_path"]]
        if uses_tma(trace):
            features.append("TMA")
        if cfg.get("warp_specialize"):
            features.append("warp-spec")
        if cfg.get("pingpong"):
            features.append("ping-pong")
        if cfg.get("persistent"):
            features.append("persistent")
        out_dtype = next(t.dtype for t in trace.tensors if t.name == "O")
        in_dtype = run.workload.dtype
        row.update(
            score_hbm_bytes=score_traffic(run.counters),
            extra_bytes=sum(extra.values()),
            extra_tensors=sorted(extra),
            ctas=[lp.ctas for lp in p.launches],
            launches=[lp.name for lp in p.launches],
            waves=p.waves,
            features=features,
            precision=in_dtype if in_dtype == out_dtype else f"{in_dtype}→{out_dtype}",
            time_s=p.time_s,
            tflops=p.tflops,
            hbm_bytes=p.hbm_bytes,
            bound=p.bound,
        )
        rows.append(row)
    return rows
