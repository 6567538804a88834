"""Issue cycles of the compiled kernels: their SASS replayed on one warp scheduler.

The model's tensor, memory and shared-memory pipes do not see the instructions a
kernel issues around them: address arithmetic, the softmax's FP32 and MUFU work,
shuffles, shared-memory loads for layout conversions, barriers. This module
estimates that time from the compiled code itself. It replays a kernel's SASS
(``nvdisasm -c -hex``) on one warp scheduler with k = 1..4 warps, every warp
running the same code:

- at most one instruction issues per cycle;
- each instruction honours its control bits: its stall count, the scoreboards in
  its wait mask, and its write (result) and read (operand) scoreboards;
- each one holds its unit (FP32 lanes, INT, MUFU, shuffle, shared memory) for its
  issue interval;
- a barrier releases the warps when all have arrived.

Global loads and stores, wgmma and their waits cost nothing here: the simulator
models them.

For a kernel with an MMA loop, ``loop`` is the cycles per iteration of its
innermost one (the loop with wgmma, HGMMA or fp8's QGMMA, or mma.sync's HMMA, and the fewest
instructions), and ``rest`` is the kernel's other instructions replayed once in text
order, less its other MMA loops beside that one: v2's masked K/V loop, which a full
attention never enters and a causal one enters for the block at the diagonal, a step
of the K/V walk that the simulator charges the loop's cycles; the rest of a causal
kernel holds what that step issues beyond them, once (``diagonal``). A kernel with
MMAs and no loop (standard's ``qk``, ``bwd_dp``) gets ``kernel``: the whole text
once. In a warp-specialised kernel (Gluon v3) each
partition is its own code between two register reallocations (``setmaxnreg``):
``rest`` is then the rest of the partition that runs the loop, and the k warps are
its MMA warps (the load warp issues a few instructions a step and is not replayed).
A branch inside the Gluon kernel's loop skips its mask, which runs only on the
blocks at the diagonal or the end of K/V (``if start_n >= hi_full`` in
``kernels/gluon/tile.py``): one block per CTA. Its loop is replayed without
those blocks and they go with ``rest``. The Triton kernels' loops run their
conditional blocks (v1's predicated O stores) every step: Nsight Compute counts
1227 instructions per warp and step in v1's forward at d = 64, for a loop of 1220.

Latencies and issue intervals are H200 micro-benchmarks
(``results/logs/``):

- ``*-cpi-probe.jsonl``: MUFU.EX2 17 and SHFL 24 cycles; issue intervals FFMA
  1.5, FADD/FMUL 1.05, IMAD/FMNMX 2, SHFL 4, MUFU 8;
- ``*-lat-probe.jsonl``: shared and local loads 24 cycles; ``bar.sync`` 14, 20, 28
  and 44 cycles with 1, 4, 8 and 16 warps.

Not measured: the read release of shared stores, S2R and MEMBAR (20 cycles), and
the read scoreboard (6).

``python3 -m tilesim.validate.issue DUMP OUT`` writes the table for a SASS dump
(``results/logs/*-sass-dump.json.gz``).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

SCHEMA_VERSION = 1

INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
HIGH = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
LABEL = re.compile(r"^\s*(\.L_x_\d+):")
BRA = re.compile(r"\bBRA\s+(?:`\()?(\.L_x_\d+)")
PRED = re.compile(r"^@!?U?P[T\d]+\s+")

GMMA = ("HGMMA", "QGMMA")  # wgmma: fp16/bf16, fp8
MMA = (*GMMA, "HMMA")  # and mma.sync (v1's 16-row steps): an issue slot, its pipe simulated
EXT = {"LDG", "LDGSTS", "STG", "LDGDEPBAR", *GMMA, "RED", "ATOM", "REDG", "LDC", "ULDC", "DEPBAR"}
FP = {"FADD", "FMUL", "FSEL", "FSETP", "F2FP", "FMNMX", "HADD2", "HMUL2", "HFMA2"}
INT = set(
    [
        "MOV",
        "IMAD",
        "IADD3",
        "LEA",
        "LOP3",
        "SEL",
        "ISETP",
        "SHF",
        "VIADD",
        "PLOP3",
        "IMNMX",
        "IABS",
        "PRMT",
        "I2F",
        "F2I",
        "POPC",
        "FLO",
        "BREV",
        "VIMNMX",
        "CS2R",
        "R2UR",
        "SGXT",
    ]
)
LATENCY = {"mufu": 17, "shfl": 24, "lds": 24, "ldl": 24, "sts": 20, "s2r": 20, "ext": 0}
RBAR = 6
ISSUE = {"mufu": 8, "shfl": 4, "ffma": 1.5, "fp": 1.05, "int": 2.0, "lds": 2, "sts": 2}
BARRIER = {1: 14, 4: 20, 8: 28, 16: 44}  # bar.sync cycles by warps per CTA


def klass(op: str) -> str:
    base = op.split(".")[0]
    if base in EXT or op.startswith("WARPGROUP"):
        return "ext"
    if base in ("LDS", "LDSM"):
        return "lds"
    if base in ("STS", "STSM", "STL"):
        return "sts"
    if base in ("S2R", "S2UR", "MEMBAR"):
        return "s2r"
    special = {"MUFU": "mufu", "SHFL": "shfl", "LDL": "ldl", "BAR": "bar", "FFMA": "ffma"}
    if base in special:
        return special[base]
    if base in FP:
        return "fp"
    if base in INT:
        return "int"
    return "uniform" if base.startswith("U") else "other"


def parse(text: str):
    """[(text, opcode, stall, write sb, read sb, wait mask)] and {label: index}."""
    out, labels = [], {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = LABEL.match(line)
        if m:
            labels[m.group(1)] = len(out)
        m = INSTR.match(line)
        if m and i + 1 < len(lines) and HIGH.match(lines[i + 1]):
            c = int(HIGH.match(lines[i + 1]).group(1), 16) >> 41
            body = m.group(2)
            op = PRED.sub("", body).split()[0].rstrip(";")
            out.append((body, op, c & 15, (c >> 5) & 7, (c >> 8) & 7, (c >> 11) & 63))
    return out, labels


def replay(body, k: int, passes: int, bar: int) -> float:
    """Cycles of one pass of ``body`` with k warps on one scheduler, steady state
    (the last passes - 1 passes averaged)."""
    n = len(body)
    pc, it, ready = [0] * k, [0] * k, [0] * k
    sb = [[0] * 6 for _ in range(k)]
    unit: dict = collections.defaultdict(float)
    done: dict = {}
    arrived = collections.defaultdict(list)
    big, cyc, rr = 1 << 60, 0, 0

    def advance(w, at):
        pc[w] += 1
        if pc[w] == n:
            pc[w] = 0
            it[w] += 1
            done[(w, it[w])] = at

    while min(it) < passes:
        for q in range(k):
            w = (rr + q) % k
            if it[w] >= passes or ready[w] > cyc:
                continue
            _, op, stall, wbar, rbar, wait = body[pc[w]]
            if wait and any(sb[w][s] > cyc for s in range(6) if wait >> s & 1):
                continue
            cl = klass(op)
            occ = ISSUE.get(cl)
            if occ and unit[cl] > cyc:
                continue
            if cl == "bar":
                key = (it[w], pc[w])
                arrived[key].append(w)
                ready[w] = big
                if len(arrived[key]) == k:
                    for v in arrived.pop(key):
                        ready[v] = cyc + bar
                        advance(v, cyc)
                rr = w + 1
                break
            if occ:
                unit[cl] = cyc + occ
            if wbar != 7:
                sb[w][wbar] = cyc + LATENCY.get(cl, 6)
            if rbar != 7:
                sb[w][rbar] = cyc + RBAR
            ready[w] = cyc + max(stall, 1)
            advance(w, cyc)
            rr = w + 1
            break
        cyc += 1
    first = max(done[(w, 1)] for w in range(k))
    last = max(done[(w, passes)] for w in range(k))
    return (last - first) / (passes - 1)


def _partition(ins, a: int, j: int) -> tuple[int, int]:
    """The span of the warp-specialised partition that holds instructions a..j: from
    the register reallocation (``setmaxnreg``, USETMAXREG) before it to the one after;
    the whole kernel where it has none (one partition)."""
    marks = [i for i, x in enumerate(ins) if x[1].startswith("USETMAXREG")]
    lo = max((i + 1 for i in marks if i < a), default=0)
    hi = min((i for i in marks if i > j), default=len(ins))
    return lo, hi


def _without_blocks(ins, labels, a: int, j: int) -> tuple[list, list]:
    """Instructions a..j without the blocks that forward branches inside them skip,
    and those blocks."""
    keep, skipped, i = [], [], a
    while i <= j:
        keep.append(ins[i])
        m = BRA.search(ins[i][0])
        target = labels.get(m.group(1)) if m else None
        if target is not None and i + 1 < target <= j:
            skipped += ins[i + 1 : target]
            i = target
        else:
            i += 1
    return keep, skipped


def kernel_issue(
    text: str, warps: int, masked_blocks: bool = False, diagonal: int = 0
) -> dict | None:
    """The replayed issue cycles of one kernel's SASS (module docstring), or None if it
    has no MMA. ``masked_blocks``: the blocks that branches inside the MMA loop skip run
    once per CTA, not every step. ``diagonal``: iterations per CTA of its other MMA loops
    (a causal kernel's masked blocks at the diagonal), each costing what it issues beyond
    a step of the loop (module docstring)."""
    ins, labels = parse(text)
    if not any(x[1].startswith(MMA) for x in ins):
        return None
    bar = BARRIER.get(warps, 28)
    # back edges; the retry stubs of mbarrier waits placed after the last EXIT jump
    # back into the code but close no loop
    end = max((i for i, x in enumerate(ins) if x[1] == "EXIT"), default=len(ins))
    loops = []
    for j, x in enumerate(ins[:end]):
        m = BRA.search(x[0])
        if m and m.group(1) in labels and j - labels[m.group(1)] > 1:
            loops.append((labels[m.group(1)], j))
    mma = [(a, j) for a, j in loops if any(x[1].startswith(MMA) for x in ins[a : j + 1])]
    ks = (1, 2, 3, 4)
    if not mma:
        return {"kernel": [replay(ins, k, 2, bar) for k in ks], "instructions": len(ins)}
    a, j = min(mma, key=lambda r: r[1] - r[0])
    body = ins[a : j + 1]
    lo, hi = _partition(ins, a, j)
    # the kernel's other MMA loops (the masked K/V loop beside the unmasked one) are
    # steps of the same K/V walk, which the loop's cycles charge: not the rest
    others = [(b, e) for b, e in mma if lo <= b and e < hi and (e < a or b > j)]
    rest = [
        x
        for i, x in enumerate(ins[lo:hi], lo)
        if not a <= i <= j and not any(b <= i <= e for b, e in others)
    ]
    if masked_blocks:
        body, skipped = _without_blocks(ins, labels, a, j)
        rest += skipped
    loop = [replay(body, k, 3, bar) for k in ks]
    rest_cycles = [replay(rest, k, 2, bar) for k in ks]
    for b, e in others if diagonal else ():
        masked = [replay(ins[b : e + 1], k, 3, bar) for k in ks]
        extra = [diagonal * max(0.0, m - n) for m, n in zip(masked, loop, strict=True)]
        rest_cycles = [r + x for r, x in zip(rest_cycles, extra, strict=True)]
    return {
        "loop": loop,
        "loop_instructions": len(body),
        "rest": rest_cycles,
        "rest_instructions": len(rest),
    }


def _entry(job):
    return kernel_issue(*job)


def table(cases: list[dict], jobs: int = 2) -> list[dict]:
    """One row per kernel with MMAs: its case, its index among the case's kernels,
    and its replayed cycles."""
    # a causal kernel's masked loop runs for the block at the diagonal, once per CTA at
    # the grid's tiles (square: block_m = block_n); a full one's never at the dump's N,
    # multiples of the tiles (the profile's rule for any N: validate/profile.py)
    work = [
        (
            k["sass"],
            c["config"]["num_warps"],
            c["config"]["warp_specialize"],
            int(c["workload"]["causal"]),
        )
        for c in cases
        for k in c["kernels"]
    ]
    with ProcessPoolExecutor(jobs) as ex:
        results = iter(list(ex.map(_entry, work)))
    rows = []
    for c in cases:
        for i, k in enumerate(c["kernels"]):
            r = next(results)
            if r is not None:
                rows.append(
                    {
                        "algo": c["algo"],
                        "workload": c["workload"],
                        "config": c["config"],
                        "kernel_index": i,
                        "launch": k["launch"],
                        **r,
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python3 -m tilesim.validate.issue")
    ap.add_argument("dump", type=Path, help="a SASS dump (*-sass-dump.json.gz)")
    ap.add_argument("out", type=Path)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    with gzip.open(args.dump, "rt") as f:
        cases = json.load(f)
    doc = {
        "kind": "issue",
        "schema_version": SCHEMA_VERSION,
        "source": args.dump.name,
        "kernels": table(cases, args.jobs),
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
