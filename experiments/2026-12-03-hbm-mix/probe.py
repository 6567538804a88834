"""HBM bandwidth against the mix of reads and writes, and standard attention's launches.

    python experiments/2026-12-03-hbm-mix/probe.py OUT.jsonl

Part 1: a stream kernel whose CTAs read R blocks and write W blocks per step (8 KiB
fp32 blocks, 1056 CTAs, ~2 GiB moved), for R:W from 1:0 to 0:1 — the model charges a
read byte 1/read_Bps and a write byte 1/write_Bps and nothing for mixing them; this
measures whether a mix costs more (DRAM read/write turnaround). Each output is checked.
Part 2: standard attention's forward launches (qk, softmax, pv) each timed alone as
a CUDA graph with the L2 flushed (timing.bench_graph_s), and all three together.
"""

import json
import sys

import torch
import triton
import triton.language as tl

from tilesim.hwmodels import load_gpu
from tilesim.kernels import launches
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate.gpu import timing
from tilesim.validate.gpu.microbench import time_calls

BLOCK = 2048
CTAS = 132 * 8


@triton.jit
def _mix(
    x_ptr, y_ptr, out_ptr, n_steps, value, R: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(pid, n_steps, nprog):
        s = tl.zeros([BLOCK], dtype=tl.float32) + value
        for r in tl.static_range(R):
            s += tl.load(x_ptr + (j * R + r) * BLOCK + offs, cache_modifier=".cg")
        for w in tl.static_range(W):
            tl.store(y_ptr + (j * W + w) * BLOCK + offs, s)
        acc += s
    tl.store(out_ptr + pid * BLOCK + offs, acc)


def mix(r, w, out):
    total = 2 << 30
    n_steps = total // ((r + w) * BLOCK * 4)
    x = torch.rand(max(r, 1) * n_steps * BLOCK, device="cuda")
    y = torch.empty(max(w, 1) * n_steps * BLOCK, device="cuda")
    part = torch.empty(CTAS * BLOCK, device="cuda")
    run = lambda: _mix[(CTAS,)](x, y, part, n_steps, 0.25, R=r, W=w, BLOCK=BLOCK)  # noqa: E731
    run()
    torch.cuda.synchronize()
    s = 0.25 + (x.view(n_steps, max(r, 1), BLOCK).sum(1) if r else 0.0)
    if w:
        got = y.view(n_steps, w, BLOCK)
        ok = bool(
            torch.allclose(
                got,
                (s if r else torch.full_like(got[:, 0], 0.25)).unsqueeze(1).expand_as(got),
                rtol=1e-5,
            )
        )
    else:
        ok = abs(float(part.double().sum()) - float(s.double().sum())) <= 1e-4 * abs(
            float(s.double().sum())
        )
    t, _ = time_calls(run, 0.3, 400)
    nbytes = (r + w) * n_steps * BLOCK * 4
    row = {
        "part": "mix",
        "R": r,
        "W": w,
        "ok": ok,
        "time_s": t,
        "bytes": nbytes,
        "read_bytes": r * n_steps * BLOCK * 4,
        "write_bytes": w * n_steps * BLOCK * 4,
        "Bps": nbytes / t,
    }
    print(json.dumps(row), file=out, flush=True)
    print(f"mix {r}:{w} ok={ok} {nbytes / t / 1e12:.3f} TB/s", flush=True)


STANDARD = [  # (B, H, N, d, dtype, causal)
    (1, 7, 4464, 64, "bf16", False),
    (19, 10, 1723, 64, "bf16", False),
    (41, 61, 1077, 128, "fp16", False),
    (13, 5, 2506, 128, "fp16", False),
    (8, 53, 2417, 64, "fp16", True),
    (27, 4, 2836, 128, "fp16", True),
    (1, 16, 16384, 128, "fp16", False),
    (4, 16, 4096, 64, "fp16", False),
    (1, 3, 6332, 64, "fp16", False),
    (16, 26, 434, 128, "fp16", True),
]


def standard(shape, out):
    b, h, n, d, dt, causal = shape
    w = Workload(batch=b, heads=h, seqlen_q=n, seqlen_kv=n, head_dim=d, dtype=dt, causal=causal)
    q, k, v, _ = timing.make_inputs(w, 0)
    cfg = default_config("standard", w, load_gpu("h200"))
    o, runs = launches(q, k, v, causal=causal, algo="standard", config=cfg)
    for _, run in runs:
        run()
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal
    )
    err = timing.rel_error(o, ref)
    parts = {}
    for name, run in runs:
        parts[name] = timing.bench_graph_s(run, 25, 100)

    def whole():
        for _, run in runs:
            run()

    total = timing.bench_graph_s(whole, 25, 100)
    row = {
        "part": "standard",
        "workload": [b, h, n, d, dt, causal],
        "rel_error": err,
        "ok": err < 2e-2,
        "time_graph_s": total,
        "parts_graph_s": parts,
    }
    print(json.dumps(row), file=out, flush=True)
    print(
        f"standard {shape} err={err:.2g} total={total * 1e6:.1f} us "
        + " ".join(f"{k}={v * 1e6:.1f}" for k, v in parts.items()),
        flush=True,
    )
    timing.release()


def main(path):
    with open(path, "w") as out:
        for r, w in [
            (1, 0),
            (0, 1),
            (1, 1),
            (4, 1),
            (2, 1),
            (1, 2),
            (1, 4),
            (3, 1),
            (1, 3),
            (1, 1),
        ]:
            mix(r, w, out)
        for shape in STANDARD:
            try:
                standard(shape, out)
            except Exception as exc:  # a probe: note it and go on
                print(
                    json.dumps({"part": "standard", "workload": shape, "error": repr(exc)[:300]}),
                    file=out,
                )


if __name__ == "__main__":
    main(sys.argv[1])
