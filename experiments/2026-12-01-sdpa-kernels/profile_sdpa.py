"""What PyTorch SDPA's math and flash backends launch, read by the torch profiler.

For a few shapes (grid ones, small grids that may take FlashAttention's split-KV
path, N not a multiple of 8) each backend runs once under the profiler after a
warm-up: every CUDA kernel's name, grid, block, registers, shared memory and
duration, and the math backend's peak scratch memory. Then a float32 matrix
product on its own (cuBLAS SGEMM, TF32 off as PyTorch's default): its kernel and
rate, a micro-benchmark of the GEMM, not of attention. Writes $OUT/sdpa_kernels.json.
"""

import json
import os
import subprocess
import sys
import tempfile

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

OUT = os.environ.get("OUT", ".")
# (batch, heads, N, d, causal, dtype)
SHAPES = [
    (4, 16, 4096, 128, False, "fp16"),
    (4, 16, 4096, 128, True, "fp16"),
    (8, 32, 2048, 64, False, "fp16"),
    (8, 32, 2048, 64, True, "bf16"),
    (1, 2, 1000, 64, True, "fp16"),  # few CTAs: FlashAttention's split-KV heuristic
    (3, 5, 700, 128, False, "bf16"),
    (2, 4, 2500, 128, True, "fp16"),
    (1, 1, 300, 64, False, "fp16"),
    (5, 3, 1234, 128, False, "fp16"),
]
BACKENDS = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}
DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


def kernels(fn):
    """[(name, grid, block, regs, smem, us)] of the CUDA kernels one call of fn launches."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    out = []
    for e in sorted(events, key=lambda e: e.get("ts", 0)):
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        a = e.get("args", {})
        out.append(
            {
                "name": e["name"],
                "cat": e["cat"],
                "grid": a.get("grid"),
                "block": a.get("block"),
                "registers": a.get("registers per thread"),
                "smem": a.get("shared memory"),
                "us": e.get("dur"),
            }
        )
    return out


def attention(b, h, n, d, causal, dtype, gen):
    q, k, v = (torch.randn(b, h, n, d, device="cuda", generator=gen).to(dtype) for _ in "qkv")
    return lambda: sdpa(q, k, v, is_causal=causal)


def matmul(batch, m, n, k, gen):
    a = torch.randn(batch, m, k, device="cuda", generator=gen)
    b = torch.randn(batch, k, n, device="cuda", generator=gen)
    return lambda: torch.bmm(a, b)


def smi():
    q = "name,serial,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu,driver_version"
    return subprocess.run(
        ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()


def main():
    doc = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cublas_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "fp16_bf16_reduction_math_sdp": torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed(),
        "nvidia_smi_before": smi(),
        "shapes": [],
    }
    gen = torch.Generator(device="cuda").manual_seed(0)
    for b, h, n, d, causal, dt in SHAPES:
        row = {"batch": b, "heads": h, "seqlen": n, "head_dim": d, "causal": causal, "dtype": dt}
        fn = attention(b, h, n, d, causal, DT[dt], gen)
        for name, backend in BACKENDS.items():
            with sdpa_kernel([backend]):
                ks = kernels(fn)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                fn()
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated() - base
                t = do_bench(fn, warmup=5, rep=20, return_mode="median") * 1e-3
            row[name] = {"kernels": ks, "peak_scratch_bytes": peak, "do_bench_s": t}
            print(
                f"{b}x{h}x{n}x{d} causal={causal} {dt} {name}: {len(ks)} kernels, "
                f"{t * 1e3:.3f} ms, sum {sum(x['us'] or 0 for x in ks) / 1e3:.3f} ms, "
                f"peak {peak / 2**20:.0f} MiB",
                flush=True,
            )
            for x in ks:
                print(
                    f"    {x['us']:9.1f} us  {x['grid']} {x['block']} r{x['registers']} "
                    f"s{x['smem']}  {x['name'][:150]}"
                )
        doc["shapes"].append(row)
        fn = None
        torch.cuda.empty_cache()
    # -- cuBLAS SGEMM on its own -------------------------------------------------
    gemms = []
    for m, n, kk, batch in ((8192, 8192, 8192, 1), (4096, 4096, 4096, 1)):
        fn = matmul(batch, m, n, kk, gen)
        ks = kernels(fn)
        t = do_bench(fn, warmup=20, rep=200, return_mode="median") * 1e-3
        clock = smi()
        flops = 2.0 * batch * m * n * kk
        gemms.append(
            {
                "m": m,
                "n": n,
                "k": kk,
                "batch": batch,
                "s": t,
                "tflops": flops / t / 1e12,
                "kernels": ks,
                "nvidia_smi_after": clock,
            }
        )
        print(
            f"sgemm {batch}x{m}x{n}x{kk}: {t * 1e3:.3f} ms {flops / t / 1e12:.1f} TFLOPS; "
            f"{clock}; {[x['name'][:120] for x in ks]}",
            flush=True,
        )
    doc["sgemm"] = gemms
    doc["nvidia_smi_after"] = smi()
    with open(os.path.join(OUT, "sdpa_kernels.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote", os.path.join(OUT, "sdpa_kernels.json"), file=sys.stderr)


if __name__ == "__main__":
    main()
