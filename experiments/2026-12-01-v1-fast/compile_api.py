"""Compile tilesim's v1 kernels for sm_90a on the CPU (validate/cross_compile.py) and print
registers, spills and per-loop SASS op counts; --dump writes SASS/TTGIR."""

import argparse

from tilesim.hwmodels.presets import load_gpu as load_preset
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate import sass
from tilesim.validate.cross_compile import compiled_launches, resource_usage

KEYS = (
    "HMMA",
    "LDS",
    "LDSM",
    "STS",
    "STSM",
    "BAR",
    "SHFL",
    "MUFU",
    "LDG",
    "STG",
    "RED",
    "LDL",
    "STL",
)

ap = argparse.ArgumentParser()
ap.add_argument("--pass", dest="pass_", default="fwd")
ap.add_argument("--d", type=int, default=64)
ap.add_argument("--n", type=int, default=1024)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--config", default=None)
ap.add_argument("--set", nargs="*", default=[])
ap.add_argument("--dump", default=None)
a = ap.parse_args()
gpu = load_preset("h200")
w = Workload(
    batch=2,
    heads=2048 // a.d,
    seqlen_q=a.n,
    seqlen_kv=a.n,
    head_dim=a.d,
    causal=a.causal,
    dtype="fp16",
    pass_=a.pass_,
)
if a.config:
    from tilesim.traces.config import named_config

    cfg = named_config(a.config, "v1", w, gpu)
else:
    cfg = default_config("v1", w, gpu)
for kv in a.set:
    k, v = kv.split("=")
    cfg = cfg.replace(**{k: type(getattr(cfg, k))(v)})
print(cfg)
out, n = compiled_launches("v1", w, cfg, gpu)
for _, name, kname, kern in out:
    if isinstance(kern, Exception):
        print(name, "FAILED", kern)
        continue
    regs, local = resource_usage(kern.asm["cubin"])
    text = sass.disassemble(kern.asm["cubin"])
    print(f"{name} {kname}: regs {regs} local {local} smem {kern.metadata.shared}")
    for lp in sass.loops(text):
        ops = lp["ops"]
        print("  loop", lp["instructions"], {o: ops.get(o, 0) for o in KEYS if ops.get(o)})
    if a.dump:
        for suffix, body in (("sass", text), ("ttgir", kern.asm["ttgir"])):
            with open(f"{a.dump}.{name}.{suffix}", "w") as f:
                f.write(body)
