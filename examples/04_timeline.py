"""See v2's serial softmax and v3's overlap on a timeline.

Covers:
  - `simulate(..., fidelity="detailed", timeline=True)` and the Perfetto JSON
    export (`Timeline.write`; open it at https://ui.perfetto.dev)
  - `tilesim.plots.gantt`: the first SMs' pipes over time, one panel per run
  - measuring overlap from the timeline: how much SFU (exp) time runs while
    the tensor cores are busy

Scenario:
  A kernel author wants to see why FlashAttention-3 beats FlashAttention-2 on
  Hopper: in v2 a CTA's GEMM, softmax and GEMM take turns; in v3 one
  warpgroup's softmax runs under the other's matmuls.

Usage: python examples/04_timeline.py [OUT_DIR]   (default: $TILESIM_OUT or ./out)
"""

import os
import sys
from pathlib import Path

from tilesim.hwmodels import load_gpu
from tilesim.plots import gantt
from tilesim.simulator import simulate
from tilesim.traces import Workload, build

GPU = "h100"  # preset alias
BATCH = 1  # sequences
HEADS = 4  # attention heads
SEQLEN = 2048  # tokens per sequence
HEAD_DIM = 128  # elements per head
SMS = 2  # SMs to draw


def busy(events, cat):
    """Merged busy intervals (µs) of one pipe of SM 0."""
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and e.get("pid") == 1 and e.get("cat") == cat
    )
    merged = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def overlap(xs, ys):
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TILESIM_OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    gpu = load_gpu(GPU)
    workload = Workload(BATCH, HEADS, SEQLEN, SEQLEN, HEAD_DIM)
    runs = []
    for algo in ("v2", "v3"):
        p = simulate(build(algo, workload, gpu), gpu, "detailed", timeline=True, timeline_sms=SMS)
        runs.append(p)
        events = p.timeline.to_perfetto()["traceEvents"]
        tensor, sfu = busy(events, "tensor"), busy(events, "sfu")
        sfu_time = sum(b - a for a, b in sfu)
        hidden = overlap(sfu, tensor) / sfu_time
        print(
            f"{algo}: {p.time_s * 1e6:.1f} us, tensor busy {p.utilisation['tensor']:.0%}, "
            f"SFU busy {p.utilisation['sfu']:.0%}; on SM 0 {hidden:.0%} of the exp time "
            "runs under a matmul"
        )
        p.timeline.write(out / f"{algo}.perfetto.json")
    path = gantt(runs, out / "gantt_v2_v3.png", sms=SMS)
    print(f"wrote {path.name}, v2.perfetto.json, v3.perfetto.json")


if __name__ == "__main__":
    main()
