#!/bin/bash
# source .gpu/bootstrap.sh && bash experiments/2026-12-03-launch/gpu.sh [body]   (carry [".gpu"])
set -u
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,driver_version --format=csv > $OUT/smi.txt
[ "${1:-}" = body ] || { timeout 200 python3 experiments/2026-12-03-launch/probe.py $OUT/launch.jsonl > $OUT/launch.log 2>&1; echo "probe rc=$?"; }
[ "${1:-}" = body ] && { timeout 200 python3 experiments/2026-12-03-launch/body.py $OUT/body.jsonl > $OUT/body.log 2>&1; echo "body rc=$?"; }
tail -4 $OUT/*.log
