"""How fast the H200 starts CTAs: grids of empty CTAs (and of CTAs that copy one short row,
as standard's softmax does at small N), timed as CUDA-graph replays.

    python3 experiments/2026-12-02-cta-rate/probe.py OUT.jsonl

Per grid size and CTA size (1-8 warps): the median replay time; the slope between the two
largest grids is seconds per CTA (the launch's fixed cost drops out). Nothing here is an
attention kernel. Only reads the GPU's clock (nvidia-smi).
"""

import json
import sys
import time

import torch
import triton
import triton.language as tl

from tilesim.validate.gpu import metadata, timing


@triton.jit
def _empty(x):
    pass


@triton.jit
def _row_copy(src, dst, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(src + row * n + offs, mask=offs < n, other=0.0)
    tl.store(dst + row * n + offs, v, mask=offs < n)


def main(path):
    x = torch.empty(1, device="cuda")
    rows, n = 1 << 20, 208  # 2^20 rows of 208 fp16 (416 B), as softmax at N = 207
    src = torch.randn(rows * n, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    with metadata.ClockSampler(interval_ms=100) as sampler, open(path, "w") as f:
        for kind in ("empty", "row_copy"):
            for warps in (1, 2, 4, 8):
                for grid in (1 << 14, 1 << 16, 1 << 18, 1 << 19, 1 << 20):
                    if kind == "empty":

                        def run(g=grid, w=warps):
                            _empty[(g,)](x, num_warps=w)
                    else:

                        def run(g=grid, w=warps):
                            _row_copy[(g,)](src, dst, n, BLOCK=256, num_warps=w)

                    run()
                    torch.cuda.synchronize()
                    if kind == "row_copy" and grid == rows and warps == 1:
                        assert torch.equal(dst, src), "row copy is wrong"
                    t0 = time.perf_counter()
                    t = timing.bench_graph_s(run, 10, 50)
                    row = dict(
                        kind=kind,
                        warps=warps,
                        grid=grid,
                        time_s=t,
                        clock_sm_MHz=timing.clock_during(sampler, t0),
                    )
                    print(json.dumps(row), flush=True)
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
