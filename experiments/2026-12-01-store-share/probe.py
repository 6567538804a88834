"""Is the store port per SM or per CTA? (probe, 2026-12-01; run on the lent H200)

The store chain of `calibrate`'s step store_latency (each tile's stores acknowledged
before the next), run by CTAs on the first SMS SMs only (the others exit at once):
with a grid of 132 x k CTAs, k per SM. If an SM's stores share one port, two CTAs on
an SM take twice the bytes' time per tile; if the limit is per CTA, the same.
Writes one JSON line per (k, bytes) to $OUT/store-share-probe.jsonl.
"""

import functools
import json
import os
import statistics

import torch
import triton
import triton.language as tl


@triton.jit
def _smid():
    return tl.inline_asm_elementwise(
        "mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _chain_on(dst, where, n_tiles, SMS: tl.constexpr, SIZE: tl.constexpr):
    pid = tl.program_id(0)
    sm = _smid()
    tl.store(where + pid, sm)
    if sm < SMS:
        base = dst + pid.to(tl.int64) * n_tiles * SIZE
        offs = tl.arange(0, SIZE)
        zero = pid * 0
        for t in range(n_tiles):
            tl.store(base + (t + zero) * SIZE + offs, offs + t)
            zero = tl.inline_asm_elementwise(
                "fence.acq_rel.gpu;\n\tmov.u32 $0, 0;",
                "=r",
                [],
                dtype=tl.int32,
                is_pure=False,
                pack=1,
            )
            tl.debug_barrier()


def main():
    with open(os.path.join(os.environ.get("OUT", "."), "store-share-probe.jsonl"), "w") as out:
        probe(out)


def probe(out):
    sms = 16
    for k in (1, 2):
        grid = 132 * k
        for nbytes in (8192, 16384, 32768):
            size = nbytes // 4
            n_tiles = 8 * 1024 * 1024 // nbytes
            dst = torch.full((grid * n_tiles * size,), -1, dtype=torch.int32, device="cuda")
            where = torch.zeros(grid, dtype=torch.int32, device="cuda")
            run = functools.partial(
                _chain_on[(grid,)], dst, where, n_tiles, SMS=sms, SIZE=size, num_warps=4
            )
            run()
            torch.cuda.synchronize()
            w = where.cpu().tolist()
            working = [p for p in range(grid) if w[p] < sms]
            per_sm = statistics.mode([sum(1 for p in working if w[p] == s) for s in range(sms)])
            got = dst.view(grid, n_tiles, size)[working[-1], n_tiles - 1].cpu()
            ok = bool((got == torch.arange(size, dtype=torch.int32) + n_tiles - 1).all())
            times = []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                run()
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b) * 1e-3 / n_tiles)
            row = dict(
                ctas_per_sm=k,
                working_ctas=len(working),
                working_per_sm=per_sm,
                tile_bytes=nbytes,
                s_per_tile=statistics.median(times),
                samples=times,
                output_ok=ok,
            )
            print(row)
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
