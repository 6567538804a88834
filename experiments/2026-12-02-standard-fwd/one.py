"""Run one checked forward twice, for Nsight Compute (the second run's launches are profiled).

python3 experiments/2026-12-02-standard-fwd/one.py ALGO B H N D CAUSAL(0/1) DTYPE
"""

import sys

import torch

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate.gpu import timing


def main(algo, b, h, n, d, causal, dtype):
    w = Workload(int(b), int(h), int(n), int(n), int(d), causal=causal == "1", dtype=dtype)
    q, k, v, scales = timing.make_inputs(w, 0)
    cfg = default_config(algo, w, load_gpu("h200"))
    out, run = timing.kernel_run(algo, q, k, v, w.causal, cfg, scales)
    err = timing.check_output(run, q, k, v, w.causal, scales, w.dtype, out=out)
    if not err <= timing.TOLERANCE[dtype]:
        raise SystemExit(f"rel. error {err:.3g}")
    torch.cuda.synchronize()
    run()
    torch.cuda.synchronize()
    print(f"ok {algo} {w} err {err:.2e}")


if __name__ == "__main__":
    main(*sys.argv[1:])
