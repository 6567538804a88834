"""The sections of `tilesim explain` on the algorithms: the shape, standard attention, v1, v2, v3.

Each function reads the predictions, counters and GPU figures of a `Story` and
returns a `Section` whose prose cites only numbers it also stores.
"""

from __future__ import annotations

from ..errors import TilesimError
from ..traces.config import check_algo
from ..units import fmt_bytes
from .fmt import fmt_pct, fmt_si, fmt_speed, fmt_time, fmt_x
from .story import OWN_TENSORS, Section, Story, score_traffic, tensor_bytes, uses_tma


def _passes_note(passes: float) -> str:
    if passes > 4.5:
        return " (a row too long for shared memory is read three times by the softmax)"
    return ""


def setup(st: Story) -> Section:
    w, gpu = st.w, st.gpu
    flops = st.runs["v2"].counters.matmul_flops
    closed = w.dense_flops()
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
        "peak_tensor_flops": st.peak,
        "mma_path": st.path,
        "hbm_bandwidth_Bps": gpu.hbm_bandwidth_Bps,
        "ridge_flop_per_byte": st.ridge,
        "sm_count": gpu.sm_count,
        "smem_bytes_per_sm": gpu.smem_bytes_per_sm,
        "l2_bytes": gpu.l2_bytes,
    }
    text = [
        f"Shape: batch {w.batch} x {w.heads} heads, sequence {w.seqlen_q}, head dim "
        f"{w.head_dim}, {w.dtype}, {mask}: {flops / 1e9:,.1f} GFLOP of matmul "
        f"(4·B·H·N²·d = {closed / 1e9:,.1f} GFLOP"
        f"{', half of it visible' if w.causal else ''}).",
        f"{gpu.display_name}: {gpu.sm_count} SMs, {st.peak / 1e12:.0f} TFLOPS {w.dtype} "
        f"tensor peak ({st.path}), {gpu.hbm_bandwidth_Bps / 1e12:.2f} TB/s HBM, "
        f"{gpu.l2_bytes / 2**20:.0f} MiB L2, {gpu.smem_bytes_per_sm / 1024:.0f} KiB shared "
        f"memory per SM. Its ridge point is {st.ridge:.0f} FLOP/byte: a kernel doing fewer "
        "FLOPs per HBM byte than that waits for memory, not for the tensor cores.",
    ]
    return Section("setup", "The shape and the GPU", text, nums)


def standard(st: Story) -> Section:
    run = st.runs["standard"]
    p, c, gpu = run.pred, run.counters, st.gpu
    sizes = tensor_bytes(run.trace)
    s_bytes = sizes["S"]
    traffic = score_traffic(c)
    qkvo = sum(sizes[t] for t in OWN_TENSORS)
    intensity = p.matmul_flops / p.hbm_bytes
    hbm_floor = p.hbm_bytes / gpu.hbm_bandwidth_Bps
    compute_floor = p.matmul_flops / st.peak
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
        "ridge_flop_per_byte": st.ridge,
        "time_s": p.time_s,
        "tflops": p.tflops,
        "bound": p.bound,
        "hbm_utilisation": p.utilisation["hbm"],
        "hbm_floor_s": hbm_floor,
        "compute_floor_s": compute_floor,
        "hbm_capacity_share": 2 * s_bytes / gpu.hbm_bytes,
        "launch_times_s": {lp.name: lp.time_s for lp in p.launches},
    }
    w = st.w
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
        f"FLOP/byte, {st.ridge / intensity:.0f}x below the ridge point ({st.ridge:.0f}). "
        f"Moving the bytes takes at least {fmt_time(hbm_floor)}; the matmuls alone "
        f"{fmt_time(compute_floor)}. Predicted: {fmt_time(p.time_s)} ({p.tflops:.0f} TFLOPS, "
        f"bound: {p.bound_text()}, HBM busy {fmt_pct(p.utilisation['hbm'])} of the time).",
    ]
    if sm is not None:
        text.append(
            f"The softmax kernel does no matmul at all: it streams "
            f"{fmt_bytes(sm.hbm_read_bytes + sm.hbm_write_bytes)} in {fmt_time(sm.time_s)} "
            f"({fmt_pct(sm.time_s / p.time_s)} of the total, bound: {sm.bound_text()}). Holding S "
            f"and P takes {fmt_bytes(2 * s_bytes)} of HBM "
            f"({fmt_pct(nums['hbm_capacity_share'])} of the {fmt_bytes(gpu.hbm_bytes)} on "
            "the card): memory, not just time, grows with N²."
        )
    return Section("standard", "Standard attention: the N x N matrix goes through HBM", text, nums)


