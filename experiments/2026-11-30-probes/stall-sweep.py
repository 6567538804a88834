"""Nsight Compute warp-state and scheduler sections (raw page) for ncu cases, one ncu process
per case, one JSONL line per kernel launch as each case finishes."""

import csv
import json
import os
import subprocess
import sys
import time

from tilesim.validate.ncu import CASES

OUT = os.environ["OUT"]
ORDER = [int(x) for x in sys.argv[1].split(",")]
BUDGET = float(sys.argv[2])
t0 = time.time()
S = [
    "--clock-control",
    "none",
    "--section",
    "WarpStateStats",
    "--section",
    "SchedulerStats",
    "--section",
    "InstructionStats",
    "--section",
    "LaunchStats",
    "--section",
    "Occupancy",
    "--page",
    "raw",
    "--csv",
]
KEEP = (
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_active.avg.per_cycle_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg",
)

for case in ORDER:
    if time.time() - t0 > BUDGET:
        print(f"budget spent before case {case}", flush=True)
        break
    algo, b, h, n, d, causal, dtype, pass_, before, count = CASES[case]
    path = os.path.join(OUT, f"s{case}.csv")
    cmd = [
        "ncu",
        *S,
        "-k",
        "regex:^_",
        "-c",
        str(before + count),
        "python3",
        "-m",
        "tilesim.validate.ncu",
        "run",
        str(case),
    ]
    try:
        with open(path, "w") as f:
            rc = subprocess.run(
                cmd,
                stdout=f,
                stderr=subprocess.DEVNULL,
                timeout=max(20, BUDGET + 40 - (time.time() - t0)),
            ).returncode
    except subprocess.TimeoutExpired:
        print(f"case {case}: timed out", flush=True)
        break
    with open(path) as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    header = rows[0]
    keep = [i for i, hh in enumerate(header) if hh in KEEP or ("stalled" in hh and "ratio" in hh)]
    with open(os.path.join(OUT, "stall-sweep.jsonl"), "a") as out:
        for k, r in enumerate(x for x in rows[2:] if len(x) == len(header)):
            rec = {
                "case": case,
                "launch_index": k,
                "setup": k < before,
                "kernel": r[header.index("Kernel Name")],
                "workload": dict(
                    algo=algo,
                    batch=b,
                    heads=h,
                    seqlen=n,
                    head_dim=d,
                    causal=causal,
                    dtype=dtype,
                    pass_=pass_,
                ),
            }
            for i in keep:
                try:
                    rec[header[i]] = float(r[i].replace(",", ""))
                except ValueError:
                    rec[header[i]] = r[i]
            out.write(json.dumps(rec) + "\n")
    os.remove(path)
    print(f"case {case}: rc={rc} {time.time() - t0:.0f}s", flush=True)
