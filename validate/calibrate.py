"""`tilesim calibrate`: micro-benchmark the GPU at hand and write a calibrated preset.

Two halves. The GPU one, :func:`tilesim.validate.gpu.calibrate.run_calibration`, runs
the Triton micro-benchmarks of :mod:`tilesim.validate.gpu.steps` (the steps this module's
:data:`STEPS` names) and returns raw measurements, one row each (``name``, ``value``,
``unit``, ``method``, ``samples``). This module is the other: :func:`derive_preset`
(pure, CPU-tested) turns those rows into preset fields with explicit arithmetic,
each with a source line saying how it was measured. The calibrated preset is an
overlay on the datasheet one (``base = "h200_sxm_141gb"``): only measured fields
change.

Calibration never looks at attention timings: that is what validation compares
the model against, and fitting to it would make the accuracy figure meaningless.

Conversions (rates per SM per clock use the SM clock of that benchmark: its own cycle
counter over its ns timer where it has them, else nvidia-smi's reading):

* ``sm_clock_hz`` = median ``nvidia-smi clocks.sm`` sampled during a sustained
  tensor-core run (validation records the same reading per point); without samples,
  measured tensor FLOP/s ÷ (SMs × datasheet FLOP/clk/SM) (the clock the datasheet
  rate would need).
* ``tensor_clock_ratio`` = the clock a tensor-core kernel's SMs really ran at over
  nvidia-smi's reading: every CTA of a ``tl.dot`` loop launch reads ``%clock64`` and
  ``%globaltimer`` at its start and end; their cycles over their ns, over the
  nvidia-smi median of that run (H200: 0.90-0.92 in every tensor loop, 1.00 in the
  exp2 and FMA loops; Nsight Compute's cycle counters gave ~1.75 GHz for the
  validation's tensor-core kernels while nvidia-smi read 1.98).
* tensor FLOP/clk/SM = best measured ``tl.dot`` FLOP/s over the kernels' tile
  shapes ÷ (SMs × clock). The best shape is the pipe's rate; slower shapes lose
  to issue overhead that the kernels' own tiles may not pay.
* ``sfu_ops_per_clk_per_sm`` = exp2/s ÷ (SMs × clock); ``fp32_ops_per_clk_per_sm``
  = FMA lane-ops/s ÷ (SMs × clock).
* ``hbm_read_efficiency`` = streaming-read B/s ÷ datasheet peak; write likewise;
  ``hbm_mix_{25,50,75,90}_efficiency`` = read+write B/s of a stream whose bytes are
  that share writes ÷ the peak (step ``hbm_mix``).
* ``l2_bandwidth_Bps`` = streaming read B/s at the largest working set of at most
  half the L2 (see :func:`pick_l2_bandwidth`).
* latencies: pointer-chase seconds per hop × ``sm_clock_hz`` (so that the engine,
  which converts cycles at that clock, reproduces the measured seconds). Loaded
  latencies (``*_50/75/95_cycles``): the chase timed while other CTAs stream
  reads, at several streaming loads; each load's busy fraction is its bandwidth
  over the highest measured, and the curve is interpolated at 50, 75 and 95% (see
  :func:`loaded_latency_curve`).
* ``launch_overhead_s`` = an empty kernel timed by ``do_bench``: the floor of any
  one-launch time that validation measures the same way.
* ``hbm_tile_extra_cycles`` = what a tile from HBM takes beyond one load's latency
  (the slowest of its requests): 16 CTAs (on an idle HBM) each stream fp16 tiles by
  plain loads, one in flight; per CTA size, seconds per tile extrapolated to zero bytes
  from two tile sizes, less the pointer chase (see :func:`tile_extra_latency`).
* ``hbm_tile_extra_2KiB_cycles`` / ``_8KiB_`` = the same for a smaller load: CTAs walk a
  chain of int32 tiles of 256 B, 2 and 8 KiB (each tile's max is the next tile's index,
  so one is in flight at any size); the seconds per tile over those of 256 B tiles
  (see :func:`small_load_extra`).
* ``store_bandwidth_B_per_clk_per_sm`` = the rate an SM's stores leave it at: CTAs (one
  per SM, an idle HBM) write chains of int32 tiles of 256 B to 32 KiB, each tile's
  stores acknowledged (a fence, then a barrier) before the next; per CTA size, bytes
  over seconds between the two largest tiles, at the run's SM clock (see
  :func:`store_port_rate`).
* ``cta_turnaround_cycles`` = the median gap, in the SM's own cycles, between a CTA's
  last instruction and the first of the CTA that takes its slot (CTAs of 8 warps that
  spin a fixed number of cycles, several waves; see ``steps.turnaround.turnaround_gaps``).
* ``wgmma_latency_cycles`` = SM cycles from a wgmma's last pipe cycle to its result:
  dependent chains of dots at 1 CTA per SM, a step of two (the second's A in registers)
  less a step of one, less the pipe time, extrapolated to zero A elements (see
  :func:`wgmma_latency`).
* ``cta_dispatch_cycles`` = SM cycles between two CTA starts anywhere on the GPU: empty
  grids of 2^19 and 2^20 CTAs back to back, their time difference over the CTAs between,
  at the run's SM clock (4 warps a CTA; 1 and 8 are listed beside it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import TilesimError
from ..hwmodels.gpu import GPU, HBM_MIX_POINTS, LOADED_LATENCY_POINTS, interpolate
from ..hwmodels.presets import calibrated_name
from ..units import KiB, MiB
from .calibration_figures import (
    SMALL_LOAD_FIELDS,
    clock_of,
    loaded_latency_curve,
    pick_l2_bandwidth,
    row_bytes,
    small_load_extra,
    store_port_rate,
    tensor_rows,
    tile_extra_latency,
    vector_step_ratio,
    wgmma_latency,
)
from .stats import median

# -- the steps ------------------------------------------------------------------------------

# The steps of `tilesim calibrate`, in run order (validate/gpu/steps/ holds their code).
STEPS = (
    "hbm",
    "hbm_mix",
    "l2",
    "latency",
    "loaded_latency",
    "tensor",
    "mma_latency",
    "clock",
    "power",
    "exp2",
    "fp32",
    "vector",
    "launch",
    "turnaround",
    "dispatch",
    "tile_latency",
    "store_latency",
)


def check_steps(only: Sequence[str] | None) -> tuple[str, ...]:
    """The steps of ``only`` in run order (all of them for none); raises on an unknown one."""
    if not only:
        return STEPS
    unknown = [s for s in only if s not in STEPS]
    if unknown:
        raise TilesimError(
            f"unknown calibration step {unknown[0]!r} (choose from {', '.join(STEPS)})"
        )
    return tuple(s for s in STEPS if s in only)


# -- the derivation -------------------------------------------------------------------------


def _sig(x: float, digits: int = 4) -> float:
    """Round to ``digits`` significant digits: a preset says 4.13e12, not 4.1283765e12."""
    return float(f"{x:.{digits}g}")


def _by_name(rows: Sequence[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for row in rows:
        out[row["name"]] = row
    return out


def _how(row: dict) -> str:
    """How a row was measured, for a source comment: method and sample count."""
    n = len(row.get("samples") or [])
    return f"{row.get('method', '')}, median of {n}" if n > 1 else row.get("method", "")


def _clock_how(row: dict) -> str:
    return "SM cycle counter" if row.get("clock_effective_MHz") else "nvidia-smi"


class Figure(NamedTuple):
    """One preset field derived from the rows, with how it was measured."""

    field: str
    value: float | int
    source: str  # the kernel, size, sample count and formula
    when: str = ""  # the date of the rows it comes from, where a later run added them


Derived = tuple[list[Figure], list[str]]  # (figures, notes) of one group of fields


def derive_preset(rows: Sequence[dict], base: GPU, date: str) -> tuple[GPU, list[str], list[str]]:
    """Calibrated `GPU` from raw measurement rows: (gpu, fields changed, notes).

    Pure arithmetic on the rows; every changed field gets a source line with the
    kernel, size, sample count, date and the formula. One function per group of
    fields, in this order; a later group reads the fields an earlier one set (the SM
    count, the clock, the rates it converts at).
    """
    m = _by_name(rows)
    changes: dict[str, float | int] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []

    def take(derived: Derived) -> None:
        figures, more = derived
        for fig in figures:
            changes[fig.field] = fig.value
            when = fig.when if fig.when and fig.when != date else date
            sources[fig.field] = f"micro-benchmark {when}: {fig.source}"
        notes.extend(more)

    def now(field: str):
        """``field`` as derived so far, else the base preset's."""
        return changes.get(field, getattr(base, field))

    take(_device_figures(m, base))
    sm_count = now("sm_count")
    tensor = tensor_rows(rows)
    take(_clock_figures(rows, m, base, sm_count, tensor))
    clock = now("sm_clock_hz")  # what the later figures convert seconds to cycles at
    take(_tensor_figures(tensor, base, sm_count, clock))
    take(_vector_figures(rows, m, base, sm_count, clock))
    take(_hbm_figures(m, base))
    take(_l2_figures(rows, int(now("l2_bytes"))))
    take(_mma_latency_figures(rows, now("tensor_fp16_wgmma_flop_per_clk_per_sm")))
    take(_latency_figures(rows, m, clock))
    take(_cta_figures(rows, m))
    take(_tile_figures(rows, m, clock))
    take(_clock_model_figures(rows, now("tensor_clock_ratio")))
    take(_launch_figures(m))

    gpu = dataclasses.replace(
        base,
        **changes,
        name=calibrated_name(base.name),
        display_name=f"{base.display_name} (calibrated {date})",
        sources={**base.sources, **sources},
    )
    return gpu, sorted(changes), notes


