# Run on the device from a copy of the repository in .diag/src (carry [".diag"]), the compactor beside this file in it.
cd .diag/src && source .gpu/bootstrap.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,driver_version --format=csv > $OUT/smi.txt
S="--clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv"
run() { timeout 90 ncu $S -k "regex:$1" -c 1 python3 -m tilesim.validate.gpu.ncu run $2 > $OUT/src_$3.csv 2> $OUT/src_$3.err; echo "$3 rc=$?"; }
run _qk_kernel 0 qk_d128_4k
run _pv_kernel 1 pv_d64_16k
run _softmax_kernel 1 softmax_d64_16k
run _v1_fwd 23 v1fwd_d64_2k
run _v1_fwd 20 v1fwd_d128_16k
run _v2_bwd_dq 17 v2bwd_dq_d64_4k
run _v2_bwd_dkdv 17 v2bwd_dkdv_d64_4k
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv >> $OUT/smi.txt
python3 experiments/2026-11-30-probes/src-sass.py $OUT/src-sass.json $OUT/src_*.csv && rm $OUT/src_*.csv && cat $OUT/src_*.err > $OUT/err.txt; rm -f $OUT/src_*.err; ls -la $OUT
