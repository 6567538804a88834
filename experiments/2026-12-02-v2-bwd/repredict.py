"""Re-predict stored measurements of some algorithms with the present model.

`tilesim report` does this for every point of a file; this restricts it to the points
of the algorithm / pass given, and prints the signed error of each (pred/meas - 1,
against the CUDA-graph time where the point has one, else the median) and each
file's MAPE and signed mean by head dim. Predicts at the SM clock read while each
point was timed, as the report does (`--preset-clock`: the preset's).

    python experiments/2026-12-02-v2-bwd/repredict.py --algo v2 --pass bwd \
        results/raw/2026-12-01-h200-run1.json ... [--out errors.json]
"""

import argparse
import json
import pathlib
import statistics

from tilesim.hwmodels import load_gpu
from tilesim.runner import Job, run_jobs
from tilesim.validate.schema import config_from_record, workload_from_record


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--algo", required=True)
    ap.add_argument("--pass", dest="pass_", default="fwd")
    ap.add_argument("--preset", default="h200-cal")
    ap.add_argument("--preset-clock", action="store_true")
    ap.add_argument("--head-dim", type=int, help="only the points of this head dim")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    rows, jobs, gpu = [], [], load_gpu(args.preset)
    for f in args.files:
        for m in json.loads(pathlib.Path(f).read_text())["measurements"]:
            w = m["workload"]
            if m["algo"] != args.algo or w["pass_"] != args.pass_ or m.get("status") != "ok":
                continue
            if args.head_dim and w["head_dim"] != args.head_dim:
                continue
            clock = None if args.preset_clock else (m.get("clock_sm_MHz") or 0) * 1e6 or None
            wl, cfg = workload_from_record(m), config_from_record(m)
            jobs.append(Job(gpu, args.algo, wl, cfg, clock_hz=clock))
            rows.append((f, m))
    outcomes, _ = run_jobs(jobs, workers=args.workers)
    preds = [{"time_s": o.prediction.time_s} if o.ok else {} for o in outcomes]
    out = []
    for (f, m), p in zip(rows, preds, strict=True):
        meas = m.get("time_graph_s") or m["time_s"]
        w = m["workload"]
        err = p["time_s"] / meas - 1 if "time_s" in p else None
        out.append(
            {
                "file": f,
                "workload": w,
                "config": m["config"],
                "measured_s": meas,
                "graph": bool(m.get("time_graph_s")),
                "predicted_s": p.get("time_s"),
                "error": err,
            }
        )
        print(
            f"{f.split('/')[-1]:40s} d{w['head_dim']} B{w['batch']} H{w['heads']} "
            f"N{w['seqlen_q']} c{int(w['causal'])} {w['dtype']} {meas * 1e6:9.1f}us "
            f"{err:+.3f}"
        )
    for f in args.files:
        for d in (64, 128, None):
            es = [
                r["error"]
                for r in out
                if r["file"] == f
                and r["error"] is not None
                and (d is None or r["workload"]["head_dim"] == d)
            ]
            if es:
                print(
                    f"{f.split('/')[-1]:40s} d={d or 'all'}: n={len(es)} "
                    f"MAPE {100 * statistics.mean(map(abs, es)):.1f}% "
                    f"signed {100 * statistics.mean(es):+.1f}% "
                    f"max {100 * max(es, key=abs):+.1f}%"
                )
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
