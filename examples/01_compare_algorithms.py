"""Compare standard attention and FlashAttention v1, v2, v3 on one shape.

Covers:
  - building a tile-schedule trace per algorithm (`tilesim.traces.build`)
  - simulating it on a GPU model (`tilesim.simulator.simulate`)
  - the `Prediction` fields: time, TFLOPS, HBM bytes, bound

Scenario:
  A 2k-token prefill with 128-wide heads on an H100. Standard attention sends
  the N x N score matrix through HBM; the FlashAttention kernels keep it on
  chip. The table shows what that is worth, and what bounds each kernel.
"""

from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import Workload, build

GPU = "h100"  # preset alias
BATCH = 2  # sequences
HEADS = 16  # attention heads
SEQLEN = 2048  # tokens per sequence
HEAD_DIM = 128  # elements per head
ALGOS = ("standard", "v1", "v2", "v3")


def main() -> None:
    gpu = load_gpu(GPU)
    workload = Workload(BATCH, HEADS, SEQLEN, SEQLEN, HEAD_DIM)
    print(f"{gpu.display_name}, B={BATCH} H={HEADS} N={SEQLEN} d={HEAD_DIM} fp16")
    print(f"{'algo':<9} {'time us':>9} {'TFLOPS':>7} {'HBM MB':>8} {'vs std':>7}  bound")
    base = None
    for algo in ALGOS:
        p = simulate(build(algo, workload, gpu), gpu)
        base = base or p.time_s
        print(
            f"{algo:<9} {p.time_s * 1e6:>9.4g} {p.tflops:>7.0f} {p.hbm_bytes / 1e6:>8.0f} "
            f"{base / p.time_s:>6.2f}x  {p.bound}"
        )


if __name__ == "__main__":
    main()
