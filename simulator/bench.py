"""`make bench` (``python -m tilesim.simulator.bench``): how fast, and how faithful, is ``fast``.

Every time is printed twice: in seconds, and as a ratio to the time this
machine takes, in the same run, to process 200,000 bare SimPy timeout events
(one process yielding `Environment.timeout(1)`): the ratio carries from one
machine to another where seconds do not. Prints one table:

* the issue's three engine targets (calibrated H200, ``fast``): v2 and v1 at
  B=4 H=16 N=4096 d=128, standard at B=1 H=16 N=16384 d=128; each the best of
  ``--repeat`` runs, with the SimPy events it used;
* the v2 case in ``detailed`` fidelity, for scale;
* the whole `tilesim compare --gpu h100` grid in ``fast`` fidelity, in this
  process (no worker pool): the engine's own speed;
* ``fast`` against ``detailed`` on the test grid (tests/simulator's
  FIDELITY_GRID): the worst and the mean relative error of the predicted time;
* ``--whatif``: the same on what-if variants of the calibrated H200 (SM count,
  HBM and L2 bandwidth, L2 size, SM clock at 0.5x, 2x and 4x; WHATIF_*), the four
  algorithms at two shapes, each variant's error beside its 1x point's.

Not a unit test: timings depend on the machine (run it on an idle one).
"""

from __future__ import annotations

import argparse
import time

from rich import box
from rich.console import Console
from rich.table import Table
from simpy import Environment

from ..hwmodels import load_gpu
from ..traces import build
from ..traces.workload import Workload, paper_batch_heads
from . import simulate

REFERENCE_EVENTS = 200_000  # bare SimPy timeouts: the unit of the ratios
TOLERANCE = 0.02  # DESIGN.md: fast stays within 2% of detailed
# The engine targets: (label, GPU, algorithm, workload, target engine seconds on
# the 2-core machine the targets were set on, where the reference took 0.18 s).
TARGETS = (
    ("v2", "h200-cal", "v2", Workload(4, 16, 4096, 4096, 128), 0.15),
    ("standard", "h200-cal", "standard", Workload(1, 16, 16384, 16384, 128), 0.6),
    ("v1", "h200-cal", "v1", Workload(4, 16, 4096, 4096, 128), 0.4),
)
TARGET_REFERENCE_S = 0.18
CASE = ("h200-cal", "v2", Workload(4, 16, 4096, 4096, 128))
COMPARE_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
COMPARE_HEAD_DIMS = (64, 128)

# The fast-vs-detailed grid: all four algorithms, shapes small enough for
# `detailed` yet large enough that loops coalesce and waves are sampled (the
# test suite checks the same grid, tests/simulator/test_fidelity.py).
FIDELITY_GRID = (
    ("a100", "standard", Workload(2, 8, 1024, 1024, 64)),
    ("a100", "standard", Workload(1, 8, 2048, 2048, 128, causal=True)),
    ("h100", "standard", Workload(1, 2, 4096, 4096, 64)),
    ("a100", "v1", Workload(2, 8, 1024, 1024, 64)),
    ("h100", "v1", Workload(1, 8, 2048, 2048, 128, causal=True)),
    ("h100", "v1", Workload(1, 4, 4096, 4096, 64)),
    ("a100", "v2", Workload(16, 16, 1024, 1024, 64)),
    ("h100", "v2", Workload(1, 8, 2048, 2048, 128, causal=True)),
    ("h100", "v2", Workload(32, 16, 512, 512, 64)),
    ("h100", "v3", Workload(1, 4, 4096, 4096, 64)),
    ("h100", "v3", Workload(8, 16, 1024, 1024, 64, causal=True)),
    ("h200", "v3", Workload(2, 8, 2048, 2048, 128)),
)


# What-if variants checked fast against detailed (--whatif): each field at each factor.
WHATIF_GPU = "h200-cal"
WHATIF_FIELDS = ("sm_count", "hbm_bandwidth_Bps", "l2_bandwidth_Bps", "l2_bytes", "sm_clock_hz")
WHATIF_FACTORS = ("0.5x", "2x", "4x")
WHATIF_SHAPES = (Workload(2, 8, 2048, 2048, 128), Workload(1, 8, 2048, 2048, 64, causal=True))
WHATIF_ALGOS = ("standard", "v1", "v2", "v3")
# and single variants: (GPU, settings, algorithm, workload). Standard's qk launch at 144
# SMs of an H100 (`tilesim whatif --vary sm_count=132,144`'s shape): its head of waves
# passes the steadiness test before the rate has settled (35.5 cycles per CTA measured,
# 27.4 at 132 SMs), and the extrapolation of the skipped waves carries it.
WHATIF_EXTRA = (("h100", {"sm_count": 144}, "standard", Workload(4, 16, 4096, 4096, 128)),)


