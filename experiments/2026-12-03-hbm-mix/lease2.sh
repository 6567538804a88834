#!/bin/bash
# The hbm_mix step again on another lease (its spread), then a fresh random seed (24):
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-hbm-mix/lease2.sh
set -u
timeout 120 python3 -m tilesim calibrate --only hbm_mix --out $OUT/cal-hbm-mix.json \
  --preset-out /tmp/cal-hbm-mix.toml > $OUT/cal-hbm-mix.log 2>&1; echo "calibrate rc=$?"
grep hbm_mix_ $OUT/cal-hbm-mix.log | head -4
bash experiments/2026-12-03-clock/validate.sh random run19-random24 24
