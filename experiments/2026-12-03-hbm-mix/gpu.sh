#!/bin/bash
# The HBM mix and standard-launch probe, nvidia-smi before and after:
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-hbm-mix/gpu.sh
set -u
Q=name,serial,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,driver_version
nvidia-smi --query-gpu=$Q --format=csv > $OUT/nvidia-smi.txt
timeout 400 python3 experiments/2026-12-03-hbm-mix/probe.py $OUT/probe.jsonl > $OUT/probe.log 2>&1; echo "rc=$?"
nvidia-smi --query-gpu=$Q --format=csv,noheader >> $OUT/nvidia-smi.txt
cat $OUT/probe.log | tail -30