def _device_figures(m: dict[str, dict], base: GPU) -> Derived:
    """``sm_count`` and ``l2_bytes``, where the driver reports other than the preset."""
    figures = []
    props = m.get("device_sm_count")
    if props and int(props["value"]) != base.sm_count:
        sm_count = int(props["value"])
        figures.append(Figure("sm_count", sm_count, f"driver reports {sm_count} SMs"))
    l2 = m.get("device_l2_bytes")
    if l2 and int(l2["value"]) != base.l2_bytes:
        figures.append(
            Figure("l2_bytes", int(l2["value"]), f"driver reports {int(l2['value'])} B of L2")
        )
    return figures, []


def _clock_figures(
    rows: Sequence[dict],
    m: dict[str, dict],
    base: GPU,
    sm_count: int,
    tensor: dict[tuple[str, str], dict],
) -> Derived:
    """``tensor_clock_ratio`` (the SMs' cycle counters over nvidia-smi in tensor-core
    runs) and ``sm_clock_hz`` (nvidia-smi during the sustained run; without it, the
    clock the datasheet's tensor rate would need)."""
    figures, notes = [], []
    # tensor-core runs: the SMs' own %clock64 over %globaltimer, and nvidia-smi meanwhile
    # (the sustained run's value is nvidia-smi's reading)
    ratios = sorted(
        r["clock_effective_MHz"] * 1e6 / (r["clock_MHz"] * 1e6 if "clock_MHz" in r else r["value"])
        for r in rows
        if r.get("clock_effective_MHz")
        and (r["name"].startswith("tensor_") or r["name"] == "sm_clock_sustained")
        and (r.get("clock_MHz") or r["name"] == "sm_clock_sustained")
    )
    if ratios:
        figures.append(
            Figure(
                "tensor_clock_ratio",
                _sig(min(1.0, median(ratios)), 3),
                f"SM cycle counter (%clock64 / %globaltimer over every CTA of a launch) over "
                f"nvidia-smi clocks.sm during the tensor-core loops, median of {len(ratios)} "
                f"({ratios[0]:.3f}-{ratios[-1]:.3f})",
            )
        )
    clock_row = m.get("sm_clock_sustained")
    if clock_row:
        figures.append(
            Figure(
                "sm_clock_hz",
                _sig(clock_row["value"]),
                f"nvidia-smi clocks.sm sampled every {clock_row.get('interval_ms', '?')} ms "
                f"during a {clock_row.get('duration_s', '?')} s tl.dot loop, median of "
                f"{len(clock_row.get('samples', []))}",
            )
        )
    elif tensor.get(("fp16", "wgmma")) or tensor.get(("fp16", "mma_sync")):
        path = "wgmma" if tensor.get(("fp16", "wgmma")) else "mma_sync"
        best = tensor[("fp16", path)]
        per_clk = base.tensor_flop_per_clk_per_sm("fp16", path)
        figures.append(
            Figure(
                "sm_clock_hz",
                _sig(best["value"] / (sm_count * per_clk)),
                f"derived: {best['value']:.4g} FLOP/s ({best['name']}) / ({sm_count} SMs x "
                f"{per_clk:g} datasheet FLOP/clk/SM); no clock samples",
            )
        )
        notes.append("no nvidia-smi clock samples: clock derived from tensor FLOP/s")
    return figures, notes


