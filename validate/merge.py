"""Merge results files of one kind and one GPU run into one file.

    python -m tilesim.validate.merge OUT.json IN1.json IN2.json ...

`validate/gpu/run.sh` times the newest kernels (v3) in a process of their own, so that a
hang there (killed by its time limit) cannot cost the other measurements; this
joins the pieces. Measurements are concatenated in the order given; the first
file's metadata is kept, the others' are listed under ``metadata.parts``, and the
after-run GPU state is the last file's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import TilesimError
from . import schema


def merge(docs: Sequence[dict]) -> dict:
    if not docs:
        raise TilesimError("nothing to merge")
    kinds = {d["kind"] for d in docs}
    if len(kinds) > 1:
        raise TilesimError(f"cannot merge results of different kinds: {', '.join(sorted(kinds))}")
    meta = dict(docs[0]["metadata"])
    meta["parts"] = [d["metadata"] for d in docs[1:]]
    last_after = [
        d["metadata"].get("nvidia_smi_after") for d in docs if d["metadata"].get("nvidia_smi_after")
    ]
    if last_after:
        meta["nvidia_smi_after"] = last_after[-1]
    out = schema.new_results(docs[0]["kind"], meta)
    for d in docs:
        out["measurements"].extend(d["measurements"])
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m tilesim.validate.merge OUT.json IN.json [IN.json ...]")
        return 2
    out, ins = Path(args[0]), [Path(a) for a in args[1:]]
    docs = []
    for path in ins:
        if not path.exists():
            print(f"merge: {path} missing (its step wrote nothing); left out")
            continue
        try:
            docs.append(schema.load_results(path))
        except TilesimError as exc:
            print(f"merge: {exc}; left out")
    if not docs:
        print("merge: no input to merge")
        return 1
    schema.save_results(merge(docs), out)
    for path in ins:
        if path.exists() and path.resolve() != out.resolve():
            path.unlink()
    print(f"merge: {sum(len(d['measurements']) for d in docs)} measurements -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
