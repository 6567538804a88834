"""`tilesim explain`: the story of attention on one GPU and shape, told with simulated numbers.

Standard attention writes the N x N score matrix to HBM and reads it back;
FlashAttention v1 keeps it on chip (tiling + online softmax) but re-reads its
output; v2 parallelises over the sequence and does less non-matmul work; v3
uses Hopper's TMA, warp specialisation and ping-pong to hide the exponentials,
and FP8. Then where the technique stops paying: decode, very short sequences,
wide heads. Every number comes from this shape's predictions (`simulate`), its
traces' analytic counters (`traces.counters`) or the GPU's figures — none is
written into the text.

The explanation is data first (`build_explanation` -> `Explanation`: sections,
each with its prose and the numbers the prose cites, plus the side-by-side
table); `tilesim.explain_render` renders it for the terminal and as Markdown, and
`Explanation.to_dict` is the ``--json`` output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import TilesimError
from .hwmodels.gpu import GPU
from .runner import Job, run_jobs
from .traces import build, default_config
from .traces.config import check_algo, kernel_config
from .traces.counters import Counters, counters
from .traces.ir import Load, Loop, Trace
from .traces.workload import Workload
from .whatif import default_batch_heads

NAMES = {
    "standard": "standard attention",
    "v1": "FlashAttention v1",
    "v2": "FlashAttention-2",
    "v3": "FlashAttention-3",
    "v3_fp8": "FlashAttention-3 (fp8)",
}
DECODE_KV = (8192, 32768)  # KV-cache lengths of the decode scenario
SHORT_SEQLEN = 128  # the launch-bound scenario: one short sequence
WIDE_HEAD_DIM = 256  # the head dim whose tiles crowd shared memory
OWN_TENSORS = ("Q", "K", "V", "O")  # inputs and output; anything else is extra memory


@dataclass
class Section:
    key: str
    title: str
    paragraphs: list[str]
    numbers: dict  # every figure the paragraphs cite, unrounded

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "title": self.title,
            "paragraphs": list(self.paragraphs),
            "numbers": dict(self.numbers),
        }


@dataclass
class Explanation:
    gpu: str
    gpu_display: str
    workload: dict
    sections: list[Section]
    table: list[dict]  # one row per algorithm, the side-by-side comparison
    errors: dict = field(default_factory=dict)  # run -> why it has no prediction

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)

    def to_dict(self) -> dict:
        return {
            "gpu": self.gpu,
            "gpu_display": self.gpu_display,
            "workload": dict(self.workload),
            "sections": [s.to_dict() for s in self.sections],
            "table": list(self.table),
            "errors": dict(self.errors),
        }


# -- formatting -----------------------------------------------------------------------


def fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_x(r: float) -> str:
    return f"{r:.2f}x" if r < 10 else f"{r:.0f}x"


def fmt_speed(time_s: float, other_s: float, other: str) -> str:
    """``1.46x faster than v2`` / ``1.10x slower than v2`` / ``as fast as v2``."""
    r = other_s / time_s
    if abs(r - 1) < 0.005:
        return f"as fast as {other}"
    return f"{fmt_x(r)} faster than {other}" if r > 1 else f"{fmt_x(1 / r)} slower than {other}"


def fmt_pct(r: float) -> str:
    if 0 < r < 0.005:
        return "<1%"
    return f"{100 * r:.0f}%"


def fmt_si(n: float) -> str:
    """A count with an SI prefix, 3 significant digits: 83.9 M, 1.07 G."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def fmt_count(n: float) -> str:
    return f"{n:,.0f}"


# -- the runs the story cites --------------------------------------------------------------


@dataclass
class Run:
    algo: str
    workload: Workload
    trace: Trace | None = None
    counters: Counters | None = None
    pred: object = None  # Prediction
    error: str | None = None


def main_workload(
    gpu: GPU,
    seqlen: int,
    head_dim: int,
    batch: int | None,
    heads: int | None,
    causal: bool,
    dtype: str,
    seqlen_kv: int | None = None,
) -> Workload:
    b, h = default_batch_heads(seqlen, head_dim)
    return Workload(batch or b, heads or h, seqlen, seqlen_kv or seqlen, head_dim, causal, dtype)