def v1(st: Story) -> Section:
    title = "FlashAttention v1: tiling and the online softmax"
    missing = st.missing("v1", title, ("v1",))
    if missing:
        return missing
    std, run = st.runs["standard"], st.runs["v1"]
    p, c, s = run.pred, run.counters, std.pred
    cfg = run.trace.config
    released = cfg.get("v1_kernel") == "released"
    t_c = -(-st.w.seqlen_kv // cfg["block_n"])
    reread = {
        t: c.read_bytes_by_tensor.get(t, 0) + c.write_bytes_by_tensor.get(t, 0)
        for t in ("Q", "O", "Acc", "L", "M")
    }
    saved = s.hbm_bytes - p.hbm_bytes
    nums = {
        "v1_kernel": cfg.get("v1_kernel", "algorithm1"),
        "hbm_bytes": p.hbm_bytes,
        "standard_hbm_bytes": s.hbm_bytes,
        "bytes_saved": saved,
        "time_s": p.time_s,
        "standard_time_s": s.time_s,
        "time_saved_s": s.time_s - p.time_s,
        "speedup_vs_standard": s.time_s / p.time_s,
        "score_traffic_bytes": score_traffic(c),
        "kv_blocks": t_c,
        "block_m": cfg["block_m"],
        "block_n": cfg["block_n"],
        "num_splits": cfg.get("num_splits", 1),
        "ctas": p.launches[0].ctas,
        "reread_bytes": reread,
        # of the bytes it asks for (no L2 reuse): the simulated HBM bytes are fewer
        "acc_share_of_requested": reread["Acc"] / c.no_reuse_hbm_bytes,
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
    text = [
        f"v1 cuts S into {cfg['block_m']} x {cfg['block_n']} tiles that live on chip and "
        "never reach HBM (0 bytes of S or P: the trace has no such tensor). "
        "The online softmax makes that possible: it keeps a running row maximum m and sum ℓ "
        "and rescales the partial output when the maximum grows, so no row needs all its "
        "scores at once.",
    ]
    if released:
        text.append(
            f"As the released FlashAttention-1 kernel ran it, each CTA holds a K/V block of "
            f"{cfg['block_n']} keys and walks its Q rows in {cfg['block_m']}-row steps; "
            f"{cfg.get('num_splits', 1)} CTAs share a head's steps ({nums['ctas']} CTAs in "
            f"all). Between the {t_c} K/V blocks every row's partial O and log-sum-exp go "
            f"to HBM and back in fp32: {fmt_bytes(reread['Acc'])} of O traffic, "
            f"{fmt_pct(nums['acc_share_of_requested'])} of the "
            f"{fmt_bytes(c.no_reuse_hbm_bytes)} it asks of memory (the L2 keeps part; HBM "
            f"moves {fmt_bytes(p.hbm_bytes)}) — the "
            "Θ(N²d²/M) of the paper (`--config fa1-algorithm1` runs the paper's Algorithm 1 "
            "itself: one CTA per head). "
            f"Against standard attention v1 {verdict}: {fmt_time(p.time_s)}, "
            f"{p.tflops:.0f} TFLOPS, bound: {p.bound_text()}."
        )
    else:
        o_q = reread["O"] + reread["Acc"] + reread["Q"]
        text.append(
            f"What it re-reads instead: the paper's Algorithm 1 walks the {t_c} K/V blocks "
            "in its outer loop and, for each, every Q block in the inner loop, loading Q_i "
            "and the partial O_i, ℓ_i, m_i and writing O_i, ℓ_i, m_i back (the partial O in "
            f"fp32, as tilesim's kernel keeps it): {fmt_bytes(o_q)} of Q and O "
            f"traffic ({fmt_bytes(reread['L'] + reread['M'])} more for ℓ and m) — the "
            "Θ(N²d²/M) of the paper. "
            f"Against standard attention v1 {verdict}: {fmt_time(p.time_s)}, "
            f"{p.tflops:.0f} TFLOPS, bound: {p.bound_text()}."
        )
    return Section("v1", title, text, nums)


def _issue_per_score(run) -> float | None:
    """Scheduler cycles one warp of the main launch issues per score of its MMA loop
    (the compiled kernel's SASS replayed at one warp per scheduler), or None."""
    launch = max(run.trace.launches, key=lambda x: len(x.issue_per_step))
    cfg = run.trace.config
    if not launch.issue_per_step:
        return None
    scores_per_warp = cfg["block_m"] * cfg["block_n"] / cfg["num_warps"]
    return launch.issue_per_step[0] / scores_per_warp


def v2(st: Story) -> Section:
    title = "FlashAttention-2: parallel over the sequence, less non-matmul work"
    missing = st.missing("v2", title, ("v1", "v2"))
    if missing:
        return missing
    gpu = st.gpu
    r1, r2, s = st.runs["v1"], st.runs["v2"], st.p("standard")
    p1, p2 = r1.pred, r2.pred
    cfg1 = r1.trace.config
    released = cfg1.get("v1_kernel") == "released"
    main1 = max(p1.launches, key=lambda lp: lp.cycles)
    main2 = max(p2.launches, key=lambda lp: lp.cycles)
    slots1 = gpu.sm_count * main1.ctas_per_sm
    slots2 = gpu.sm_count * main2.ctas_per_sm
    busy1 = min(gpu.sm_count, main1.ctas)
    acc1 = r1.counters.read_bytes_by_tensor.get("Acc", 0) + r1.counters.write_bytes_by_tensor.get(
        "Acc", 0
    )
    issue1, issue2 = _issue_per_score(r1), _issue_per_score(r2)
    path1 = r1.trace.launches[0].mma_path
    path2 = r2.trace.launches[-1].mma_path
    peak1 = gpu.peak_tensor_flops(st.w.dtype, path1)
    nums = {
        "v1_kernel": cfg1.get("v1_kernel", "algorithm1"),
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
        "v1_acc_bytes": acc1,
        "v1_issue_cycles_per_score": issue1,
        "v2_issue_cycles_per_score": issue2,
        "v1_mma_path": path1,
        "v2_mma_path": path2,
        "v1_tensor_peak_flops": peak1,
        "hbm_bytes": p2.hbm_bytes,
        "time_s": p2.time_s,
        "v1_time_s": p1.time_s,
        "speedup_vs_v1": p1.time_s / p2.time_s,
        "speedup_vs_standard": s.time_s / p2.time_s,
        "v1_speedup_vs_standard": s.time_s / p1.time_s,
        "tflops": p2.tflops,
        "v1_tflops": p1.tflops,
        "peak_share": p2.tflops * 1e12 / st.peak,
        "bound": p2.bound,
        "utilisation": dict(p2.utilisation),
    }
    fill = main1.ctas / slots1
    if released:
        text = [
            f"v1's {main1.ctas} CTAs ({cfg1['num_warps']} warps each) split every K/V "
            f"block's keys between their warps: each {cfg1['block_m']}-row step the warps "
            "meet in shared memory for the row maximum and sum and hand each other P "
            "(the split-K partitioning the FlashAttention-2 paper names as v1's "
            "inefficiency), then rescale the step's O and log-sum-exp and send them back "
            f"to HBM in fp32 ({fmt_bytes(acc1)} of it here). v2 swaps the loops (Q blocks "
            f"outside, K/V inside): each of its {main2.ctas} CTAs keeps its Q block and "
            "running O on chip, every warp owns its own rows (no exchange), and O and the "
            "log-sum-exp are written once.",
        ]
        if issue1 is not None and issue2 is not None:
            text.append(
                f"In the compiled kernels that partitioning is issue time: v1's step loop "
                f"issues {issue1:.2f} scheduler cycles per score per warp, v2's "
                f"{issue2:.2f} (their SASS replayed at one warp per scheduler)."
                + (
                    f" A {cfg1['block_m']}-row step is one mma.sync tile high, too short for "
                    f"wgmma: v1's tensor peak here is {peak1 / 1e12:.0f} TFLOPS against "
                    f"v2's {st.peak / 1e12:.0f}."
                    if path1 != path2
                    else ""
                )
            )
    else:
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
            + f". v2 swaps the loops (Q blocks outside, K/V inside) and gives each Q block "
            f"its own CTA: {main2.ctas} CTAs, {main2.waves} wave(s) of {slots2}. The Q tile "
            "and the running O stay on chip; O and the log-sum-exp are written once at the "
            "end.",
        ]
    text += [
        f"It also trims the work that is not matmul: the output is rescaled once at the end "
        f"instead of every step, {fmt_si(r2.counters.fp32_ops)} FP32 ops against v1's "
        f"{fmt_si(r1.counters.fp32_ops)} (the exponentials stay "
        f"{fmt_si(r2.counters.exp_count)}: one per score). HBM traffic drops from "
        f"{fmt_bytes(p1.hbm_bytes)} to {fmt_bytes(p2.hbm_bytes)}.",
        f"Predicted: {fmt_time(p2.time_s)}, {fmt_speed(p2.time_s, p1.time_s, 'v1')} "
        f"and {fmt_speed(p2.time_s, s.time_s, 'standard attention')}; {p2.tflops:.0f} "
        f"TFLOPS = {fmt_pct(nums['peak_share'])} of the tensor peak, bound: {p2.bound_text()} "
        f"(tensor cores busy {fmt_pct(p2.utilisation['tensor'])}, SFU "
        f"{fmt_pct(p2.utilisation['sfu'])}). v1 ran {p1.tflops:.0f} TFLOPS, "
        + (
            f"{fmt_x(s.time_s / p1.time_s)} faster than standard attention already."
            if p1.time_s < s.time_s
            else f"{fmt_speed(p1.time_s, s.time_s, 'standard')}."
        ),
    ]
    return Section("v2", title, text, nums)


def v3(st: Story) -> Section:
    gpu = st.gpu
    if not st.hopper:
        try:
            check_algo("v3", st.w, gpu)
            why = ""
        except TilesimError as exc:
            why = str(exc)
        p2 = st.p("v2")
        nums = {
            "applies": False,
            "has_tma": gpu.has_tma,
            "has_wgmma": gpu.has_wgmma,
            "has_fp8": gpu.has_fp8,
            "arch": gpu.arch,
            "reason": why,
            "v2_tflops": p2.tflops,
            "peak_share": p2.tflops * 1e12 / st.peak,
        }
        text = [
            f"FlashAttention-3 does not apply on the {gpu.display_name} ({gpu.arch}): it is "
            "built from Hopper features this GPU lacks — the Tensor Memory Accelerator "
            f"(has_tma={gpu.has_tma}) that lets one warpgroup load tiles asynchronously, "
            f"asynchronous warpgroup MMA (has_wgmma={gpu.has_wgmma}) that lets a softmax run "
            f"while the GEMM is in flight, and FP8 tensor cores (has_fp8={gpu.has_fp8}). "
            f"tilesim says so: “{why}”.",
            f"Here FlashAttention-2 ({st.path}) is the end of the line: {p2.tflops:.0f} "
            f"TFLOPS, {fmt_pct(nums['peak_share'])} of the {st.peak / 1e12:.0f} TFLOPS "
            "peak.",
        ]
        return Section("v3", "FlashAttention-3: Hopper only", text, nums)

    title = "FlashAttention-3: asynchrony on Hopper"
    missing = st.missing("v3", title, ("v3",))
    if missing:
        return missing
    r3, p2 = st.runs["v3"], st.p("v2")
    p3, c3 = r3.pred, r3.counters
    cfg = r3.trace.config
    roles = [r.name for r in r3.trace.launches[0].program.roles]
    e_rate = gpu.sfu_ops_per_clk_per_sm
    t_rate = gpu.tensor_flop_per_clk_per_sm(st.w.dtype, "wgmma")
    exp_ratio = (c3.exp_count / e_rate) / (c3.matmul_flops / t_rate)
    nums = {
        "applies": True,
        "time_s": p3.time_s,
        "tflops": p3.tflops,
        "bound": p3.bound,
        "v2_time_s": p2.time_s,
        "speedup_vs_v2": p2.time_s / p3.time_s,
        "tma_loads": uses_tma(r3.trace),
        "roles": roles,
        "pingpong": cfg["pingpong"],
        "warp_specialize": cfg["warp_specialize"],
        "exp_to_gemm_time": exp_ratio,
        "utilisation": dict(p3.utilisation),
        "v2_utilisation": dict(p2.utilisation),
        "peak_share": p3.tflops * 1e12 / st.peak,
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
        f"{st.w.dtype}). Run one after the other, as a v2 CTA does, that time adds to "
        "the GEMMs'; overlapped, it hides behind them.",
        f"Predicted: {fmt_time(p3.time_s)}, {p3.tflops:.0f} TFLOPS "
        f"({fmt_pct(nums['peak_share'])} of peak), {fmt_speed(p3.time_s, p2.time_s, 'v2')}; "
        f"tensor cores busy {fmt_pct(p3.utilisation['tensor'])} (v2: "
        f"{fmt_pct(p2.utilisation['tensor'])}), bound: {p3.bound_text()}.",
    ]
    fa3 = st.runs.get("v3_fa3")
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
            "FlashAttention-3's CUDA schedule adds ping-pong: the two consumer warpgroups "
            "take turns on the tensor cores, so one's softmax runs under the other's GEMMs, "
            "with 2 stages of K/V buffers (`--config fa3`; tilesim's Gluon kernel runs it "
            "when asked). Predicted with it: "
            f"{fmt_time(pa.time_s)}, {pa.tflops:.0f} TFLOPS, bound: {pa.bound_text()}, "
            f"{fmt_speed(pa.time_s, p3.time_s, 'the default v3')}."
        )
    f8 = st.runs.get("v3_fp8")
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
            f"{pf.bound_text()} (tensor cores busy {fmt_pct(pf.utilisation['tensor'])}, SFU "
            f"{fmt_pct(pf.utilisation['sfu'])})."
        )
    return Section("v3", title, text, nums)
