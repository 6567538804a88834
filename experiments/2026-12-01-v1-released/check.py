"""The released-FlashAttention-1 v1 on the GPU: check every configuration, time it, predict it.

Scenario: for a few shapes, forward and backward, tilesim's standard, v1 (the
default: the released kernel's structure), v1 with ``fa1-algorithm1`` and v2.
Each kernel's output (or gradients) is checked against the float32 reference
first, with the buffers poisoned; only a correct one is timed (do_bench median,
L2 flushed), then predicted on the calibrated H200 with the same config.
Prints the table and the v1/standard and v1/v2 ratios, measured and predicted;
writes everything to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
from triton.testing import do_bench

import tilesim
import tilesim.kernels as K
from tilesim.kernels._common import device_gpu
from tilesim.kernels.reference import reference
from tilesim.traces.config import named_config
from tilesim.traces.workload import Workload

PRESET = "h200-cal"
TOL = {"fwd": 5e-3, "bwd": 1e-2}  # fp16 output; gradients sum N terms
# (batch, heads, N, d, causal): batch x heads x splits fills the 132 SMs in all but the last
FWD_SHAPES = [
    (16, 8, 1024, 64, False),
    (4, 16, 4096, 64, False),
    (4, 16, 4096, 64, True),
    (8, 16, 2048, 128, False),
    (2, 16, 4096, 128, True),
    (1, 16, 4096, 64, False),
]
BWD_SHAPES = [(16, 8, 1024, 64, False), (4, 16, 4096, 64, False), (8, 16, 2048, 128, False)]
ALGO1_MAX_N = 2048  # Algorithm 1 runs one CTA per head: only the short shapes


def rel_error(out, ref) -> float:
    diff = out.double() - ref.double()
    if not bool(diff.isfinite().all()):
        return math.inf
    return float(diff.norm() / ref.double().norm())


def inputs(b, h, n, d, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, h, n, d, device="cuda", generator=gen).half() for _ in range(4)]


def runs_for(pass_, algo, config, q, k, v, do, causal):
    """(run, check): ``check()`` returns the worst relative error on the first and last head."""
    heads = [(0, 0), (q.shape[0] - 1, q.shape[1] - 1)]
    if pass_ == "fwd":
        out, launches = K.launches(q, k, v, causal=causal, algo=algo, config=config)
        calls = [c for _, c in launches]

        def run():
            for c in calls:
                c()

        def check():
            out.fill_(float("nan"))
            run()
            return max(
                rel_error(
                    out[b : b + 1, h : h + 1].float(),
                    reference(
                        q[b : b + 1, h : h + 1],
                        k[b : b + 1, h : h + 1],
                        v[b : b + 1, h : h + 1],
                        causal,
                    ),
                )
                for b, h in heads
            )

        return run, check
    grads, launches = K.backward_launches(q, k, v, do, causal=causal, algo=algo, config=config)
    calls = [c for _, c in launches]

    def run():
        for c in calls:
            c()

    def check():
        for g in grads:
            g.fill_(float("nan"))
        run()
        worst = 0.0
        for b, h in heads:
            sl = (slice(b, b + 1), slice(h, h + 1))
            ref = K.reference_grads(q[sl], k[sl], v[sl], do[sl], causal)
            errs = [rel_error(g[sl].float(), r) for g, r in zip(grads, ref, strict=True)]
            worst = max([worst, *errs])
        return worst

    return run, check


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="v1_check.json")
    ap.add_argument("--budget-s", type=float, default=420.0)
    args = ap.parse_args()
    t0 = time.time()
    gpu = device_gpu(torch.device("cuda"))  # the preset the kernels resolve configs on
    rows = []
    plan = [("fwd", s) for s in FWD_SHAPES] + [("bwd", s) for s in BWD_SHAPES]
    for pass_, (b, h, n, d, causal) in plan:
        w = Workload(b, h, n, n, d, causal=causal, pass_=pass_)
        q, k, v, do = inputs(b, h, n, d, seed=n + d + causal)
        variants = [("standard", None), ("v1", None), ("v2", None)]
        if n <= ALGO1_MAX_N:
            variants.insert(2, ("v1", "fa1-algorithm1"))
        for algo, name in variants:
            row = {"pass": pass_, "B": b, "H": h, "N": n, "d": d, "causal": causal,
                   "algo": algo, "config_name": name or "default"}  # fmt: skip
            if time.time() - t0 > args.budget_s:
                rows.append({**row, "status": "skipped"})
                continue
            # the same config for the kernel and the prediction
            config = named_config(name or "default", algo, w, gpu)
            try:
                run, check = runs_for(pass_, algo, config, q, k, v, do, causal)
                err = check()
            except Exception as exc:  # a launch failure is a result, not the end
                rows.append({**row, "status": "error", "note": str(exc).splitlines()[0][:200]})
                print(row, "error", exc, flush=True)
                continue
            row["rel_error"] = err
            if not err < TOL[pass_]:
                rows.append({**row, "status": "wrong"})
                print(row, f"WRONG rel error {err:.2e}", flush=True)
                continue
            t = do_bench(run, warmup=10, rep=40, return_mode="median") * 1e-3
            p = tilesim.predict(PRESET, algo, b, h, n, d, causal, config=config, pass_=pass_)
            row.update(status="ok", time_s=t, predicted_s=p.time_s, config=p.config,
                       error_pct=100 * (p.time_s / t - 1))  # fmt: skip
            rows.append(row)
            print(f"{pass_} B{b} H{h} N{n} d{d} {'causal' if causal else 'full'} "
                  f"{algo}/{name or 'default'}: {t * 1e3:.3f} ms measured, "
                  f"{p.time_s * 1e3:.3f} predicted ({row['error_pct']:+.1f}%), err {err:.1e}",
                  flush=True)  # fmt: skip
    print("\nratios (measured / predicted):")
    for pass_, shape in plan:
        pick = {
            r["algo"]: r
            for r in rows
            if (r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"]) == (pass_, *shape)
            and r["config_name"] == "default"
            and r.get("status") == "ok"
        }
        if {"standard", "v1", "v2"} <= pick.keys():
            s, v1, v2 = (pick[a] for a in ("standard", "v1", "v2"))
            vs_std = (s["time_s"] / v1["time_s"], s["predicted_s"] / v1["predicted_s"])
            of_v2 = (v2["time_s"] / v1["time_s"], v2["predicted_s"] / v1["predicted_s"])
            print(
                f"  {pass_} {shape}: v1 vs standard {vs_std[0]:.2f}x / {vs_std[1]:.2f}x, "
                f"v1 share of v2's throughput {of_v2[0]:.2f} / {of_v2[1]:.2f}"
            )
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": __import__("triton").__version__, "date": time.strftime("%Y-%m-%d"),
            "preset": PRESET}  # fmt: skip
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)
    bad = [r for r in rows if r.get("status") in ("wrong", "error")]
    print(f"\nwrote {args.out}: {len(rows)} points, {len(bad)} wrong or failed")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
