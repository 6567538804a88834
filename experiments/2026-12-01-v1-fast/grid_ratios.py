"""v1's grid points (this run) against standard's and v2's on the same grid, measured
in other runs on H200s (results/raw): v1 / standard speed and v1's share of v2.

    python experiments/2026-12-01-v1-fast/grid_ratios.py V1_FILE OTHER_FILE...
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def points(path: str) -> list[dict]:
    return [r for r in json.loads(Path(path).read_text())["measurements"] if r["status"] == "ok"]


def key(r: dict) -> tuple:
    w = r["workload"]
    return (w["pass_"], w["dtype"], w["head_dim"], w["causal"], w["seqlen_q"], w["batch"])


def main(v1_file: str, *others: str) -> None:
    best = defaultdict(dict)  # the fastest measurement of each (algo, shape) across runs
    for path in others:
        for r in points(path):
            if r["algo"] in ("standard", "v2") and r.get("group") in ("fp16", "bwd"):
                k = key(r)
                best[k][r["algo"]] = min(best[k].get(r["algo"], 1e9), r["time_s"])
    print("| pass | d | mask | N | v1 ms | vs standard | share of v2 |")
    print("|---|---|---|---|---|---|---|")
    for r in points(v1_file):
        k = key(r)
        if r.get("group") not in ("fp16", "bwd") or not {"standard", "v2"} <= best[k].keys():
            continue
        t = r["time_s"]
        s, v2 = best[k]["standard"], best[k]["v2"]
        mask = "causal" if k[3] else "full"
        print(
            f"| {k[0]} | {k[2]} | {mask} | {k[4]} | {t * 1e3:.3f} | {s / t:.2f}x | {v2 / t:.0%} |"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
