"""Hardware counters of tilesim's kernels: run the cases under Nsight Compute, then parse.

On the GPU machine, from the repository root (clocks are left alone)::

    ncu --clock-control none -k 'regex:^_' \
        --metrics "$(python3 -m tilesim.validate.gpu.ncu metrics)" \
        --csv python3 -m tilesim.validate.gpu.ncu run > ncu.csv
    nvidia-smi --query-gpu=name,clocks.sm,power.limit,driver_version --format=csv > smi.txt
    python3 -m tilesim.validate.gpu.ncu parse ncu.csv --smi smi.txt --git-commit <hash> \
        --out results/raw/<date>-<gpu>-ncu.json

``run`` launches each case's kernels twice (the first compiles and warms up;
``parse`` keeps the second). A backward case first runs its forward once
(``backward_launches`` does), which ``parse`` skips. The JSON holds, per case,
the workload, the kernel config the model should predict, and each kernel's
counters; ``tests/validate/test_ncu_bytes.py`` holds the model's HBM bytes to
the DRAM bytes counted here.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
from pathlib import Path

# algo, batch, heads, N, d, causal, dtype, pass, Triton kernels run before (untimed), launches
CASES = (
    ("standard", 4, 16, 4096, 128, False, "fp16", "fwd", 0, 3),
    ("standard", 1, 32, 16384, 64, False, "fp16", "fwd", 0, 3),
    ("standard", 1, 32, 16384, 64, True, "fp16", "fwd", 0, 3),
    ("v1", 4, 16, 4096, 128, False, "fp16", "fwd", 0, 1),
    ("v1", 2, 32, 8192, 64, False, "fp16", "fwd", 0, 1),
    ("v2", 4, 32, 4096, 64, False, "fp16", "fwd", 0, 1),
    ("v2", 32, 16, 512, 128, True, "fp16", "fwd", 0, 1),
    ("v2", 32, 16, 512, 128, False, "fp16", "fwd", 0, 1),
    ("v2", 4, 16, 4096, 128, False, "fp16", "fwd", 0, 1),
    ("v3", 4, 32, 4096, 64, True, "fp16", "fwd", 0, 1),
    ("v3", 16, 16, 1024, 128, False, "fp8", "fwd", 0, 2),
    ("v3", 1, 16, 16384, 128, False, "fp8", "fwd", 0, 2),
    ("v2", 4, 16, 4096, 128, False, "fp16", "bwd", 1, 3),
    ("v2", 4, 16, 4096, 128, True, "fp16", "bwd", 1, 3),
    ("standard", 4, 16, 2048, 128, False, "fp16", "bwd", 3, 5),
    ("v1", 8, 16, 1024, 128, False, "fp16", "bwd", 1, 1),
    ("v1", 8, 32, 1024, 64, False, "fp16", "bwd", 1, 1),
    ("v2", 4, 32, 4096, 64, False, "fp16", "bwd", 1, 3),
    ("v3", 32, 16, 512, 128, True, "fp16", "fwd", 0, 1),
    ("v3", 32, 16, 512, 128, False, "fp16", "fwd", 0, 1),
    ("v1", 1, 16, 16384, 128, False, "fp16", "fwd", 0, 1),
    # v1 at d = 64 across its wave counts (4, 2, 1): the forward's worst errors
    ("v1", 32, 32, 512, 64, False, "fp16", "fwd", 0, 1),
    ("v1", 16, 32, 1024, 64, False, "fp16", "fwd", 0, 1),
    ("v1", 8, 32, 2048, 64, False, "fp16", "fwd", 0, 1),
    ("v1", 8, 32, 2048, 64, False, "fp16", "bwd", 1, 1),
)

# ncu metric -> field of a kernel's record
METRICS = {
    "gpu__time_duration.sum": ("time_s", 1e-9),
    "dram__bytes_read.sum": ("dram_read_bytes", 1),
    "dram__bytes_write.sum": ("dram_write_bytes", 1),
    "lts__t_sector_hit_rate.pct": ("l2_hit_rate_pct", 1),
    "launch__registers_per_thread": ("registers_per_thread", 1),
    "launch__shared_mem_per_block": ("shared_mem_per_block_bytes", 1),
    "launch__grid_size": ("grid_size", 1),
    "launch__block_size": ("block_size", 1),
    "sm__inst_executed.sum": ("warp_instructions", 1),
    "sm__inst_executed_pipe_xu.sum": ("warp_instructions_xu", 1),
    "sm__inst_executed_pipe_fma.sum": ("warp_instructions_fma", 1),
    "sm__inst_executed_pipe_alu.sum": ("warp_instructions_alu", 1),
    "smsp__issue_active.avg.pct_of_peak_sustained_active": ("issue_active_pct", 1),
    "sm__cycles_elapsed.avg": ("sm_cycles_elapsed", 1),
    # register spills: local-memory bytes the LSU moved, and how many L1 missed
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": ("local_load_bytes", 1),
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": ("local_store_bytes", 1),
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld_lookup_miss.sum": ("local_load_l1_miss_sectors", 1),
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st_lookup_miss.sum": ("local_store_l1_miss_sectors", 1),
    "lts__t_bytes.sum": ("l2_bytes", 1),
}


def run_cases(selected: list[int] | None = None) -> None:
    """Launch every case's kernels twice (GPU; run under ncu)."""
    import torch

    from ...kernels.api import backward_launches, launches, quantize_fp8

    for i, (algo, b, h, n, d, causal, dtype, pass_, _, _) in enumerate(CASES):
        if selected and i not in selected:
            continue
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        if pass_ == "bwd":
            grads, runs = backward_launches(q, k, v, torch.randn_like(q), causal=causal, algo=algo)
            out = grads[0]
        else:
            scales = {}
            if dtype == "fp8":
                (q, scales["q_scale"]), (k, scales["k_scale"]), (v, scales["v_scale"]) = (
                    quantize_fp8(t) for t in (q, k, v)
                )
            out, runs = launches(q, k, v, causal=causal, algo=algo, **scales)
        torch.cuda.synchronize()
        for _ in range(2):
            for _, run in runs:
                run()
            torch.cuda.synchronize()
        finite = bool(torch.isfinite(out.float()).all())
        print(f"case {i}: {algo} {pass_} B={b} H={h} N={n} d={d} causal={causal} {dtype} "
              f"finite={finite}", flush=True)  # fmt: skip


