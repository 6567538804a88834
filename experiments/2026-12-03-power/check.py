"""The clock model against the SMs' counted clocks of validated attention points.

    python experiments/2026-12-03-power/check.py RESULTS.json [...]  > out.jsonl

Each point with a counted clock (`clock_counter_MHz`) is simulated on h200-cal with
its clock model on (nothing measured goes in); the launches' clocks are averaged over
their predicted times and set beside the counted one. A check, not a fit: the model's
shares come from micro-benchmarks (probe.py, fit.py).
"""

import json
import sys
from concurrent.futures import ProcessPoolExecutor

from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import build
from tilesim.traces.workload import KernelConfig, Workload


def one(row):
    gpu = load_gpu("h200-cal")
    w = Workload(**row["workload"])
    cfg = KernelConfig(**row["config"])
    p = simulate(build(row["algo"], w, gpu, cfg), gpu)
    t = sum(lp.time_s for lp in p.launches)
    hz = sum(lp.time_s * lp.clock_hz for lp in p.launches) / t
    return {
        "algo": row["algo"],
        "pass": w.pass_,
        "dtype": w.dtype,
        "d": w.head_dim,
        "n": w.seqlen_q,
        "time_s": row.get("time_graph_s"),
        "counted_MHz": row["clock_counter_MHz"],
        "model_MHz": hz / 1e6,
        "launch_MHz": {lp.name: round(lp.clock_hz / 1e6) for lp in p.launches},
    }


def main(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for r in doc["measurements"]:
            if r.get("status") == "ok" and r.get("clock_counter_MHz") and "config" in r:
                rows.append(r)
    with ProcessPoolExecutor(2) as ex:
        for out in ex.map(one, rows):
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
