#!/bin/bash
# The power probe twice (forward order, then reversed), nvidia-smi sampled all along:
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-power/gpu.sh
set -u
D=experiments/2026-12-03-power
Q=name,serial,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,enforced.power.limit,temperature.gpu,driver_version
nvidia-smi --query-gpu=$Q --format=csv > $OUT/nvidia-smi.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 100 > $OUT/smi-loop.csv 2>/dev/null &
LOOP=$!
date +%s.%N > $OUT/epoch.txt
timeout 200 python3 $D/probe.py $OUT/probe-a.jsonl > $OUT/probe-a.log 2>&1; echo "a rc=$?"
timeout 200 python3 $D/probe.py $OUT/probe-b.jsonl --reverse > $OUT/probe-b.log 2>&1; echo "b rc=$?"
kill $LOOP
nvidia-smi --query-gpu=$Q --format=csv,noheader >> $OUT/nvidia-smi.txt
grep -c '"ok"' $OUT/probe-a.jsonl $OUT/probe-b.jsonl; grep -v '"ok"' $OUT/probe-a.jsonl | head -5