def _number(text: str) -> float | None:
    text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse(
    csv_text: str,
    nvidia_smi: list[str],
    git_commit: str,
    date: str,
    selected: list[int] | None = None,
) -> dict:
    """The ncu CSV of a `run` -> the results document (cases in order, second runs kept);
    ``selected``: the case indices that run was given (default: all)."""
    from ...hwmodels import load_gpu
    from ...traces.config import default_config
    from ...traces.workload import Workload

    rows = csv.DictReader(line for line in csv_text.splitlines() if line.startswith('"'))
    kernels: dict = collections.OrderedDict()
    for row in rows:
        key = (int(row["ID"]), row["Kernel Name"])
        kernels.setdefault(key, {})[row["Metric Name"]] = row["Metric Value"]
    triton = [(name, m) for (_, name), m in kernels.items() if name.startswith("_")]
    gpu = load_gpu("h200_sxm_141gb")
    cases, pos = [], 0
    for i, (algo, b, h, n, d, causal, dtype, pass_, before, count) in enumerate(CASES):
        if selected and i not in selected:
            continue
        pos += before
        second = triton[pos + count : pos + 2 * count]
        pos += 2 * count
        w = Workload(b, h, n, n, d, causal=causal, dtype=dtype, pass_=pass_)
        records = []
        for name, m in second:
            rec = {"kernel": name.split("(")[0]}
            for metric, (field, scale) in METRICS.items():
                value = _number(m.get(metric, ""))
                rec[field] = None if value is None else value * scale
            records.append(rec)
        cases.append(
            {
                "algo": algo,
                "workload": w.to_dict(),
                "config": default_config(algo, w, gpu).to_dict(),
                "kernels": records,
            }
        )
    if pos != len(triton):
        raise SystemExit(f"ncu CSV has {len(triton)} Triton kernels, the cases account for {pos}")
    return {
        "kind": "ncu",
        "schema_version": 1,
        "metadata": {
            "date": date,
            "git_commit": git_commit,
            "tool": "Nsight Compute, ncu --clock-control none (clocks left as they were); the "
            "second of two runs of each case's launches",
            "nvidia_smi_before": nvidia_smi,
        },
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tilesim.validate.gpu.ncu", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("metrics", help="print the --metrics list for ncu")
    run = sub.add_parser("run", help="launch the cases (under ncu, on the GPU)")
    run.add_argument("cases", nargs="*", type=int)
    par = sub.add_parser("parse", help="ncu CSV -> results JSON")
    par.add_argument("csv", type=Path)
    par.add_argument("--out", type=Path, required=True)
    par.add_argument("--git-commit", default="")
    par.add_argument("--date", default="")
    par.add_argument("--smi", type=Path, help="nvidia-smi output saved beside the CSV")
    par.add_argument("--cases", type=int, nargs="*", help="the case indices `run` was given")
    args = ap.parse_args(argv)
    if args.cmd == "metrics":
        print(",".join(METRICS))
    elif args.cmd == "run":
        run_cases(args.cases)
    else:
        import datetime

        smi = args.smi.read_text().splitlines() if args.smi else []
        date = args.date or datetime.date.today().isoformat()
        doc = parse(args.csv.read_text(), smi, args.git_commit, date, args.cases)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(args.out)


if __name__ == "__main__":
    main()
