"""The `tilesim calibrate` step ``launch``: the overhead of a kernel launch.

An empty Triton kernel timed by ``do_bench`` (the floor of any one-launch time that
validation measures the same way), back to back, and inside a CUDA graph.
"""

from __future__ import annotations

import time

import torch
import triton
from triton.testing import do_bench

from ...schema import measurement
from ..microbench import Bench, time_calls


@triton.jit
def _empty(x_ptr):
    pass


def launch(bench: Bench) -> None:
    """Seconds of an empty launch: by do_bench, back to back and inside a CUDA graph."""
    x = torch.empty(1, device="cuda")
    _empty[(1,)](x)
    torch.cuda.synchronize()
    t = do_bench(lambda: _empty[(1,)](x), warmup=25, rep=200, return_mode="median") * 1e-3
    bench.add(measurement("launch_do_bench", t, "s", "empty Triton kernel, do_bench median", [t]))
    n = 200
    t0 = time.perf_counter()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        _empty[(1,)](x)
    end.record()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t0) / n
    bench.add(
        measurement(
            "launch_back_to_back",
            start.elapsed_time(end) * 1e-3 / n,
            "s",
            f"{n} empty launches back to back (host {host * 1e6:.1f} us each)",
        )
    )
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _empty[(1,)](x)
        stream.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(100):
                _empty[(1,)](x)
    torch.cuda.synchronize()
    t, s = time_calls(graph.replay, 0.1)
    bench.add(measurement("launch_graph", t / 100, "s", "100 empty launches in a CUDA graph", s))