TENSOR_FIELDS = {
    ("fp16", "wgmma"): "tensor_fp16_wgmma_flop_per_clk_per_sm",
    ("fp16", "mma_sync"): "tensor_fp16_mma_sync_flop_per_clk_per_sm",
    ("fp8", "wgmma"): "tensor_fp8_wgmma_flop_per_clk_per_sm",
}


def _tensor_figures(
    tensor: dict[tuple[str, str], dict], base: GPU, sm_count: int, clock: float
) -> Derived:
    """Tensor FLOP/clk/SM per (dtype, path): the best shape's FLOP/s over SMs x the clock
    its run was at; none for a path the base preset has no rate for."""
    figures, notes = [], []
    for key, field in TENSOR_FIELDS.items():
        best = tensor.get(key)
        if best is None:
            continue
        if getattr(base, field) == 0:
            notes.append(f"{best['name']} measured but {base.name} has no {field}; not set")
            continue
        hz = clock_of(best, clock)
        figures.append(
            Figure(
                field,
                _sig(best["value"] / (sm_count * hz)),
                f"{best['value']:.4g} FLOP/s best of {best['name']} ({_how(best)}) / "
                f"({sm_count} SMs x {hz / 1e6:.0f} MHz, {_clock_how(best)})",
            )
        )
    return figures, notes


