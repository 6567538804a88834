#!/bin/bash
# After the layout change (validate/gpu/, one module per calibration step, the Gluon
# package, the runner's Pool in `validate`): the GPU code still runs. One device call:
#     source .gpu/bootstrap.sh && bash experiments/2026-12-04-layout-check/gpu.sh
set -u
nvidia-smi --query-gpu=name,serial,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,driver_version --format=csv > $OUT/smi.txt
timeout 150 python3 -m tilesim calibrate --quick --out $OUT/calibrate-quick.json --preset-out $OUT/quick.toml > $OUT/calibrate.log 2>&1
echo "calibrate rc=$?"; tail -3 $OUT/calibrate.log
timeout 90 python3 -m tilesim validate --grid random --seed 99 --points 6 --pass fwd --time-budget-s 60 --out $OUT/smoke.json > $OUT/smoke.log 2>&1
echo "validate smoke rc=$?"; tail -3 $OUT/smoke.log
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/kernels tests/validate tests/test_pipeline.py > $OUT/gpu-tests.log 2>&1
echo "gpu tests rc=$?"; tail -4 $OUT/gpu-tests.log
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv >> $OUT/smi.txt