def reference_s(events: int = REFERENCE_EVENTS) -> float:
    """Wall seconds of ``events`` bare SimPy timeout events (one process, delay 1)."""
    env = Environment()

    def ticks():
        for _ in range(events):
            yield env.timeout(1)

    env.process(ticks())
    wall = time.perf_counter()
    env.run()
    return time.perf_counter() - wall


def _timed(trace, gpu, fidelity: str):
    wall, cpu = time.perf_counter(), time.process_time()
    pred = simulate(trace, gpu, fidelity)
    return pred, time.perf_counter() - wall, time.process_time() - cpu


def fidelity_errors(grid=FIDELITY_GRID) -> list[tuple[str, float]]:
    """(label, relative error of fast vs detailed time) for each point of ``grid``."""
    out = []
    for gpu_name, algo, w in grid:
        gpu = load_gpu(gpu_name)
        trace = build(algo, w, gpu)
        fast = simulate(trace, gpu, "fast").time_s
        detailed = simulate(trace, gpu, "detailed").time_s
        label = f"{gpu_name} {algo} B={w.batch} H={w.heads} N={w.seqlen_q} d={w.head_dim}" + (
            " causal" if w.causal else ""
        )
        out.append((label, fast / detailed - 1))
    return out


def whatif_fidelity_errors(
    gpu_name: str = WHATIF_GPU,
    fields=WHATIF_FIELDS,
    factors=WHATIF_FACTORS,
    shapes=WHATIF_SHAPES,
    algos=WHATIF_ALGOS,
) -> list[dict]:
    """fast vs detailed on each what-if variant: one dict per (shape, algo, setting) with
    the relative error of the time (``error``) and of its 1x point (``base_error``)."""
    base = load_gpu(gpu_name)
    out = []
    for w in shapes:
        for algo in algos:
            base_error = None
            for setting in [{}] + [{k: f} for k in fields for f in factors]:
                gpu = base.with_overrides(setting) if setting else base
                trace = build(algo, w, gpu)
                fast = simulate(trace, gpu, "fast").time_s
                error = fast / simulate(trace, gpu, "detailed").time_s - 1
                if not setting:
                    base_error = error
                    continue
                key, factor = next(iter(setting.items()))
                out.append(
                    {
                        "gpu": gpu_name,
                        "algo": algo,
                        "shape": _shape(w),
                        "field": key,
                        "factor": factor,
                        "error": error,
                        "base_error": base_error,
                    }
                )
    return out


def whatif_extra_errors(cases=WHATIF_EXTRA) -> list[dict]:
    """`whatif_fidelity_errors`' rows for single variants (WHATIF_EXTRA)."""
    out = []
    for gpu_name, settings, algo, w in cases:
        ((key, factor),) = settings.items()
        out += whatif_fidelity_errors(gpu_name, (key,), (factor,), (w,), (algo,))
    return out


