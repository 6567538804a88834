# On the device, from a copy of this worktree in .xfer-acc (carry [".gpu", ".xfer-acc"]):
#   cd .xfer-acc && bash experiments/2026-12-02-v2-bwd/gpu_ncu.sh
# ncu case 12: v2 bwd B=4 H=16 N=4096 d=128 fp16; case 17: B=4 H=32 N=4096 d=64 fp16.
# Clocks left as they are (--clock-control none); nvidia-smi before and after.
source ../.gpu/bootstrap.sh >/dev/null 2>&1
Q=name,clocks.sm,clocks.max.sm,power.draw,power.limit,driver_version
nvidia-smi --query-gpu=$Q --format=csv > $OUT/smi.txt
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,sm__warps_active.avg.per_cycle_active
for c in 12 17; do
  timeout 100 ncu --clock-control none -k regex:_v2_bwd --metrics $M --csv \
    python3 -m tilesim.validate.gpu.ncu run $c > $OUT/metrics_case$c.csv 2> /tmp/m$c.err; echo "metrics $c rc=$?"
  tail -3 /tmp/m$c.err
done
S="--clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv"
timeout 150 ncu $S -k regex:_v2_bwd_dkdv -c 1 python3 -m tilesim.validate.gpu.ncu run 12 > /tmp/src_v2bwd_dkdv_d128_4k.csv 2>/tmp/s1.err; echo "src dkdv rc=$?"
timeout 120 ncu $S -k regex:_v2_bwd_dq -c 1 python3 -m tilesim.validate.gpu.ncu run 12 > /tmp/src_v2bwd_dq_d128_4k.csv 2>/tmp/s2.err; echo "src dq rc=$?"
tail -2 /tmp/s1.err /tmp/s2.err
python3 results/logs/2026-11-30-h200-src-sass.py $OUT/src-sass.json /tmp/src_*.csv
nvidia-smi --query-gpu=$Q --format=csv >> $OUT/smi.txt
ls -la $OUT
