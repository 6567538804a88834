"""The first lease's probe rows through `clock_fit.derive` (what calibrate's power step does).

python experiments/2026-12-03-power/fit.py out/probe-a.jsonl out/probe-b.jsonl
"""

import json
import sys

from tilesim.validate import clock_fit


def rows(paths):
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r["status"] != "ok":
                    continue
                mma = r["kernel"] == "dot"
                row = {"name": "clock_dot_probe" if mma else "clock_other", "mma": mma}
                row.update(value=r["clock_counter_MHz"] * 1e6, dtype=r.get("dtype"))
                row["data"] = r.get("data")
                if mma:
                    hbm = r["hbm_bytes_per_s"]
                    row.update(tensor_flop_per_s=r["tensor_flop_per_s"], hbm_bytes_per_s=hbm)
                    row.update(l2_hit_bytes_per_s=r["l2_bytes_per_s"] - hbm)
                    row.update(fp32_ops_per_s=r["fp32_ops_per_s"])
                yield row


if __name__ == "__main__":
    fields, top, shares = clock_fit.derive(list(rows(sys.argv[1:])), 0.907)
    for k, v in fields.items():
        print(f"{k:30s} {v:.4g}")
    print(top)
    print(shares)
