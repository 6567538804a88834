"""What a kernel costs in a CUDA-graph replay beyond its CTAs' work, on the GPU.

    python3 experiments/2026-12-03-launch/probe.py OUT.jsonl

validate's graph time is a replay between two events with the L2 flushed before each
(`timing.bench_graph_s`); the model charges every launch `launch_overhead_s`, an empty
kernel under do_bench (3.34 us). Here, as graph replays (median), with the L2 flushed
first ("flush") or the GPU held busy by a spin instead ("spin", the L2 warm):
* k empty kernels in one graph, k = 1, 2, 3, 5, 9: the first's cost and each next one's;
* one kernel of g CTAs, each loading and storing one 128-B line, g = 1 to 2,640;
* a kernel with a long unrolled body (cold instruction fetch after the flush), 1 and 132 CTAs;
* tilesim's v2 forward at B1 H10 N157 d128 causal bf16 (13.7 us measured in seed 20),
  once and twice in one graph. Its output is checked first. Only reads the GPU's clocks.
"""

import json
import statistics
import sys

import torch
import triton
import triton.language as tl

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate.gpu import timing


@triton.jit
def _empty(x_ptr):
    pass


@triton.jit
def _touch(x_ptr, y_ptr):
    pid = tl.program_id(0)
    offs = pid * 32 + tl.arange(0, 32)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1.0)


@triton.jit
def _long(x_ptr, y_ptr, STEPS: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * 128 + tl.arange(0, 128)
    v = tl.load(x_ptr + offs)
    for i in tl.static_range(STEPS):  # unrolled: STEPS x a few instructions of code
        v = v * 1.0001 + i
    tl.store(y_ptr + offs, v)


def replay_s(fns, flush: bool, reps: int = 200) -> float:
    """Median seconds of one graph replay of ``fns`` (L2 flushed, or the GPU spun busy)."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for f in fns:
            f()
    torch.cuda.synchronize()
    buf = torch.empty(timing.GRAPH_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    ev = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for s, e in ev:
        if flush:
            buf.zero_()
        else:
            torch.cuda._sleep(100_000)  # the host queues the replay while the GPU spins
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e-3 for s, e in ev[reps // 10 :])


def main(path):
    x = torch.randn(2640 * 128, device="cuda")
    y = torch.empty_like(x)
    rows = []

    def put(case, **kw):
        for flush in (True, False):
            row = {"case": case, "flush": flush, **kw["meta"], "time_s": replay_s(kw["fns"], flush)}
            print(json.dumps(row), flush=True)
            rows.append(row)

    for k in (1, 2, 3, 5, 9):
        put("empty", fns=[lambda: _empty[(1,)](x)] * k, meta={"kernels": k})
    for g in (1, 10, 66, 132, 264, 1320, 2640):
        put("touch", fns=[lambda g=g: _touch[(g,)](x, y)], meta={"ctas": g})
    torch.testing.assert_close(y[:32], x[:32] + 1.0)
    for steps in (16, 2048):
        for g in (1, 132):
            put(
                "long",
                fns=[lambda g=g, s=steps: _long[(g,)](x, y, STEPS=s)],
                meta={"ctas": g, "steps": steps},
            )
    w = Workload(1, 10, 157, 157, 128, causal=True, dtype="bf16")
    q, k_, v, scales = timing.make_inputs(w, 0)
    cfg = default_config("v2", w, load_gpu("h200"))
    out, run = timing.kernel_run("v2", q, k_, v, True, cfg, scales)
    err = timing.check_output(run, q, k_, v, True, scales, "bf16", out=out)
    assert err <= timing.TOLERANCE["bf16"], err
    for n in (1, 2):
        put("v2-B1H10N157", fns=[run] * n, meta={"kernels": n, "rel_error": err})
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
