"""Does do_bench's L2 flush (zeroing 256 MB: dirty lines) slow the kernel timed after it?

Times small and large tilesim kernels, and a 1 MiB copy, after three kinds of flush:
"dirty" (buffer.zero_(), as triton.testing.do_bench does), "clean" (a read of the same
256 MB: the L2 holds only clean lines afterwards) and "none". One CUDA event pair
around each kernel, medians of 200 runs. Output checked before timing (kernel_run +
check_output). Run on the GPU: python3 experiments/2026-12-01-flush-probe/probe.py OUT.json
"""

import json
import statistics
import sys

import torch

from tilesim.hwmodels import load_gpu
from tilesim.traces import Workload
from tilesim.traces.config import default_config
from tilesim.validate.gpu import metadata, timing

SHAPES = [
    ("v3", Workload(1, 6, 213, 213, 128)),
    ("v3", Workload(14, 1, 470, 470, 64, dtype="bf16")),
    ("v2", Workload(2, 2, 178, 178, 64)),
    ("standard", Workload(1, 3, 718, 718, 64)),
    ("v2", Workload(4, 16, 4096, 4096, 128)),
]
FLUSH_BYTES = 256 * 2**20
REPS = 200


def times(fn, flush):
    ev = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(REPS)
    ]
    for start, end in ev:
        flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in ev]  # µs


def main(out):
    gpu = load_gpu("h200")
    buf = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    buf_f = buf.view(torch.float32)
    flushes = {
        "dirty": buf.zero_,
        "clean": lambda: buf_f.amax(),
        "none": lambda: None,
    }
    x = torch.randn(2**18, device="cuda")
    y = torch.empty_like(x)
    cases = [("copy 1MiB", None, lambda: y.copy_(x))]
    for algo, w in SHAPES:
        q, k, v, scales = timing.make_inputs(w, 0)
        o, run = timing.kernel_run(algo, q, k, v, w.causal, default_config(algo, w, gpu), scales)
        err = timing.check_output(run, q, k, v, w.causal, scales, w.dtype, out=o)
        assert err <= timing.TOLERANCE[w.dtype], (algo, w, err)
        cases.append((f"{algo} {w}", w, run))
    rows = []
    for name, _w, fn in cases:
        for _ in range(20):
            fn()
        row = {"case": name}
        for mode, flush in flushes.items():
            t = times(fn, flush)
            p90 = sorted(t)[int(0.9 * len(t))]
            row[mode] = {"median_us": statistics.median(t), "min_us": min(t), "p90_us": p90}
        rows.append(row)
        print(name[:70], {m: round(row[m]["median_us"], 1) for m in flushes}, flush=True)
    meta = metadata.collect({"command": "experiments/2026-12-01-flush-probe/probe.py"})
    with open(out, "w") as f:
        json.dump({"metadata": metadata.finish(meta), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