def _vector_figures(
    rows: Sequence[dict], m: dict[str, dict], base: GPU, sm_count: int, clock: float
) -> Derived:
    """SFU and FP32 ops/clk/SM, and ``vector_warps_per_scheduler``: the flash softmax
    step at one warp per scheduler over the pipes' time at those rates."""
    figures = []
    for name, field, what in (
        ("exp2", "sfu_ops_per_clk_per_sm", "exp2/s"),
        ("fp32_fma", "fp32_ops_per_clk_per_sm", "FMA lane-ops/s"),
    ):
        row = m.get(name)
        if row:
            hz = clock_of(row, clock)
            figures.append(
                Figure(
                    field,
                    _sig(row["value"] / (sm_count * hz)),
                    f"{row['value']:.4g} {what} ({_how(row)}) / ({sm_count} SMs x "
                    f"{hz / 1e6:.0f} MHz, {_clock_how(row)})",
                )
            )
    # latency hiding of vector work
    steps = {
        r["warps"] * 100 + r["ctas_per_sm"]: r for r in rows if r["name"].startswith("vector_step_")
    }
    one = steps.get(401)  # 4 warps, one CTA per SM: one warp per scheduler
    if one:
        rates = {fig.field: fig.value for fig in figures}
        sfu = rates.get("sfu_ops_per_clk_per_sm", base.sfu_ops_per_clk_per_sm)
        fp32 = rates.get("fp32_ops_per_clk_per_sm", base.fp32_ops_per_clk_per_sm)
        ratios = {
            key: vector_step_ratio(row, sfu, fp32, clock_of(row, clock))
            for key, row in steps.items()
        }
        slow = max(1.0, ratios[401])
        seen = ", ".join(
            f"{key // 100} warps x {key % 100} CTA/SM {ratios[key]:.2f}" for key in sorted(ratios)
        )
        figures.append(
            Figure(
                "vector_warps_per_scheduler",
                _sig(slow, 3),
                f"the flash softmax step on a register tile ({_how(one)}) took "
                f"{ratios[401]:.2f}x the SFU/FP32 pipe time at one warp per scheduler "
                f"(measured / pipe time: {seen})",
            )
        )
    return figures, []


