"""Rebuild the profile entries that have spill-reload waits, with `validate/sass.py`'s
rule that a loop loading nothing through L1 reloads from L1 (no waits).

Only those entries can change under the rule (a loop without waits keeps none), so
this gives what ``python -m tilesim.validate.profile --out profiles/sm90a-triton-3.6.json``
would, without compiling the other 2700 variants. The same cases and `Collector`
as the profile command; needs Triton 3.6 (the profile's toolchain):

    PYTHONPATH=<this tree as tilesim> /work/venv-t36/bin/python \\
        experiments/2026-12-02-v2-bwd/reprofile_spills.py profiles/sm90a-triton-3.6.json
"""

import dataclasses
import sys
from pathlib import Path

from tilesim.profiles import load, write
from tilesim.validate.profile import rebuild


def main(path: str) -> None:
    profile = load(Path(path))
    target = {v for v, f in profile.entries.items() if f.spill_reload_covers}
    rebuilt = rebuild(target, log=lambda *a: print(*a, file=sys.stderr))
    entries = dict(profile.entries)
    changed = 0
    for v in target:
        new = rebuilt[v]
        old = entries[v]
        if dataclasses.replace(new, spill_reload_covers=old.spill_reload_covers) != old:
            raise SystemExit(f"{v}: more than the spill waits differ: {old} / {new}")
        changed += new != old
        entries[v] = new
    write(dataclasses.replace(profile, entries=entries), Path(path))
    print(f"{len(target)} entries with spill waits rebuilt, {changed} changed")


if __name__ == "__main__":
    main(sys.argv[1])
