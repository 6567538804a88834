"""Compile a probe kernel of proto.py for sm_90a on the CPU: registers, spills, SASS loops.

python compile_probe.py fwd_c 64 16 256 4 [SASS_OUT]
"""

import sys

import proto
import torch

from tilesim.validate import sass
from tilesim.validate.cross_compile import cross_compiling, resource_usage

KEYS = ("HMMA", "LDS", "LDSM", "STS", "STSM", "BAR", "SHFL", "MUFU", "LDG", "STG", "LDL", "STL")


def main() -> None:
    fn = getattr(proto, sys.argv[1])
    d, bm, bn, warps = (int(x) for x in sys.argv[2:6])
    b, h, n = 2, 16, 1024
    q = torch.empty((b, h, n, d), dtype=torch.float16, device="meta")
    o32 = torch.empty((b, h, n, d), dtype=torch.float32, device="meta")
    lse = torch.empty((b * h, n), dtype=torch.float32, device="meta")
    with cross_compiling() as log:
        fn[(b * h, 2)](
            q, q, q, q, o32, lse, 0.125, h, n, n,
            HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, STAGES=2, num_warps=warps, num_stages=2,
        )  # fmt: skip
    kernel = log[-1][1]
    regs, local = resource_usage(kernel.asm["cubin"])
    text = sass.disassemble(kernel.asm["cubin"])
    print(f"regs {regs} local {local} smem {kernel.metadata.shared}")
    for loop in sass.loops(text):
        ops = loop["ops"]
        print("  loop", loop["instructions"], {k: ops[k] for k in KEYS if ops.get(k)})
    if len(sys.argv) > 6:
        with open(sys.argv[6], "w") as f:
            f.write(text)
        with open(sys.argv[6] + ".ttgir", "w") as f:
            f.write(kernel.asm["ttgir"])


if __name__ == "__main__":
    main()
