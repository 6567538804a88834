"""Replay each SASS loop (with HMMA) of a dump on one scheduler, at 1-4 warps.

validate/issue.py's replay, with mma.sync's HMMA given a tensor-pipe issue interval (2499
FLOP/clk/SM, h200-cal, over 4 schedulers: 6.55 cycles per m16n8k16) and an assumed
33-cycle latency, for these probes only. REPLAY_SET="lds=1,Ihmma=1" sets latencies (and,
with an I, issue intervals) to see what a loop's time hangs on; REPLAY_BAR the barrier's.

    python replay.py DUMP.sass
"""

import os
import sys

from tilesim.validate import issue

_klass = issue.klass


def klass(op):
    return "hmma" if op.startswith("HMMA") else _klass(op)


def main() -> None:
    issue.klass = klass
    issue.ISSUE["hmma"] = 6.55
    issue.LATENCY["hmma"] = 33
    for kv in filter(None, os.environ.get("REPLAY_SET", "").split(",")):
        k, v = kv.split("=")
        (issue.ISSUE if k.startswith("I") else issue.LATENCY)[k.lstrip("I")] = float(v)
    bar = float(os.environ.get("REPLAY_BAR", 20))
    with open(sys.argv[1]) as f:
        ins, labels = issue.parse(f.read())
    end = max((i for i, x in enumerate(ins) if x[1] == "EXIT"), default=len(ins))
    for j, x in enumerate(ins[:end]):
        m = issue.BRA.search(x[0])
        if not (m and m.group(1) in labels and j - labels[m.group(1)] > 1):
            continue
        body = ins[labels[m.group(1)] : j + 1]
        hmma = sum(1 for b in body if b[1].startswith("HMMA"))
        if hmma:
            cycles = [round(issue.replay(body, k, 3, bar)) for k in (1, 2, 3, 4)]
            print(f"loop of {len(body)} instructions, {hmma} HMMA: cycles at 1-4 warps {cycles}")


if __name__ == "__main__":
    main()
