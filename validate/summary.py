"""A short summary of one GPU run's results files (the last thing `validate/gpu/run.sh` prints).

    python -m tilesim.validate.summary OUT_DIR

Reads every results JSON under OUT_DIR (the calibrate, bench and validate files
of one run) and prints a few lines each: the calibrated fields, headline bench
TFLOPS, and the validate counts with the MAPE of the predictions *stored* in the
file (the model of the day; `tilesim report` recomputes them).
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import schema, stats


def summarize_calibrate(doc: dict) -> list[str]:
    meta = doc["metadata"]
    lines = [f"calibrate: {len(doc['measurements'])} measurements in {meta.get('wall_s', '?')} s"]
    for field, d in sorted((meta.get("derived") or {}).items()):
        lines.append(f"  {field:<42} {d['datasheet']:.4g} -> {d['calibrated']:.4g}")
    lines += [f"  note: {n}" for n in meta.get("notes") or []]
    return lines


def summarize_bench(doc: dict, seqlens=(8192, 16384)) -> list[str]:
    rows = doc["measurements"]
    counts = _counts(rows)
    lines = [f"bench: {len(rows)} runs ({counts})"]
    passes = list(dict.fromkeys(r["workload"].get("pass_", "fwd") for r in rows))
    for pass_ in passes:
        for n in seqlens:
            for causal in (False, True):
                sel = [
                    r
                    for r in rows
                    if r["workload"]["seqlen_q"] == n
                    and r["workload"]["head_dim"] == 128
                    and r["workload"]["causal"] == causal
                    and r["workload"].get("pass_", "fwd") == pass_
                ]
                if not sel:
                    continue
                cells = [
                    f"{r['impl'].removeprefix('tilesim-')} "
                    + (f"{r['tflops']:.0f}" if r["status"] == "ok" else r["status"])
                    for r in sel
                ]
                mask = "causal" if causal else "full"
                what = "" if pass_ == "fwd" else f"{pass_} "
                lines.append(f"  {what}d=128 N={n} {mask} TFLOPS: " + ", ".join(cells))
    return lines


def summarize_validate(doc: dict) -> list[str]:
    rows = doc["measurements"]
    lines = [f"validate: {len(rows)} points ({_counts(rows)})"]
    presets = doc["metadata"].get("presets") or []
    for preset in presets:
        pairs = [
            (r["predictions"][preset]["time_s"], r["time_s"])
            for r in schema.ok_rows(doc)
            if "time_s" in (r.get("predictions") or {}).get(preset, {})
        ]
        if not pairs:
            lines.append(f"  {preset}: no stored predictions")
            continue
        pred, meas = zip(*pairs, strict=True)
        s = stats.summarize(pred, meas)
        lines.append(
            f"  {preset} (stored predictions, n={s.n}): MAPE {s.mape_pct:.1f}%, "
            f"signed {s.signed_mean_pct:+.1f}%, max {s.max_abs_pct:+.1f}%, "
            f"Spearman {s.spearman:.3f}"
        )
        by_pass: dict[str, list] = {}
        for r in schema.ok_rows(doc):
            if "time_s" in (r.get("predictions") or {}).get(preset, {}):
                by_pass.setdefault(r["workload"].get("pass_", "fwd"), []).append(
                    (r["predictions"][preset]["time_s"], r["time_s"])
                )
        if len(by_pass) > 1:
            for pass_, pp in by_pass.items():
                s = stats.summarize(*zip(*pp, strict=True))
                lines.append(f"    {pass_}: n={s.n}, MAPE {s.mape_pct:.1f}%")
    clocks = sorted(r["clock_sm_MHz"] for r in rows if r.get("clock_sm_MHz"))
    if clocks:
        lines.append(
            f"  SM clock while timed: {clocks[len(clocks) // 2]:.0f} MHz median "
            f"({clocks[0]:.0f}-{clocks[-1]:.0f})"
        )
    bad = [r for r in rows if r["status"] in ("wrong", "error")]
    for r in bad[:6]:
        w = r["workload"]
        lines.append(
            f"  {r['status']}: {r['algo']}"
            + ("" if w.get("pass_", "fwd") == "fwd" else f" {w['pass_']}")
            + f" {w['dtype']} d={w['head_dim']} N={w['seqlen_q']} "
            f"causal={w['causal']}: {r['note'][:90]}"
        )
    return lines


def _counts(rows) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else ".")
    files = sorted(root.rglob("*.json"))
    if not files:
        print(f"summary: no results files under {root}")
        return 1
    out = []
    for path in files:
        try:
            doc = schema.load_results(path)
        except Exception as exc:  # a partial or foreign file: say so, go on
            out.append(f"{path.name}: unreadable ({' '.join(str(exc).split())[:120]})")
            continue
        kind = doc["kind"]
        fn = {
            "calibrate": summarize_calibrate,
            "bench": summarize_bench,
            "validate": summarize_validate,
        }[kind]
        out.append(f"== {path.name}")
        out += fn(doc)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
