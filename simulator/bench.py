"""`make bench` (``python -m tilesim.simulator.bench``): how fast, and how faithful, is ``fast``.

Prints one table:

* the v2 case (B=4, H=16, N=4096, d=128, H100) in ``fast`` and ``detailed``
  fidelity: wall time, CPU time, SimPy events, events per second;
* the whole `tilesim compare --gpu h100` grid in ``fast`` fidelity, in this
  process (no worker pool): the engine's own speed;
* ``fast`` against ``detailed`` on the test grid (tests/simulator's
  FIDELITY_GRID): the worst and the mean relative error of the predicted time.

Not a unit test: timings depend on the machine (run it on an idle one).
"""

from __future__ import annotations

import argparse
import time

from rich import box
from rich.console import Console
from rich.table import Table

from ..hwmodels import load_gpu
from ..traces import build
from ..traces.workload import Workload
from . import simulate

CASE = ("h100", "v2", Workload(4, 16, 4096, 4096, 128))
COMPARE_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
COMPARE_HEAD_DIMS = (64, 128)
TOKENS, HIDDEN = 16384, 2048

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-grid", action="store_true", help="skip the compare grid")
    parser.add_argument("--skip-fidelity", action="store_true", help="skip fast vs detailed")
    args = parser.parse_args(argv)
    console = Console()
    table = Table(title="tilesim engine benchmark", box=box.SIMPLE_HEAD)
    for col in ("case", "fidelity", "wall s", "cpu s", "events", "events/s", "result"):
        table.add_column(
            col, justify="left" if col in ("case", "fidelity", "result") else "right", no_wrap=True
        )
    notes = []

    gpu_name, algo, w = CASE
    gpu = load_gpu(gpu_name)
    trace = build(algo, w, gpu)
    label = f"{algo} {w.batch}x{w.heads}x{w.seqlen_q}x{w.head_dim}"  # B x H x N x d
    times = {}
    for fidelity in ("fast", "detailed"):
        pred, wall, cpu = _timed(trace, gpu, fidelity)
        times[fidelity] = pred.time_s
        table.add_row(
            label,
            fidelity,
            f"{wall:.2f}",
            f"{cpu:.2f}",
            f"{pred.sim_events:,}",
            f"{pred.sim_events / cpu:,.0f}",
            f"{pred.time_s * 1e6:.1f} µs",
        )
    notes.append(f"{label}: fast vs detailed {(times['fast'] / times['detailed'] - 1) * 100:+.2f}%")

    if not args.skip_grid:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        events = points = 0
        for d in COMPARE_HEAD_DIMS:
            for n in COMPARE_SEQLENS:
                wl = Workload(TOKENS // n, HIDDEN // d, n, n, d)
                for a in ("standard", "v1", "v2", "v3"):
                    pred = simulate(build(a, wl, gpu), gpu, "fast")
                    events += pred.sim_events
                    points += 1
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        table.add_row(
            f"compare ({points} pts)",
            "fast",
            f"{wall:.1f}",
            f"{cpu:.1f}",
            f"{events:,}",
            f"{events / cpu:,.0f}",
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
            f"{cpu:.1f}",
            "",
            "",
            f"worst {worst[1] * 100:+.2f}%",
        )
        notes.append(
            f"fast vs detailed: worst {worst[1] * 100:+.2f}% ({worst[0]}), "
            f"mean |error| {mean * 100:.2f}%"
        )
    console.print(table)
    for note in notes:
        console.print(note)


if __name__ == "__main__":
    main()
