#!/usr/bin/env bash
# The whole GPU validation in one command: calibrate, validate, bench, then a summary.
#
# On the GPU machine, from the repository root:
#     source .gpu/bootstrap.sh && TILESIM_GIT_COMMIT=<hash> bash validate/gpu/run.sh
#
# Writes under $OUT (./out when unset), 6 files, 2 folders deep at most:
#     results/<date>-<gpu>-calibrate.json   raw micro-benchmark figures
#     presets/<base>.calibrated.toml        the calibrated preset (overlay on the datasheet one)
#     results/<date>-<gpu>.json             the validation grid (forward, then backward), measured
#                                           and predicted
#     results/<date>-<gpu>-bench.json       tilesim kernels vs PyTorch SDPA backends (forward and
#                                           backward)
#     report.md                             accuracy from the predictions stored on the day
#     gpu_run.log                           everything printed
# Then, on the CPU: copy results/* to results/raw/ and presets/* to hwmodels/presets/,
# and run `tilesim report --update-baseline` to record the accuracy figure.
#
# Time: about 6-7 minutes; the soft budgets add up to ~9 (every step has a soft budget,
# after which it records the rest as skipped, and a hard limit, after which it is
# killed; its file keeps every point finished). v3 runs in processes of its own: a
# hang in the newest kernel costs only its own points; so does the backward (issue 7:
# standard, v1, v2; only the backward launches timed; v1's points stop at N=4096).
# GPU_RUN_QUICK=1: a ~2-minute smoke run.
# Only reads the GPU's settings (nvidia-smi queries); never changes them.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT/results" "$OUT/presets"
export PYTHONUNBUFFERED=1
LOG="$OUT/gpu_run.log"
: >"$LOG"
# shellcheck source=steps.sh
source "$(dirname "$0")/steps.sh"
smi() {
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,driver_version \
        --format=csv 2>&1 | tee -a "$LOG"
}

NOT_V3="standard,v1,v2"
SDPA="sdpa-math,sdpa-flash,sdpa-efficient,sdpa-cudnn"
SDPA_BWD="sdpa-flash,sdpa-efficient,sdpa-cudnn"
if [ "${GPU_RUN_QUICK:-0}" = 1 ]; then
    CAL="--quick"; CAL_T=60
    VAL="--quick --seqlens 4096"; VAL_A="30 60"; VAL_B="20 40"; VAL_C="30 60"
    BENCH="--seqlens 4096 --head-dims 128"; BENCH_A="30 60"; BENCH_B="20 40"; BENCH_C="20 40"
else
    CAL=""; CAL_T=100
    VAL=""; VAL_A="120 150"; VAL_B="70 95"; VAL_C="90 120"
    BENCH=""; BENCH_A="90 120"; BENCH_B="25 45"; BENCH_C="50 75"
fi

read -r DATE SLUG BASE < <(python3 - <<'PY'
import torch
from tilesim.hwmodels.presets import base_preset_for
from tilesim.validate.gpu.metadata import gpu_slug, today
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
smi

run $CAL_T python3 -m tilesim calibrate $CAL --out "$RES-calibrate.json" --preset-out "$CAL_PRESET"
# validate predicts with the calibrated preset too: put it where load_gpu finds it
[ -f "$CAL_PRESET" ] && cp "$CAL_PRESET" hwmodels/presets/

read -r soft hard <<<"$VAL_A"
run $hard python3 -m tilesim validate $VAL --pass fwd --algos $NOT_V3 --time-budget-s $soft --out "$RES.a.json"
read -r soft hard <<<"$VAL_B"
run $hard python3 -m tilesim validate $VAL --pass fwd --algos v3 --time-budget-s $soft --out "$RES.b.json"
read -r soft hard <<<"$VAL_C"
run $hard python3 -m tilesim validate $VAL --pass bwd --algos $NOT_V3 --time-budget-s $soft --out "$RES.c.json"
python3 -m tilesim.validate.merge "$RES.json" "$RES.a.json" "$RES.b.json" "$RES.c.json" 2>&1 | tee -a "$LOG"

read -r soft hard <<<"$BENCH_A"
run $hard python3 -m tilesim bench $BENCH --impls $NOT_V3,$SDPA --time-budget-s $soft --out "$RES-bench.a.json"
read -r soft hard <<<"$BENCH_B"
run $hard python3 -m tilesim bench $BENCH --impls v3 --time-budget-s $soft --out "$RES-bench.b.json"
read -r soft hard <<<"$BENCH_C"
run $hard python3 -m tilesim bench $BENCH --pass bwd --impls $NOT_V3,$SDPA_BWD --time-budget-s $soft --out "$RES-bench.c.json"
python3 -m tilesim.validate.merge "$RES-bench.json" "$RES-bench.a.json" "$RES-bench.b.json" "$RES-bench.c.json" 2>&1 | tee -a "$LOG"

if [ -f "$RES.json" ]; then
    python3 -m tilesim report "$RES.json" --stored --gpu-preset "$BASE" \
        --markdown "$OUT/report.md" >/dev/null 2>>"$LOG" || say "report (stored predictions) failed"
fi
smi
say "== summary"
python3 -m tilesim.validate.summary "$OUT/results" 2>&1 | tee -a "$LOG"
