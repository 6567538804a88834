"""What-if sweeps: "what if HBM were 2x faster?" over algorithms and shapes.

A sweep is the cartesian product of the varied hardware fields (``--vary
hbm_bandwidth_Bps=0.5x,1x,2x``, several ``--vary`` multiply), the algorithms and
the shapes (sequence lengths x head dims). Every point is one prediction on a
what-if variant of the GPU (`GPU.with_overrides`, so a variant gets a readable
name such as ``h100_sxm5_80gb+hbm_bandwidth_Bps=2x``); its speed-up is measured
against the unmodified GPU on the same algorithm and shape (the "1x point",
computed even when 1x is not in the list).

Rows come in a fixed order — shape, then algorithm, then the varied values in
the order typed — so the output is the same whether the points ran serially,
on local processes or on a Dask cluster (`tilesim.runner`). A point that
cannot run (a tile that no longer fits when shared memory shrinks) is a row
with its one-line error, not a failed sweep.

Shrinking ``smem_bytes_per_sm`` alone would leave the per-CTA limit above the
SM's capacity, which a GPU cannot have; unless ``smem_bytes_per_cta_max`` is
varied too, the per-CTA limit follows the SM's down (min of the two).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .errors import TilesimError
from .hwmodels import SETTABLE_FIELDS, UNITS
from .hwmodels.gpu import GPU
from .runner import Job, Outcome, RunStats, run_jobs
from .traces.workload import ALGOS, Workload, paper_batch_heads


def default_batch_heads(seqlen: int, head_dim: int) -> tuple[int, int]:
    """Batch and heads of the paper shape (16k tokens per batch, H·d = 2048), at least one
    of each."""
    for name, value in (("seqlen", seqlen), ("head_dim", head_dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise TilesimError(f"{name} must be a positive integer, got {value!r}")
    batch, heads = paper_batch_heads(seqlen, head_dim)
    return max(1, batch), max(1, heads)


# How a run that only this field limited would scale with it, by the field's unit: as the
# value for a rate, as its inverse for a latency or overhead; a capacity has no such law.
RATE_UNITS = frozenset(
    {"SMs", "Hz", "of sm_clock_hz", "of peak", "B/s", "B/clk/SM", "FLOP/clk/SM", "ops/clk/SM",
     "lanes/clk/SM", "schedulers"}
)  # fmt: skip
COST_UNITS = frozenset({"SM cycles", "s"})


def ideal_speedup(key: str, factor: float) -> float | None:
    """The speed-up of a run bound by ``key`` alone when it changes by ``factor``
    (None where no such law holds: capacities, flags)."""
    unit = UNITS.get(key)
    if not factor > 0:
        return None
    if unit in RATE_UNITS:
        return factor
    if unit in COST_UNITS:
        return 1.0 / factor
    return None


@dataclass(frozen=True)
class Vary:
    """One varied hardware field and its values as typed (``2x``, ``6.7e12``, ``true``)."""

    key: str
    values: tuple[str, ...]


def parse_vary(items: Sequence[str], gpu: GPU) -> tuple[Vary, ...]:
    """``["hbm_bandwidth_Bps=0.5x,1x,2x", ...]`` -> Varys, each value checked on ``gpu``."""
    varies: list[Vary] = []
    seen: set[str] = set()
    for item in items:
        key, sep, rest = str(item).partition("=")
        key = key.strip()
        values = tuple(v.strip() for v in rest.split(",")) if sep else ()
        if not sep or not key or not values or any(not v for v in values):
            raise TilesimError(
                f"--vary expects KEY=V1,V2,... (e.g. hbm_bandwidth_Bps=0.5x,1x,2x), got {item!r}"
            )
        if key in seen:
            raise TilesimError(f"--vary {key} is given twice")
        if len(set(values)) != len(values):
            raise TilesimError(f"--vary {key} lists a value twice: {rest}")
        if key not in SETTABLE_FIELDS:
            # with_overrides words it best: the key, a suggestion and the valid keys
            try:
                gpu.with_overrides({key: values[0]})
            except TilesimError as exc:
                raise TilesimError(f"--vary: {exc}") from None
        for value in values:
            try:
                variant(gpu, {key: value})
            except TilesimError as exc:
                raise TilesimError(f"--vary {key}={value}: {exc}") from None
        seen.add(key)
        varies.append(Vary(key, values))
    return tuple(varies)


def variant(gpu: GPU, settings: dict[str, str]) -> GPU:
    """``gpu`` with ``settings`` applied (see the module docstring for shared memory).

    A setting that leaves its field as it was (``1x``) is dropped, so the 1x point
    is the preset itself — same name, same cache entry as the baseline.
    """
    settings = {k: v for k, v in settings.items() if _value(gpu, k, v) != getattr(gpu, k)}
    new_smem = _value(gpu, "smem_bytes_per_sm", settings.get("smem_bytes_per_sm"))
    if new_smem is not None and "smem_bytes_per_cta_max" not in settings:
        # Lower the per-CTA limit to what the SM will have first (always consistent), so
        # the variant keeps the name of the user's settings only.
        cap = min(gpu.smem_bytes_per_cta_max, new_smem)
        if cap != gpu.smem_bytes_per_cta_max:
            gpu = gpu.with_overrides({"smem_bytes_per_cta_max": cap}, name=gpu.name)
    return gpu.with_overrides(settings)


def _value(gpu: GPU, key: str, value: str):
    """The value ``key`` would take (None if absent or unreadable: with_overrides says why)."""
    if value is None:
        return None
    # a lone smaller smem_bytes_per_sm is inconsistent with the per-CTA limit; probe past it
    extra = {"smem_bytes_per_cta_max": 1} if key == "smem_bytes_per_sm" else {}
    try:
        return getattr(gpu.with_overrides({key: value, **extra}, name=gpu.name), key)
    except TilesimError:
        return None


def shapes(
    seqlens: Sequence[int],
    head_dims: Sequence[int],
    *,
    batch: int | None = None,
    heads: int | None = None,
    causal: bool = False,
    dtype: str = "fp16",
    seqlens_kv: Sequence[int] | None = None,
    kv_heads: int | None = None,
) -> list[Workload]:
    """One workload per (seqlen, head_dim); batch/heads None: `default_batch_heads`.

    Serving shapes: with ``seqlens_kv`` one per (seqlen, KV length, head_dim), the
    queries (``seqlen``: 1 for decode) against a cache of that length, the default
    batch filling 16k tokens of cache; ``kv_heads`` for grouped-query heads.
    """
    out = []
    for n in seqlens:
        for n_kv in seqlens_kv or (None,):
            for d in head_dims:
                b, h = default_batch_heads(n if n_kv is None else n_kv, d)
                out.append(
                    Workload(
                        b if batch is None else batch,
                        h if heads is None else heads,
                        n,
                        n if n_kv is None else n_kv,
                        d,
                        causal,
                        dtype,
                        kv_heads=kv_heads,
                    )
                )
    return out


@dataclass(frozen=True)
class SweepResult:
    gpu: str  # the base GPU's name
    varies: tuple[Vary, ...]
    algos: tuple[str, ...]
    rows: tuple[dict, ...]
    stats: RunStats = field(compare=False)

    def to_dict(self) -> dict:
        """Everything but the run statistics: the same for every runner and every rerun."""
        return {
            "gpu": self.gpu,
            "vary": {v.key: list(v.values) for v in self.varies},
            "algos": list(self.algos),
            "rows": [dict(r) for r in self.rows],
        }


def run_sweep(
    gpu: GPU,
    varies: Sequence[Vary],
    algos: Sequence[str],
    workloads: Sequence[Workload],
    *,
    fidelity: str = "fast",
    workers: int = 1,
    scheduler=None,
    cache_dir=None,
    progress: bool = False,
    on_result: Callable[[int, Outcome], None] | None = None,
) -> SweepResult:
    """Predict every point of the sweep and its 1x baseline; see the module docstring."""
    for algo in algos:
        if algo not in ALGOS:
            raise TilesimError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")
    if not algos or not workloads:
        raise TilesimError("a sweep needs at least one algorithm and one shape")
    combos = list(itertools.product(*(v.values for v in varies)))
    keys = [v.key for v in varies]

    points: list[tuple[Workload, str, dict]] = []
    jobs: list[Job] = []
    errors: dict[int, str] = {}
    for w in workloads:
        for algo in algos:
            jobs.append(Job(gpu, algo, w, fidelity=fidelity))  # the 1x baseline
            for combo in combos:
                settings = dict(zip(keys, combo, strict=True))
                points.append((w, algo, settings))
                try:
                    jobs.append(Job(variant(gpu, settings), algo, w, fidelity=fidelity))
                except TilesimError as exc:  # this combination is not a consistent GPU
                    errors[len(jobs)] = str(exc)
                    jobs.append(Job(gpu, algo, w, fidelity=fidelity))  # placeholder
    outcomes, stats = run_jobs(
        jobs,
        workers=workers,
        scheduler=scheduler,
        cache_dir=cache_dir,
        progress=progress,
        on_result=on_result,
    )

    rows = []
    per_base = len(combos) + 1
    for k, (w, algo, settings) in enumerate(points):
        base_index = (k // len(combos)) * per_base
        j = base_index + 1 + k % len(combos)
        base, out = outcomes[base_index], outcomes[j]
        error = errors.get(j) or out.error
        rows.append(_row(gpu, w, algo, settings, jobs[j].gpu, None if error else out, base, error))
    return SweepResult(gpu.name, tuple(varies), tuple(algos), tuple(rows), stats)


def _row(
    gpu: GPU,
    w: Workload,
    algo: str,
    settings: dict,
    hw: GPU,
    out: Outcome | None,
    base: Outcome,
    error: str | None,
) -> dict:
    factors, values = {}, {}
    for key in settings:
        old, new = getattr(gpu, key), getattr(hw, key)
        factors[key] = None if isinstance(old, bool) or error or old == 0 else new / old
        values[key] = None if error else new
    row = {
        "algo": algo,
        "batch": w.batch,
        "heads": w.heads,
        "seqlen": w.seqlen_q,
        "head_dim": w.head_dim,
        "causal": w.causal,
        "dtype": w.dtype,
        "settings": dict(settings),
        "factors": factors,
        "values": values,  # the fields' values on the variant, in their units
        "gpu": None if error else hw.name,
        "time_s": None,
        "tflops": None,
        "bound": None,
        "hbm_bytes": None,
        "speedup": None,
        "error": error,
    }
    # serving shapes only: the rows of square multi-head shapes stay as they were
    if w.seqlen_kv != w.seqlen_q:
        row["seqlen_kv"] = w.seqlen_kv
    if w.group > 1:
        row["kv_heads"] = w.num_kv_heads
    if out is not None and out.prediction is not None:
        p = out.prediction
        row.update(time_s=p.time_s, tflops=p.tflops, bound=p.bound, hbm_bytes=p.hbm_bytes)
        if base.prediction is not None and p.time_s > 0:
            row["speedup"] = base.prediction.time_s / p.time_s
    return row
