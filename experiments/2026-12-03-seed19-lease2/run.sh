#!/bin/bash
# seed 19 again, on another lease: the same three validate calls as run11
set -u
nvidia-smi --query-gpu=name,serial,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,driver_version --format=csv > $OUT/smi.txt
V="python3 -m tilesim validate --grid random --seed 19 --points 120"
timeout 150 $V --pass fwd --algos standard,v1,v2 --time-budget-s 120 --out $OUT/a.json > $OUT/a.log 2>&1
timeout 100 $V --pass fwd --algos v3 --time-budget-s 75 --out $OUT/b.json > $OUT/b.log 2>&1
timeout 130 $V --pass bwd --algos standard,v1,v2 --time-budget-s 100 --out $OUT/c.json > $OUT/c.log 2>&1
python3 -m tilesim.validate.merge $OUT/run12.json $OUT/a.json $OUT/b.json $OUT/c.json
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv >> $OUT/smi.txt
cat $OUT/a.log $OUT/b.log $OUT/c.log > $OUT/validate.log
rm -f $OUT/a.json $OUT/b.json $OUT/c.json $OUT/a.log $OUT/b.log $OUT/c.log
tail -4 $OUT/validate.log
