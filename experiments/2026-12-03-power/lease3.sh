#!/bin/bash
# tilesim calibrate's power step, then a fresh random seed (23), on another lease with counted clocks:
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-power/lease2.sh
set -u
timeout 150 python3 -m tilesim calibrate --only power --out $OUT/cal-power.json \
  --preset-out /tmp/cal-power.toml > $OUT/cal-power.log 2>&1; echo "calibrate rc=$?"
tail -3 $OUT/cal-power.log
bash experiments/2026-12-03-clock/validate.sh random run18-random23 23
