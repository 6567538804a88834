#!/bin/bash
# One validate run with the SMs' counted clock recorded per point (timing.counter_clock_hz):
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-clock/validate.sh grid NAME
#     source .gpu/bootstrap.sh && bash experiments/2026-12-03-clock/validate.sh random NAME SEED
# Writes $OUT/NAME.json (the parts merged), NAME-validate.log, NAME-nvidia-smi.txt.
set -u
SET=$1; NAME=$2; SEED=${3:-}
Q=name,serial,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,driver_version
nvidia-smi --query-gpu=$Q --format=csv > $OUT/$NAME-nvidia-smi.txt
if [ "$SET" = random ]; then
  V="python3 -m tilesim validate --grid random --seed $SEED --points 120"
  A=(150 120); B=(100 75); C=(130 100)
else
  V="python3 -m tilesim validate --grid grid"
  A=(230 200); B=(120 95); C=(150 120)
fi
timeout ${A[0]} $V --pass fwd --algos standard,v1,v2 --time-budget-s ${A[1]} --out $OUT/a.json > $OUT/a.log 2>&1
timeout ${B[0]} $V --pass fwd --algos v3 --time-budget-s ${B[1]} --out $OUT/b.json > $OUT/b.log 2>&1
timeout ${C[0]} $V --pass bwd --algos standard,v1,v2 --time-budget-s ${C[1]} --out $OUT/c.json > $OUT/c.log 2>&1
python3 -m tilesim.validate.merge $OUT/$NAME.json $OUT/a.json $OUT/b.json $OUT/c.json
nvidia-smi --query-gpu=$Q --format=csv,noheader >> $OUT/$NAME-nvidia-smi.txt
cat $OUT/a.log $OUT/b.log $OUT/c.log > $OUT/$NAME-validate.log
rm -f $OUT/a.json $OUT/b.json $OUT/c.json $OUT/a.log $OUT/b.log $OUT/c.log
tail -4 $OUT/$NAME-validate.log
