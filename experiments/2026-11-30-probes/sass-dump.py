"""Dump the SASS (nvdisasm -c -hex) of every kernel variant of the validation grid.

Run on the H200 (Triton 3.6, torch 2.11, 2026-11-30, at acff558, SM clock 1980 MHz
untouched) as ``python3 2026-11-30-h200-sass-dump.py OUT.json.gz``: it runs
``validate.registers``' collection (one launch per kernel variant, outputs checked)
and keeps each compiled kernel's disassembly beside its registers and loop counts.
``2026-11-30-h200-sass-dump.json.gz`` is its output (77 variants, 237 kernels).
"""

import gzip
import json
import sys

from tilesim.validate import registers, sass

texts = []
orig = sass.disassemble


def disassemble(cubin):
    text = orig(cubin)
    texts.append(text)
    return text


sass.disassemble = disassemble
cases = registers.collect(log=lambda *a: None)
i = 0
for case in cases:
    for kern in case["kernels"]:
        kern["sass"] = texts[i]
        i += 1
assert i == len(texts)
with gzip.open(sys.argv[1], "wt") as f:
    json.dump(cases, f)
print(len(cases), "cases", i, "kernels")
