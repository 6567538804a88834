"""`tilesim explain --pass bwd | fwd_bwd`: the backward pass's trade, with this shape's numbers.

Standard attention's forward stores the probabilities P (N x N) and its backward
reads them back, and writes and reads dP and dS, N x N each too. FlashAttention
stores only O and one or two fp32 statistics per row, and its backward
recomputes S = Q Kᵀ and P tile by tile on chip: it buys HBM bytes with FLOPs.
This module puts figures on both sides of the trade, all from the traces'
counters (`traces.counters`), `traces.kept_bytes` and the simulated predictions:

* FLOPs: the backward's matmul FLOPs against the forward's. The convention (and
  the FlashAttention paper) says 2.5x: the five products S, dV, dP, dQ, dK of
  2·N²·d each. Standard attention reads P, so it skips S: 2x. v1 (Algorithm 4)
  runs exactly the five: 2.5x. v2's dQ in a pass of its own recomputes S and
  dP once more instead of adding dQ atomically: 3.5x. "Recomputed" FLOPs are
  the backward's FLOPs above 2x its forward's (dV, dP, dQ, dK, which any
  backward runs): 0.5x the forward for v1, 1.5x for v2.
* Bytes: the N x N traffic of standard attention's backward (P read, dP and dS
  written and read back), none of which a FlashAttention backward has; and the
  simulated HBM bytes of each backward.
* Memory kept between the passes: P against O plus the row statistics.

The explanation has the same shape as the forward's (`Explanation`: sections
whose prose cites only the numbers they store, and a side-by-side table), so
the same renderers print it.
"""

from __future__ import annotations

import dataclasses

from .errors import TilesimError
from .explain.fmt import fmt_pct, fmt_si, fmt_time, fmt_x
from .explain.story import NAMES, Explanation, Section, score_traffic
from .hwmodels.gpu import GPU
from .runner import Job, run_jobs
from .traces import default_config, kept_bytes
from .traces.counters import Counters, counters
from .traces.workload import PASS_FLOPS, Workload
from .units import fmt_bytes

ALGOS = ("standard", "v1", "v2")  # the algorithms with a backward schedule
PAPER_FACTOR = PASS_FLOPS["bwd"]  # backward matmul FLOPs / forward's, by the shared convention
# What each forward keeps in HBM for its backward, besides Q, K, V (traces.kept_bytes).
DQ_WORKSPACE = "dQacc"  # v1's fp32 dQ in HBM (traces.flash_v1_bwd)
KEPT_TENSORS = {"standard": ("P",), "v1": ("O", "L", "M"), "v2": ("O", "LSE")}


@dataclasses.dataclass
class BwdRun:
    algo: str
    fwd_counters: Counters | None = None
    bwd_counters: Counters | None = None
    fwd_pred: object = None  # Prediction of the forward alone
    pass_pred: object = None  # Prediction of the pass asked for (bwd or fwd_bwd)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.pass_pred is not None and self.fwd_pred is not None


