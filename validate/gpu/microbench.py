"""The shared harness of the `tilesim calibrate` steps (needs torch, triton and a CUDA GPU).

:class:`Bench` holds what every step of :mod:`tilesim.validate.gpu.steps` needs: the
GPU's SM count and L2 size, the nvidia-smi clock sampler, the quick flag, the log, the
rows collected (`Bench.add`) and `Bench.timed` (back-to-back CUDA-event timing, with
the SM clock sampled meanwhile). Beside it the pieces several steps share: the
``%clock64`` / ``%globaltimer`` / ``%smid`` reads and the clock stamps kernels write
with them (`effective_clock_MHz`, `sm_clock_stamp`), and the checks every kernel's
output passes before it is timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from ...errors import TilesimError
from ...units import MiB
from ..schema import summary_lines
from ..stats import median
from .metadata import ClockSampler

# -- clock stamps ------------------------------------------------------------------


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _clock64():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _smid():
    return tl.inline_asm_elementwise(
        "mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _stamp(stamps_ptr, pid, slot: tl.constexpr):
    # the SM's cycle counter and the GPU's ns timer, side by side: their ratio over a
    # run is the SM clock the kernel really ran at (nvidia-smi's clocks.sm is a sample
    # of what the driver asked for, and read 1980 MHz where these counters gave ~1.75
    # GHz for tensor-core kernels under Nsight Compute)
    base = stamps_ptr + pid.to(tl.int64) * 4 + slot
    tl.store(base, _clock64())
    tl.store(base + 1, _globaltimer())


@triton.jit
def _sm_clock_stamp(out_ptr):
    # one row per CTA: its SM, that SM's cycle counter and the GPU's ns timer; two
    # launches of it around a kernel give each SM's cycles over the ns between them
    pid = tl.program_id(0)
    base = out_ptr + pid.to(tl.int64) * 3
    tl.store(base, _smid().to(tl.int64))
    tl.store(base + 1, _clock64())
    tl.store(base + 2, _globaltimer())


def sm_clock_stamp(out) -> None:
    """Launch `_sm_clock_stamp` with one CTA per row of ``out`` (int64 [rows, 3])."""
    _sm_clock_stamp[(out.shape[0],)](out, num_warps=1)


# -- timing --------------------------------------------------------------------------


def _stamps(grid) -> torch.Tensor:
    """A zeroed [grid, 4] int64 buffer for the kernels' `_stamp`s."""
    return torch.zeros(grid[0], 4, dtype=torch.int64, device="cuda")


def effective_clock_MHz(stamps: torch.Tensor) -> float | None:
    """The SM clock the last launch ran at: its CTAs' %clock64 cycles over their
    %globaltimer ns (None if the timer did not move)."""
    st = stamps.cpu().double()
    ns = float((st[:, 3] - st[:, 1]).sum())
    cycles = float((st[:, 2] - st[:, 0]).sum())
    return round(cycles / ns * 1e3, 1) if ns > 0 and cycles > 0 else None


def time_calls(fn: Callable[[], object], min_time_s: float = 0.3, max_calls: int = 2000):
    """Median seconds of back-to-back calls of ``fn`` (no L2 flush), with the samples.

    Two warm-up calls; then calls timed one by one with CUDA events until
    ``min_time_s`` of wall time has passed.
    """
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    events = []
    t0 = time.perf_counter()
    while len(events) < max_calls:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
        if len(events) % 8 == 0:
            torch.cuda.synchronize()
            if time.perf_counter() - t0 >= min_time_s:
                break
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1e-3 for s, e in events]
    return median(samples), samples


class Bench:
    """Runs the micro-benchmarks on GPU 0 and collects calibration rows."""

    def __init__(self, sampler: ClockSampler, quick: bool = False, log=print):
        props = torch.cuda.get_device_properties(0)
        self.sm_count = props.multi_processor_count
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0)) or 50 * MiB
        self.sampler = sampler
        self.quick = quick
        self.log = log
        self.rows: list[dict] = []
        self.min_time_s = 0.15 if quick else 0.4

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        self.log("  " + summary_lines([row])[0])
        return row

    def timed(
        self, fn, min_time_s: float | None = None, max_calls: int = 2000
    ) -> tuple[float, list[float], float | None]:
        """(median s, samples, median SM clock MHz during the run or None)."""
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        t, samples = time_calls(fn, min_time_s or self.min_time_s, max_calls)
        clocks = self.sampler.between(t0, time.perf_counter())
        return t, samples, (median(clocks) if clocks else None)


def _check_close(got, want, what: str, tol: float = 1e-5) -> None:
    got, want = float(got), float(want)
    if not abs(got - want) <= tol * max(abs(want), 1e-30):
        raise TilesimError(f"micro-benchmark {what} computed {got:.6g}, expected {want:.6g}")


def _check_rel(got: torch.Tensor, want: torch.Tensor, what: str, tol: float = 1e-3) -> None:
    err = float((got.double() - want.double()).norm() / want.double().norm())
    if not err <= tol:
        raise TilesimError(f"micro-benchmark {what}: relative error {err:.3g} (over {tol:g})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__
