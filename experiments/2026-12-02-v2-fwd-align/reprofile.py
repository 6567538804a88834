"""Rebuild the profile's v2 forward entries with the masked-loop rule of
`validate/profile.py` (a CTA that runs a second K/V loop with MMAs, the trace says so,
pays that loop's issue beyond a step once): at N not a multiple of block_n the full
attention's partial last block runs in its own masked loop (kernels/flash_v2.py).

Only v2's full forward entries at such N change under the rule (every other kernel's
trace has a second MMA loop exactly when it is causal, the old rule); this gives what
``python -m tilesim.validate.profile --out profiles/sm90a-triton-3.6.json`` would for
them, with the same cases and `Collector`, without compiling the other 2,700 variants.
Needs Triton 3.6 (the profile's toolchain):

    PYTHONPATH=<this tree as tilesim> /work/venv-t36/bin/python \\
        experiments/2026-12-02-v2-fwd-align/reprofile.py profiles/sm90a-triton-3.6.json
"""

import dataclasses
import sys
from pathlib import Path

from tilesim.profiles import load, write
from tilesim.validate.profile import rebuild


def main(path: str) -> None:
    profile = load(Path(path))
    target = {
        v
        for v in profile.entries
        if v.algo == "v2" and v.pass_ == "fwd" and not v.causal and v.seqlen_kv_align < v.block_n
    }
    rebuilt = rebuild(target, log=lambda *a: print(*a, file=sys.stderr))
    entries = dict(profile.entries)
    changed = []
    for v in sorted(target, key=repr):
        new, old = rebuilt[v], entries[v]
        if dataclasses.replace(new, issue_per_cta_cycles=old.issue_per_cta_cycles) != old:
            raise SystemExit(f"{v}: more than the issue per CTA differs: {old} / {new}")
        if new != old:
            changed.append(v)
            print(v, old.issue_per_cta_cycles, "->", new.issue_per_cta_cycles)
        entries[v] = new
    write(dataclasses.replace(profile, entries=entries), Path(path))
    print(
        f"{len(target)} v2 full forward entries at N off the tiles rebuilt, {len(changed)} changed"
    )


if __name__ == "__main__":
    main(sys.argv[1])
