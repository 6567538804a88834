"""Nsight Compute stall samples per SASS instruction for ncu cases, one ncu process per case,
compacted into a JSONL line per kernel launch as soon as each case finishes (a timeout keeps
what finished)."""

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
    "SourceCounters",
    "--section",
    "WarpStateStats",
    "--page",
    "source",
    "--print-source",
    "sass",
    "--csv",
]


def blocks(path):
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    rows = list(csv.reader(lines))
    i = 0
    while i < len(rows):
        if rows[i] and rows[i][0] == "Kernel Name":
            name, header, j = rows[i][1], rows[i + 1], i + 2
            data = []
            while j < len(rows) and not (rows[j] and rows[j][0] == "Kernel Name"):
                if len(rows[j]) == len(header):
                    data.append(rows[j])
                j += 1
            yield name, header, data
            i = j
        else:
            i += 1


for case in ORDER:
    if time.time() - t0 > BUDGET:
        print(f"budget spent before case {case}", flush=True)
        break
    algo, b, h, n, d, causal, dtype, pass_, before, count = CASES[case]
    csv_path = os.path.join(OUT, f"c{case}.csv")
    left = max(20, BUDGET + 60 - (time.time() - t0))
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
        with open(csv_path, "w") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, timeout=left).returncode
    except subprocess.TimeoutExpired:
        print(f"case {case}: timed out", flush=True)
        break
    with open(os.path.join(OUT, "src-sweep.jsonl"), "a") as out:
        for k, (name, header, data) in enumerate(blocks(csv_path)):
            ix = {hh: i for i, hh in enumerate(header)}
            reasons = [hh for hh in header if hh.startswith("stall_") and "(" not in hh]
            rows = []
            for x in data:
                ex = int(x[ix["Instructions Executed"]] or 0)
                smp = int(x[ix["Warp Stall Sampling (All Samples)"]] or 0)
                st = {hh[6:]: int(x[ix[hh]]) for hh in reasons if x[ix[hh]] not in ("0", "")}
                rows.append([x[ix["Address"]][-5:], x[ix["Source"]].strip(), ex, smp, st])
            rec = {
                "case": case,
                "launch_index": k,
                "setup": k < before,
                "kernel": name,
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
                "columns": ["addr", "sass", "executed", "samples", "stalls"],
                "rows": rows,
            }
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")
    os.remove(csv_path)
    print(f"case {case}: rc={rc} {time.time() - t0:.0f}s", flush=True)
