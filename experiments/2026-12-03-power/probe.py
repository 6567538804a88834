"""The SM clock a launch runs at against what it does per second, on the GPU.

    python3 experiments/2026-12-03-power/probe.py OUT.jsonl [--reverse]

The counted clock (`timing.counter_clock_hz`) of a validation point falls with how hard
its launches work: 1,484 MHz for v3 fp16 d128, ~1,800 for a dependent tl.dot chain,
1,980 for nothing heavy. This probe measures that against micro-benchmarks whose rates
are known, timed as a validation point is (CUDA graph, 10 ms warm-up, 40 ms of replays,
L2 flushed before each; then 20 stamped replays for the counted clock), each launch
~2 ms: tl.dot loops (fp16/bf16/fp8 wgmma, fp16 mma.sync) with operands in registers,
streamed from an L2-resident buffer or from HBM, diluted by 0-256 dependent FMAs a step,
random or zero data; FMA-only, exp2-only, HBM read/copy and L2 read kernels. Each row:
its rates per second (tensor FLOP, FP32 lane ops, MUFU ops, bytes from L2, bytes to and
from HBM), graph time, counted clock. Every variant's output is checked first. Only reads
the GPU's clocks.
"""

import json
import sys
import time

import torch
import triton

from tilesim.validate.gpu import metadata, microbench, timing
from tilesim.validate.gpu.steps import hbm, power, tensor, vector

BM, BN, BK = 128, 128, 64
L2_TILES = 32  # streamed tiles in the L2-resident buffer (32 x 2 x 16 KiB = 1 MiB, fp16)
HBM_TILES = 8192  # ... in the HBM-sized one (256 MiB fp16: four L2s)
LAUNCH_S = 2e-3


# the tl.dot loop this probe ran is calibrate's power step's (same source)
_dot_loop_src = power._dot_loop_src
_dot_loop = triton.jit(_dot_loop_src)
_dot_loop_sync = triton.jit(_dot_loop_src)  # compiled with DISABLE_MMA_V3=1


def _rel(got, want) -> float:
    return ((got.float() - want.float()).norm() / max(want.float().norm().item(), 1e-6)).item()


def _measure(run, row: dict, sampler) -> dict:
    t0 = time.perf_counter()
    t = timing.bench_graph_s(run, 10, 40)
    row["clock_sm_MHz"] = timing.clock_during(sampler, t0)
    hz = timing.counter_clock_hz(run, replays=timing.COUNTER_REPLAYS)
    row["time_s"] = t
    row["clock_counter_MHz"] = hz / 1e6 if hz else None
    for k in [k for k in row if k.startswith("per_launch_")]:
        row[k.replace("per_launch_", "") + "_per_s"] = row[k] / t
    return row


def dot_variant(dtype, data, where, fma, path, sms, sampler) -> dict:
    td = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dtype]
    tiles = {"regs": 1, "l2": L2_TILES, "hbm": HBM_TILES}[where]
    gen = torch.Generator(device="cuda").manual_seed(7)
    if data == "zeros":
        a = torch.zeros(tiles, BM, BK, device="cuda").to(td)
        b = torch.zeros(tiles, BK, BN, device="cuda").to(td)
    else:
        a = (torch.rand(tiles, BM, BK, device="cuda", generator=gen) - 0.5).to(td)
        b = (torch.rand(tiles, BK, BN, device="cuda", generator=gen) - 0.5).to(td)
    grid = (2 * sms,)
    c = torch.empty(grid[0], BM, BN, device="cuda")
    stream = where != "regs"
    kern = _dot_loop_sync if path == "mma_sync" else _dot_loop
    row = {"kernel": "dot", "dtype": dtype, "data": data, "where": where, "fma": fma, "path": path}

    def launch(iters):
        with tensor._mma_v3_disabled(path == "mma_sync"):
            kern[grid](a, b, c, iters, fma, tiles, STREAM=stream, BM=BM, BN=BN, BK=BK, num_warps=4)

    launch(3)  # check program 0 after 3 steps
    torch.cuda.synchronize()
    ts = [(i * grid[0]) % tiles for i in range(3)] if stream else [0, 0, 0]
    want = sum(a[t].float() @ b[t].float() for t in ts)
    v = torch.zeros(BM, device="cuda")
    for _ in range(3 * fma):
        v = v * 0.999 + 0.001
    want = want + v[:, None]
    row["rel_error"] = _rel(c[0], want)
    if not row["rel_error"] < 2e-2:
        return {**row, "status": "wrong"}
    # one launch of a few steps timed to size the real one at ~LAUNCH_S
    t = timing.bench_graph_s(lambda: launch(64), 2, 10) or 1e-3
    iters = max(65, int(64 * LAUNCH_S / t)) | 1
    flop = 2 * BM * BN * BK * grid[0] * iters
    tile_bytes = (BM * BK + BK * BN) * a.element_size()
    row.update(
        iters=iters,
        per_launch_tensor_flop=flop,
        per_launch_fp32_ops=fma * iters * BM * grid[0],  # FMA lane-ops
        per_launch_l2_bytes=(tile_bytes * grid[0] * iters if stream else 0),
        per_launch_hbm_bytes=(tile_bytes * grid[0] * iters if where == "hbm" else 0),
        status="ok",
    )
    return _measure(lambda: launch(iters), row, sampler)


