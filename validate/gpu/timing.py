"""What `tilesim bench` and `tilesim validate` share on the GPU: inputs, checks, timing.

Every kernel's output is checked against the float32 reference *before* it is
timed (a fast wrong kernel is worth nothing), on fresh random inputs, with the
output memory poisoned first so an unwritten element shows up as NaN (a
backward's dq, dk, dv against float32 autograd, `check_grads`). Times are
``triton.testing.do_bench`` medians: it flushes L2 before every call (the model
starts each kernel with a cold L2 too) and times each call with CUDA events.

torch and triton are imported inside the functions: this module loads on a
machine without them, where :func:`require_cuda` explains what is missing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from ...errors import TilesimError
from ...traces.workload import Workload

# ‖out − ref‖/‖ref‖ an output may have (the kernels' own tests use the same):
# fp16 kernels land near 3e-4, bf16 near 3e-3; fp8 rounds P to e4m3 (2^-4).
TOLERANCE = {"fp16": 5e-3, "bf16": 3e-2, "fp8": 1e-1}


def require_cuda(command: str) -> None:
    """Raise one line unless torch, triton and a CUDA GPU are all here."""
    hint = "pip install 'tilesim[kernels]' on a machine with an NVIDIA GPU"
    try:
        import torch
    except ImportError:
        raise TilesimError(f"tilesim {command} needs torch and triton ({hint})") from None
    if not torch.cuda.is_available():
        raise TilesimError(
            f"tilesim {command} needs a CUDA GPU, and torch sees none "
            "(torch.cuda.is_available() is False); predictions need no GPU: try `tilesim predict`"
        )
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise TilesimError(
            f"tilesim {command} times real GPU kernels: unset TRITON_INTERPRET (it is set to "
            f"{os.environ['TRITON_INTERPRET']!r})"
        )
    try:
        import triton  # noqa: F401
    except ImportError:
        raise TilesimError(f"tilesim {command} needs triton ({hint})") from None


def torch_dtype(dtype: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dtype]


FP8_MAX = 448.0  # largest finite e4m3 value


def make_inputs(w: Workload, seed: int):
    """Fresh random q [B, H, N_q, d], k, v [B, H_kv, N_kv, d] on the GPU, and the fp8
    descale factors.

    Standard-normal entries (never zeros: they hide unwritten outputs and run
    faster than real data). FP8 inputs are scaled per tensor so the largest
    magnitude maps to e4m3's 448; ``scales`` holds ``q_scale``, ``k_scale``,
    ``v_scale`` (real value = stored x scale), empty for fp16/bf16.
    """
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    shapes = {
        "q": (w.batch, w.heads, w.seqlen_q, w.head_dim),
        "k": (w.batch, w.num_kv_heads, w.seqlen_kv, w.head_dim),
        "v": (w.batch, w.num_kv_heads, w.seqlen_kv, w.head_dim),
    }
    tensors, scales = {}, {}
    for name, shape in shapes.items():
        x = torch.randn(shape, device="cuda", generator=gen, dtype=torch.float32)
        if w.dtype == "fp8":
            scale = float(x.abs().amax()) / FP8_MAX
            tensors[name] = (x / scale).to(torch.float8_e4m3fn)
            scales[f"{name}_scale"] = scale
        else:
            tensors[name] = x.to(torch_dtype(w.dtype))
    return tensors["q"], tensors["k"], tensors["v"], scales


def poison_allocator(nbytes: int) -> None:
    """Fill a just-freed block of ``nbytes`` with NaN so the next allocation of that
    size (the kernel's output) starts as NaN rather than as an earlier run's result."""
    import torch

    junk = torch.full((max(1, nbytes // 2),), float("nan"), dtype=torch.float16, device="cuda")
    del junk


def check_output(
    run: Callable[[], object], q, k, v, causal: bool, scales: dict, dtype: str, out=None
) -> float:
    """Run once and return the worst relative error over the checked (batch, head) slices.

    ``out``: the buffer ``run`` writes into, filled with NaN first (else the
    allocator's next block of that size is). Non-finite output gives ``inf``;
    the caller compares with :data:`TOLERANCE`.
    """
    from ...kernels.reference import reference

    if out is not None:
        out.fill_(float("nan"))
    else:
        poison_allocator(q.shape[0] * q.shape[1] * q.shape[2] * v.shape[3] * 2)
    result = run()
    if isinstance(result, tuple):
        result = result[0]
    b_last, h_last = q.shape[0] - 1, q.shape[1] - 1
    worst = 0.0
    # the first and the last (batch, head): a wrong batch/head stride shows up there,
    # without a float32 n x n reference for every head
    group = q.shape[1] // k.shape[1]  # query heads per K/V head
    for b, h in dict.fromkeys([(0, 0), (b_last, h_last)]):
        sl = (slice(b, b + 1), slice(h, h + 1))
        kv = (slice(b, b + 1), slice(h // group, h // group + 1))
        ref = reference(q[sl], k[kv], v[kv], causal, **scales)
        worst = max(worst, rel_error(result[sl].float(), ref))
    return worst


def kernel_run(algo: str, q, k, v, causal: bool, config, scales: dict, out=None):
    """(out, run): ``run()`` launches a tilesim kernel into ``out`` and returns it.

    Inputs are checked, the config resolved and TMA descriptors built once, here:
    ``run`` is only the kernel launches, the bare figure that ``attention(...)``
    (timed beside it by the bench) adds its per-call host work to.
    """
    from ...kernels import launches

    out, runs = launches(q, k, v, causal=causal, algo=algo, config=config, out=out, **scales)
    calls = tuple(call for _, call in runs)

    def run():
        for call in calls:
            call()
        return out

    return out, run


# ‖grad − ref‖/‖ref‖ a backward's dq, dk, dv may have. Looser than the forward's:
# dS sums N terms per element of dQ and dK, so the error grows with N (the kernel
# tests see 3e-4 to 6e-4 at N <= 1k in fp16; 16k rows accumulate more rounding).
GRAD_TOLERANCE = {"fp16": 1e-2, "bf16": 5e-2}


def make_grad_output(w: Workload, seed: int):
    """dO, the incoming gradient: standard-normal, shaped and typed as q, on the GPU."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed + 7919)
    shape = (w.batch, w.heads, w.seqlen_q, w.head_dim)
    return torch.randn(shape, device="cuda", generator=gen).to(torch_dtype(w.dtype))


def backward_run(algo: str, q, k, v, do, causal: bool, config):
    """(grads, run, launches): ``run()`` runs tilesim's backward launches into grads.

    ``backward_launches`` checks the inputs and runs the forward once (untimed);
    ``run`` is only the backward's launches, in order; ``launches`` names them
    for timing each on its own.
    """
    from ...kernels import backward_launches

    grads, runs = backward_launches(q, k, v, do, causal=causal, algo=algo, config=config)
    calls = tuple(call for _, call in runs)

    def run():
        for call in calls:
            call()
        return grads

    return grads, run, runs


def check_grads(run: Callable[[], object], q, k, v, do, causal: bool, grads=None) -> float:
    """Run once; the worst relative error of dq, dk, dv on the first and last (batch, head).

    ``grads``: the buffers ``run`` writes (filled with NaN first, so an element the
    launches leave unwritten shows up); else ``run()`` returns the three gradients.
    """
    from ...kernels import reference_grads

    if grads is not None:
        for g in grads:
            g.fill_(float("nan"))
    result = run()
    if grads is None:
        grads = result
    b_last, h_last = q.shape[0] - 1, q.shape[1] - 1
    worst = 0.0
    for b, h in dict.fromkeys([(0, 0), (b_last, h_last)]):
        sl = (slice(b, b + 1), slice(h, h + 1))
        ref = reference_grads(q[sl], k[sl], v[sl], do[sl], causal)
        for g, r in zip(grads, ref, strict=True):
            worst = max(worst, rel_error(g[sl].float(), r))
    return worst


def bench_parts(runs, warmup_ms: float, rep_ms: float) -> dict[str, float]:
    """Median seconds of each named launch, each by do_bench on its own (run in order
    once first, so that each launch reads what the ones before it wrote)."""
    parts = {}
    for name, run in runs:
        run()
        parts[name] = bench_s(run, warmup_ms, rep_ms)
    return parts


def output_buffer(w: Workload):
    """The output tensor of a tilesim kernel for ``w`` (fp16 for fp8 inputs)."""
    import torch

    dtype = torch.float16 if w.dtype == "fp8" else torch_dtype(w.dtype)
    return torch.empty(w.batch, w.heads, w.seqlen_q, w.head_dim, dtype=dtype, device="cuda")


def rel_error(out, ref) -> float:
    """‖out − ref‖/‖ref‖ in float64; inf when ``out`` has NaN or inf."""
    diff = out.double() - ref.double()
    if not bool(diff.isfinite().all()):
        return math.inf
    return float(diff.norm() / ref.double().norm())


def bench_s(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> float:
    """Median seconds of ``fn`` by ``triton.testing.do_bench`` (L2 flushed before each call)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median") * 1e-3


GRAPH_FLUSH_BYTES = 256 * 2**20  # the L2 flush between replays: do_bench's buffer size


def bench_graph_s(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> float | None:
    """Median seconds of ``fn``'s launches replayed as one CUDA graph, L2 flushed before
    each replay; None if they cannot be captured.

    do_bench times ``fn`` as Python runs it: each Triton launch costs the host tens of
    µs, and a point whose kernels are shorter than that measures the host, not the GPU.
    A graph replay issues every launch at once, so the GPU runs them back to back: the
    time the model predicts (kernels and their launch gaps on the GPU).
    """
    import statistics

    import torch

    if not torch.cuda.is_available():
        return None
    try:
        fn()  # compiled and warm before the capture
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        torch.cuda.synchronize()
    except Exception:  # a launch that cannot be captured: no graph time for this point
        torch.cuda.synchronize()
        return None
    flush = torch.empty(GRAPH_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def replays(n: int) -> list[float]:
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(n)
        ]
        for start, end in events:
            flush.zero_()
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in events]

    estimate = statistics.median(replays(5))
    replays(max(1, int(warmup_ms * 1e-3 / max(estimate, 1e-6))))
    times = replays(max(5, min(10_000, int(rep_ms * 1e-3 / max(estimate, 1e-6)))))
    return statistics.median(times)


COUNTER_CLOCK = (
    "median over SMs and 20 replays of each SM's %clock64 over %globaltimer between stamp "
    "launches around a CUDA-graph replay of the point's launches (L2 flushed before each): "
    "the SM clock they really ran at"
)
COUNTER_REPLAYS = 20  # replays of the stamped graph (COUNTER_CLOCK)


def counter_clock_hz(fn: Callable[[], object], replays: int = COUNTER_REPLAYS) -> float | None:
    """The SM clock ``fn``'s launches really ran at, in Hz; None if they cannot be captured.

    nvidia-smi's ``clocks.sm`` reads what the driver asked for: under tensor-core load
    the SMs' own cycle counters ran 6-25% slower than it said on the H200, the heaviest
    tensor loads slowest (docs/model.md). So ``fn`` is captured
    as a CUDA graph between two launches of a stamp kernel (two CTAs per SM, each
    writing its SM id, ``%clock64`` and ``%globaltimer``), replayed as the timing
    replays it (L2 flushed before each); each SM's cycles over the ns between its two
    stamps is the clock over ``fn``'s launches. The median over SMs and replays.
    """
    import statistics

    import torch

    from .microbench import sm_clock_stamp

    if not torch.cuda.is_available():
        return None
    rows = 2 * torch.cuda.get_device_properties(0).multi_processor_count
    before = torch.zeros((rows, 3), dtype=torch.int64, device="cuda")
    after = torch.zeros_like(before)
    try:
        sm_clock_stamp(before)  # compiled before the capture
        fn()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            sm_clock_stamp(before)
            fn()
            sm_clock_stamp(after)
        torch.cuda.synchronize()
    except Exception:  # a launch that cannot be captured: no counter clock
        torch.cuda.synchronize()
        return None
    flush = torch.empty(GRAPH_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    stamps = []
    for _ in range(replays):
        flush.zero_()
        graph.replay()
        stamps.append((before.clone(), after.clone()))
    torch.cuda.synchronize()
    clocks = []
    for b, a in stamps:
        first = {}  # SM -> (cycles, ns) of its first stamp before fn
        for sm, cyc, ns in b.tolist():
            first.setdefault(sm, (cyc, ns))
        for sm, cyc, ns in a.tolist():
            if sm in first and ns > first[sm][1]:
                clocks.append((cyc - first[sm][0]) / (ns - first[sm][1]) * 1e9)
                first.pop(sm)  # one pair per SM
    return statistics.median(clocks) if clocks else None


HOST_CALLS = 50  # calls per round of host_s: too few to fill the GPU's launch queue
HOST_ROUNDS = 5


def host_s(fn: Callable[[], object], calls: int = HOST_CALLS, rounds: int = HOST_ROUNDS) -> float:
    """Host seconds per call of ``fn``: ``calls`` calls back to back on the host clock,
    stopped before the GPU catches up (the launches queue), median of ``rounds``.

    What a caller's thread spends per call; the GPU's time is do_bench's figure.
    """
    import statistics
    import time

    import torch

    fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls)
        torch.cuda.synchronize()
    return statistics.median(per_call)


REPEATS = 2  # do_bench runs per point
# A kernel this long is timed once: its median already spans seconds of running.
LONG_KERNEL_S = 0.02


def bench_repeat(
    fn: Callable[[], object], warmup_ms: float, rep_ms: float, repeats: int = REPEATS
) -> tuple[float, list[float]]:
    """(time, medians): ``repeats`` do_bench medians and the smallest of them.

    A transient slowdown (a clock dip, another process) only ever adds time, so
    the smallest median is the kernel's own speed; the spread of the medians,
    kept beside it, says how far to trust the difference between two kernels.
    """
    medians = [bench_s(fn, warmup_ms, rep_ms)]
    while len(medians) < repeats and medians[0] < LONG_KERNEL_S:
        medians.append(bench_s(fn, warmup_ms, rep_ms))
    return min(medians), medians


def clock_during(sampler, t0: float) -> float | None:
    """Median SM clock (MHz) that ``sampler`` read since ``t0``; None without samples."""
    import statistics
    import time

    clocks = sampler.between(t0, time.perf_counter())
    return float(statistics.median(clocks)) if clocks else None


class Watchdog:
    """Ends the process cleanly when one point runs far too long (a hung kernel).

    A hung GPU kernel blocks the main thread inside CUDA for good; a timer thread
    still runs, so it calls ``on_hang`` (which records what happened and saves the
    results file) and exits with status 3. The GPU is freed when the process ends.
    """

    EXIT_CODE = 3

    def __init__(self, limit_s: float, on_hang: Callable[[object], None]):
        self.limit_s = limit_s
        self.on_hang = on_hang
        self._timer = None

    def arm(self, what: object, limit_s: float | None = None) -> None:
        import threading

        self.disarm()
        limit = self.limit_s if limit_s is None else limit_s
        self._timer = threading.Timer(limit, self._fire, args=(what,))
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self, what: object) -> None:
        try:
            self.on_hang(what)
        finally:
            os._exit(self.EXIT_CODE)


def free_bytes() -> int:
    import torch

    free, _ = torch.cuda.mem_get_info()
    return int(free)


def release() -> None:
    """Give cached blocks back between shapes (the standard algorithm's S and P are large)."""
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()


def first_line(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return (text or type(exc).__name__)[:limit]


def standard_scratch_bytes(w: Workload) -> int:
    """S and P of standard attention: two B x H x N_q x N_kv matrices in the input type."""
    n_pad = -(-w.seqlen_kv // 8) * 8
    return 2 * w.batch * w.heads * w.seqlen_q * n_pad * w.elem_bytes


def standard_backward_scratch_bytes(w: Workload) -> int:
    """Standard attention's backward: the forward's S and P, then dP and dS, four n x n."""
    return 2 * standard_scratch_bytes(w)


def math_scratch_bytes(w: Workload) -> int:
    """PyTorch's math backend at its peak: the float32 scores and their softmax, the
    -inf mask and more (9.5-12.5 bytes per score in the torch profiler's memory
    statistics on the H200, experiments/2026-12-01-sdpa-kernels), and float32 copies
    of Q, K, V and O."""
    bh = w.batch * w.heads
    return bh * w.seqlen_q * (10 * w.seqlen_kv + 16 * w.head_dim)
