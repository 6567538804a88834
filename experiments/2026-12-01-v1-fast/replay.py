"""Replay each SASS loop of a dump on one scheduler (validate/issue.py) with k warps."""
import sys
from tilesim.validate import issue

_klass = issue.klass
def klass(op):
    return "hmma" if op.startswith("HMMA") else _klass(op)
issue.klass = klass
issue.ISSUE["hmma"] = 6.55  # 2499 FLOP/clk/SM (h200-cal) / 4 schedulers, m16n8k16
issue.LATENCY["hmma"] = 33  # assumed (not measured here)
import os
for kv in os.environ.get('REPLAY_SET', '').split(','):
    if kv:
        k, v = kv.split('=')
        (issue.ISSUE if k.startswith("I") else issue.LATENCY)[k.lstrip("I")] = float(v)
BAR = float(os.environ.get('REPLAY_BAR', 20))
text = open(sys.argv[1]).read()
ins, labels = issue.parse(text)
end = max((i for i, x in enumerate(ins) if x[1] == "EXIT"), default=len(ins))
for j, x in enumerate(ins[:end]):
    m = issue.BRA.search(x[0])
    if m and m.group(1) in labels and j - labels[m.group(1)] > 1:
        a = labels[m.group(1)]
        body = ins[a : j + 1]
        hm = sum(1 for b in body if b[1].startswith("HMMA"))
        if not hm:
            continue
        cyc = [issue.replay(body, k, 3, BAR) for k in (1, 2, 3, 4)]
        print(f"loop {a}-{j}: {len(body)} ins, {hm} HMMA, cycles k=1..4: {[round(c) for c in cyc]}")
