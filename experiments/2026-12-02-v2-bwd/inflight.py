"""Which wgmma groups of v2's backward loops stay in flight across other work, and how
many issue cycles the warp spends while each is in flight.

Compiles each variant on the CPU (Triton's own path, `validate.cross_compile`), reads
the innermost MMA loop's SASS and walks it with the issue replay's rules
(`validate.issue`: stall counts, scoreboards, unit intervals) for one warp per
scheduler. A wgmma group is committed by the HGMMA that carries ``gsb0``; it is
waited for at the next ``WARPGROUP.DEPBAR`` (wrapping past the back edge). The
cycles between are what the warp issues while the tensor cores run the group.

Run with a Python that has Triton 3.6 (the profile's toolchain):
    /work/venv-t36/bin/python experiments/2026-12-02-v2-bwd/inflight.py > inflight.txt
"""

import collections
import sys

from tilesim.hwmodels import load_gpu
from tilesim.traces.config import default_config
from tilesim.traces.workload import Workload
from tilesim.validate import issue, sass
from tilesim.validate.cross_compile import compiled_launches


def times(body):
    """Issue cycle of each instruction of ``body`` in a steady-state pass, one warp."""
    sb = [0] * 6
    unit = collections.defaultdict(float)
    cyc, ready, out = 0, 0, []
    for _ in range(3):
        stamps = []
        for _, op, stall, wbar, rbar, wait in body:
            cyc = max(cyc, ready)
            cl = issue.klass(op)
            occ = issue.ISSUE.get(cl)
            while (wait and any(sb[s] > cyc for s in range(6) if wait >> s & 1)) or (
                occ and unit[cl] > cyc
            ):
                cyc += 1
            if cl == "bar":
                cyc += issue.BARRIER[4]
            if occ:
                unit[cl] = cyc + occ
            if wbar != 7:
                sb[wbar] = cyc + issue.LATENCY.get(cl, 6)
            if rbar != 7:
                sb[rbar] = cyc + issue.RBAR
            stamps.append(cyc)
            ready = cyc + max(stall, 1)
        out.append(stamps)
    start = out[2][0]
    return [t - start for t in out[2]], ready - start


def loop_body(text):
    ins, labels = issue.parse(text)
    end = max(i for i, x in enumerate(ins) if x[1] == "EXIT")
    loops = []
    for j, x in enumerate(ins[:end]):
        m = issue.BRA.search(x[0])
        if m and m.group(1) in labels and j - labels[m.group(1)] > 1:
            loops.append((labels[m.group(1)], j))
    mma = [(a, j) for a, j in loops if any(x[1].startswith(issue.MMA) for x in ins[a : j + 1])]
    a, j = min(mma, key=lambda r: r[1] - r[0])
    return ins[a : j + 1]


def groups(body):
    """[(first HGMMA index, commit index, wait index or None, n HGMMAs)] in body order."""
    out, first, count = [], None, 0
    for i, x in enumerate(body):
        if x[1].startswith("HGMMA"):
            first = i if first is None else first
            count += 1
            if "gsb0" in x[0]:
                out.append([first, i, None, count])
                first, count = None, 0
    n = len(body)
    for g in out:
        for s in range(1, n + 1):
            if body[(g[1] + s) % n][1].startswith("WARPGROUP.DEPBAR"):
                g[2] = (g[1] + s) % n
                break
    return out


def main():
    gpu = load_gpu("h200")
    for d in (64, 128):
        for causal in (False, True):
            for dtype in ("fp16", "bf16"):
                for n in (4096, 4000):
                    w = Workload(
                        batch=4,
                        heads=16,
                        seqlen_q=n,
                        seqlen_kv=n,
                        head_dim=d,
                        causal=causal,
                        dtype=dtype,
                        pass_="bwd",
                    )
                    c = default_config("v2", w, gpu)
                    kernels, _ = compiled_launches("v2", w, c, gpu)
                    for _, name, _, k in kernels:
                        if name == "v2_bwd_preprocess":
                            continue
                        body = loop_body(sass.disassemble(k.asm["cubin"]))
                        t, total = times(body)
                        parts = []
                        for first, commit, wait, cnt in groups(body):
                            # cycles the warp issues from the group's first wgmma (the
                            # tensor cores start on it) to its wait
                            span = (t[wait] - t[first]) % total if wait is not None else None
                            where = "wraps" if wait is not None and wait < commit else "in-step"
                            parts.append(
                                f"[{cnt} HGMMA @{first}-{commit} wait@{wait} "
                                f"{where} issue-in-flight={span}]"
                            )
                        print(
                            f"d={d} causal={int(causal)} {dtype} N={n} {name}: "
                            f"{len(body)} instr, {total} cycles/step at 1 warp; " + " ".join(parts),
                            flush=True,
                        )


if __name__ == "__main__":
    sys.exit(main())
