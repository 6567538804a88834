"""Latency of shared-memory loads, local-memory loads and CTA barriers on the H200:
dependent chains timed with %clock64, 132 CTAs (one per SM) of 1-16 warps, median
over CTAs. ``lds``/``ldl``: a pointer chase (address arithmetic + load) per step;
``alu``: the same arithmetic without the load; ``bar``: back-to-back bar.sync."""

import json
import sys

import torch
import triton
import triton.language as tl

K = 16


@triton.jit
def _clk():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


# pointer chases: $1 is 0 (read from memory, so the compiler cannot know it); each
# dependent load's address is base + 4 * (the last load's value), and every word holds 0
LDS = (
    "{ .shared .align 16 .b32 sbuf[1024]; .reg .u32 a, t; mov.u32 t, %tid.x; shl.b32 t, t, 2; "
    "mov.u32 a, sbuf; add.u32 a, a, t; st.shared.u32 [a], $1; mov.b32 $0, $1; "
    + " ".join(["shl.b32 t, $0, 2; add.u32 t, a, t; ld.shared.u32 $0, [t];"] * K)
    + " }"
)
LDL = (
    "{ .local .align 8 .b32 buf[4]; .reg .u64 p, q, b; "
    "mov.u64 b, buf; st.local.u32 [buf], $1; mov.b32 $0, $1; "
    + " ".join(["cvt.u64.u32 q, $0; shl.b64 q, q, 2; add.u64 p, b, q; ld.local.u32 $0, [p];"] * K)
    + " }"
)
BAR = "{ mov.b32 $0, $1; " + " ".join(["bar.sync 0;"] * K) + " }"
# the same chain's address arithmetic alone (subtract it)
ALU = (
    "{ .reg .u32 a, t; mov.u32 a, 0; mov.b32 $0, $1; "
    + " ".join(["shl.b32 t, $0, 2; add.u32 t, a, t; add.u32 $0, t, $1;"] * K)
    + " }"
)


def kernel_for(asm):
    @triton.jit
    def k(
        x_ptr,
        st_ptr,
        iters,
        THREADS: tl.constexpr,
        ASM: tl.constexpr,
        SMEM: tl.constexpr,
        INIT: tl.constexpr,
    ):
        pid = tl.program_id(0)
        offs = tl.arange(0, THREADS)
        x = tl.load(x_ptr + offs)
        t0 = _clk()
        for _ in range(iters):
            x = tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
        t1 = _clk()
        tl.store(x_ptr + 4096 + pid * THREADS + offs, x)
        tl.store(st_ptr + pid, t1 - t0)

    return k


def main(out):
    rows = []
    iters = 1000
    cases = (("lds", LDS, True), ("ldl", LDL, False), ("alu", ALU, False), ("bar", BAR, False))
    for name, asm, smem in cases:
        k = kernel_for(asm)
        for warps in (1, 4, 8, 16):
            threads = warps * 32
            x = torch.zeros(4096 + 132 * threads, device="cuda", dtype=torch.int32)
            st = torch.zeros(132, device="cuda", dtype=torch.int64)
            try:
                for _ in range(3):
                    k[(132,)](
                        x, st, iters, THREADS=threads, ASM=asm, SMEM=smem, INIT=0, num_warps=warps
                    )
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001
                rows.append({"op": name, "warps": warps, "error": str(exc)[:400]})
                print(name, warps, "error", str(exc)[:300], flush=True)
                break
            cyc = float(st.median())
            rows.append({"op": name, "warps": warps, "cycles_per_instr": cyc / (iters * K)})
            print(name, warps, round(cyc / (iters * K), 2), flush=True)
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
