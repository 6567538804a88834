"""Issue 23's shapes on the GPU: v1 (released structure, and variants), fa1-algorithm1,
standard and v2, forward and backward, through the validation harness.

Every point goes through ``tilesim.validate.gpu.run.run_validate``: fresh inputs, the
output (or dq, dk, dv) checked against the float32 reference first, then the
do_bench medians, the CUDA-graph replay time and the SM clock sampled meanwhile.
No predictions here (``tilesim report`` recomputes them on the CPU).

    python experiments/2026-12-01-v1-fast/sweep.py --out OUT.json [--budget-s 120]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import fa1_num_splits, named_config
from tilesim.traces.workload import Workload
from tilesim.validate.gpu.run import run_validate
from tilesim.validate.grid import GridPoint

# (batch, heads, N, d, causal): B x H x splits fills the 132 SMs; S1 is the FA1 paper's
S1 = (16, 8, 1024, 64, False)
FWD = [S1, (4, 16, 4096, 64, False), (4, 16, 4096, 64, True), (8, 16, 2048, 128, False),
       (2, 16, 4096, 128, True)]  # fmt: skip
BWD = [S1, (4, 16, 4096, 64, False), (8, 16, 2048, 128, False)]
ALGO1 = {S1, (8, 16, 2048, 128, False)}  # Algorithm 1: one CTA per head, short shapes only
# v1 variants beside the default (the released kernel's facts): name -> config changes
FWD_VARIANTS = {
    "warps8": lambda w: {"num_warps": 8},
    "half-block": lambda w: {"block_n": 128 if w.head_dim <= 64 else 64},
}
BWD_VARIANTS = {
    "warps4": lambda w: {"num_warps": 4},
    "stages1": lambda w: {"num_stages": 1},
}
VARIANT_SHAPES = {S1, (4, 16, 4096, 64, False), (8, 16, 2048, 128, False)}


def points(gpu) -> list[GridPoint]:
    out = []
    for pass_, shapes, variants in (("fwd", FWD, FWD_VARIANTS), ("bwd", BWD, BWD_VARIANTS)):
        for shape in shapes:
            b, h, n, d, causal = shape
            w = Workload(b, h, n, n, d, causal=causal, pass_=pass_)
            group = f"issue23-{pass_}"
            for algo in ("standard", "v2", "v1"):
                out.append(GridPoint(algo, w, named_config("default", algo, w, gpu), group))
            if shape in ALGO1:
                cfg = named_config("fa1-algorithm1", "v1", w, gpu)
                out.append(GridPoint("v1", w, cfg, f"{group}-fa1-algorithm1"))
            if shape in VARIANT_SHAPES:
                base = named_config("default", "v1", w, gpu)
                for name, change in variants.items():
                    cfg = base.replace(**change(w))
                    cfg = cfg.replace(num_splits=fa1_num_splits(w, cfg, gpu))
                    out.append(GridPoint("v1", w, cfg, f"{group}-{name}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=120.0)
    args = ap.parse_args()
    gpu = load_gpu("h200")
    pts = points(gpu)
    print(f"{len(pts)} points", flush=True)
    run_validate(
        pts,
        Path(args.out),
        [],
        time_budget_s=args.budget_s,
        predict_workers=0,
        meta_extra={"grid": "issue23", "script": "experiments/2026-12-01-v1-fast/sweep.py"},
    )


if __name__ == "__main__":
    main()
