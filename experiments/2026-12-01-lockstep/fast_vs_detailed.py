"""PyTorch SDPA's math backend: ``fast`` against ``detailed``, launch by launch.

Its elementwise launches (10^4-10^6 identical CTAs) run in lock step on every SM, and
fast fidelity simulates one SM for all (simulator/scheduler.py). Usage:
    python fast_vs_detailed.py B H N d [--causal] [--gpu h200-cal]
"""

import argparse
import time

from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import Workload, build_external

ap = argparse.ArgumentParser()
ap.add_argument("shape", type=int, nargs=4)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--gpu", default="h200-cal")
args = ap.parse_args()
b, h, n, d = args.shape
gpu = load_gpu(args.gpu)
trace = build_external("sdpa-math", Workload(b, h, n, n, d, causal=args.causal), gpu)
preds = {}
for fidelity in ("fast", "detailed"):
    t = time.process_time()
    preds[fidelity] = simulate(trace, gpu, fidelity)
    print(f"{fidelity}: {time.process_time() - t:.2f} s CPU, {preds[fidelity].sim_events} events")
fast, det = preds["fast"], preds["detailed"]
for f, x in zip(fast.launches, det.launches, strict=True):
    err = f.time_s / x.time_s - 1
    print(
        f"{x.name:16s} {x.time_s * 1e6:9.3f} us  fast {err:+.2%}  {f.simulated_ctas}/{x.ctas} CTAs"
    )
print(f"total {det.time_s * 1e6:.3f} us  fast {fast.time_s / det.time_s - 1:+.2%}")
