"""Replay the compiled loop bodies of every kernel variant of the validation grid on
one warp scheduler, from their SASS control bits (diagnostic, not used by the model).

Input: the SASS dump beside this script (``*-sass-dump.json.gz``: ``nvdisasm -c -hex``
of every kernel of ``validate.registers``' 77 variants, Triton 3.6 on the H200).
For each kernel with an MMA loop: ``loop`` = cycles per iteration of its innermost
MMA loop (the loop with HGMMA and the fewest instructions) with k = 1..4 warps per
scheduler all running it; ``rest`` = the kernel's other instructions replayed once
in text order (prologue, epilogue, other loops once); kernels with HGMMA and no loop
(standard's qk, bwd_dp) get ``kernel`` = the whole text once.

The replay issues at most one instruction per cycle per scheduler, honours each
instruction's stall count, waits on the scoreboards in its wait mask, sets its write
scoreboard to its class's latency and its read scoreboard to RBAR cycles, and
occupies its unit (FP32 lanes, INT, MUFU, shuffle, shared memory) for its issue
interval. Global loads, stores, wgmma and their waits cost nothing here (the
simulator models them). Latencies and issue intervals are H200 micro-benchmarks:
``*-cpi-probe.jsonl`` (MUFU.EX2 17, SHFL 24 cycles; issue intervals FFMA 1.5, FADD/FMUL
1.05, IMAD/FMNMX 2, SHFL 4, MUFU 8) and ``*-lat-probe.jsonl`` (shared and local loads
24 cycles, bar.sync 20/28/44 cycles with 4/8/16 warps). STS/STSM read release,
S2R and MEMBAR latencies (20) and RBAR (6) are not measured.

usage: python3 2026-11-30-h200-issue-replay.py OUT.json [JOBS]
"""

import collections
import gzip
import json
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
DUMP = HERE / "2026-11-30-h200-sass-dump.json.gz"

INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
HIGH = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
LABEL = re.compile(r"^\s*(\.L_x_\d+):")
BRA = re.compile(r"\bBRA\s+(?:`\()?(\.L_x_\d+)")
PRED = re.compile(r"^@!?U?P[T\d]+\s+")

EXT = {"LDG", "LDGSTS", "STG", "LDGDEPBAR", "HGMMA", "RED", "ATOM", "REDG", "LDC", "ULDC", "DEPBAR"}
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


def kernel_entry(job):
    text, warps = job
    ins, labels = parse(text)
    if not any(x[1].startswith("HGMMA") for x in ins):
        return None
    bar = BARRIER.get(warps, 28)
    loops = []
    for j, x in enumerate(ins):
        m = BRA.search(x[0])
        if m and m.group(1) in labels and j - labels[m.group(1)] > 1:
            loops.append((labels[m.group(1)], j))
    mma = [(a, j) for a, j in loops if any(x[1].startswith("HGMMA") for x in ins[a : j + 1])]
    ks = (1, 2, 3, 4)
    if not mma:
        return {"kernel": [replay(ins, k, 2, bar) for k in ks], "instructions": len(ins)}
    a, j = min(mma, key=lambda r: r[1] - r[0])
    body, rest = ins[a : j + 1], ins[:a] + ins[j + 1 :]
    return {
        "loop": [replay(body, k, 3, bar) for k in ks],
        "loop_instructions": len(body),
        "rest": [replay(rest, k, 2, bar) for k in ks],
        "rest_instructions": len(rest),
    }


def main(out: str, jobs: int = 2) -> None:
    with gzip.open(DUMP, "rt") as f:
        cases = json.load(f)
    work = [(k["sass"], c["config"]["num_warps"]) for c in cases for k in c["kernels"]]
    with ProcessPoolExecutor(jobs) as ex:
        results = iter(list(ex.map(kernel_entry, work)))
    rows = []
    for c in cases:
        for k in c["kernels"]:
            r = next(results)
            if r is not None:
                rows.append({"algo": c["algo"], "workload": c["workload"], "config": c["config"],
                             "launch": k["launch"], **r})  # fmt: skip
    Path(out).write_text(json.dumps({"kind": "issue-replay", "kernels": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
