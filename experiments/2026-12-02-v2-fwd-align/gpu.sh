#!/usr/bin/env bash
# On the H200, from the repository root (carry [".gpu"]):
#     source .gpu/bootstrap.sh && bash experiments/2026-12-02-v2-fwd-align/gpu.sh
# The timing sweep (probe.py), then Nsight Compute (clocks left alone) on v2's
# forward at B=17 H=6 d=128 N=7273 and N=7296: counters, and stall samples per SASS
# instruction. Writes under $OUT. Only reads the GPU's settings.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
D=experiments/2026-12-02-v2-fwd-align
Q=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,driver_version
nvidia-smi --query-gpu=$Q --format=csv > "$OUT/smi.txt"
timeout 240 python3 $D/probe.py "$OUT/sweep.jsonl" > "$OUT/sweep.log" 2>&1; echo "sweep rc=$?"
tail -3 "$OUT/sweep.log"
nvidia-smi --query-gpu=$Q --format=csv,noheader >> "$OUT/smi.txt"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,sm__warps_active.avg.per_cycle_active,lts__t_sectors.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed_op_global_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
for n in 7273 7296; do
  timeout 90 ncu --clock-control none -k regex:_v2_fwd --launch-skip 1 -c 1 --metrics $M --csv \
    python3 $D/probe.py --one 17 6 $n 128 > "$OUT/metrics_$n.csv" 2>/tmp/m$n.err; echo "metrics $n rc=$?"
  tail -2 /tmp/m$n.err
done
S="--clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv"
for n in 7273 7296; do
  timeout 120 ncu $S -k regex:_v2_fwd --launch-skip 1 -c 1 python3 $D/probe.py --one 17 6 $n 128 \
    > /tmp/src_v2fwd_$n.csv 2>/tmp/s$n.err; echo "src $n rc=$?"
  tail -2 /tmp/s$n.err
done
python3 results/logs/2026-11-30-h200-src-sass.py "$OUT/src-sass.json" /tmp/src_v2fwd_*.csv
nvidia-smi --query-gpu=$Q --format=csv,noheader >> "$OUT/smi.txt"
ls -la "$OUT"
