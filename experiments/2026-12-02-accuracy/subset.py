"""Write the measurements of some algorithms (and passes) of results files into one file,
for `tilesim report` on that subset only (the report re-predicts every point it reads).

    python experiments/2026-12-02-accuracy/subset.py OUT.json --algos v1 FILE...
"""

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--algos", required=True, help="comma-separated")
    ap.add_argument("--passes", default="fwd,bwd,fwd_bwd")
    a = ap.parse_args()
    algos, passes = set(a.algos.split(",")), set(a.passes.split(","))
    for path in a.files:
        doc = json.loads(path.read_text())
        doc["measurements"] = [
            m
            for m in doc["measurements"]
            if m["algo"] in algos and m["workload"]["pass_"] in passes
        ]
        dest = a.out.parent / f"{a.out.stem}-{path.stem}.json"
        dest.write_text(json.dumps(doc, indent=1))
        print(f"{dest}: {len(doc['measurements'])} measurements")


if __name__ == "__main__":
    main()
