"""Where a v2 backward step's time goes on the H200 (Nsight Compute's stall samples per
SASS instruction) against the issue replay's cycles for the same instructions.

    /work/venv-t36/bin/python experiments/2026-12-02-v2-bwd/regions.py \
        experiments/2026-12-02-v2-bwd/src-sass.json

The regions split the loop at its wgmma waits (``WARPGROUP.DEPBAR``): the samples at
a wait are the tensor time not covered by issue; the others are the instructions
between. Step cycles = sm__cycles_elapsed over the steps one SM runs (ncu case 12:
B=4 H=16 N=4096 d=128, 4096 CTAs of 64 steps, one CTA per SM, 32 waves).
"""

import collections
import importlib.util
import json
import pathlib
import sys

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate import sass
from tilesim.validate.cross_compile import compiled_launches

here = pathlib.Path(__file__).parent
spec = importlib.util.spec_from_file_location("inflight", here / "inflight.py")
inflight = importlib.util.module_from_spec(spec)
spec.loader.exec_module(inflight)

CYCLES = {"v2bwd_dkdv_d128_4k": 4202596, "v2bwd_dq_d128_4k": 2894550}  # metrics_case12.csv
STEPS = 32 * 64  # waves x steps per CTA


def main(path):
    doc = json.loads(pathlib.Path(path).read_text())
    gpu = load_gpu("h200")
    w = Workload(4, 16, 4096, 4096, 128, pass_="bwd")
    kernels, _ = compiled_launches("v2", w, default_config("v2", w, gpu), gpu)
    bodies = {
        name: inflight.loop_body(sass.disassemble(k.asm["cubin"]))
        for _, name, _, k in kernels
        if name != "v2_bwd_preprocess"
    }
    for tag, v in doc.items():
        ins = v["instructions"]
        ex = collections.Counter(r["executed"] for r in ins)
        top = max(ex, key=lambda e: ex[e] * e)
        idx = [i for i, r in enumerate(ins) if r["executed"] == top]
        loop = ins[min(idx) : max(idx) + 1]
        body = bodies["v2_bwd_dkdv" if "dkdv" in tag else "v2_bwd_dq"]
        assert len(body) == len(loop), (len(body), len(loop))
        t, total = inflight.times(body)
        samples = sum(r["samples"] for r in loop)
        step = CYCLES[tag] / STEPS
        print(f"{tag}: {step:.0f} cycles a step on the GPU, replay {total} cycles of issue")
        waits = [i for i, x in enumerate(body) if x[1].startswith("WARPGROUP.DEPBAR")]
        bounds = [0, *waits, len(body)]
        for a, b in zip(bounds, bounds[1:], strict=False):
            if a in waits:
                share = loop[a]["samples"] / samples
                print(f"  wait @{a:3d}: GPU {share * step:6.0f}")
                a += 1
            if a >= b:
                continue
            share = sum(r["samples"] for r in loop[a:b]) / samples
            rep = (t[b] if b < len(body) else total) - t[a]
            print(f"  issue {a:3d}-{b - 1:3d}: GPU {share * step:6.0f}  replay {rep:6.0f}")


if __name__ == "__main__":
    main(sys.argv[1])
