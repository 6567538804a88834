"""v2 (and v3) forward at N a multiple of the tiles against N next to it, on the GPU.

    python3 experiments/2026-12-02-v2-fwd-align/probe.py OUT.jsonl      # the sweep
    python3 experiments/2026-12-02-v2-fwd-align/probe.py --one B H N D  # one shape twice (ncu)

Each shape's output is checked against the float32 reference before it is timed
(CUDA-graph replay, L2 flushed before each; and do_bench). ``desc=0`` runs v2 with
pointer loads instead of TMA descriptors: whether the cost follows the descriptors.
Only reads the GPU's clock (nvidia-smi), never sets it.
"""

import argparse
import json
import time

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate.gpu import metadata, timing

# (algo, B, H, N, d, causal, dtype, desc)
SHAPES = [
    *[
        ("v2", 17, 6, n, 128, False, "fp16", 1)
        for n in (7168, 7232, 7264, 7273, 7280, 7295, 7296, 7297)
    ],
    *[("v2", 2, 16, n, 128, False, "fp16", 1) for n in (8192, 8191, 8193, 8200, 8208, 8256, 8320)],
    *[("v2", 17, 6, n, 128, False, "bf16", 1) for n in (7273, 7296)],
    *[("v2", 17, 6, n, 128, False, "fp16", 0) for n in (7273, 7296)],
    *[("v2", 1, 41, n, 128, True, "fp16", 1) for n in (9600, 9620, 9728)],
    *[("v2", 13, 2, n, 64, False, "fp16", 1) for n in (7397, 7424)],
    *[("v3", 17, 6, n, 128, False, "fp16", 1) for n in (7273, 7296)],
    *[("v3", 2, 16, n, 128, False, "fp16", 1) for n in (8191, 8192)],
    *[("standard", 39, 38, n, 128, c, "bf16", 1) for n in (478, 480, 512) for c in (True, False)],
]


def runner(algo, w, desc):
    q, k, v, scales = timing.make_inputs(w, 0)
    cfg = default_config(algo, w, load_gpu("h200"))
    if algo == "v2" and not desc:
        import torch

        from tilesim.kernels import flash_v2

        out = torch.empty_like(q)
        ((_, call),) = flash_v2.launches(
            q, k, v, w.causal, w.head_dim**-0.5, cfg, out, use_desc=False
        )

        def run():
            call()
            return out
    else:
        out, run = timing.kernel_run(algo, q, k, v, w.causal, cfg, scales)
    err = timing.check_output(run, q, k, v, w.causal, scales, w.dtype, out=out)
    return run, err, cfg


def sweep(path):
    with metadata.ClockSampler(interval_ms=100) as sampler, open(path, "w") as f:
        for algo, b, h, n, d, causal, dtype, desc in SHAPES:
            w = Workload(b, h, n, n, d, causal=causal, dtype=dtype)
            run, err, cfg = runner(algo, w, desc)
            row = dict(
                algo=algo,
                batch=b,
                heads=h,
                seqlen=n,
                head_dim=d,
                causal=causal,
                dtype=dtype,
                desc=desc,
                rel_error=err,
                block_m=cfg.block_m,
                block_n=cfg.block_n,
            )
            if err <= timing.TOLERANCE[dtype]:
                t0 = time.perf_counter()
                row["time_graph_s"] = timing.bench_graph_s(run, 10, 60)
                row["time_s"], row["medians_s"] = timing.bench_repeat(run, 10, 40)
                row["clock_sm_MHz"] = timing.clock_during(sampler, t0)
            print(json.dumps(row), flush=True)
            f.write(json.dumps(row) + "\n")
            timing.release()


def one(b, h, n, d):
    w = Workload(b, h, n, n, d)
    run, err, _ = runner("v2", w, 1)
    assert err <= timing.TOLERANCE["fp16"], err
    run()
    import torch

    torch.cuda.synchronize()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--one", nargs=4, type=int)
    a = ap.parse_args()
    one(*a.one) if a.one else sweep(a.out)
