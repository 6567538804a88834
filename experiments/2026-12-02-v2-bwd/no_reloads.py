"""Counterfactual: the v2 backward points of random seeds 14-15 at d = 128 predicted
with the profile's spill-reload waits removed (each wait is charged an L2 round trip
by the engine; the SASS replay already charges an L1 hit's 24 cycles).

    cd experiments/2026-12-02-v2-bwd && python no_reloads.py repredict-inflight.json
"""

import dataclasses
import json
import pathlib
import sys

from tilesim.hwmodels import load_gpu
from tilesim.profiles import for_arch
from tilesim.simulator import simulate
from tilesim.traces import build
from tilesim.validate.schema import config_from_record, workload_from_record

prof = for_arch("hopper")
entries = {v: dataclasses.replace(f, spill_reload_covers=()) for v, f in prof.entries.items()}
no_reloads = dataclasses.replace(prof, entries=entries)
for r in json.loads(pathlib.Path(sys.argv[1]).read_text()):
    if "random1" not in r["file"] or r["workload"]["head_dim"] != 128:
        continue
    if not any(s in r["file"] for s in ("random14", "random15")):
        continue
    m = {"workload": r["workload"], "config": r["config"]}
    w, c = workload_from_record(m), config_from_record(m)
    gpu = load_gpu("h200-cal").at_clock(1.98e9)  # every point's recorded clock
    t = simulate(build("v2", w, gpu, c, profile=no_reloads), gpu).time_s
    print(
        f"{r['file'][-13:-5]} N{w.seqlen_q} H{w.heads} causal={int(w.causal)} {w.dtype}: "
        f"with reloads {r['error']:+.3f}, without {t / r['measured_s'] - 1:+.3f}"
    )