def _shape(w: Workload) -> str:
    causal = " causal" if w.causal else ""
    return f"B={w.batch} H={w.heads} N={w.seqlen_q} d={w.head_dim}{causal}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per timed case (best kept)")
    parser.add_argument("--skip-grid", action="store_true", help="skip the compare grid")
    parser.add_argument("--skip-fidelity", action="store_true", help="skip fast vs detailed")
    parser.add_argument(
        "--whatif", action="store_true", help="fast vs detailed on what-if variants (minutes)"
    )
    args = parser.parse_args(argv)
    repeat = max(args.repeat, 1)
    console = Console()
    # the reference, best of a few, before and after the cases (the machine drifts)
    ref = min(reference_s() for _ in range(3))
    table = Table(
        title=f"tilesim engine benchmark (reference: {REFERENCE_EVENTS:,} SimPy events "
        f"in {ref:.3f} s = 1.00x)",
        box=box.SIMPLE_HEAD,
    )
    cols = ("case", "fidelity", "wall s", "x ref", "target", "cpu s", "events", "result")
    for col in cols:
        table.add_column(
            col, justify="left" if col in ("case", "fidelity", "result") else "right", no_wrap=True
        )
    notes = []

    def ratio(wall: float) -> str:
        return f"{wall / ref:.2f}x"

    for label, gpu_name, algo, w, target_s in TARGETS:
        gpu = load_gpu(gpu_name)
        trace = build(algo, w, gpu)
        best = None
        for _ in range(repeat):
            run = _timed(trace, gpu, "fast")
            if best is None or run[1] < best[1]:
                best = run
        pred, wall, cpu = best
        table.add_row(
            f"{label} {w.batch}x{w.heads}x{w.seqlen_q}x{w.head_dim}",  # B x H x N x d
            "fast",
            f"{wall:.3f}",
            ratio(wall),
            f"{target_s / TARGET_REFERENCE_S:.2f}x",
            f"{cpu:.3f}",
            f"{pred.sim_events:,}",
            f"{pred.time_s * 1e6:.1f} µs",
        )

    gpu_name, algo, w = CASE
    gpu = load_gpu(gpu_name)
    trace = build(algo, w, gpu)
    label = f"{algo} {w.batch}x{w.heads}x{w.seqlen_q}x{w.head_dim}"
    times = {}
    for fidelity in ("fast", "detailed"):
        pred, wall, cpu = _timed(trace, gpu, fidelity)
        times[fidelity] = pred.time_s
        if fidelity == "detailed":
            table.add_row(
                label,
                fidelity,
                f"{wall:.3f}",
                ratio(wall),
                "",
                f"{cpu:.3f}",
                f"{pred.sim_events:,}",
                f"{pred.time_s * 1e6:.1f} µs",
            )
    notes.append(f"{label}: fast vs detailed {(times['fast'] / times['detailed'] - 1) * 100:+.2f}%")

    if not args.skip_grid:
        gpu = load_gpu("h100")
        wall0, cpu0 = time.perf_counter(), time.process_time()
        events = points = 0
        for d in COMPARE_HEAD_DIMS:
            for n in COMPARE_SEQLENS:
                wl = Workload(*paper_batch_heads(n, d), n, n, d)
                for a in ("standard", "v1", "v2", "v3"):
                    pred = simulate(build(a, wl, gpu), gpu, "fast")
                    events += pred.sim_events
                    points += 1
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        table.add_row(
            f"compare h100 ({points} pts)",
            "fast",
            f"{wall:.2f}",
            ratio(wall),
            "",
            f"{cpu:.2f}",
            f"{events:,}",
            "1 process",
        )
        notes.append("`tilesim compare` runs the grid's points in parallel processes (--jobs)")

    if not args.skip_fidelity:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        errors = fidelity_errors()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        worst = max(errors, key=lambda e: abs(e[1]))
        mean = sum(abs(e) for _, e in errors) / len(errors)
        table.add_row(
            f"fidelity ({len(errors)} pts)",
            "both",
            f"{wall:.1f}",
            ratio(wall),
            "",
            f"{cpu:.1f}",
            "",
            f"worst {worst[1] * 100:+.2f}%",
        )
        notes.append(
            f"fast vs detailed: worst {worst[1] * 100:+.2f}% ({worst[0]}), "
            f"mean |error| {mean * 100:.2f}%"
        )
    if args.whatif:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        rows = whatif_fidelity_errors() + whatif_extra_errors()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        worst = max(rows, key=lambda r: abs(r["error"]))
        table.add_row(
            f"whatif fidelity ({len(rows)} pts)",
            "both",
            f"{wall:.1f}",
            ratio(wall),
            "",
            f"{cpu:.1f}",
            "",
            f"worst {worst['error'] * 100:+.2f}%",
        )
        over = [r for r in rows if abs(r["error"]) > TOLERANCE]
        notes.append(
            f"what-if variants: {len(over)} of {len(rows)} over "
            f"{TOLERANCE:.0%}, of which {sum(abs(r['base_error']) <= TOLERANCE for r in over)} "
            "have their 1x point within it"
        )
        for r in over:
            notes.append(
                f"  {r['gpu']} {r['algo']} {r['shape']} {r['field']}={r['factor']}: "
                f"{r['error'] * 100:+.2f}% (1x: {r['base_error'] * 100:+.2f}%)"
            )
    after = min(reference_s() for _ in range(3))
    console.print(table)
    notes.append(
        f"reference measured {ref:.3f} s before the cases and {after:.3f} s after "
        "(a large change: the machine was busy); target: the issue's seconds over its 0.18 s"
    )
    for note in notes:
        console.print(note)


if __name__ == "__main__":
    main()