def _hbm_figures(m: dict[str, dict], base: GPU) -> Derived:
    """HBM read and write efficiency (streams over the datasheet peak, at most 1) and
    the mixed streams' ``hbm_mix_*_efficiency``."""
    figures, notes = [], []
    for name, field in (("hbm_read", "hbm_read_efficiency"), ("hbm_write", "hbm_write_efficiency")):
        row = m.get(name)
        if not row:
            continue
        eff = row["value"] / base.hbm_bandwidth_Bps
        text = (
            f"{row['value']:.4g} B/s ({_how(row)}) / {base.hbm_bandwidth_Bps:.4g} "
            "B/s datasheet peak"
        )
        if eff > 1:
            notes.append(f"{name} {row['value']:.4g} B/s beats the datasheet peak; set to 1")
            eff, text = 1.0, text + " (above peak: clamped to 1)"
        figures.append(Figure(field, _sig(eff), text))
    for share in HBM_MIX_POINTS:
        pct = round(100 * share)
        row = m.get(f"hbm_mix_{pct}")
        if row:
            eff = min(1.0, row["value"] / base.hbm_bandwidth_Bps)
            figures.append(
                Figure(
                    f"hbm_mix_{pct}_efficiency",
                    _sig(eff),
                    f"{row['value']:.4g} B/s read+write ({_how(row)}) / "
                    f"{base.hbm_bandwidth_Bps:.4g} B/s datasheet peak",
                    row.get("date", ""),
                )
            )
    return figures, notes


def _l2_figures(rows: Sequence[dict], l2_bytes: int) -> Derived:
    """``l2_bandwidth_Bps``: the read curve's point of `pick_l2_bandwidth`."""
    curve = sorted((r for r in rows if r["name"].startswith("l2_read@")), key=row_bytes)
    point = pick_l2_bandwidth(curve, l2_bytes)
    if not point:
        return [], []
    shape = ", ".join(f"{r['size_bytes'] / MiB:g} MiB {r['value'] / 1e12:.2f}" for r in curve)
    source = (
        f"streaming read of {point['size_bytes'] / MiB:g} MiB (largest set <= L2/2; "
        f"curve TB/s: {shape})"
    )
    return [Figure("l2_bandwidth_Bps", _sig(point["value"]), source)], []


def _mma_latency_figures(rows: Sequence[dict], rate: float) -> Derived:
    """``wgmma_latency_cycles`` from the dependent chains (`wgmma_latency`), the pipe
    time taken out at ``rate`` FLOP/clk/SM."""
    latency = wgmma_latency(rows, rate)
    if not latency:
        return [], []
    cycles, seen, when = latency
    source = (
        f"dependent tl.dot chains, 1 CTA of 4 warps per SM: a register-A wgmma's SM "
        f"cycles (a step of two dots less a step of one, same shape) less its pipe time "
        f"at {rate:g} FLOP/clk, fitted on the A operand's elements and taken at zero "
        f"(the conversion of A out); per shape: {seen}"
    )
    return [Figure("wgmma_latency_cycles", _sig(max(0.0, cycles), 3), source, when)], []


def _latency_figures(rows: Sequence[dict], m: dict[str, dict], clock: float) -> Derived:
    """L2 and HBM latency in cycles at ``clock``: idle (the pointer chases), and at 50,
    75 and 95% busy (the chases under streaming load, `loaded_latency_curve`)."""
    figures = []
    for name, field in (
        ("l2_latency", "l2_hit_latency_cycles"),
        ("hbm_latency", "hbm_latency_cycles"),
    ):
        row = m.get(name)
        if row:
            figures.append(
                Figure(
                    field,
                    _sig(row["value"] * clock, 3),
                    f"pointer chase {row['value'] * 1e9:.0f} ns/hop ({_how(row)}) x "
                    f"{clock / 1e6:.0f} MHz",
                )
            )
    for level, base_field in (("l2", "l2_hit_latency"), ("hbm", "hbm_latency")):
        rows_l = [r for r in rows if r["name"].startswith(f"{level}_latency_loaded@")]
        curve = loaded_latency_curve(rows_l)
        if curve:
            shape = ", ".join(f"{u:.2f} {lat * 1e9:.0f} ns" for u, lat in curve)
            for u in LOADED_LATENCY_POINTS:
                lat = interpolate(curve, u)
                figures.append(
                    Figure(
                        f"{base_field}_{round(100 * u)}_cycles",
                        _sig(lat * clock, 3),
                        f"pointer chase {lat * 1e9:.0f} ns/hop at {100 * u:.0f}% busy, "
                        f"interpolated on the curve measured while other CTAs stream-read "
                        f"(busy fraction: stream B/s / highest; unsaturated points: {shape}) "
                        f"x {clock / 1e6:.0f} MHz",
                    )
                )
    return figures, []


