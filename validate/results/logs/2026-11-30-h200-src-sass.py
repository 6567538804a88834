"""Compact ncu --page source --print-source sass CSVs: per kernel, every SASS instruction
with its executed count and nonzero warp-stall samples by reason."""
import csv, json, sys, os
out = {}
for path in sys.argv[2:]:
    rows = [l for l in open(path) if l.startswith('"')]
    r = list(csv.reader(rows))
    kname = r[0][1]
    hdr = r[1]
    ix = {h: i for i, h in enumerate(hdr)}
    reasons = [h for h in hdr if h.startswith('stall_') and '(' not in h]
    insts = []
    for x in r[2:]:
        if len(x) != len(hdr):
            continue
        rec = {"addr": x[ix['Address']], "sass": x[ix['Source']].strip(),
               "executed": int(x[ix['Instructions Executed']] or 0),
               "samples": int(x[ix['Warp Stall Sampling (All Samples)']] or 0)}
        st = {h[6:]: int(x[ix[h]]) for h in reasons if (x[ix[h]] or '0') not in ('0', '')}
        if st:
            rec["stalls"] = st
        insts.append(rec)
    tag = os.path.basename(path)[4:-4]
    out[tag] = {"kernel": kname, "instructions": insts}
json.dump(out, open(sys.argv[1], "w"))
