"""The SM clock of a tensor-core loop against its operands' data and its tensor duty, on the GPU.

    python3 experiments/2026-12-03-clock/duty.py OUT.jsonl

calibrate's tl.dot loops multiply the same register tiles every step; attention streams new
tiles. Each variant here runs ~20 ms launches (2 CTAs/SM, 4 warps, fp16/bf16 128x128x64
wgmma): operands "const" (loaded once), "stream" (a new tile from an L2-resident random
buffer each step) or "zeros" (streamed, all zero), with `fma` dependent FMAs per step to
dilute the tensor pipe. Per variant: graph time, the SMs' counted clock
(`timing.counter_clock_hz`), nvidia-smi meanwhile, and the tensor pipe's busy fraction
(FLOP/s over the calibrated per-clock rate x SMs x the counted clock). Output checked
first. Only reads the GPU's clocks.
"""

import json
import sys
import time

import torch
import triton
import triton.language as tl

from tilesim.hwmodels import load_gpu
from tilesim.validate.gpu import metadata, timing

BM, BN, BK = 128, 128, 64
TILES = 64  # distinct streamed tiles: 64 x 2 x 16 KiB = 2 MiB, L2-resident


@triton.jit
def _dot_loop(
    a_ptr,
    b_ptr,
    c_ptr,
    iters,
    fma,
    STREAM: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    TILES: tl.constexpr,
):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    v = tl.zeros((BM,), dtype=tl.float32) + pid.to(tl.float32)
    for i in range(iters):
        if STREAM:
            t = (i + pid) % TILES
            a = tl.load(a_ptr + t * BM * BK + rm[:, None] * BK + rk[None, :])
            b = tl.load(b_ptr + t * BK * BN + rk[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
        for _ in range(fma):
            v = v * 0.999 + 0.001
    tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc + v[:, None])


def variant(data, dtype, fma, sms, per_clk, sampler):
    td = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    if data == "zeros":
        a = torch.zeros(TILES, BM, BK, device="cuda", dtype=td)
        b = torch.zeros(TILES, BK, BN, device="cuda", dtype=td)
    else:
        a = (torch.rand(TILES, BM, BK, device="cuda") - 0.5).to(td)
        b = (torch.rand(TILES, BK, BN, device="cuda") - 0.5).to(td)
    grid = (2 * sms,)
    c = torch.empty(grid[0], BM, BN, device="cuda")
    stream = data != "const"

    def launch(iters):
        _dot_loop[grid](
            a, b, c, iters, fma, STREAM=stream, BM=BM, BN=BN, BK=BK, TILES=TILES, num_warps=4
        )

    launch(3)  # check: 3 steps of program 0 (tiles 0, 1, 2 streamed; tile 0 x3 const)
    torch.cuda.synchronize()
    ts = [0, 1, 2] if stream else [0, 0, 0]
    want = sum(a[t].float() @ b[t].float() for t in ts)
    v = torch.zeros(BM, device="cuda")
    for _ in range(3 * fma):
        v = v * 0.999 + 0.001
    want = want + v[:, None]
    err = ((c[0] - want).norm() / max(want.norm(), 1e-6)).item()
    if not err < 2e-2 and data != "zeros":
        return {"data": data, "dtype": dtype, "fma": fma, "rel_error": err, "status": "wrong"}
    flop = 2 * BM * BN * BK * grid[0]
    est = flop * 1000 / 6e14
    iters = int(max(100, 0.02 / est * 1000)) | 1  # ~20 ms a launch, odd (no specialisation)

    def run():
        launch(iters)

    t0 = time.perf_counter()
    t = timing.bench_graph_s(run, 10, 200)
    smi = timing.clock_during(sampler, t0)
    hz = timing.counter_clock_hz(run, replays=10)
    rate = flop * iters / t
    return {
        "data": data,
        "dtype": dtype,
        "fma": fma,
        "rel_error": err,
        "status": "ok",
        "iters": iters,
        "time_s": t,
        "tflops": rate / 1e12,
        "clock_sm_MHz": smi,
        "clock_counter_MHz": hz / 1e6 if hz else None,
        "tensor_busy": rate / (per_clk * sms * hz) if hz else None,
    }


def main(path):
    gpu = load_gpu("h200-cal")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_clk = gpu.tensor_fp16_wgmma_flop_per_clk_per_sm
    with metadata.ClockSampler(interval_ms=50) as sampler, open(path, "w") as f:
        for dtype in ("fp16", "bf16"):
            for data in ("const", "stream", "zeros"):
                for fma in (0, 16, 64, 256):
                    row = variant(data, dtype, fma, sms, per_clk, sampler)
                    print(json.dumps(row), flush=True)
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
