"""Place the four algorithms on the H100's roofline.

Covers:
  - arithmetic intensity = matmul FLOPs / bytes, at each memory level (HBM, L2,
    shared memory), from a `Prediction` (`RooflinePoint.of`)
  - the GPU's ridge point (`GPU.ridge_point_flop_per_byte`)
  - `tilesim.plots.roofline`: the hierarchical roofline (a PNG; matplotlib Agg, no display)

Scenario:
  Why is standard attention slow? Its intensity sits far left of the ridge
  point, where HBM bandwidth, not the tensor cores, sets the ceiling. The
  FlashAttention kernels move right, under the compute roof; their K/V re-reads
  come from the L2, where their intensity is far lower.

Usage: python examples/03_roofline.py [OUT_DIR]   (default: $TILESIM_OUT or ./out)
"""

import os
import sys
from pathlib import Path

from tilesim.hwmodels import load_gpu
from tilesim.plots import RooflinePoint, roofline
from tilesim.simulator import simulate
from tilesim.traces import Workload, build

GPU = "h100"  # preset alias
BATCH = 2  # sequences
HEADS = 16  # attention heads
SEQLEN = 2048  # tokens per sequence
HEAD_DIM = 128  # elements per head
ALGOS = ("standard", "v1", "v2", "v3")


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TILESIM_OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    gpu = load_gpu(GPU)
    workload = Workload(BATCH, HEADS, SEQLEN, SEQLEN, HEAD_DIM)
    ridge = gpu.ridge_point_flop_per_byte("fp16")
    print(f"ridge point of {gpu.display_name} (fp16 wgmma / HBM): {ridge:.0f} FLOP/byte")
    points = []
    for algo in ALGOS:
        p = simulate(build(algo, workload, gpu), gpu)
        point = RooflinePoint.of(p, gpu)  # FLOPs per byte at HBM, L2 and shared memory
        points.append(point)
        side = "below" if point.intensity < ridge else "above"
        print(
            f"{algo:<9} {point.intensity:>7.1f} FLOP/byte ({side} the ridge; "
            f"{point.l2_intensity:.0f} per L2 byte), {p.tflops:>4.0f} TFLOPS"
        )
    path = roofline(gpu, points, out / "roofline.png")
    print(f"wrote {path.name}")


if __name__ == "__main__":
    main()
