"""Per-tile round-trip spread: CTAs stream their own fp16 tiles from HBM with one in
flight (as calibrate's tile_latency step) and stamp %clock64 after each tile arrived."""

import json
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _stamp_after(v):
    # %clock64 read predicated on v (the loaded data): it cannot issue before v is there
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.s32 p, $1, 123456789; "
        "@p mov.u64 $0, %clock64; @!p mov.u64 $0, 0; }",
        "=l,r",
        [v],
        dtype=tl.int64,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _tiles_stamped(src, out, stamps, n_tiles, spin, ROWS: tl.constexpr, COLS: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    base = src + pid.to(tl.int64) * n_tiles * ROWS * COLS
    acc = tl.zeros([ROWS, COLS], dtype=tl.float32)
    for t in range(n_tiles):
        x = tl.load(base + t * ROWS * COLS + r[:, None] * COLS + c[None, :]).to(tl.float32)
        acc += x
        s = tl.sum(tl.sum(x, 1), 0)
        clk = _stamp_after(s.to(tl.int32, bitcast=True))
        tl.store(stamps + pid.to(tl.int64) * n_tiles + t, clk)
    tl.store(out + pid * ROWS + r, tl.sum(acc, 1))


def run(ctas, warps, rows, cols, n_tiles=512, reps=5):
    src = torch.randn(ctas * n_tiles * rows * cols, device="cuda").half()
    out = torch.empty(ctas * rows, device="cuda")
    st = torch.zeros(ctas * n_tiles, dtype=torch.int64, device="cuda")
    res = []
    for _ in range(reps):
        _tiles_stamped[(ctas,)](
            src, out, st, n_tiles, 0, ROWS=rows, COLS=cols, num_warps=warps, num_stages=1
        )
        torch.cuda.synchronize()
        want = src.view(ctas, n_tiles, rows, cols).float().sum((1, 3)).flatten()
        ok = torch.allclose(out, want, rtol=1e-3, atol=1e-1)
        d = st.view(ctas, n_tiles).diff(dim=1)[:, 8:].flatten().double().cpu()
        q = torch.quantile(
            d, torch.tensor([0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99], dtype=torch.double)
        )
        res.append(
            dict(
                ctas=ctas,
                warps=warps,
                rows=rows,
                cols=cols,
                ok=bool(ok),
                mean=float(d.mean()),
                std=float(d.std()),
                quantiles=[round(float(x), 1) for x in q],
                zeros=int((st == 0).sum()),
            )
        )
    return res


if __name__ == "__main__":
    outdir = os.environ.get("OUT", ".")
    rows = []
    for ctas in (16, 132, 264):
        for warps, (r, c) in ((4, (64, 128)), (4, (64, 64)), (8, (128, 128))):
            for x in run(ctas, warps, r, c):
                print(json.dumps(x))
                rows.append(x)
    with open(os.path.join(outdir, "spread.jsonl"), "w") as f:
        for x in rows:
            f.write(json.dumps(x) + "\n")
