#!/usr/bin/env bash
# On the H200 (carry [".gpu"]):
#     source .gpu/bootstrap.sh && bash experiments/2026-12-02-standard-fwd/gpu.sh
# Nsight Compute (clocks left alone) on standard attention's forward launches of the
# random sets' worst points and of grid-like ones: time, SM cycles, DRAM and L2 bytes per
# launch. Writes $OUT/ncu.tgz (ncu_<case>.csv, .err, smi.txt; a case list as $1 runs those
# only). Only reads the GPU's settings.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
FINAL=$OUT; OUT=$(mktemp -d)
ONLY=${1:-}
D=experiments/2026-12-02-standard-fwd
Q=name,serial,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,driver_version
nvidia-smi --query-gpu=$Q --format=csv > "$OUT/smi.txt"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active,launch__registers_per_thread,launch__grid_size
while read -r name algo b h n d c dt; do
  [ -z "$name" ] && continue
  [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]] && continue
  timeout 120 ncu --clock-control none -k 'regex:^_' --launch-skip 3 --launch-count 3 --metrics $M --csv \
    python3 $D/one.py $algo $b $h $n $d $c $dt > "$OUT/ncu_$name.csv" 2>"$OUT/ncu_$name.err"
  echo "$name rc=$? $(tail -1 "$OUT/ncu_$name.err")"
done <<'CASES'
s63x55n354c standard 63 55 354 128 1 bf16
s63x55n352c standard 63 55 352 128 1 bf16
s57x35n207f standard 57 35 207 128 0 fp16
s57x35n208f standard 57 35 208 128 0 fp16
s6x1n9937c standard 6 1 9937 128 1 fp16
s6x1n9984c standard 6 1 9984 128 1 fp16
s4x16n4096f standard 4 16 4096 128 0 fp16
s4x16n4096c standard 4 16 4096 128 1 fp16
s1x32n16384c standard 1 32 16384 64 1 fp16
CASES
nvidia-smi --query-gpu=$Q --format=csv,noheader >> "$OUT/smi.txt"
tar czf "$FINAL/ncu.tgz" -C "$OUT" .