def _plan(gpu: GPU, w: Workload) -> dict[str, tuple[str, Workload, object]]:
    hopper = gpu.has_tma and gpu.has_wgmma
    plan: dict[str, tuple[str, Workload, object]] = {}
    base = Workload(
        w.batch,
        w.heads,
        w.seqlen_q,
        w.seqlen_kv,
        w.head_dim,
        w.causal,
        "fp16" if w.dtype == "fp8" else w.dtype,
    )
    for algo in ("standard", "v1", "v2"):
        plan[algo] = (algo, base, None)
    if hopper:
        plan["v3"] = ("v3", base, None)
        cfg = default_config("v3", base, gpu)
        if not (cfg.warp_specialize and cfg.pingpong):
            # FlashAttention-3's CUDA schedule, which the Triton kernel cannot express
            plan["v3_fa3"] = ("v3", base, cfg.replace(warp_specialize=True, pingpong=True))
        triton = kernel_config("v3", base, gpu)
        if triton != cfg:
            # what tilesim's Triton v3 kernel runs (and validation measures)
            plan["v3_triton"] = ("v3", base, triton)
        if gpu.has_fp8:
            plan["v3_fp8"] = ("v3", _with(base, dtype="fp8"), None)
    fast = ("standard", "v2") + (("v3",) if hopper else ())
    for kv in DECODE_KV:
        for algo in fast:
            plan[f"decode{kv}_{algo}"] = (
                algo,
                _with(base, seqlen_q=1, seqlen_kv=kv, causal=False),
                None,
            )
    for algo in fast:
        plan[f"short_{algo}"] = (
            algo,
            _with(base, batch=1, seqlen_q=SHORT_SEQLEN, seqlen_kv=SHORT_SEQLEN),
            None,
        )
    other = WIDE_HEAD_DIM if base.head_dim != WIDE_HEAD_DIM else 64
    for algo in ("v2",) + (("v3",) if hopper else ()):
        heads = max(1, base.heads * base.head_dim // other)  # same H*d: same FLOPs
        plan[f"wide_{algo}"] = (algo, _with(base, head_dim=other, heads=heads), None)
    return plan


def _with(w: Workload, **changes) -> Workload:
    d = w.to_dict()
    d.update(changes)
    return Workload(**d)


def gather(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> dict[str, Run]:
    """Every prediction the story needs, with its trace and counters."""
    plan = _plan(gpu, w)
    runs: dict[str, Run] = {}
    jobs, names = [], []
    for name, (algo, wl, config) in plan.items():
        run = Run(algo, wl)
        try:
            run.trace = build(algo, wl, gpu, config)
            run.counters = counters(run.trace)
        except TilesimError as exc:
            run.error = str(exc)
        runs[name] = run
        if run.error is None:
            jobs.append(Job(gpu, algo, wl, config, fidelity))
            names.append(name)
    outcomes, _ = run_jobs(jobs, workers=workers, cache_dir=cache_dir, progress=progress)
    for name, out in zip(names, outcomes, strict=True):
        runs[name].pred = out.prediction
        runs[name].error = out.error
    return runs


# -- the story -------------------------------------------------------------------------------


def build_explanation(
    gpu: GPU,
    w: Workload,
    *,
    workers: int = 1,
    cache_dir=None,
    progress: bool = False,
    fidelity: str = "fast",
) -> Explanation:
    """Predict everything the story cites and write it (see the module docstring).

    With ``w.dtype == "fp8"`` the story runs at fp16 and adds v3's fp8 variant (only v3
    takes fp8); on a GPU without fp8 that is an error, not a silent fp16 story.
    """
    if w.dtype == "fp8":
        check_algo("v3", w, gpu)
    runs = gather(
        gpu, w, workers=workers, cache_dir=cache_dir, progress=progress, fidelity=fidelity
    )
    for key in ("standard", "v2"):
        if runs[key].pred is None:
            raise TilesimError(f"cannot explain this shape: {key} fails: {runs[key].error}")
    story = _Story(gpu, runs)
    sections = [
        story.setup(),
        story.standard(),
        story.v1(),
        story.v2(),
        story.v3(),
        story.decode(),
        story.short(),
        story.wide(),
        story.is_not(),
    ]
    return Explanation(
        gpu=gpu.name,
        gpu_display=gpu.display_name,
        workload=runs["standard"].workload.to_dict(),
        sections=sections,
        table=story.table(),
        errors={k: r.error for k, r in sorted(runs.items()) if r.error},
    )


def _tensor_bytes(trace: Trace) -> dict[str, int]:
    return {t.name: t.nbytes for t in trace.tensors}


def _extra_tensors(trace: Trace) -> dict[str, int]:
    return {k: v for k, v in _tensor_bytes(trace).items() if k not in OWN_TENSORS}


def _score_traffic(c: Counters) -> int:
    """Bytes of the N x N matrices (S, P) through HBM, as the trace moves them."""
    return sum(
        c.read_bytes_by_tensor.get(t, 0) + c.write_bytes_by_tensor.get(t, 0) for t in ("S", "P")
    )


def _passes_note(passes: float) -> str:
    if passes > 4.5:
        return " (a row too long for shared memory is read three times by the softmax)"
    return ""


def _uses_tma(trace: Trace) -> int:
    def count(ops) -> int:
        n = 0
        for op in ops:
            if isinstance(op, Load) and op.tma:
                n += 1
            elif isinstance(op, Loop):
                n += count(op.body)
        return n

    return sum(count(r.ops) for launch in trace.launches for r in launch.program.roles)


class _Story:
    def __init__(self, gpu: GPU, runs: dict[str, Run]) -> None:
        self.gpu = gpu
        self.runs = runs
        self.w = runs["standard"].workload
        self.hopper = gpu.has_tma and gpu.has_wgmma
        self.path = default_config("v2", self.w, gpu).mma_path
        self.peak = gpu.peak_tensor_flops(self.w.dtype, self.path)
        self.ridge = gpu.ridge_point_flop_per_byte(self.w.dtype, self.path)

    def p(self, name: str):
        return self.runs[name].pred

    def _missing(self, key: str, title: str, names: tuple[str, ...]) -> Section | None:
        bad = [n for n in names if self.runs.get(n) is None or self.runs[n].pred is None]
        if not bad:
            return None
        why = "; ".join(f"{n}: {self.runs[n].error}" for n in bad if n in self.runs)
        return Section(
            key,
            title,
            [f"Not predicted on this GPU and shape ({why})."],
            {"errors": {n: self.runs[n].error for n in bad if n in self.runs}},
        )

    # -- 0 ------------------------------------------------------------------------
    def setup(self) -> Section:
        w, gpu = self.w, self.gpu
        flops = self.runs["v2"].counters.matmul_flops
        closed = 4 * w.batch * w.heads * w.seqlen_q * w.seqlen_kv * w.head_dim
        mask = "causal" if w.causal else "non-causal"
        nums = {
            "batch": w.batch,
            "heads": w.heads,
            "seqlen_q": w.seqlen_q,
            "seqlen_kv": w.seqlen_kv,
            "head_dim": w.head_dim,
            "dtype": w.dtype,
            "causal": w.causal,
            "matmul_flops": flops,
            "closed_form_flops": closed,
            "peak_tensor_flops": self.peak,
            "mma_path": self.path,
            "hbm_bandwidth_Bps": gpu.hbm_bandwidth_Bps,
            "ridge_flop_per_byte": self.ridge,
            "sm_count": gpu.sm_count,
            "smem_bytes_per_sm": gpu.smem_bytes_per_sm,
            "l2_bytes": gpu.l2_bytes,
        }
        text = [
            f"Shape: batch {w.batch} x {w.heads} heads, sequence {w.seqlen_q}, head dim "
            f"{w.head_dim}, {w.dtype}, {mask}: {flops / 1e9:,.1f} GFLOP of matmul "
            f"(4·B·H·N²·d = {closed / 1e9:,.1f} GFLOP"
            f"{', half of it visible' if w.causal else ''}).",
            f"{gpu.display_name}: {gpu.sm_count} SMs, {self.peak / 1e12:.0f} TFLOPS {w.dtype} "
            f"tensor peak ({self.path}), {gpu.hbm_bandwidth_Bps / 1e12:.2f} TB/s HBM, "
            f"{gpu.l2_bytes / 2**20:.0f} MiB L2, {gpu.smem_bytes_per_sm / 1024:.0f} KiB shared "
            f"memory per SM. Its ridge point is {self.ridge:.0f} FLOP/byte: a kernel doing fewer "
            "FLOPs per HBM byte than that waits for memory, not for the tensor cores.",
        ]
        return Section("setup", "The shape and the GPU", text, nums)

    # -- 1 ------------------------------------------------------------------------
    def standard(self) -> Section:
        run = self.runs["standard"]
        p, c, gpu = run.pred, run.counters, self.gpu
        sizes = _tensor_bytes(run.trace)
        s_bytes = sizes["S"]
        traffic = _score_traffic(c)
        qkvo = sum(sizes[t] for t in OWN_TENSORS)
        intensity = p.matmul_flops / p.hbm_bytes
        hbm_floor = p.hbm_bytes / gpu.hbm_bandwidth_Bps
        compute_floor = p.matmul_flops / self.peak
        launches = {lp.name: lp for lp in p.launches}
        sm = launches.get("softmax")
        nums = {
            "s_bytes": s_bytes,
            "s_and_p_bytes": 2 * s_bytes,
            "score_traffic_bytes": traffic,
            "score_passes": traffic / s_bytes,
            "qkvo_bytes": qkvo,
            "hbm_bytes": p.hbm_bytes,
            "score_share_of_hbm": max(0.0, 1 - qkvo / p.hbm_bytes),
            "intensity_flop_per_byte": intensity,
            "ridge_flop_per_byte": self.ridge,
            "time_s": p.time_s,
            "tflops": p.tflops,
            "bound": p.bound,
            "hbm_utilisation": p.utilisation["hbm"],
            "hbm_floor_s": hbm_floor,
            "compute_floor_s": compute_floor,
            "hbm_capacity_share": 2 * s_bytes / gpu.hbm_bytes,
            "launch_times_s": {lp.name: lp.time_s for lp in p.launches},
        }
        w = self.w
        text = [
            f"Standard attention materialises S = QKᵀ and P = softmax(S): each is "
            f"B·H·N² = {w.batch}·{w.heads}·{w.seqlen_q}·{w.seqlen_kv} elements, "
            f"{fmt_bytes(s_bytes)} in {w.dtype}. Its three kernels write S, read it back "
            f"(softmax), write P and read it again (P·V): {traffic / s_bytes:.0f} passes over "
            f"an N x N matrix{_passes_note(traffic / s_bytes)}, {fmt_bytes(traffic)} of HBM "
            f"traffic for matrices nobody keeps, against {fmt_bytes(qkvo)} for Q, K, V and O.",
            f"The simulator moves {fmt_bytes(p.hbm_bytes)} through HBM "
            f"({fmt_pct(nums['score_share_of_hbm'])} of it the score matrix) for "
            f"{p.matmul_flops / 1e9:,.1f} GFLOP: an arithmetic intensity of {intensity:.1f} "
            f"FLOP/byte, {self.ridge / intensity:.0f}x below the ridge point ({self.ridge:.0f}). "
            f"Moving the bytes takes at least {fmt_time(hbm_floor)}; the matmuls alone "
            f"{fmt_time(compute_floor)}. Predicted: {fmt_time(p.time_s)} ({p.tflops:.0f} TFLOPS, "
            f"bound: {p.bound}, HBM busy {fmt_pct(p.utilisation['hbm'])} of the time).",
        ]
        if sm is not None:
            text.append(
                f"The softmax kernel does no matmul at all: it streams "
                f"{fmt_bytes(sm.hbm_read_bytes + sm.hbm_write_bytes)} in {fmt_time(sm.time_s)} "
                f"({fmt_pct(sm.time_s / p.time_s)} of the total, bound: {sm.bound}). Holding S "
                f"and P takes {fmt_bytes(2 * s_bytes)} of HBM "
                f"({fmt_pct(nums['hbm_capacity_share'])} of the {fmt_bytes(gpu.hbm_bytes)} on "
                "the card): memory, not just time, grows with N²."
            )
        return Section(
            "standard", "Standard attention: the N x N matrix goes through HBM", text, nums
        )

    # -- 2 ------------------------------------------------------------------------
    def v1(self) -> Section:
        title = "FlashAttention v1: tiling and the online softmax"
        missing = self._missing("v1", title, ("v1",))
        if missing:
            return missing
        std, run = self.runs["standard"], self.runs["v1"]
        p, c, s = run.pred, run.counters, std.pred
        cfg = run.trace.config
        t_c = -(-self.w.seqlen_kv // cfg["block_n"])
        reread = {
            t: c.read_bytes_by_tensor.get(t, 0) + c.write_bytes_by_tensor.get(t, 0)
            for t in ("Q", "O", "L", "M")
        }
        saved = s.hbm_bytes - p.hbm_bytes
        nums = {
            "hbm_bytes": p.hbm_bytes,
            "standard_hbm_bytes": s.hbm_bytes,
            "bytes_saved": saved,
            "time_s": p.time_s,
            "standard_time_s": s.time_s,
            "time_saved_s": s.time_s - p.time_s,
            "speedup_vs_standard": s.time_s / p.time_s,
            "score_traffic_bytes": _score_traffic(c),
            "kv_blocks": t_c,
            "block_m": cfg["block_m"],
            "block_n": cfg["block_n"],
            "reread_bytes": reread,
            "tflops": p.tflops,
            "bound": p.bound,
            "intensity_flop_per_byte": p.matmul_flops / p.hbm_bytes,
        }
        moved = (
            f"saves {fmt_bytes(saved)} of HBM traffic"
            if saved >= 0
            else f"moves {fmt_bytes(-saved)} more through HBM"
        )
        speed = fmt_speed(p.time_s, s.time_s, "standard")
        verdict = (
            f"{moved} and {fmt_time(s.time_s - p.time_s)} ({speed})"
            if p.time_s < s.time_s
            else f"{moved} but is {speed}"
        )
        o_q = reread["O"] + reread["Q"]
        text = [
            f"v1 cuts S into {cfg['block_m']} x {cfg['block_n']} tiles that live in shared "
            "memory and never reach HBM (0 bytes of S or P: the trace has no such tensor). "
            "The online softmax makes that possible: it keeps a running row maximum m and sum ℓ "
            "and rescales the partial output when the maximum grows, so no row needs all its "
            "scores at once.",
            f"What it re-reads instead: the paper's Algorithm 1 walks the {t_c} K/V blocks in "
            "its outer loop and, for each, every Q block in the inner loop, loading Q_i and the "
            f"partial O_i, ℓ_i, m_i and writing O_i, ℓ_i, m_i back: {fmt_bytes(o_q)} of Q and O "
            f"traffic ({fmt_bytes(reread['L'] + reread['M'])} more for ℓ and m) — the "
            "Θ(N²d²/M) of the paper. "
            f"Against standard attention v1 {verdict}: {fmt_time(p.time_s)}, "
            f"{p.tflops:.0f} TFLOPS, bound: {p.bound}.",
        ]
        return Section("v1", title, text, nums)

    # -- 3 ------------------------------------------------------------------------
    def v2(self) -> Section:
        title = "FlashAttention-2: parallel over the sequence, less non-matmul work"
        missing = self._missing("v2", title, ("v1", "v2"))
        if missing:
            return missing
        gpu = self.gpu
        r1, r2, s = self.runs["v1"], self.runs["v2"], self.p("standard")
        p1, p2 = r1.pred, r2.pred
        main1 = max(p1.launches, key=lambda lp: lp.cycles)
        main2 = max(p2.launches, key=lambda lp: lp.cycles)
        slots1 = gpu.sm_count * main1.ctas_per_sm
        slots2 = gpu.sm_count * main2.ctas_per_sm
        busy1 = min(gpu.sm_count, main1.ctas)
        nums = {
            "v1_ctas": main1.ctas,
            "v2_ctas": main2.ctas,
            "v1_slots": slots1,
            "v2_slots": slots2,
            "v1_sms_busy": busy1,
            "v1_waves": main1.waves,
            "v2_waves": main2.waves,
            "v1_fp32_ops": r1.counters.fp32_ops,
            "v2_fp32_ops": r2.counters.fp32_ops,
            "v1_exp": r1.counters.exp_count,
            "v2_exp": r2.counters.exp_count,
            "v1_hbm_bytes": p1.hbm_bytes,
            "hbm_bytes": p2.hbm_bytes,
            "time_s": p2.time_s,
            "v1_time_s": p1.time_s,
            "speedup_vs_v1": p1.time_s / p2.time_s,
            "speedup_vs_standard": s.time_s / p2.time_s,
            "tflops": p2.tflops,
            "peak_share": p2.tflops * 1e12 / self.peak,
            "bound": p2.bound,
            "utilisation": dict(p2.utilisation),
        }
        fill = main1.ctas / slots1
        text = [
            f"v1's grid is one CTA per (batch, head): {main1.ctas} CTAs for {gpu.sm_count} SMs "
            f"x {main1.ctas_per_sm} slots = {slots1} slots, so "
            + (
                f"only {busy1} SMs get work"
                if main1.ctas < gpu.sm_count
                else f"the slots are {fmt_pct(min(fill, 1.0))} filled in its first wave"
                if fill < 1
                else f"it runs {main1.waves} waves of long CTAs"
            )
            + f". v2 swaps the loops (Q blocks outside, K/V inside) and gives each Q block its "
            f"own CTA: {main2.ctas} CTAs, {main2.waves} wave(s) of {slots2}. The Q tile and the "
            "running O stay on chip; O and the log-sum-exp are written once at the end.",
            f"It also trims the work that is not matmul: the output is rescaled once at the end "
            f"instead of every step, {fmt_si(r2.counters.fp32_ops)} FP32 ops against v1's "
            f"{fmt_si(r1.counters.fp32_ops)} (the exponentials stay "
            f"{fmt_si(r2.counters.exp_count)}: one per score). HBM traffic drops from "
            f"{fmt_bytes(p1.hbm_bytes)} to {fmt_bytes(p2.hbm_bytes)}.",
            f"Predicted: {fmt_time(p2.time_s)}, {fmt_x(p1.time_s / p2.time_s)} faster than v1 "
            f"and {fmt_x(s.time_s / p2.time_s)} faster than standard attention; {p2.tflops:.0f} "
            f"TFLOPS = {fmt_pct(nums['peak_share'])} of the tensor peak, bound: {p2.bound} "
            f"(tensor cores busy {fmt_pct(p2.utilisation['tensor'])}, SFU "
            f"{fmt_pct(p2.utilisation['sfu'])}).",
        ]
        return Section("v2", title, text, nums)

    # -- 4 ------------------------------------------------------------------------
    def v3(self) -> Section:
        gpu = self.gpu
        if not self.hopper:
            try:
                check_algo("v3", self.w, gpu)
                why = ""
            except TilesimError as exc:
                why = str(exc)
            p2 = self.p("v2")
            nums = {
                "applies": False,
                "has_tma": gpu.has_tma,
                "has_wgmma": gpu.has_wgmma,
                "has_fp8": gpu.has_fp8,
                "arch": gpu.arch,
                "reason": why,
                "v2_tflops": p2.tflops,
                "peak_share": p2.tflops * 1e12 / self.peak,
            }
            text = [
                f"FlashAttention-3 does not apply on the {gpu.display_name} ({gpu.arch}): it is "
                "built from Hopper features this GPU lacks — the Tensor Memory Accelerator "
                f"(has_tma={gpu.has_tma}) that lets one warpgroup load tiles asynchronously, "
                f"asynchronous warpgroup MMA (has_wgmma={gpu.has_wgmma}) that lets a softmax run "
                f"while the GEMM is in flight, and FP8 tensor cores (has_fp8={gpu.has_fp8}). "
                f"tilesim says so: “{why}”.",
                f"Here FlashAttention-2 ({self.path}) is the end of the line: {p2.tflops:.0f} "
                f"TFLOPS, {fmt_pct(nums['peak_share'])} of the {self.peak / 1e12:.0f} TFLOPS "
                "peak.",
            ]
            return Section("v3", "FlashAttention-3: Hopper only", text, nums)

        title = "FlashAttention-3: asynchrony on Hopper"
        missing = self._missing("v3", title, ("v3",))
        if missing:
            return missing
        r3, p2 = self.runs["v3"], self.p("v2")
        p3, c3 = r3.pred, r3.counters
        cfg = r3.trace.config
        roles = [r.name for r in r3.trace.launches[0].program.roles]
        e_rate = gpu.sfu_ops_per_clk_per_sm
        t_rate = gpu.tensor_flop_per_clk_per_sm(self.w.dtype, "wgmma")
        exp_ratio = (c3.exp_count / e_rate) / (c3.matmul_flops / t_rate)
        nums = {
            "applies": True,
            "time_s": p3.time_s,
            "tflops": p3.tflops,
            "bound": p3.bound,
            "v2_time_s": p2.time_s,
            "speedup_vs_v2": p2.time_s / p3.time_s,
            "tma_loads": _uses_tma(r3.trace),
            "roles": roles,
            "pingpong": cfg["pingpong"],
            "warp_specialize": cfg["warp_specialize"],
            "exp_to_gemm_time": exp_ratio,
            "utilisation": dict(p3.utilisation),
            "v2_utilisation": dict(p2.utilisation),
            "peak_share": p3.tflops * 1e12 / self.peak,
        }
        if cfg["warp_specialize"]:
            how = (
                f"v3 splits each CTA into warpgroups with different jobs ({', '.join(roles)}): "
                f"a producer issues TMA copies ({nums['tma_loads']} TMA loads in its program) "
                f"into a {cfg['num_stages']}-stage ring of shared-memory buffers, and the "
                "consumers run asynchronous wgmma: while the tensor cores compute the next "
                "S = QKᵀ, the softmax of the previous tile runs on the SFU and FP32 pipes."
                + (
                    " With ping-pong the two consumers take turns on the tensor cores, one's "
                    "softmax under the other's GEMMs."
                    if cfg["pingpong"]
                    else ""
                )
            )
        else:
            how = (
                f"v3 (as tilesim's Triton kernel runs it) loads K and V with TMA "
                f"({nums['tma_loads']} TMA loads in its program, {cfg['num_stages'] - 1} "
                "iterations ahead) and issues its GEMMs as asynchronous wgmma: while "
                "P·V of one tile is on the tensor cores, the softmax of the next runs on the "
                "SFU and FP32 pipes (intra-warpgroup overlap), with no producer warpgroup."
            )
        text = [
            how,
            f"Why it matters: on this GPU an exponential costs 1/{e_rate:.0f} SM-clock and a "
            f"matmul FLOP 1/{t_rate:.0f}, so the exponentials of a tile take "
            f"{fmt_pct(exp_ratio)} of the time of its two GEMMs ({t_rate / e_rate / 4:.0f}/d at "
            f"{self.w.dtype}). Run one after the other, as a v2 CTA does, that time adds to "
            "the GEMMs'; overlapped, it hides behind them.",
            f"Predicted: {fmt_time(p3.time_s)}, {p3.tflops:.0f} TFLOPS "
            f"({fmt_pct(nums['peak_share'])} of peak), {fmt_speed(p3.time_s, p2.time_s, 'v2')}; "
            f"tensor cores busy {fmt_pct(p3.utilisation['tensor'])} (v2: "
            f"{fmt_pct(p2.utilisation['tensor'])}), bound: {p3.bound}.",
        ]
        fa3 = self.runs.get("v3_fa3")
        if fa3 is not None and fa3.pred is not None:
            pa = fa3.pred
            fa3_roles = [r.name for r in fa3.trace.launches[0].program.roles]
            nums.update(
                fa3_time_s=pa.time_s,
                fa3_tflops=pa.tflops,
                fa3_bound=pa.bound,
                fa3_roles=fa3_roles,
                fa3_speedup_vs_v3=p3.time_s / pa.time_s,
            )
            text.append(
                "FlashAttention-3's CUDA schedule goes further: warp specialisation (a "
                f"producer warpgroup that only issues TMA loads, beside {len(fa3_roles) - 1} "
                "consumer warpgroups) and ping-pong (the consumers take turns on the tensor "
                "cores, so one's softmax runs under the other's GEMMs). Triton cannot express "
                "that schedule, so tilesim's default v3 does not assume it. Predicted with it: "
                f"{fmt_time(pa.time_s)}, {pa.tflops:.0f} TFLOPS, bound: {pa.bound}, "
                f"{fmt_speed(pa.time_s, p3.time_s, 'the default v3')}."
            )
        tri = self.runs.get("v3_triton")
        if tri is not None and tri.pred is not None:
            pt, ct = tri.pred, tri.trace.config
            nums.update(
                triton_time_s=pt.time_s,
                triton_tflops=pt.tflops,
                triton_bound=pt.bound,
                triton_config=dict(ct),
                triton_speedup_vs_v3=p3.time_s / pt.time_s,
            )
            missing_parts = [
                name
                for key, name in (
                    ("warp_specialize", "no producer warpgroup"),
                    ("pingpong", "no ping-pong"),
                )
                if cfg[key] and not ct[key]
            ]
            text.append(
                "tilesim's Triton v3 kernel (what `tilesim validate` measures) runs a simpler "
                f"schedule — {', '.join(missing_parts) or 'other tiles'}, "
                f"{ct['num_stages']} stages — because Triton cannot express FlashAttention-3's "
                f"warpgroup barriers. Predicted for it: {fmt_time(pt.time_s)}, "
                f"{pt.tflops:.0f} TFLOPS, bound: {pt.bound}; the schedule above is "
                f"{fmt_speed(p3.time_s, pt.time_s, 'it')}."
            )
        f8 = self.runs.get("v3_fp8")
        if f8 is not None and f8.pred is not None:
            pf = f8.pred
            fp8_peak = gpu.peak_tensor_flops("fp8", "wgmma")
            ratio8 = (f8.counters.exp_count / e_rate) / (
                f8.counters.matmul_flops / gpu.tensor_flop_per_clk_per_sm("fp8", "wgmma")
            )
            nums.update(
                fp8_time_s=pf.time_s,
                fp8_tflops=pf.tflops,
                fp8_bound=pf.bound,
                fp8_peak_flops=fp8_peak,
                fp8_exp_to_gemm_time=ratio8,
                fp8_hbm_bytes=pf.hbm_bytes,
                fp8_speedup_vs_fp16=p3.time_s / pf.time_s,
            )
            text.append(
                f"FP8 (e4m3 inputs, fp16 output) doubles the tensor peak to "
                f"{fp8_peak / 1e12:.0f} TFLOPS and halves the input bytes "
                f"({fmt_bytes(pf.hbm_bytes)} through HBM), but not the exponentials: they now "
                f"take {fmt_pct(ratio8)} of the GEMM time. Predicted {fmt_time(pf.time_s)}, "
                f"{pf.tflops:.0f} TFLOPS, {fmt_speed(pf.time_s, p3.time_s, 'fp16 v3')}, bound: "
                f"{pf.bound}."
            )
        return Section("v3", title, text, nums)

    # -- 5 ------------------------------------------------------------------------
    def decode(self) -> Section:
        title = "Where it stops paying (1): decode, one query against a long KV cache"
        algos = ("standard", "v2") + (("v3",) if self.hopper else ())
        names = tuple(f"decode{kv}_{a}" for kv in DECODE_KV for a in algos)
        missing = self._missing("decode", title, names)
        if missing:
            return missing
        gpu = self.gpu
        main_speedup = self.p("standard").time_s / self.p("v2").time_s
        nums: dict = {"main_speedup_v2_vs_standard": main_speedup, "by_kv": {}}
        parts = []
        for kv in DECODE_KV:
            ps = {a: self.p(f"decode{kv}_{a}") for a in algos}
            v2 = ps["v2"]
            best = min(algos, key=lambda a: ps[a].time_s)
            intensity = v2.matmul_flops / v2.hbm_bytes
            bw = v2.compulsory_hbm_bytes / v2.time_s
            nums["by_kv"][kv] = {
                "time_s": {a: ps[a].time_s for a in algos},
                "speedup_v2_vs_standard": ps["standard"].time_s / v2.time_s,
                "intensity_flop_per_byte": intensity,
                "v2_ctas": v2.launches[-1].ctas,
                "achieved_Bps": bw,
                "hbm_share": bw / gpu.hbm_bandwidth_Bps,
                "bound": v2.bound,
                "fastest": best,
            }
            parts.append(
                f"KV {kv}: "
                + ", ".join(f"{a} {fmt_time(ps[a].time_s)}" for a in algos)
                + f"; v2 {fmt_x(ps['standard'].time_s / v2.time_s)} standard's speed, "
                f"{intensity:.2f} FLOP/byte, K and V streamed at {bw / 1e12:.2f} TB/s "
                f"({fmt_pct(bw / gpu.hbm_bandwidth_Bps)} of peak), bound: {v2.bound}"
            )
        w = self.runs[f"decode{DECODE_KV[0]}_v2"].workload
        text = [
            f"Generating a token, each of {w.batch}x{w.heads} heads has one query row against "
            "the whole cache. The score matrix is one row per head, so there is nothing big to "
            "keep out of HBM: every algorithm must read K and V once, at about 1 FLOP per byte "
            f"— far below the ridge point ({self.ridge:.0f}). The gain over standard attention "
            f"that was {fmt_x(main_speedup)} on the full shape "
            + (
                "shrinks:"
                if all(v["speedup_v2_vs_standard"] < main_speedup for v in nums["by_kv"].values())
                else "does not shrink here:"
            ),
            "; ".join(parts) + ".",
            f"v2's grid has one CTA per (batch, head) here "
            f"({nums['by_kv'][DECODE_KV[0]]['v2_ctas']} for {gpu.sm_count} SMs), each walking "
            "the whole cache alone; what helps decode is "
            "splitting the KV sequence across CTAs (Flash-Decoding), not tiling.",
        ]
        return Section("decode", title, text, nums)

    def short(self) -> Section:
        title = "Where it stops paying (2): very short sequences are launch-bound"
        algos = ("standard", "v2") + (("v3",) if self.hopper else ())
        missing = self._missing("short", title, tuple(f"short_{a}" for a in algos))
        if missing:
            return missing
        gpu = self.gpu
        ps = {a: self.p(f"short_{a}") for a in algos}
        w = self.runs["short_v2"].workload
        over = gpu.launch_overhead_s
        nums = {
            "seqlen": w.seqlen_q,
            "batch": w.batch,
            "heads": w.heads,
            "launch_overhead_s": over,
            "time_s": {a: ps[a].time_s for a in algos},
            "launches": {a: len(ps[a].launches) for a in algos},
            "launch_share": {a: len(ps[a].launches) * over / ps[a].time_s for a in algos},
            "bound": {a: ps[a].bound for a in algos},
            "speedup_v2_vs_standard": ps["standard"].time_s / ps["v2"].time_s,
        }
        text = [
            f"One sequence of {w.seqlen_q} tokens ({w.heads} heads) is "
            f"{ps['v2'].matmul_flops / 1e6:,.0f} MFLOP: microseconds of work, while each kernel "
            f"launch costs {fmt_time(over)} on this GPU. "
            + "; ".join(
                f"{a}: {fmt_time(ps[a].time_s)}, {len(ps[a].launches)} launch(es) = "
                f"{fmt_pct(nums['launch_share'][a])} of it, bound: {ps[a].bound}"
                for a in algos
            )
            + ".",
        ]
        work = {a: ps[a].time_s - len(ps[a].launches) * over for a in algos}
        nums["time_without_launches_s"] = work
        v2_share = nums["launch_share"]["v2"]
        text.append(
            f"v2 is {fmt_speed(ps['v2'].time_s, ps['standard'].time_s, 'standard attention')}, "
            f"partly because it launches one kernel instead of three: without the launches the "
            f"kernels take {fmt_time(work['standard'])} and {fmt_time(work['v2'])}. "
            + (
                f"With {fmt_pct(v2_share)} of v2's time spent launching, fewer launches "
                "(fused layers, CUDA graphs) would pay more here than a better attention kernel."
                if v2_share >= 0.3
                else f"Launching is {fmt_pct(v2_share)} of v2's time at this shape."
            )
        )
        return Section("short", title, text, nums)

    def wide(self) -> Section:
        algos = ("v2",) + (("v3",) if self.hopper else ())
        other = self.runs["wide_v2"].workload.head_dim
        title = (
            f"Where it stops paying (3): head dim {other} crowds shared memory"
            if other > self.w.head_dim
            else f"Where it stops paying (3): head dim {self.w.head_dim} crowds shared memory"
        )
        missing = self._missing("wide", title, tuple(f"wide_{a}" for a in algos))
        if missing:
            return missing
        gpu = self.gpu
        nums: dict = {"head_dim": self.w.head_dim, "other_head_dim": other, "by_algo": {}}
        parts = []
        for a in algos:
            base, wide = self.runs[a], self.runs[f"wide_{a}"]
            if base.pred is None:
                continue
            pb, pw = base.pred, wide.pred
            lb, lw = pb.launches[-1], pw.launches[-1]
            cb, cw = base.trace.config, wide.trace.config
            nums["by_algo"][a] = {
                "tiles": [cb["block_m"], cb["block_n"], cb["num_stages"]],
                "other_tiles": [cw["block_m"], cw["block_n"], cw["num_stages"]],
                "smem_per_cta": base.trace.launches[-1].smem_bytes,
                "other_smem_per_cta": wide.trace.launches[-1].smem_bytes,
                "ctas_per_sm": lb.ctas_per_sm,
                "other_ctas_per_sm": lw.ctas_per_sm,
                "occupancy_limiter": lb.occupancy_limiter,
                "other_occupancy_limiter": lw.occupancy_limiter,
                "tflops": pb.tflops,
                "other_tflops": pw.tflops,
                "bound": pb.bound,
                "other_bound": pw.bound,
            }
            n = nums["by_algo"][a]
            parts.append(
                f"{a}: d={self.w.head_dim} runs {cb['block_m']}x{cb['block_n']} tiles, "
                f"{n['smem_per_cta'] / 1024:.0f} KiB per CTA, {lb.ctas_per_sm} CTA(s) per SM "
                f"({lb.occupancy_limiter}-limited), {pb.tflops:.0f} TFLOPS; d={other} "
                f"{cw['block_m']}x{cw['block_n']} x {cw['num_stages']} stages, "
                f"{n['other_smem_per_cta'] / 1024:.0f} KiB per CTA, {lw.ctas_per_sm} per SM "
                f"({lw.occupancy_limiter}-limited), {pw.tflops:.0f} TFLOPS, bound: {pw.bound}"
            )
        wide_d, narrow_d = max(other, self.w.head_dim), min(other, self.w.head_dim)
        text = [
            f"A tile of K or V is block_n x d elements, so at d={wide_d} the same "
            f"{gpu.smem_bytes_per_sm / 1024:.0f} KiB of shared memory per SM holds fewer, "
            "smaller tiles: the Q block shrinks, so K and V are re-read for more Q blocks, and "
            "fewer CTAs or pipeline stages fit per SM to hide latency. At equal H·d (the same "
            "FLOPs): " + "; ".join(parts) + ".",
        ]
        v = nums["by_algo"].get("v2")
        if v is not None:
            t_wide = v["other_tflops"] if other == wide_d else v["tflops"]
            t_narrow = v["tflops"] if other == wide_d else v["other_tflops"]
            nums["wide_vs_narrow_tflops"] = t_wide / t_narrow
            if t_wide < t_narrow:
                text.append(
                    f"v2 loses {fmt_pct(1 - t_wide / t_narrow)} of its throughput at d={wide_d} "
                    f"against d={narrow_d}: the tiling that removed the N x N matrix now runs "
                    "into the size of shared memory."
                )
            else:
                text.append(
                    f"In this model v2 still gains {fmt_pct(t_wide / t_narrow - 1)} at "
                    f"d={wide_d} over d={narrow_d}: each K/V tile carries more FLOPs per byte "
                    "loaded, which outweighs the smaller Q block; the cost of the wide head is "
                    "the occupancy above (little room left to overlap CTAs) rather than speed."
                )
        return Section("wide", title, text, nums)

    # -- 6 ------------------------------------------------------------------------
    def is_not(self) -> Section:
        algos = [
            a
            for a in ("standard", "v1", "v2", "v3")
            if a in self.runs and self.runs[a].counters is not None
        ]
        flops = {a: self.runs[a].counters.matmul_flops for a in algos}
        exps = {a: self.runs[a].counters.exp_count for a in algos}
        w = self.w
        closed = 4 * w.batch * w.heads * w.seqlen_q * w.seqlen_kv * w.head_dim
        s, p2 = self.p("standard"), self.p("v2")
        nums = {
            "matmul_flops": flops,
            "exp_count": exps,
            "closed_form_flops": closed,
            "hbm_bytes_ratio_standard_vs_v2": s.hbm_bytes / p2.hbm_bytes,
            "speedup_v2_vs_standard": s.time_s / p2.time_s,
        }
        same = len(set(flops.values())) == 1
        flop_text = (
            f"every algorithm multiplies the same {flops['v2'] / 1e9:,.1f} GFLOP "
            f"(4·B·H·N²·d = {closed / 1e9:,.1f} G)"
            if same
            else "; ".join(f"{a} {flops[a] / 1e9:,.1f} GFLOP" for a in algos)
            + f" (4·B·H·N²·d = {closed / 1e9:,.1f} G; standard attention masks a full N x N "
            "product, the FlashAttention kernels skip blocks above the diagonal)"
        )
        text = [
            "FlashAttention is not an approximation. The online softmax rescales partial sums "
            "exactly (e^(x−m_old)·e^(m_old−m_new) = e^(x−m_new)), so the output is the same "
            "numbers up to floating-point rounding (tilesim's kernels are checked against a "
            "PyTorch reference, and `tilesim validate` checks every point before timing it). "
            "Each algorithm takes one exponential per score it computes: "
            + ", ".join(f"{a} {fmt_si(exps[a])}" for a in algos)
            + ".",
            f"Nor is it a faster matmul: {flop_text}. The speed-up "
            f"({fmt_x(nums['speedup_v2_vs_standard'])}, v2 over standard) comes from bytes — "
            f"{fmt_x(nums['hbm_bytes_ratio_standard_vs_v2'])} fewer through HBM — and from "
            "keeping the tensor cores fed"
            + (
                ", plus, with the causal mask, from the blocks it never computes."
                if not same
                else "."
            ),
        ]
        return Section("not", "What FlashAttention is not", text, nums)

    # -- 7 ------------------------------------------------------------------------
    def table(self) -> list[dict]:
        rows = []
        for name in ("standard", "v1", "v2", "v3", "v3_fp8"):
            run = self.runs.get(name)
            if run is None:
                continue
            row = {"algo": name, "name": NAMES[name], "error": run.error}
            if run.pred is None:
                rows.append(row)
                continue
            p, trace = run.pred, run.trace
            cfg = trace.config
            extra = _extra_tensors(trace)
            features = [cfg["mma_path"]]
            if _uses_tma(trace):
                features.append("TMA")
            if cfg.get("warp_specialize"):
                features.append("warp-spec")
            if cfg.get("pingpong"):
                features.append("ping-pong")
            if cfg.get("persistent"):
                features.append("persistent")
            out_dtype = next(t.dtype for t in trace.tensors if t.name == "O")
            in_dtype = run.workload.dtype
            row.update(
                score_hbm_bytes=_score_traffic(run.counters),
                extra_bytes=sum(extra.values()),
                extra_tensors=sorted(extra),
                ctas=[lp.ctas for lp in p.launches],
                launches=[lp.name for lp in p.launches],
                waves=p.waves,
                features=features,
                precision=in_dtype if in_dtype == out_dtype else f"{in_dtype}→{out_dtype}",
                time_s=p.time_s,
                tflops=p.tflops,
                hbm_bytes=p.hbm_bytes,
                bound=p.bound,
            )
            rows.append(row)
        return rows
