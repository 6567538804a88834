"""A short flash kernel's fixed cost: v2 forward time against its K/V steps and its CTAs.

    python3 experiments/2026-12-03-launch/body.py OUT.jsonl

v2 forward, d = 128, bf16, not causal, B = 1, H = 1, 10 or 132 heads (1, 10, 132 CTAs of
128 rows at N = 128), N = 128-2048 (1-16 K/V steps), each output checked, then timed as a
CUDA-graph replay with the L2 flushed before each (validate's graph time) and its SMs'
counted clock. Time against steps at fixed CTAs: the intercept is the kernel's cost
without a K/V step (launch, prologue, epilogue); the model's is computed on the CPU from
the same shapes. Only reads the GPU's clocks.
"""

import json
import sys

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate.gpu import timing


def main(path):
    gpu = load_gpu("h200")
    with open(path, "w") as f:
        for heads in (1, 10, 132):
            for n in (128, 256, 512, 1024, 2048):
                w = Workload(1, heads, n, n, 128, dtype="bf16")
                q, k, v, scales = timing.make_inputs(w, 0)
                cfg = default_config("v2", w, gpu)
                out, run = timing.kernel_run("v2", q, k, v, False, cfg, scales)
                err = timing.check_output(run, q, k, v, False, scales, "bf16", out=out)
                row = {"heads": heads, "seqlen": n, "rel_error": err}
                if err <= timing.TOLERANCE["bf16"]:
                    row["time_graph_s"] = timing.bench_graph_s(run, 10, 60)
                    hz = timing.counter_clock_hz(run)
                    row["clock_counter_MHz"] = hz / 1e6 if hz else None
                print(json.dumps(row), flush=True)
                f.write(json.dumps(row) + "\n")
                timing.release()


if __name__ == "__main__":
    main(sys.argv[1])
