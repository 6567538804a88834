"""Host time per call of ``tilesim.kernels.attention`` on the GPU, beside its bare
launches, and a cProfile of the API path: the figures for the API's per-call overhead.

Usage: python probe.py OUT.json [PROFILE.txt]. Runs with any tilesim that has
``kernels.attention`` and ``kernels.launches`` (the old one too, for the before figure).
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import statistics
import sys
import time

import torch
from triton.testing import do_bench

import tilesim.kernels as K

CALLS, ROUNDS = 50, 7  # calls per round: too few to fill the GPU's launch queue
SHAPES = [  # (B, H, N, d, causal): the two examples, and a long one
    (16, 16, 1024, 128, False),
    (1, 8, 1536, 128, True),
    (4, 16, 4096, 128, False),
]


def host_s(fn) -> float:
    fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        per_call.append((time.perf_counter() - t0) / CALLS)
        torch.cuda.synchronize()
    return statistics.median(per_call)


def main(out_path: str, profile_path: str | None) -> None:
    algos = ["v3", "v2"] if torch.cuda.get_device_capability()[0] == 9 else ["v2"]
    rows = []
    for algo in algos:
        for b, h, n, d, causal in SHAPES:
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in "qkv")
            _, runs = K.launches(q, k, v, causal=causal, algo=algo)
            calls = [run for _, run in runs]

            def bare(calls=calls):
                for call in calls:
                    call()

            def api(q=q, k=k, v=v, causal=causal, algo=algo):
                return K.attention(q, k, v, causal=causal, algo=algo)

            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            row = {
                "algo": algo,
                "shape": [b, h, n, d],
                "causal": causal,
                "api_host_us": host_s(api) * 1e6,
                "launch_host_us": host_s(bare) * 1e6,
                "api_tflops": flops / do_bench(api, return_mode="median") / 1e9,
                "launch_tflops": flops / do_bench(bare, return_mode="median") / 1e9,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    if profile_path:
        b, h, n, d, causal = SHAPES[1]
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in "qkv")
        K.attention(q, k, v, causal=causal, algo=algos[0])
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            K.attention(q, k, v, causal=causal, algo=algos[0])
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text).sort_stats("tottime")
        stats.print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        with open(profile_path, "w") as f:
            f.write(text.getvalue())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
