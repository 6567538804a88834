"""Compact ncu --page source --print-source sass CSVs: per kernel, every SASS instruction
with its executed count and nonzero warp-stall samples by reason.

python3 2026-11-30-h200-src-sass.py OUT.json src_<tag>.csv ...
"""

import csv
import json
import os
import sys


def kernel(path: str) -> dict:
    with open(path) as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    header = rows[1]
    ix = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "(" not in h]
    insts = []
    for x in rows[2:]:
        if len(x) != len(header):
            continue
        rec = {
            "addr": x[ix["Address"]],
            "sass": x[ix["Source"]].strip(),
            "executed": int(x[ix["Instructions Executed"]] or 0),
            "samples": int(x[ix["Warp Stall Sampling (All Samples)"]] or 0),
        }
        stalls = {h[6:]: int(x[ix[h]]) for h in reasons if x[ix[h]] not in ("0", "")}
        if stalls:
            rec["stalls"] = stalls
        insts.append(rec)
    return {"kernel": rows[0][1], "instructions": insts}


if __name__ == "__main__":
    out = {os.path.basename(p)[4:-4]: kernel(p) for p in sys.argv[2:]}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