def gather(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> dict[str, BwdRun]:
    """Counters of each algorithm's forward and backward; predictions of the forward and
    of the pass ``w.pass_`` (each pass with its own default config)."""
    fwd_w = dataclasses.replace(w, pass_="fwd")
    bwd_w = dataclasses.replace(w, pass_="bwd")
    runs: dict[str, BwdRun] = {}
    jobs, keys = [], []
    for algo in ALGOS:
        run = runs[algo] = BwdRun(algo)
        try:
            run.fwd_counters = counters(Job(gpu, algo, fwd_w).trace())
            run.bwd_counters = counters(Job(gpu, algo, bwd_w).trace())
        except TilesimError as exc:
            run.error = str(exc)
            continue
        for which, wl in (("fwd", fwd_w), ("pass", w)):
            jobs.append(Job(gpu, algo, wl, None, fidelity))
            keys.append((algo, which))
    outcomes, _ = run_jobs(jobs, workers=workers, cache_dir=cache_dir, progress=progress)
    for (algo, which), out in zip(keys, outcomes, strict=True):
        run = runs[algo]
        if out.error:
            run.error = run.error or out.error
        elif which == "fwd":
            run.fwd_pred = out.prediction
        else:
            run.pass_pred = out.prediction
    return runs


def bwd_time(run: BwdRun, pass_: str) -> float:
    """Predicted seconds of the backward: the pass itself, or fwd_bwd minus the forward."""
    if pass_ == "bwd":
        return run.pass_pred.time_s
    return run.pass_pred.time_s - run.fwd_pred.time_s


def nxn_traffic(c: Counters) -> int:
    """HBM bytes of the N x N matrices (S, P, dP, dS) as the trace moves them (no reuse)."""
    return score_traffic(c)


def trade_numbers(gpu: GPU, w: Workload, runs: dict[str, BwdRun]) -> dict:
    """Every figure of the recompute trade, unrounded (the sections cite these)."""
    ok = {a: r for a, r in runs.items() if r.ok}
    std = ok["standard"]
    path = default_config("v2", dataclasses.replace(w, pass_="bwd"), gpu).mma_path
    peak = gpu.peak_tensor_flops(w.dtype, path)
    nums: dict = {
        "paper_factor": PAPER_FACTOR,
        "peak_tensor_flops": peak,
        "hbm_bandwidth_Bps": gpu.hbm_bandwidth_Bps,
        "ridge_flop_per_byte": gpu.ridge_point_flop_per_byte(w.dtype, path),
        "algos": {},
    }
    std_nxn = nxn_traffic(std.bwd_counters)
    for algo, r in ok.items():
        fwd_f, bwd_f = r.fwd_counters.matmul_flops, r.bwd_counters.matmul_flops
        nxn = nxn_traffic(r.bwd_counters)
        tb = bwd_time(r, w.pass_)
        nums["algos"][algo] = {
            "fwd_flops": fwd_f,
            "bwd_flops": bwd_f,
            "flops_factor": bwd_f / fwd_f,
            # dV, dP, dQ, dK with P at hand are 2x the forward's FLOPs; the rest is
            # recomputation (S; for v2's separate dQ pass, S and dP once more)
            "recomputed_flops": bwd_f - 2 * fwd_f,
            "nxn_bytes": nxn,
            "nxn_bytes_avoided": std_nxn - nxn,
            "bwd_no_reuse_hbm_bytes": r.bwd_counters.no_reuse_hbm_bytes,
            # v1's fp32 dQ workspace (the released kernel's atomic adds, Algorithm 4's
            # read-modify-write of dQ_i)
            "dq_workspace_bytes": r.bwd_counters.read_bytes_by_tensor.get(DQ_WORKSPACE, 0)
            + r.bwd_counters.write_bytes_by_tensor.get(DQ_WORKSPACE, 0),
            "kept_bytes": kept_bytes(algo, w),
            "kept_tensors": list(KEPT_TENSORS[algo]),
            "fwd_time_s": r.fwd_pred.time_s,
            "bwd_time_s": tb,
            "bwd_over_fwd_time": tb / r.fwd_pred.time_s,
            "pass_time_s": r.pass_pred.time_s,
            "pass_hbm_bytes": r.pass_pred.hbm_bytes,
            "pass_tflops": r.pass_pred.tflops,
            "bound": r.pass_pred.bound,
        }
    for algo, a in nums["algos"].items():
        if algo != "standard" and a["nxn_bytes_avoided"] > 0:
            # FLOPs spent per HBM byte saved: below the ridge point, recomputing is cheaper
            a["flops_per_byte_avoided"] = a["recomputed_flops"] / a["nxn_bytes_avoided"]
    return nums


# -- the sections --------------------------------------------------------------------


def _flops_section(w: Workload, nums: dict) -> Section:
    a = nums["algos"]
    mask = " (causal: the flash backwards skip the masked blocks, standard's GEMMs do not)"
    text = [
        "FlashAttention's forward does not store the N x N probabilities P, so its "
        "backward computes S = Q Kᵀ and P again, tile by tile, from Q, K and the "
        "per-row statistics. The convention counts the backward as "
        f"{nums['paper_factor']}x the forward's matmul FLOPs: the five products S, dV, "
        "dP, dQ, dK of 2·N²·d each."
    ]
    for algo in ALGOS:
        if algo not in a:
            continue
        x = a[algo]
        why = {
            "standard": "it reads the stored P, so it skips S: four GEMMs, nothing recomputed",
            "v1": "the five products, S recomputed once",
            "v2": "its dQ runs in a pass of its own, which recomputes S and dP again "
            "instead of adding dQ atomically",
        }[algo]
        extra = (
            ""
            if algo == "standard"
            else f": {fmt_si(x['recomputed_flops'])}FLOP recomputed, "
            f"{x['recomputed_flops'] / x['fwd_flops']:.2f}x the forward"
        )
        text.append(
            f"{NAMES[algo]}: {fmt_si(x['bwd_flops'])}FLOP = {x['flops_factor']:.2f}x its "
            f"forward's {fmt_si(x['fwd_flops'])}FLOP ({why}){extra}."
        )
    if w.causal:
        text[-1] += mask
    return Section("bwd_flops", "The backward recomputes: extra FLOPs", text, nums["algos"])


def _bytes_section(nums: dict) -> Section:
    a = nums["algos"]
    std = a["standard"]
    text = [
        "Standard attention's backward pays for the stored P in bytes: it reads P, "
        "writes dP and dS and reads them back, "
        f"{fmt_bytes(std['nxn_bytes'])} of N x N traffic through HBM; its whole backward "
        f"moves {fmt_bytes(std['pass_hbm_bytes'])} (simulated)."
    ]
    ridge = nums["ridge_flop_per_byte"]
    for algo in ("v1", "v2"):
        if algo not in a:
            continue
        x = a[algo]
        per = x.get("flops_per_byte_avoided")
        cheaper = (
            ""
            if per is None
            else f" It spends {per:.0f} recomputed FLOPs per byte avoided, "
            + (
                f"below the ridge point of {ridge:.0f} FLOP/byte: recomputing is cheaper "
                "than reading"
                if per < ridge
                else f"above the ridge point of {ridge:.0f} FLOP/byte: here recomputing "
                "costs more tensor time than the bytes would cost HBM time"
            )
            + "."
        )
        ratio = x["pass_hbm_bytes"] / std["pass_hbm_bytes"]
        if ratio <= 1:
            moved = f"{fmt_pct(1 - ratio)} less than standard's."
        else:
            moved = f"{fmt_x(ratio)} standard's"
            if x["dq_workspace_bytes"]:
                moved += (
                    f": its fp32 dQ workspace, written (and, in Algorithm 4, read back) "
                    f"every inner step, moves "
                    f"{fmt_bytes(x['dq_workspace_bytes'])} (no reuse), more than the N x N "
                    "traffic it avoids"
                )
            moved += "."
        text.append(
            f"{NAMES[algo]} avoids all {fmt_bytes(x['nxn_bytes_avoided'])} of it; its "
            f"backward moves {fmt_bytes(x['pass_hbm_bytes'])} (simulated), {moved}{cheaper}"
        )
    return Section("bwd_bytes", "...to avoid HBM bytes", text, {"ridge": ridge, **a})


def _memory_section(w: Workload, nums: dict) -> Section:
    a = nums["algos"]
    std = a["standard"]["kept_bytes"]
    text = [
        "Between the passes standard attention keeps P, "
        f"B·H·N² elements: {fmt_bytes(std)} at this shape (and it grows with N²)."
    ]
    for algo in ("v1", "v2"):
        if algo not in a:
            continue
        x = a[algo]
        text.append(
            f"{NAMES[algo]} keeps {' + '.join(x['kept_tensors'])}: "
            f"{fmt_bytes(x['kept_bytes'])}, {fmt_x(std / x['kept_bytes'])} less "
            "(it grows with N only)."
        )
    return Section(
        "bwd_memory",
        "Memory kept between the passes",
        text,
        {k: v["kept_bytes"] for k, v in a.items()},
    )


def _time_section(w: Workload, nums: dict) -> Section:
    a = nums["algos"]
    text = []
    for algo in ALGOS:
        if algo not in a:
            continue
        x = a[algo]
        line = (
            f"{NAMES[algo]}: backward {fmt_time(x['bwd_time_s'])}, "
            f"{x['bwd_over_fwd_time']:.2f}x its forward's {fmt_time(x['fwd_time_s'])}"
        )
        if w.pass_ == "fwd_bwd":
            line += f"; forward + backward {fmt_time(x['pass_time_s'])}"
        text.append(line + f" (bound: {x['bound']}).")
    if "standard" in a and "v2" in a:
        s, v = a["standard"]["pass_time_s"], a["v2"]["pass_time_s"]
        verdict = "faster" if v < s else "slower"
        text.append(
            f"The trade {'pays' if v < s else 'does not pay'} here: {NAMES['v2']} is "
            f"{fmt_x(s / v if v < s else v / s)} {verdict} than standard attention "
            f"({'backward' if w.pass_ == 'bwd' else 'forward + backward'})."
        )
    return Section("bwd_time", "What it costs in time", text, a)


def _table(w: Workload, runs: dict[str, BwdRun], nums: dict) -> list[dict]:
    rows = []
    for algo in ALGOS:
        r = runs[algo]
        row = {"algo": algo, "name": NAMES[algo], "error": r.error}
        if not r.ok:
            rows.append(row)
            continue
        p, x = r.pass_pred, nums["algos"][algo]
        row.update(
            score_hbm_bytes=x["nxn_bytes"],
            extra_bytes=x["kept_bytes"],
            extra_tensors=list(KEPT_TENSORS[algo]),
            ctas=[lp.ctas for lp in p.launches],
            launches=[lp.name for lp in p.launches],
            waves=p.waves,
            features=[p.config.get("mma_path", "")],
            precision=w.dtype,
            time_s=p.time_s,
            tflops=p.tflops,
            hbm_bytes=p.hbm_bytes,
            bound=p.bound,
            flops_factor=x["flops_factor"],
        )
        rows.append(row)
    return rows


def build_backward_explanation(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> Explanation:
    """The recompute trade of the backward pass (``w.pass_`` "bwd" or "fwd_bwd")."""
    if w.pass_ not in ("bwd", "fwd_bwd"):
        raise TilesimError(f"the backward story needs pass bwd or fwd_bwd, not {w.pass_!r}")
    if w.dtype == "fp8":
        raise TilesimError("fp8 has no backward schedule (v3 only runs fp8); use fp16 or bf16")
    runs = gather(
        gpu, w, workers=workers, cache_dir=cache_dir, progress=progress, fidelity=fidelity
    )
    for key in ("standard", "v2"):
        if not runs[key].ok:
            raise TilesimError(f"cannot explain this shape: {key} fails: {runs[key].error}")
    nums = trade_numbers(gpu, w, runs)
    sections = [
        _flops_section(w, nums),
        _bytes_section(nums),
        _memory_section(w, nums),
        _time_section(w, nums),
    ]
    return Explanation(
        gpu=gpu.name,
        gpu_display=gpu.display_name,
        workload=w.to_dict(),
        sections=sections,
        table=_table(w, runs, nums),
        errors={k: r.error for k, r in sorted(runs.items()) if r.error},
    )
