"""Summarise check.py's output: model clock over counted clock, by algorithm and pass."""

import json
import statistics
import sys
from collections import defaultdict

rows = []
for path in sys.argv[1:]:
    with open(path) as f:
        rows += [json.loads(line) for line in f]
groups = defaultdict(list)
for r in rows:
    e = r["model_MHz"] / r["counted_MHz"] - 1
    groups[(r["algo"], r["pass"])].append((e, r))
    groups[("all", "")].append((e, r))
for k, v in sorted(groups.items()):
    es = [e for e, _ in v]
    print(
        f"{k[0]:9s} {k[1]:4s} n={len(v):3d} mean {100 * statistics.mean(es):+5.1f}% "
        f"MAE {100 * statistics.mean(abs(e) for e in es):4.1f}% "
        f"max {100 * max(es, key=abs):+5.1f}%  counted {min(r['counted_MHz'] for _, r in v):.0f}-"
        f"{max(r['counted_MHz'] for _, r in v):.0f}"
    )
