"""The SM clock attention kernels really run at while validate times them, on the GPU.

    python3 experiments/2026-12-03-clock/probe.py OUT.jsonl        # the sweep
    python3 experiments/2026-12-03-clock/probe.py --one ALGO B H N D DTYPE  # one launch (ncu)

For each shape (output checked first): the CUDA-graph time as validate takes it, the
nvidia-smi clocks.sm median meanwhile, and `timing.counter_clock_hz` (each SM's
%clock64 over %globaltimer between two stamp launches around the kernels, replayed as
the timing replays them). Nsight Compute's sm__cycles_elapsed over gpu__time_duration
on two of the shapes checks the counter clock. Only reads the GPU's clocks.
"""

import argparse
import json
import time

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate.gpu import metadata, timing

# (algo, B, H, N, d, causal, dtype)
SHAPES = [
    ("v2", 17, 6, 7296, 128, False, "fp16"),
    ("v2", 4, 16, 4096, 128, False, "fp16"),
    ("v2", 4, 16, 4096, 128, False, "bf16"),
    ("v2", 2, 16, 8192, 128, True, "fp16"),
    ("v2", 8, 32, 2048, 64, False, "fp16"),
    ("v2", 1, 4, 2000, 128, False, "fp16"),
    ("v3", 2, 16, 8192, 128, False, "fp16"),
    ("v3", 2, 16, 8192, 128, False, "fp8"),
    ("v3", 4, 16, 4096, 64, True, "bf16"),
    ("v1", 4, 16, 4096, 128, False, "fp16"),
    ("v1", 4, 16, 4096, 64, False, "fp16"),
    ("standard", 1, 16, 4096, 128, False, "fp16"),
    ("standard", 8, 16, 1000, 64, False, "bf16"),
]


def runner(algo, w):
    q, k, v, scales = timing.make_inputs(w, 0)
    cfg = default_config(algo, w, load_gpu("h200"))
    out, run = timing.kernel_run(algo, q, k, v, w.causal, cfg, scales)
    err = timing.check_output(run, q, k, v, w.causal, scales, w.dtype, out=out)
    return run, err


def sweep(path):
    with metadata.ClockSampler(interval_ms=50) as sampler, open(path, "w") as f:
        for algo, b, h, n, d, causal, dtype in SHAPES:
            w = Workload(b, h, n, n, d, causal=causal, dtype=dtype)
            run, err = runner(algo, w)
            row = dict(
                algo=algo,
                batch=b,
                heads=h,
                seqlen=n,
                head_dim=d,
                causal=causal,
                dtype=dtype,
                rel_error=err,
            )
            if err <= timing.TOLERANCE[dtype]:
                for rep in range(2):  # twice: does the clock hold from one pass to the next
                    t0 = time.perf_counter()
                    row[f"time_graph_s_{rep}"] = timing.bench_graph_s(run, 10, 60)
                    row[f"clock_sm_MHz_{rep}"] = timing.clock_during(sampler, t0)
                    t1 = time.perf_counter()
                    c = timing.counter_clock_hz(run)
                    row[f"clock_counter_MHz_{rep}"] = c / 1e6 if c else None
                    row[f"clock_sm_MHz_counter_{rep}"] = timing.clock_during(sampler, t1)
            print(json.dumps(row), flush=True)
            f.write(json.dumps(row) + "\n")
            timing.release()


def one(algo, b, h, n, d, dtype):
    w = Workload(b, h, n, n, d, dtype=dtype)
    run, err = runner(algo, w)
    assert err <= timing.TOLERANCE[dtype], err
    for _ in range(3):
        run()
    import torch

    torch.cuda.synchronize()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--one", nargs=6)
    a = ap.parse_args()
    if a.one:
        algo, *nums, dtype = a.one
        one(algo, *map(int, nums), dtype)
    else:
        sweep(a.out)
