"""Time the v2 backward against PyTorch SDPA's flash backend backward (GPU only).

    python experiments/2026-11-30-tuning/probe_bwd.py --out DIR [--budget-s 150]

Shapes: B·N = 16k tokens, H·d = 2048 (d = 128 unless ``--head-dim``), N in 4096, 8192, 16384,
causal off and on, fp16. At N = 4096 every tile config in ``CONFIGS`` runs; at
the longer N the default and the two fastest of N = 4096. Every variant's dq,
dk, dv are first checked against float32 torch autograd (relative error below
5e-3), then the backward launches alone are timed (``triton.testing.do_bench``,
L2 flushed, median); the forward runs once, untimed. SDPA's backward is timed
as ``torch.autograd.grad`` of a retained forward graph. TFLOPS use
2.5 · 4·B·H·N²·d (half for causal). One JSON line per measurement goes to
``DIR/probe_bwd.jsonl`` as it is taken (a run cut short keeps what it had).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import time
from pathlib import Path

import torch
import triton

from tilesim.errors import TilesimError
from tilesim.kernels import backward_launches, reference_grads, rel_error
from tilesim.kernels._common import device_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import PAPER_HIDDEN, PAPER_TOKENS, KernelConfig, Workload

D = 128
SEQLENS = (4096, 8192, 16384)
TOL = 5e-3
CONFIGS = [  # (block_m, block_n, num_warps, num_stages)
    (64, 64, 8, 2),
    (64, 128, 8, 2),
    (128, 64, 8, 2),
    (64, 64, 4, 3),
    (64, 64, 8, 3),
    (128, 128, 8, 2),
    (64, 128, 8, 3),
    (64, 128, 4, 2),
    (64, 128, 4, 3),
]


def _bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def _sdpa(q, k, v, do, causal, ref):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
    grads = torch.autograd.grad(out, leaves, do, retain_graph=True)
    errs = [rel_error(g, r) for g, r in zip(grads, ref, strict=True)]
    ms = _bench(lambda: torch.autograd.grad(out, leaves, do, retain_graph=True))
    return ms, errs


def _ours(q, k, v, do, causal, config, ref):
    grads, runs = backward_launches(q, k, v, do, causal=causal, algo="v2", config=config)
    for g in grads:
        g.fill_(float("nan"))
    for _, run in runs:
        run()
    errs = [rel_error(g, r) for g, r in zip(grads, ref, strict=True)]
    if max(errs) >= TOL:
        return None, errs, {}

    def all_runs():
        for _, run in runs:
            run()

    ms = _bench(all_runs)
    parts = {name: _bench(run) for name, run in runs}
    return ms, errs, parts


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--head-dim", type=int, default=D, help="d (heads = 2048 / d)")
    ap.add_argument("--seqlens", type=str, default=",".join(map(str, SEQLENS)))
    args = ap.parse_args(argv)
    d, heads = args.head_dim, PAPER_HIDDEN // args.head_dim
    seqlens = tuple(int(x) for x in args.seqlens.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / "probe_bwd.jsonl").open("w")
    start = time.monotonic()
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit",
             "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
    except OSError as exc:
        smi = f"nvidia-smi: {exc}"
    meta = {
        "kind": "meta",
        "date": datetime.date.today().isoformat(),
        "gpu": torch.cuda.get_device_name(),
        "nvidia_smi": smi,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "shape": f"B*N={PAPER_TOKENS}, H={heads}, d={d}, fp16",
        "tflops": "2.5 * 4*B*H*N^2*d (x0.5 causal) / time",
    }
    print(json.dumps(meta), file=log, flush=True)
    print(meta)
    gpu = device_gpu(torch.device("cuda"))
    best: dict[bool, list] = {}
    for n in seqlens:
        batch = PAPER_TOKENS // n
        for causal in (False, True):
            if time.monotonic() - start > args.budget_s:
                print("budget spent; stopping", flush=True)
                return
            gen = torch.Generator(device="cpu").manual_seed(n + causal)
            q, k, v, do = (
                torch.randn((batch, heads, n, d), generator=gen).half().cuda() for _ in range(4)
            )
            ref = reference_grads(q, k, v, do, causal)
            wl = Workload(batch, heads, n, n, d, causal=causal, dtype="fp16", pass_="bwd")
            default = default_config("v2", wl, gpu)
            sdpa_ms, sdpa_errs = _sdpa(q, k, v, do, causal, ref)
            flops = wl.flops()
            row = {"kind": "sdpa_flash", "n": n, "causal": causal, "ms": sdpa_ms,
                   "tflops": flops / sdpa_ms / 1e9, "rel_err": sdpa_errs}  # fmt: skip
            print(json.dumps(row), file=log, flush=True)
            print(row, flush=True)
            if n == seqlens[0]:
                configs = [KernelConfig(*c, default.mma_path) for c in CONFIGS]
            else:
                configs = [default] + [c for c in best.get(causal, [])[:2] if c != default]
            results = []
            for config in configs:
                if time.monotonic() - start > args.budget_s:
                    break
                tiles = (config.block_m, config.block_n, config.num_warps, config.num_stages)
                try:
                    ms, errs, parts = _ours(q, k, v, do, causal, config, ref)
                    error = None if ms is not None else "wrong gradients"
                except (TilesimError, triton.runtime.errors.OutOfResources) as exc:
                    ms, errs, parts, error = None, None, {}, str(exc).splitlines()[0][:200]
                row = {
                    "kind": "tilesim_v2_bwd", "n": n, "causal": causal, "config": tiles,
                    "default": config == default, "ms": ms, "rel_err": errs, "error": error,
                    "tflops": flops / ms / 1e9 if ms else None,
                    "speedup_vs_sdpa": sdpa_ms / ms if ms else None, "launch_ms": parts,
                }  # fmt: skip
                print(json.dumps(row), file=log, flush=True)
                print(row, flush=True)
                if ms is not None:
                    results.append((ms, config))
            if n == seqlens[0]:
                best[causal] = [c for _, c in sorted(results, key=lambda r: r[0])]
            del q, k, v, do, ref
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
