#!/usr/bin/env bash
# On the H200, from the repository root (carry [".gpu"]):
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-clock/gpu.sh
# The sweep (probe.py), then Nsight Compute (clocks left alone) on one launch of two
# shapes: cycles over duration. Writes under $OUT. Only reads the GPU's settings.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
D=experiments/2026-12-03-clock
Q=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,driver_version
nvidia-smi --query-gpu=$Q --format=csv > "$OUT/smi.txt"
timeout 300 python3 $D/probe.py "$OUT/sweep.jsonl" > "$OUT/sweep.log" 2>&1; echo "sweep rc=$?"
tail -3 "$OUT/sweep.log"
nvidia-smi --query-gpu=$Q --format=csv,noheader >> "$OUT/smi.txt"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second
for s in "v2 17 6 7296 128 fp16" "v3 2 16 8192 128 fp8"; do
  set -- $s
  timeout 90 ncu --clock-control none -k regex:fwd --launch-skip 2 -c 1 --metrics $M --csv \
    python3 $D/probe.py --one $s > "$OUT/ncu_$1_$6.csv" 2>/tmp/n.err; echo "ncu $s rc=$?"
  tail -2 /tmp/n.err
done
nvidia-smi --query-gpu=$Q --format=csv,noheader >> "$OUT/smi.txt"
ls -la "$OUT"
