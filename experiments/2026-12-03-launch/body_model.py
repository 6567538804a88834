"""The model beside body.py's measurements (CPU): each shape at its counted clock.

python experiments/2026-12-03-launch/body_model.py
"""

import json
from pathlib import Path

from tilesim import runner
from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload

HERE = Path(__file__).parent


def main():
    gpu = load_gpu("h200-cal")
    print("heads     N  CTAs  measured  model   diff (us)")
    for line in (HERE / "body-out" / "body.jsonl").read_text().splitlines():
        r = json.loads(line)
        w = Workload(1, r["heads"], r["seqlen"], r["seqlen"], 128, dtype="bf16")
        cfg = default_config("v2", w, gpu)
        job = runner.Job(gpu, "v2", w, cfg, clock_hz=r["clock_counter_MHz"] * 1e6, counted=True)
        t, m = r["time_graph_s"] * 1e6, runner.predict(job).time_s * 1e6
        ctas = r["heads"] * -(-r["seqlen"] // cfg.block_m)
        print(f"{r['heads']:5} {r['seqlen']:5} {ctas:5} {t:9.2f} {m:7.2f} {t - m:+8.2f}")


if __name__ == "__main__":
    main()
