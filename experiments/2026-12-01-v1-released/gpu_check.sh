#!/usr/bin/env bash
# The released-FlashAttention-1 v1 on the H200, in one command, from the repository root:
#     source .gpu/bootstrap.sh && bash experiments/2026-12-01-v1-released/gpu_check.sh
# 1. the GPU tests of v1 (both named configs, forward and backward, against float32);
# 2. check.py: every configuration's output checked, then timed and predicted.
# Writes under $OUT (./out when unset): pytest.log, v1_check.json, v1_check.log.
# About 8 minutes at most; only reads the GPU's settings.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
HERE=$(dirname "$0")
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,driver_version --format=csv
timeout --signal=INT --kill-after=10 240 python -m pytest -q -p no:cacheprovider -m gpu \
    tests/kernels/test_kern_gpu.py tests/kernels/test_kern_backward_gpu.py -k v1 2>&1 \
    | tee "$OUT/pytest.log"
echo "pytest exited with ${PIPESTATUS[0]}"
timeout --signal=INT --kill-after=10 450 python "$HERE/check.py" --out "$OUT/v1_check.json" \
    --budget-s 360 2>&1 | tee "$OUT/v1_check.log"
echo "check.py exited with ${PIPESTATUS[0]}"
