"""Compile a prototype for sm_90a on the CPU; print registers, spills and per-loop SASS ops."""
import sys, importlib, collections
import torch
from tilesim.validate.cross_compile import cross_compiling, resource_usage
from tilesim.validate import sass

def build(fn, grid, args, **kw):
    with cross_compiling() as log:
        fn[grid](*args, **kw)
    name, k = log[-1]
    regs, local = resource_usage(k.asm["cubin"])
    text = sass.disassemble(k.asm["cubin"])
    return k, regs, local, text

def report(k, regs, local, text, keys=("HMMA","LDS","LDSM","STS","BAR","SHFL","MUFU","LDG","LDGSTS","STG","LDL","STL","FFMA","FMUL","FADD")):
    print(f"regs {regs} local {local} smem {k.metadata.shared}")
    for lp in sass.loops(text):
        ops = lp["ops"]
        print(" loop", lp["instructions"], {o: ops.get(o, 0) for o in keys if ops.get(o)}, "BAR*", sum(v for o, v in ops.items() if o.startswith("BAR")))

if __name__ == "__main__":
    mod = importlib.import_module(sys.argv[1])
    fn = getattr(mod, sys.argv[2])
    d = int(sys.argv[3]); bm = int(sys.argv[4]); bn = int(sys.argv[5]); w = int(sys.argv[6]); st = int(sys.argv[7])
    B, H, N = 2, 16, 1024
    q = torch.empty((B, H, N, d), dtype=torch.float16, device="meta")
    o32 = torch.empty((B, H, N, d), dtype=torch.float32, device="meta")
    lse = torch.empty((B * H, N), dtype=torch.float32, device="meta")
    k, regs, local, text = build(fn, (B * H, 2), (q, q, q, q, o32, lse, 0.125, H, N, N),
                                 HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, STAGES=st, num_warps=w, num_stages=st)
    report(k, regs, local, text)
    if len(sys.argv) > 8:
        open(sys.argv[8], "w").write(text)
        open(sys.argv[8] + ".ttgir", "w").write(k.asm["ttgir"])
        open(sys.argv[8] + ".ptx", "w").write(k.asm["ptx"])
