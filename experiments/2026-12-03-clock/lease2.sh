#!/bin/bash
# Seed 20 again on another lease (counted clocks), then the duty probe:
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-clock/lease2.sh
set -u
D=experiments/2026-12-03-clock
bash $D/validate.sh random run15-random20 20
nvidia-smi --query-gpu=serial,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/duty-nvidia-smi.txt
timeout 150 python3 $D/duty.py $OUT/duty.jsonl > $OUT/duty.log 2>&1; echo "duty rc=$?"; tail -3 $OUT/duty.log
nvidia-smi --query-gpu=serial,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> $OUT/duty-nvidia-smi.txt
# microbench._emitted_path (one helper for both tl.dot loops' PTX check): the two steps, quick
timeout 150 python3 -m tilesim calibrate --only tensor,mma_latency --quick --out $OUT/cal-quick.json \
  --preset-out /tmp/cal-quick.toml > $OUT/cal-quick.log 2>&1; echo "calibrate rc=$?"; tail -3 $OUT/cal-quick.log