def _cta_figures(rows: Sequence[dict], m: dict[str, dict]) -> Derived:
    """``cta_turnaround_cycles`` and ``cta_dispatch_cycles``, each from one CTA size: 8
    warps (the flash and GEMM kernels' CTAs) for the turnaround, 4 for the front end's
    pace (the same at every size); the others listed beside it."""
    figures = []
    for field, prefix, warps, digits in (
        ("cta_turnaround_cycles", "cta_turnaround_", 8, 0),
        ("cta_dispatch_cycles", "cta_dispatch_", 4, 2),
    ):
        row = m.get(f"{prefix}{warps}w")
        if row:
            others = ", ".join(
                f"{r['warps']} warps {r['value']:.{digits}f}"
                for r in rows
                if r["name"].startswith(prefix) and r is not row
            )
            source = _how(row) + (f" (other CTA sizes: {others})" if others else "")
            figures.append(Figure(field, _sig(row["value"], 3), source, row.get("date", "")))
    return figures, []


def _tile_figures(rows: Sequence[dict], m: dict[str, dict], clock: float) -> Derived:
    """What a tile from an idle HBM takes beyond one load (``hbm_tile_extra_cycles`` and
    the smaller loads' ``hbm_tile_extra_*KiB_cycles``, at ``clock``), and the rate an
    SM's stores leave it at (``store_bandwidth_B_per_clk_per_sm``)."""
    figures = []
    extra = tile_extra_latency(rows, m.get("hbm_latency"))
    if extra:
        seconds, seen = extra
        figures.append(
            Figure(
                "hbm_tile_extra_cycles",
                _sig(max(0.0, seconds) * clock, 3),
                f"a fp16 tile streamed from an idle HBM by one CTA, one in flight, took "
                f"{seconds * 1e9:.0f} ns more than the pointer chase's single load (per CTA "
                f"size: seconds per tile at zero bytes, from its two tile sizes, less the "
                f"chase: {seen}; median) x {clock / 1e6:.0f} MHz",
            )
        )
    for nbytes, field in SMALL_LOAD_FIELDS:
        small = small_load_extra(rows, nbytes)
        if small:
            seconds, seen, when = small
            figures.append(
                Figure(
                    field,
                    _sig(max(0.0, seconds) * clock, 3),
                    f"a CTA's chain of {nbytes // KiB} KiB int32 tiles from an idle HBM, one "
                    f"in flight, took {seconds * 1e9:.0f} ns per tile more than one of 256 B "
                    f"tiles (per CTA size: {seen}; median) x {clock / 1e6:.0f} MHz",
                    when,
                )
            )
    port = store_port_rate(rows)
    if port:
        per_clk, seen, when = port
        figures.append(
            Figure(
                "store_bandwidth_B_per_clk_per_sm",
                _sig(per_clk, 3),
                f"a CTA's tiles written to an idle HBM, each acknowledged before the next: per "
                f"CTA size, bytes over seconds between its two largest tiles ({seen}), over "
                f"the SM clock of the run; median",
                when,
            )
        )
    return figures, []


def _clock_model_figures(rows: Sequence[dict], tensor_clock_ratio: float) -> Derived:
    """The clock model's fields, fitted on the ``power`` step's rows (`clock_fit.derive`)."""
    from . import clock_fit  # numpy

    model = clock_fit.derive(rows, tensor_clock_ratio)
    if model is None:
        return [], []
    fields, top_src, share_src = model
    when = next((r.get("date", "") for r in rows if r["name"].startswith("clock_dot_")), "")
    figures = [
        Figure(field, value, top_src if field == "clock_max_hz" else share_src, when)
        for field, value in fields.items()
    ]
    return figures, []


def _launch_figures(m: dict[str, dict]) -> Derived:
    """``launch_overhead_s``: an empty kernel's do_bench median."""
    row = m.get("launch_do_bench")
    if not row:
        return [], []
    return [Figure("launch_overhead_s", _sig(row["value"], 3), _how(row))], []
