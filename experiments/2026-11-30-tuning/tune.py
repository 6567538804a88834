"""Check and time kernel variants on a GPU:
``python experiments/2026-11-30-tuning/tune.py [--phase ...]``.

One run does everything a short GPU lease allows: for each variant (algorithm,
dtype, shape, KernelConfig) it draws fresh random inputs, runs once into a
NaN-poisoned output, compares with the float32 reference (a variant that fails
is reported and never timed), then times it with ``triton.testing.do_bench``
(L2 flushed before every repetition, median). Each launch of a variant is timed
alone too (standard attention's three kernels; v3-fp8's V transpose).

Phases: ``explore`` sweeps tile configurations at N=8192; ``final`` times every
algorithm with its default configuration (``traces.config.default_config``) at
the target shapes (d=128, 16 heads, 16k tokens per batch). Results go to
``--out`` as JSON lines as they come; the table is printed last.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import torch
import triton

from tilesim.kernels import api, flash_v2
from tilesim.kernels._common import resolve_config
from tilesim.kernels.reference import reference, rel_error
from tilesim.traces.workload import PAPER_HIDDEN, PAPER_TOKENS, KernelConfig, Workload

TOL = {"fp16": 1e-2, "bf16": 3e-2, "fp8": 0.1}
TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
# the target shapes: H·d = 2048, 16k tokens per batch (``--smoke``: tiny ones, any device)
SHAPE = {
    "heads": PAPER_HIDDEN // 128,
    "head_dim": 128,
    "tokens": PAPER_TOKENS,
    "device": "cuda",
    "scale_n": 1,
}


@dataclass
class Variant:
    algo: str
    dtype: str
    seqlen: int
    causal: bool
    config: KernelConfig | None = None  # None: the default configuration
    use_desc: bool | None = None  # v2 only: force the load path
    label: str = ""
    result: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.seqlen // SHAPE["scale_n"]

    @property
    def batch(self) -> int:
        return max(1, SHAPE["tokens"] // self.n)

    def flops(self) -> float:
        n, heads, d = self.n, SHAPE["heads"], SHAPE["head_dim"]
        return Workload(self.batch, heads, n, n, d, causal=self.causal).flops()


def cfg(bm, bn, warps, stages, **kw) -> KernelConfig:
    hopper = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
    if SHAPE["device"] == "cpu":  # smoke test: interpreter-sized tiles
        bm, bn = min(bm, 32), min(bn, 16)
    return KernelConfig(bm, bn, warps, stages, "wgmma" if hopper else "mma_sync", **kw)


def explore_variants() -> list[Variant]:
    out = []
    n = 8192
    for causal in (False, True):
        for c, desc in [
            (None, None),
            (cfg(128, 64, 8, 3), False),
            (cfg(128, 128, 8, 2), None),
            (cfg(128, 128, 8, 3), None),
            (cfg(128, 64, 4, 3), None),
        ]:
            label = "ptr" if desc is False else ""
            out.append(Variant("v2", "fp16", n, causal, c, desc, label))
        # v3 without warp specialisation (its specialised build deadlocked: README.md)
        for c in [
            cfg(128, 128, 8, 3),
            cfg(128, 128, 8, 2),
            cfg(128, 64, 8, 3),
            cfg(128, 128, 8, 3, persistent=True),
        ]:
            out.append(Variant("v3", "fp16", n, causal, c))
        for c in [cfg(128, 128, 8, 3), cfg(128, 128, 8, 4), cfg(128, 128, 8, 3, persistent=True)]:
            out.append(Variant("v3", "fp8", n, causal, c))
    return out


def final_variants() -> list[Variant]:
    """Default configurations at the target shapes (N=8192 is in ``explore`` already)."""
    out = []
    for causal in (False, True):
        v3 = cfg(128, 128, 8, 3)
        for n in (4096, 16384):
            out.append(Variant("v2", "fp16", n, causal))
            out.append(Variant("v3", "fp16", n, causal, v3))
            out.append(Variant("v3", "fp8", n, causal, v3))
        out.append(Variant("v2", "bf16", 8192, causal))
        out.append(Variant("v3", "bf16", 8192, causal, v3))
        out.append(Variant("standard", "fp16", 4096, causal))
        out.append(Variant("v1", "fp16", 4096, causal))
        out.append(Variant("v1", "fp16", 4096, causal, cfg(64, 64, 8, 1)))
    return out


def make_inputs(v: Variant, seed: int):
    dev = SHAPE["device"]
    gen = torch.Generator(device=dev).manual_seed(seed)
    shape = (v.batch, SHAPE["heads"], v.n, SHAPE["head_dim"])
    if v.dtype == "fp8":
        raw = [torch.randn(shape, device=dev, generator=gen) for _ in range(3)]
        (q, sq), (k, sk), (vv, sv) = (api.quantize_fp8(t) for t in raw)
        return (q, k, vv), {"q_scale": sq, "k_scale": sk, "v_scale": sv}
    raw = [torch.randn(shape, device=dev, generator=gen) for _ in range(3)]
    return tuple(t.to(TORCH_DTYPES[v.dtype]) for t in raw), {}


def bench_ms(fn, warmup: int, rep: int) -> float:
    """Median ms of ``fn``: do_bench (L2 flushed each time) on a GPU, a wall clock elsewhere."""
    if SHAPE["device"] == "cuda":
        return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def run_variant(v: Variant, seed: int) -> dict:
    (q, k, vv), scales = make_inputs(v, seed)
    res = {
        "algo": v.algo,
        "dtype": v.dtype,
        "batch": v.batch,
        "heads": SHAPE["heads"],
        "seqlen": v.n,
        "head_dim": SHAPE["head_dim"],
        "causal": v.causal,
        "config": (v.config or KernelConfig(1, 1, 1, 1)).to_dict(),
        "default": v.config is None,
        "label": v.label,
    }
    out_dtype = torch.float16 if v.dtype == "fp8" else q.dtype
    out = torch.full(q.shape, float("nan"), dtype=out_dtype, device=q.device)
    t0 = time.time()
    try:
        if v.use_desc is not None:
            runs = flash_v2.launches(
                q, k, vv, v.causal, q.shape[-1] ** -0.5, v.config, out, use_desc=v.use_desc
            )
        else:
            out, runs = api.launches(
                q, k, vv, causal=v.causal, algo=v.algo, config=v.config, out=out, **scales
            )
            if v.config is None:
                res["config"] = resolve_config(v.algo, q, k, v.causal, v.dtype, None).to_dict()
        for _, run in runs:
            run()
        if q.is_cuda:
            torch.cuda.synchronize()
    except Exception as exc:  # report and go on: one bad variant must not end the lease
        res.update(status="error", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return res
    res["first_run_s"] = round(time.time() - t0, 2)
    ref = reference(q, k, vv, v.causal, **scales)
    err = rel_error(out, ref)
    del ref
    res["rel_error"] = err
    if not err < TOL[v.dtype]:
        res["status"] = "wrong"
        return res

    def all_runs():
        for _, run in runs:
            run()

    ms = bench_ms(all_runs, warmup=25, rep=100)
    res["ms"] = ms
    res["tflops"] = v.flops() / (ms * 1e-3) / 1e12
    if len(runs) > 1:
        res["launch_ms"] = {name: bench_ms(run, warmup=10, rep=50) for name, run in runs}
    res["status"] = "ok"
    return res


def gpu_state() -> dict:
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (interpreter)"
    info = {
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    query = "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu"
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        info["nvidia_smi"] = f"unavailable: {exc}"
    return info


def describe(r: dict) -> str:
    c = r["config"]
    flags = "".join(f for f, on in (("W", c["warp_specialize"]), ("P", c["persistent"])) if on)
    return f"{c['block_m']}x{c['block_n']} w{c['num_warps']} s{c['num_stages']} {flags}"


def table(rows: list[dict]) -> str:
    lines = [
        f"{'algo':8} {'dtype':5} {'N':>6} {'B':>2} {'causal':6} {'config':22} {'default':7} "
        f"{'err':>8} {'ms':>8} {'TFLOPS':>7}  launches"
    ]
    for r in rows:
        err = f"{r['rel_error']:.1e}" if "rel_error" in r else "-"
        ms = f"{r['ms']:.3f}" if "ms" in r else r.get("status", "")
        tf = f"{r['tflops']:.0f}" if "tflops" in r else r.get("error", "")[:40]
        launches = " ".join(f"{k}={v:.3f}" for k, v in r.get("launch_ms", {}).items())
        name = r["algo"] + ("-" + r["label"] if r.get("label") else "")
        lines.append(
            f"{name:8} {r['dtype']:5} {r['seqlen']:>6} {r['batch']:>2} "
            f"{str(r['causal']):6} {describe(r):22} {str(r['default']):7} "
            f"{err:>8} {ms:>8} {tf:>7}  {launches}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", action="append", choices=["explore", "final"])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument(
        "--budget-s", type=float, default=400.0, help="start no new variant after this many seconds"
    )
    parser.add_argument(
        "--hang-s",
        type=float,
        default=60.0,
        help="end the run if one variant takes longer (a deadlocked kernel)",
    )
    parser.add_argument(
        "--start-at",
        type=int,
        default=0,
        help="skip the first variants of each phase (to resume after a hang)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shapes on any device (the CPU: TRITON_INTERPRET=1)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        SHAPE.update(
            heads=2,
            head_dim=64,
            tokens=128,
            scale_n=64,
            device="cuda" if torch.cuda.is_available() else "cpu",
        )
    elif not torch.cuda.is_available():
        print("tune needs a CUDA GPU (or --smoke with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    phases = args.phase or ["explore", "final"]
    state = gpu_state()
    print(json.dumps(state), flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "tune.jsonl")
    start = time.time()
    rows = []
    with open(path, "a") as log:
        log.write(json.dumps({"state": state}) + "\n")
        for phase in phases:
            variants = explore_variants() if phase == "explore" else final_variants()
            for i, v in enumerate(variants):
                if i < args.start_at:
                    continue
                if time.time() - start > args.budget_s:
                    print(f"budget spent: skipped {len(variants) - i} {phase} variants")
                    break
                # a deadlocked kernel never returns: stop the whole run instead of the lease
                print(
                    f"[{phase} {i}] {v.algo} {v.dtype} N={v.n} causal={v.causal} {v.config}",
                    flush=True,
                )
                faulthandler.dump_traceback_later(args.hang_s, exit=True)
                r = run_variant(v, seed=1000 + i)
                faulthandler.cancel_dump_traceback_later()
                r["phase"] = phase
                rows.append(r)
                log.write(json.dumps(r) + "\n")
                log.flush()
                print(table([r]).splitlines()[1], flush=True)
                torch.cuda.empty_cache()
    state_after = gpu_state()
    print("after:", state_after.get("nvidia_smi"))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
