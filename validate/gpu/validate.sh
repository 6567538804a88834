#!/usr/bin/env bash
# One validation set on the GPU, in one command: the grid, or a random set by its seed.
#
# On the GPU machine, from the repository root:
#     source .gpu/bootstrap.sh && bash validate/gpu/validate.sh grid
#     source .gpu/bootstrap.sh && bash validate/gpu/validate.sh random SEED [POINTS]
#
# Writes under $OUT (./out when unset): <date>-<gpu>[-random<SEED>].json (the merged
# set, forward then backward, measured and predicted with the datasheet and calibrated
# presets), validate.log. Three processes (standard/v1/v2 forward, v3 forward, the
# backward), each under a soft budget (the rest recorded as skipped) and a hard limit:
# a hang in one costs only its own points. At most about 6 minutes.
# Only reads the GPU's settings (nvidia-smi queries); never changes them.
set -uo pipefail
SET=${1:?usage: validate/gpu/validate.sh grid | random SEED [POINTS]}
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LOG="$OUT/validate.log"
: >"$LOG"
# shellcheck source=steps.sh
source "$(dirname "$0")/steps.sh"
case "$SET" in
grid) ARGS=(--grid grid); SUFFIX="" ;;
random)
    SEED=${2:?random needs a seed}
    ARGS=(--grid random --seed "$SEED" --points "${3:-180}"); SUFFIX="-random$SEED" ;;
*) say "unknown set $SET (grid or random)"; exit 2 ;;
esac
read -r DATE SLUG < <(python3 -c "
import torch
from tilesim.validate.gpu.metadata import gpu_slug, today
print(today(), gpu_slug(torch.cuda.get_device_name(0)))")
RES="$OUT/$DATE-$SLUG$SUFFIX"
nvidia-smi --query-gpu=name,serial,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,driver_version \
    --format=csv 2>&1 | tee -a "$LOG"
run 150 python3 -m tilesim validate "${ARGS[@]}" --pass fwd --algos standard,v1,v2 --time-budget-s 120 --out "$RES.a.json"
run 100 python3 -m tilesim validate "${ARGS[@]}" --pass fwd --algos v3 --time-budget-s 75 --out "$RES.b.json"
run 130 python3 -m tilesim validate "${ARGS[@]}" --pass bwd --algos standard,v1,v2 --time-budget-s 100 --out "$RES.c.json"
python3 -m tilesim.validate.merge "$RES.json" "$RES.a.json" "$RES.b.json" "$RES.c.json" 2>&1 | tee -a "$LOG"
rm -f "$RES.a.json" "$RES.b.json" "$RES.c.json"
say "== summary"
python3 -m tilesim.validate.summary "$OUT" 2>&1 | tee -a "$LOG"
