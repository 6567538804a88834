#!/usr/bin/env bash
# The whole GPU validation in one command: calibrate, bench, validate, then a summary.
#
# On the GPU machine, from the repository root:
#     source .gpu/bootstrap.sh && TILESIM_GIT_COMMIT=<hash> bash validate/gpu_run.sh
#
# Writes under $OUT (./out when unset), 6 files, 2 folders deep at most:
#     results/<date>-<gpu>-calibrate.json   raw micro-benchmark figures
#     presets/<base>.calibrated.toml        the calibrated preset (overlay on the datasheet one)
#     results/<date>-<gpu>-bench.json       tilesim kernels vs PyTorch SDPA backends
#     results/<date>-<gpu>.json             the validation grid, measured and predicted
#     report.md                             accuracy from the stored predictions
#     gpu_run.log                           everything printed
# Copy results/* to validate/results/ and presets/* to hwmodels/presets/, then run
# `tilesim report --update-baseline` on the CPU to record the accuracy figure.
#
# Budget: about 9 minutes in all (calibrate ~1.5, bench <= 2.5, validate <= 4.5).
# GPU_RUN_QUICK=1 runs a small smoke version of each step (about 1.5 minutes).
# Only reads the GPU's settings (nvidia-smi queries); never changes them.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT/results" "$OUT/presets"
export PYTHONUNBUFFERED=1
LOG="$OUT/gpu_run.log"
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
run() {  # run a step with a hard time limit; its output goes to the terminal and the log
    local limit=$1
    shift
    say "+ $* (limit ${limit}s)"
    timeout --signal=INT --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || say "step exited with $rc"
    return 0
}

if [ "${GPU_RUN_QUICK:-0}" = 1 ]; then
    CAL="--quick"
    BENCH="--seqlens 4096 --head-dims 128 --time-budget-s 40"
    VAL="--quick --seqlens 4096 --time-budget-s 40"
else
    CAL=""
    BENCH="--time-budget-s 130"
    VAL="--time-budget-s 220"
fi

read -r DATE SLUG BASE < <(python3 - <<'PY'
import torch
from tilesim.validate.calibrate import base_preset_for
from tilesim.validate.metadata import gpu_slug, today
name = torch.cuda.get_device_name(0)
print(today(), gpu_slug(name), base_preset_for(name))
PY
)
if [ -z "${BASE:-}" ]; then
    say "no CUDA GPU with a known preset here; nothing run"
    exit 2
fi
RES="$OUT/results/$DATE-$SLUG"
CAL_PRESET="$OUT/presets/$BASE.calibrated.toml"
say "tilesim GPU run: $DATE $SLUG (datasheet preset $BASE), commit ${TILESIM_GIT_COMMIT:-unknown}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,driver_version --format=csv 2>&1 | tee -a "$LOG"

run 150 python3 -m tilesim calibrate $CAL --out "$RES-calibrate.json" --preset-out "$CAL_PRESET"
# validate predicts with the calibrated preset too: put it where load_gpu finds it
[ -f "$CAL_PRESET" ] && cp "$CAL_PRESET" hwmodels/presets/
run 180 python3 -m tilesim bench $BENCH --out "$RES-bench.json"
run 290 python3 -m tilesim validate $VAL --out "$RES.json"
if [ -f "$RES.json" ]; then
    python3 -m tilesim report "$RES.json" "$RES-bench.json" --stored --gpu-preset "$BASE" \
        --markdown "$OUT/report.md" >/dev/null 2>>"$LOG" || say "report (stored predictions) failed"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,driver_version --format=csv 2>&1 | tee -a "$LOG"
say "== summary"
python3 -m tilesim.validate.summary "$OUT/results" 2>&1 | tee -a "$LOG"
