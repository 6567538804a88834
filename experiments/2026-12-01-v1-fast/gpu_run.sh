#!/usr/bin/env bash
# Issue 23 on the H200, one command from the repository root:
#     source .gpu/bootstrap.sh && bash experiments/2026-12-01-v1-fast/gpu_run.sh
# 1. v1's GPU tests (a selection); 2. sweep.py (issue shapes: v1 and its variants,
# fa1-algorithm1, standard, v2, fwd and bwd); 3. the grid's v1 points, fwd and bwd;
# 4. the v1 points of random set 14. Every point checked before it is timed; no
# predictions (tilesim report recomputes them). Only reads the GPU's settings.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
HERE=$(dirname "$0")
LOG="$OUT/run.log"
{
nvidia-smi --query-gpu=name,serial,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,driver_version --format=csv
timeout -k 5 ${T_TEST:-60} python -m pytest -q -p no:cacheprovider -m gpu -x \
    tests/kernels/test_kern_gpu.py tests/kernels/test_kern_backward_gpu.py \
    -k "${TEST_K:-v1 and (partial or d64 or algorithm or autograd)}" 2>&1 | tail -15
echo "pytest exited with ${PIPESTATUS[0]}"
timeout -k 5 ${T_SWEEP:-100} python "$HERE/sweep.py" --out "$OUT/sweep.json" --budget-s ${B_SWEEP:-80} 2>&1 | tail -50
V="python -m tilesim validate --algos v1 --workers 0"
timeout -k 5 ${T_GRID:-65} $V --grid grid --pass fwd --time-budget-s 45 --out "$OUT/grid-fwd.json" 2>&1 | tail -30
timeout -k 5 ${T_GRID:-65} $V --grid grid --pass bwd --time-budget-s 50 --out "$OUT/grid-bwd.json" 2>&1 | tail -30
timeout -k 5 ${T_RAND:-45} $V --grid random --seed 14 --points 120 --pass fwd --time-budget-s 30 --out "$OUT/random14-v1.json" 2>&1 | tail -25
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | tee "$LOG"
