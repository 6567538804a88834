"""The calibration step ``power``: the SM clock of launches whose work per second is known.

A launch with MMAs ran below the clock nvidia-smi reported, the more so the harder it
worked; launches without MMAs at the full clock (simulator/clock.py). Each variant here
is timed as a validation point is (CUDA graph, 10 ms warm-up, 40 ms of replays, L2
flushed before each; then 20 stamped replays for the counted clock, timing.py), each
launch ~2 ms: tl.dot loops (fp16/bf16/fp8 wgmma, fp16 mma.sync) with their operands in
registers, streamed from an L2-resident buffer or from HBM, diluted by FMAs; FMA-only,
exp2-only, HBM read/copy and L2 read loops. A row's value is the counted clock (Hz);
beside it its rates per second. Every variant's output is checked first.
`clock_fit.derive` turns the rows into the preset's clock model.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ....errors import TilesimError
from ...schema import measurement
from .. import timing
from ..microbench import Bench, _check_rel, _stamps
from .hbm import _stream_copy, _stream_read
from .tensor import _mma_v3_disabled
from .vector import _exp2_loop, _fma_loop

BM, BN, BK = 128, 128, 64
L2_TILES = 32  # streamed tiles in the L2-resident buffer (32 x 2 x 16 KiB = 1 MiB, fp16)
HBM_TILES = 8192  # ... in the HBM-sized one (256 MiB fp16: four L2s)
LAUNCH_S = 2e-3
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


def _dot_loop_src(
    a_ptr,
    b_ptr,
    c_ptr,
    iters,
    fma,
    n_tiles,
    STREAM: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
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
            t = ((i * tl.num_programs(0) + pid) % n_tiles).to(tl.int64)
            a = tl.load(a_ptr + t * BM * BK + rm[:, None] * BK + rk[None, :])
            b = tl.load(b_ptr + t * BK * BN + rk[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
        for _ in range(fma):
            v = v * 0.999 + 0.001
    tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc + v[:, None])


_dot_loop = triton.jit(_dot_loop_src)
_dot_loop_sync = triton.jit(_dot_loop_src)  # compiled with DISABLE_MMA_V3=1


def _rel(got, want) -> float:
    scale = max(want.float().norm().item(), 1e-6)
    return ((got.float() - want.float()).norm() / scale).item()


def _row(bench, name, run, rates: dict, method: str, **extra) -> None:
    """Time ``run`` as a validation point, count its clock, add the row."""
    t = timing.bench_graph_s(run, 10, 40)
    hz = timing.counter_clock_hz(run, replays=timing.COUNTER_REPLAYS)
    if not t or not hz:
        bench.log(f"  {name}: no CUDA-graph time or counted clock")
        return
    per_s = {f"{k}_per_s": v / t for k, v in rates.items()}
    name += getattr(bench, "suffix", "")
    bench.add(measurement(name, hz, "Hz", method, [], time_s=t, **per_s, **extra))


def _dot(bench, dtype: str, where: str, fma: int, path: str = "wgmma", zeros: bool = False):
    td = DTYPES[dtype]
    tiles = {"regs": 1, "l2": L2_TILES, "hbm": HBM_TILES}[where]
    gen = torch.Generator(device="cuda").manual_seed(7)
    if zeros:
        a = torch.zeros(tiles, BM, BK, device="cuda").to(td)
        b = torch.zeros(tiles, BK, BN, device="cuda").to(td)
    else:
        a = (torch.rand(tiles, BM, BK, device="cuda", generator=gen) - 0.5).to(td)
        b = (torch.rand(tiles, BK, BN, device="cuda", generator=gen) - 0.5).to(td)
    grid = (2 * bench.sm_count,)
    c = torch.empty(grid[0], BM, BN, device="cuda")
    stream = where != "regs"
    kern = _dot_loop_sync if path == "mma_sync" else _dot_loop

    def launch(iters):
        with _mma_v3_disabled(path == "mma_sync"):
            kern[grid](a, b, c, iters, fma, tiles, STREAM=stream, BM=BM, BN=BN, BK=BK, num_warps=4)

    launch(3)  # program 0 after 3 steps
    torch.cuda.synchronize()
    ts = [(i * grid[0]) % tiles for i in range(3)] if stream else [0, 0, 0]
    want = sum(a[t].float() @ b[t].float() for t in ts)
    v = torch.zeros(BM, device="cuda")
    for _ in range(3 * fma):
        v = v * 0.999 + 0.001
    if zeros:  # all-zero operands and no FMAs: the accumulator stays zero
        if c[0].abs().max().item() != 0:
            raise TilesimError(f"micro-benchmark power dot loop {dtype} {where}: not zero")
    else:
        _check_rel(c[0], want + v[:, None], f"power dot loop {dtype} {where}", tol=2e-2)
    t = timing.bench_graph_s(lambda: launch(64), 2, 10) or 1e-3
    iters = max(65, int(64 * LAUNCH_S / t)) | 1  # ~LAUNCH_S a launch
    tile_bytes = (BM * BK + BK * BN) * a.element_size()
    moved = tile_bytes * grid[0] * iters if stream else 0
    rates = {
        "tensor_flop": 2 * BM * BN * BK * grid[0] * iters,
        "fp32_ops": fma * iters * BM * grid[0],  # FMA lane-ops
        "l2_hit_bytes": moved if where == "l2" else 0,
        "hbm_bytes": moved if where == "hbm" else 0,
    }
    data = "zeros" if zeros else "random"
    _row(
        bench,
        f"clock_dot_{dtype}_{path}_{where}_fma{fma}" + ("_zeros" if zeros else ""),
        lambda: launch(iters),
        rates,
        f"counted SM clock of a tl.dot {BM}x{BN}x{BK} loop ({path}, {dtype}, {data} operands "
        f"{'in registers' if where == 'regs' else 'streamed from ' + where.upper()}, "
        f"{fma} FMAs a step), {grid[0]} CTAs of 4 warps, {iters} steps",
        mma=True,
        dtype=dtype,
        data=data,
    )


def _fma(bench, ctas_per_sm: int) -> None:
    block, grid = 8192, (bench.sm_count * ctas_per_sm,)
    x = torch.rand(block, device="cuda")
    out = torch.empty(grid[0] * block, device="cuda")
    stamps = _stamps(grid)
    _fma_loop[grid](x, out, stamps, 2, 0.999, 0.001, BLOCK=block)
    want = x.double()
    for _ in range(8):
        want = want * 0.999 + 0.001
    _check_rel(out[:block].double(), want, "power fma loop", tol=1e-5)
    iters = 1500
    _row(
        bench,
        f"clock_fma_{ctas_per_sm}cta",
        lambda: _fma_loop[grid](x, out, stamps, iters, 0.999, 0.001, BLOCK=block),
        {"fp32_ops": 4 * iters * block * grid[0]},
        f"counted SM clock of FMA chains, {grid[0]} CTAs x {block} lanes x {4 * iters}",
        mma=False,
    )


def _exp2(bench) -> None:
    block, grid = 4096, (bench.sm_count * 4,)
    x = torch.rand(block, device="cuda")
    out = torch.empty(grid[0] * block, device="cuda")
    stamps = _stamps(grid)
    _exp2_loop[grid](x, out, stamps, 3, BLOCK=block)
    want = x.double()
    for _ in range(3):
        want = torch.exp2(-want)
    _check_rel(out[:block].double(), want, "power exp2 loop", tol=1e-4)
    iters = 3000
    _row(
        bench,
        "clock_exp2",
        lambda: _exp2_loop[grid](x, out, stamps, iters, BLOCK=block),
        {"sfu_ops": iters * block * grid[0]},
        f"counted SM clock of exp2 chains, {grid[0]} CTAs x {block} lanes x {iters}",
        mma=False,
    )


def _stream(bench, kind: str, nbytes: int) -> None:
    block = 4096
    n_blocks = nbytes // (4 * block)
    x = torch.rand(n_blocks * block, device="cuda")
    grid = (bench.sm_count * 8,)
    in_hbm = nbytes > bench.l2_bytes
    if kind == "copy":
        y = torch.empty_like(x)
        _stream_copy[grid](x, y, n_blocks, BLOCK=block)
        _check_rel(y, x, "power copy", tol=1e-6)

        def run():
            _stream_copy[grid](x, y, n_blocks, BLOCK=block)

        moved = 2 * nbytes
    else:
        out = torch.empty(grid[0] * block, device="cuda")
        passes = 1 if in_hbm else max(1, 2**34 // nbytes)
        _stream_read[grid](x, out, n_blocks, 1, BLOCK=block)
        got = out.double().sum().reshape(1)
        _check_rel(got, x.double().sum().reshape(1), "power stream read", tol=1e-4)

        def run():
            _stream_read[grid](x, out, n_blocks, passes, BLOCK=block)

        moved = nbytes * passes
    where = "hbm" if in_hbm else "l2"
    rates = {"hbm_bytes": moved} if in_hbm else {"l2_hit_bytes": moved}
    _row(
        bench,
        f"clock_{kind}_{where}",
        run,
        rates,
        f"counted SM clock of a stream {kind} of {nbytes >> 20} MiB ({where.upper()}), "
        f"{grid[0]} CTAs",
        mma=False,
    )


def power(bench: Bench) -> None:
    """The step: every variant, then the same again in reverse order (two samples each)."""
    variants = [
        *(lambda d=d, f=f: _dot(bench, d, "regs", f) for d in DTYPES for f in (0, 32, 96, 256)),
        *(lambda d=d, f=f: _dot(bench, d, "l2", f) for d in ("fp16", "bf16") for f in (0, 96)),
        *(lambda f=f: _dot(bench, "fp16", "hbm", f) for f in (0, 96)),
        lambda: _dot(bench, "fp16", "regs", 0, path="mma_sync"),
        lambda: _dot(bench, "fp16", "l2", 0, path="mma_sync"),
        lambda: _dot(bench, "fp16", "regs", 0, zeros=True),
        lambda: _dot(bench, "fp16", "l2", 0, zeros=True),
        lambda: _fma(bench, 4),
        lambda: _fma(bench, 1),
        lambda: _exp2(bench),
        lambda: _stream(bench, "read", 2 << 30),
        lambda: _stream(bench, "copy", 1 << 30),
        lambda: _stream(bench, "read", 16 << 20),
    ]
    if bench.quick:
        variants = variants[::3]
    for i, run in enumerate(variants + variants[::-1]):
        bench.suffix = "_rev" if i >= len(variants) else ""  # rows merge by name
        try:
            run()
        except Exception as exc:  # one variant that cannot compile or run: the rest go on
            bench.log(f"  failed: {' '.join(str(exc).split())[:200]}")
