import sys, collections
from tilesim.validate import issue
ins, labels = issue.parse(open(sys.argv[1]).read())
end = max((i for i, x in enumerate(ins) if x[1] == "EXIT"), default=len(ins))
for j, x in enumerate(ins[:end]):
    m = issue.BRA.search(x[0])
    if m and m.group(1) in labels and j - labels[m.group(1)] > 1:
        body = ins[labels[m.group(1)]: j + 1]
        tot = collections.Counter()
        for b in body:
            tot[b[1].split(".")[0]] += b[2]
        print(len(body), "stall sum", sum(b[2] for b in body), tot.most_common(12))
