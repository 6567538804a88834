"""What if HBM were faster? A bandwidth sweep for standard attention and FlashAttention-2.

Covers:
  - `tilesim.whatif.parse_vary` / `run_sweep`: a cartesian sweep of hardware
    fields x algorithms x shapes, with speed-ups against the unmodified GPU
  - what-if GPU variants named after their change (h100_sxm5_80gb+hbm_bandwidth_Bps=2x)

Scenario:
  A hardware architect asks whether faster HBM would speed up attention.
  Standard attention is HBM-bound and follows the bandwidth; FlashAttention-2
  hardly moves any bytes and barely notices.
"""

from tilesim.hwmodels import load_gpu
from tilesim.whatif import parse_vary, run_sweep, shapes

GPU = "h100"  # preset alias
VARY = ["hbm_bandwidth_Bps=0.5x,1x,2x,4x"]  # multipliers of the preset's 3.35 TB/s
ALGOS = ("standard", "v2")
SEQLENS = (2048,)  # tokens per sequence
HEAD_DIMS = (64,)  # elements per head
BATCH = 1  # sequences
HEADS = 16  # attention heads


def main() -> None:
    gpu = load_gpu(GPU)
    varies = parse_vary(VARY, gpu)
    workloads = shapes(SEQLENS, HEAD_DIMS, batch=BATCH, heads=HEADS)
    result = run_sweep(gpu, varies, ALGOS, workloads, workers=1)
    print(f"{'algo':<9} {'HBM':>5} {'time us':>9} {'speed-up':>9}  bound")
    for row in result.rows:
        print(
            f"{row['algo']:<9} {row['settings']['hbm_bandwidth_Bps']:>5} "
            f"{row['time_s'] * 1e6:>9.4g} {row['speedup']:>8.2f}x  {row['bound']}"
        )


if __name__ == "__main__":
    main()
