"""Cycles per instruction of dependent chains by instruction class, warps per scheduler
and independent chains per thread (ILP): one CTA per SM, %clock64 around the loop."""

import json
import os

import torch
import triton
import triton.language as tl

K = 16  # dependent instructions per asm block
OPS = {
    "ffma": ("fma.rn.f32 $0, $0, $2, $3;", "=f,f,f,f", "f32"),
    "fmul": ("mul.rn.f32 $0, $0, $2;", "=f,f,f,f", "f32"),
    "fadd": ("add.rn.f32 $0, $0, $2;", "=f,f,f,f", "f32"),
    "fmax": ("max.f32 $0, $0, $2;", "=f,f,f,f", "f32"),
    "ex2": ("ex2.approx.ftz.f32 $0, $0;", "=f,f,f,f", "f32"),
    "imad": ("mad.lo.s32 $0, $0, $2, $3;", "=r,r,r,r", "i32"),
    "shfl": ("shfl.sync.bfly.b32 $0, $0, 1, 31, -1;", "=r,r,r,r", "i32"),
}


def make(op):
    body, cons, ty = OPS[op]
    return "{ mov.b32 $0, $1; " + " ".join([body] * K) + " }", cons, ty


@triton.jit
def _clk():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


def kernel_for(op):
    asm, cons, ty = make(op)
    dt = tl.float32 if ty == "f32" else tl.int32

    @triton.jit
    def k(
        x_ptr,
        out_ptr,
        st_ptr,
        iters,
        ILP: tl.constexpr,
        THREADS: tl.constexpr,
        ASM: tl.constexpr,
        CONS: tl.constexpr,
    ):
        pid = tl.program_id(0)
        offs = tl.arange(0, THREADS * ILP)
        x = tl.load(x_ptr + offs)
        a = tl.load(x_ptr + offs + 1)
        b = tl.load(x_ptr + offs + 2)
        t0 = _clk()
        for _ in range(iters):
            x = tl.inline_asm_elementwise(ASM, CONS, [x, a, b], dtype=x.dtype, is_pure=True, pack=1)
        t1 = _clk()
        tl.store(out_ptr + pid * THREADS * ILP + offs, x)
        tl.store(st_ptr + pid, t1 - t0)

    return k, asm, cons, dt


def main():
    out = []
    iters = 2000
    for op in OPS:
        k, asm, cons, dt = kernel_for(op)
        for warps in (4, 8, 16):
            for ilp in (1, 2, 4):
                threads = warps * 32
                tdt = torch.float32 if dt == tl.float32 else torch.int32
                x = (
                    (torch.rand(threads * ilp + 2, device="cuda") * 0.5 + 0.5).to(tdt)
                    if tdt == torch.float32
                    else torch.randint(1, 7, (threads * ilp + 2,), device="cuda", dtype=tdt)
                )
                o = torch.empty(132 * threads * ilp, device="cuda", dtype=tdt)
                st = torch.zeros(132, device="cuda", dtype=torch.int64)
                try:
                    k[(132,)](
                        x,
                        o,
                        st,
                        iters,
                        ILP=ilp,
                        THREADS=threads,
                        ASM=asm,
                        CONS=cons,
                        num_warps=warps,
                    )
                    torch.cuda.synchronize()
                    k[(132,)](
                        x,
                        o,
                        st,
                        iters,
                        ILP=ilp,
                        THREADS=threads,
                        ASM=asm,
                        CONS=cons,
                        num_warps=warps,
                    )
                    torch.cuda.synchronize()
                    cyc = float(st.double().median())
                    n = iters * K * ilp  # instructions per thread of the class
                    row = dict(
                        op=op,
                        warps=warps,
                        warps_per_scheduler=warps // 4,
                        ilp=ilp,
                        cycles_per_instr_per_thread=cyc / n,
                        issue_per_scheduler=(n * warps / 4) / cyc,
                    )
                except Exception as e:  # noqa: BLE001
                    row = dict(op=op, warps=warps, ilp=ilp, error=str(e).splitlines()[0][:200])
                print(json.dumps(row), flush=True)
                out.append(row)
    with open(os.path.join(os.environ.get("OUT", "."), "cpi.jsonl"), "w") as f:
        for r in out:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
