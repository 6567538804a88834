"""Decode kernel tiles on the GPU: K/V read bandwidth of a few configs on three shapes.

Informs the decode kernel's default tiles (traces/serving.py); never a hardware
parameter. Each config's output is checked against the float32 reference first,
then timed as a CUDA-graph replay with L2 flushed (validate.gpu.timing.bench_graph_s).
Usage (GPU): python experiments/2026-12-01-decode-tuning/sweep.py OUT.json
"""

from __future__ import annotations

import json
import sys

import torch

from tilesim.kernels import launches
from tilesim.kernels._common import device_gpu
from tilesim.traces import Workload, default_config
from tilesim.validate.gpu import metadata, timing

SHAPES = [  # batch, heads, kv heads, KV length (d = 128, one query row)
    (1, 32, 8, 32768),  # split 15 ways, heads packed
    (16, 32, 8, 8192),  # one split, heads packed
]
TILES = [  # block_n, num_warps, num_stages
    (64, 4, 3), (64, 4, 4), (128, 4, 2), (128, 4, 3), (128, 4, 4), (256, 4, 2),
]  # fmt: skip


def main(out: str) -> None:
    gpu = device_gpu(torch.device("cuda"))
    rows = []
    for b, h, hk, n in SHAPES:
        w = Workload(b, h, 1, n, 128, kv_heads=hk)
        q, k, v, _ = timing.make_inputs(w, seed=n)
        base = default_config("v2", w, gpu)
        for bn, warps, stages in TILES:
            c = base.replace(block_n=bn, num_warps=warps, num_stages=stages)
            c = c.replace(num_splits=min(c.num_splits, -(-n // bn)))
            row = {"workload": w.to_dict(), "config": c.to_dict(), "default": c == base}
            try:
                o, runs = launches(q, k, v, config=c)

                def run(runs=runs, o=o):
                    for _, r in runs:
                        r()
                    return o

                err = timing.check_output(run, q, k, v, False, {}, "fp16", out=o)
                row["rel_error"] = err
                if err <= timing.TOLERANCE["fp16"]:
                    t = timing.bench_graph_s(run, 10, 30)
                    row.update(time_graph_s=t, kv_Bps=w.kv_bytes() / t if t else None)
            except Exception as exc:  # a config that does not compile or fit: recorded
                row["error"] = f"{type(exc).__name__}: {timing.first_line(exc)}"
            rows.append(row)
            print(json.dumps(row), flush=True)
        q = k = v = None
        timing.release()
    doc = {"kind": "decode-tiles", "metadata": metadata.collect({"script": __file__}), "rows": rows}
    metadata.finish(doc["metadata"])
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