def fma_variant(ctas_per_sm, sms, sampler) -> dict:
    block, grid = 8192, (sms * ctas_per_sm,)
    x = torch.rand(block, device="cuda")
    out = torch.empty(grid[0] * block, device="cuda")
    stamps = microbench._stamps(grid)
    a, b = 0.999, 0.001
    vector._fma_loop[grid](x, out, stamps, 2, a, b, BLOCK=block)
    want = x.double()
    for _ in range(8):
        want = want * a + b
    row = {"kernel": "fma", "ctas_per_sm": ctas_per_sm}
    row["rel_error"] = _rel(out[:block], want)
    if not row["rel_error"] < 1e-5:
        return {**row, "status": "wrong"}
    iters = 1500
    row.update(iters=iters, per_launch_fp32_ops=4 * iters * block * grid[0], status="ok")
    run = lambda: vector._fma_loop[grid](x, out, stamps, iters, a, b, BLOCK=block)  # noqa: E731
    return _measure(run, row, sampler)


def exp2_variant(sms, sampler) -> dict:
    block, grid = 4096, (sms * 4,)
    x = torch.rand(block, device="cuda")
    out = torch.empty(grid[0] * block, device="cuda")
    stamps = microbench._stamps(grid)
    vector._exp2_loop[grid](x, out, stamps, 3, BLOCK=block)
    want = x.double()
    for _ in range(3):
        want = torch.exp2(-want)
    row = {"kernel": "exp2"}
    row["rel_error"] = _rel(out[:block], want)
    if not row["rel_error"] < 1e-4:
        return {**row, "status": "wrong"}
    iters = 3000
    row.update(iters=iters, per_launch_sfu_ops=iters * block * grid[0], status="ok")
    run = lambda: vector._exp2_loop[grid](x, out, stamps, iters, BLOCK=block)  # noqa: E731
    return _measure(run, row, sampler)


def stream_variant(kind, nbytes, sms, sampler) -> dict:
    block = 4096
    n_blocks = nbytes // (4 * block)
    x = torch.rand(n_blocks * block, device="cuda")
    grid = (sms * 8,)
    row = {"kernel": kind, "bytes": nbytes}
    if kind == "copy":
        y = torch.empty_like(x)
        hbm._stream_copy[grid](x, y, n_blocks, BLOCK=block)
        row["rel_error"] = _rel(y, x)
        run = lambda: hbm._stream_copy[grid](x, y, n_blocks, BLOCK=block)  # noqa: E731
        passes = 1
        moved = 2 * nbytes
    else:
        out = torch.empty(grid[0] * block, device="cuda")
        passes = 1 if nbytes > 2**28 else max(1, int(2**34 // nbytes))
        hbm._stream_read[grid](x, out, n_blocks, 1, BLOCK=block)
        row["rel_error"] = abs(out.double().sum().item() / x.double().sum().item() - 1)
        run = lambda: hbm._stream_read[grid](x, out, n_blocks, passes, BLOCK=block)  # noqa: E731
        moved = nbytes * passes
    if not row["rel_error"] < 1e-4:
        return {**row, "status": "wrong"}
    in_hbm = nbytes > 2**28
    row.update(
        passes=passes,
        per_launch_l2_bytes=moved,
        per_launch_hbm_bytes=moved if in_hbm else 0,
        status="ok",
    )
    return _measure(run, row, sampler)


def variants(sms, sampler):
    for dtype in ("fp16", "bf16", "fp8"):
        for fma in (0, 32, 96, 256):
            yield lambda d=dtype, f=fma: dot_variant(d, "random", "regs", f, "wgmma", sms, sampler)
    for dtype in ("fp16", "bf16"):
        for fma in (0, 96):
            yield lambda d=dtype, f=fma: dot_variant(d, "random", "l2", f, "wgmma", sms, sampler)
    for fma in (0, 96):
        yield lambda f=fma: dot_variant("fp16", "random", "hbm", f, "wgmma", sms, sampler)
    yield lambda: dot_variant("fp16", "random", "regs", 0, "mma_sync", sms, sampler)
    yield lambda: dot_variant("fp16", "random", "l2", 0, "mma_sync", sms, sampler)
    yield lambda: dot_variant("fp16", "zeros", "regs", 0, "wgmma", sms, sampler)
    yield lambda: dot_variant("fp16", "zeros", "l2", 0, "wgmma", sms, sampler)
    yield lambda: fma_variant(4, sms, sampler)
    yield lambda: fma_variant(1, sms, sampler)
    yield lambda: exp2_variant(sms, sampler)
    yield lambda: stream_variant("read", 2**31, sms, sampler)
    yield lambda: stream_variant("copy", 2**30, sms, sampler)
    yield lambda: stream_variant("read", 2**24, sms, sampler)


def main(path, reverse=False):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    with metadata.ClockSampler(interval_ms=50) as sampler, open(path, "w") as f:
        todo = list(variants(sms, sampler))
        for i, make in enumerate(reversed(todo) if reverse else todo):
            t0 = time.time()
            try:
                row = make()
            except Exception as exc:  # one variant that cannot compile or run: say so, go on
                row = {"status": "error", "error": str(exc).splitlines()[0][:200], "index": i}
            row.update(order=i, wall_start=t0, wall_end=time.time())
            print(json.dumps(row), flush=True)
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], "--reverse" in sys.argv[2:])
