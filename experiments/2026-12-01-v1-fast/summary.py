"""The issue-23 table from a sweep.py results file: each shape's times (do_bench and
CUDA-graph), v1 against standard attention and its share of v2's throughput.

    python experiments/2026-12-01-v1-fast/summary.py experiments/2026-12-01-v1-fast/h200-sweep1.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> None:
    rows = json.loads(open(path).read())["measurements"]  # noqa: SIM115 - a short read
    by_shape = defaultdict(dict)
    for r in rows:
        if r["status"] != "ok":
            continue
        w = r["workload"]
        shape = (w["pass_"], w["batch"], w["heads"], w["seqlen_q"], w["head_dim"], w["causal"])
        name = r["algo"] if r["group"].startswith("issue23-") and r["group"].count("-") == 1 else ""
        name = name or f"v1 {r['group'].split('-', 2)[2]}"
        by_shape[shape][name] = (r["time_s"], r.get("time_graph_s", r["time_s"]))
    print("| pass | B H N d mask | standard | v2 | v1 | v1 vs standard | v1 share of v2 | others |")
    print("|---|---|---|---|---|---|---|---|")
    for shape, t in by_shape.items():
        pass_, b, h, n, d, causal = shape
        s, v2, v1 = (t[a][0] * 1e3 for a in ("standard", "v2", "v1"))
        others = ", ".join(f"{k[3:]} {v[0] * 1e3:.3f}" for k, v in t.items() if k.startswith("v1 "))
        mask = "causal" if causal else "full"
        print(
            f"| {pass_} | B{b} H{h} N{n} d{d} {mask} | {s:.3f} | {v2:.3f} | {v1:.3f} | "
            f"{s / v1:.2f}x | {v2 / v1:.0%} | {others} |"
        )


if __name__ == "__main__":
    main(sys.argv[1])
