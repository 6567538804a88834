"""The sections of `tilesim explain` on where FlashAttention stops paying, and what it is not.

Decode against a long KV cache, very short (launch-bound) sequences, wide heads
that crowd shared memory; then the same FLOPs and exponentials for every
algorithm. Each function reads a `Story` and returns a `Section`.
"""

from __future__ import annotations

from .fmt import fmt_pct, fmt_si, fmt_speed, fmt_time, fmt_x
from .story import DECODE_KV, PAGE_ENTRY_BYTES, PAGE_ROWS, Section, Story


def decode(st: Story) -> Section:
    title = "Where it stops paying (1): decode, one query against a long KV cache"
    algos = ("standard", "v2") + (("v3",) if st.hopper else ())
    names = tuple(f"decode{kv}_{a}" for kv in DECODE_KV for a in (*algos, "v2_whole", "v2_gqa"))
    missing = st.missing("decode", title, names)
    if missing:
        return missing
    gpu = st.gpu
    peak = gpu.hbm_bandwidth_Bps
    main_speedup = st.p("standard").time_s / st.p("v2").time_s
    nums: dict = {"main_speedup_v2_vs_standard": main_speedup, "hbm_peak_Bps": peak, "by_kv": {}}
    parts = []
    for kv in DECODE_KV:
        ps = {a: st.p(f"decode{kv}_{a}") for a in algos}
        v2, whole, gqa = ps["v2"], st.p(f"decode{kv}_v2_whole"), st.p(f"decode{kv}_v2_gqa")
        w = st.runs[f"decode{kv}_v2"].workload
        wg = st.runs[f"decode{kv}_v2_gqa"].workload
        split = st.runs[f"decode{kv}_v2"].trace.config.get("num_splits", 1)
        bw = w.kv_bytes() / v2.time_s
        nums["by_kv"][kv] = {
            "time_s": {a: ps[a].time_s for a in algos},
            "speedup_v2_vs_standard": ps["standard"].time_s / v2.time_s,
            "intensity_flop_per_byte": v2.matmul_flops / v2.hbm_bytes,
            "kv_bytes_per_token": w.kv_bytes() // w.batch,
            "num_splits": split,
            "v2_ctas": v2.launches[0].ctas,
            "achieved_Bps": bw,
            "hbm_share": bw / peak,
            "whole_time_s": whole.time_s,
            "whole_ctas": whole.launches[0].ctas,
            "whole_hbm_share": w.kv_bytes() / whole.time_s / peak,
            "split_speedup": whole.time_s / v2.time_s,
            "gqa_kv_heads": wg.num_kv_heads,
            "gqa_time_s": gqa.time_s,
            "gqa_kv_bytes_per_token": wg.kv_bytes() // wg.batch,
            "gqa_hbm_share": wg.kv_bytes() / gqa.time_s / peak,
            "gqa_speedup": v2.time_s / gqa.time_s,
            "gqa_num_splits": st.runs[f"decode{kv}_v2_gqa"].trace.config.get("num_splits", 1),
            "bound": v2.bound,
            "fastest": min(algos, key=lambda a: ps[a].time_s),
        }
        n = nums["by_kv"][kv]
        parts.append(
            f"KV {kv}: each sequence's token reads {fmt_si(n['kv_bytes_per_token'])}B of K and "
            f"V; "
            + ", ".join(f"{a} {fmt_time(ps[a].time_s)}" for a in algos)
            + f" — v2 splits the cache {split} ways ({n['v2_ctas']} CTAs for {gpu.sm_count} "
            f"SMs) and streams K and V at {bw / 1e12:.2f} TB/s ({fmt_pct(n['hbm_share'])} of "
            f"HBM's peak), {fmt_x(n['split_speedup'])} the speed of one CTA per (batch, head) "
            f"({n['whole_ctas']} CTAs: {fmt_pct(n['whole_hbm_share'])} of peak); bound: "
            f"{v2.bound_text()}"
        )
    w = st.runs[f"decode{DECODE_KV[0]}_v2"].workload
    first = nums["by_kv"][DECODE_KV[0]]
    group = w.heads // first["gqa_kv_heads"]
    gqa = [
        f"KV {kv}: {fmt_time(nums['by_kv'][kv]['gqa_time_s'])}, "
        f"{fmt_x(nums['by_kv'][kv]['gqa_speedup'])} faster"
        for kv in DECODE_KV
    ]
    split_gain = [v["split_speedup"] for v in nums["by_kv"].values()]
    page = PAGE_ROWS * w.head_dim * w.elem_bytes  # one page of one K/V head
    nums["page_rows"] = PAGE_ROWS
    nums["page_table_share"] = PAGE_ENTRY_BYTES / (2 * page)
    text = [
        f"Generating a token, each of {w.batch}x{w.heads} heads has one query row against "
        "the whole cache. The score matrix is one row per head, so there is nothing big to "
        "keep out of HBM: every algorithm must read K and V once, at about 1 FLOP per byte "
        f"— far below the ridge point ({st.ridge:.0f}). The gain over standard attention "
        f"that was {fmt_x(main_speedup)} on the full shape "
        + (
            "shrinks:"
            if all(v["speedup_v2_vs_standard"] < main_speedup for v in nums["by_kv"].values())
            else "does not shrink here:"
        ),
        "; ".join(parts) + ".",
        "Decode is a bandwidth problem: its time is the KV cache's bytes over the HBM "
        "bandwidth the kernel reaches, and a kernel reaches it only with enough loads in "
        "flight. Splitting the KV sequence across CTAs (Flash-Decoding: each split writes "
        "a partial output and log-sum-exp, a second launch combines them) puts more CTAs "
        "on the cache at the price of that launch: "
        + (
            f"here it pays, up to {fmt_x(max(split_gain))} the speed of one CTA per (batch, head)."
            if max(split_gain) > 1.02
            else f"here {first['whole_ctas']} CTAs of one (batch, head) each already stream "
            f"near the peak, and the combine's launch costs more than the split gains "
            f"({fmt_x(min(split_gain))}); with fewer sequences or heads the split pays."
        ),
        f"Grouped-query heads shrink the bytes themselves: with {first['gqa_kv_heads']} K/V "
        f"heads for {w.heads} query heads (G = {group}) a token reads "
        f"{fmt_si(first['gqa_kv_bytes_per_token'])}B per sequence instead of "
        f"{fmt_si(first['kv_bytes_per_token'])}B, and packing the G query heads of a K/V "
        "head into one CTA's Q block (FlashAttention-3's PackGQA) reads each K/V tile once "
        "for all of them: " + "; ".join(gqa) + f". With {group}x fewer K/V heads there are "
        f"{group}x fewer CTAs of work, so the split count rises to keep the SMs busy "
        f"({first['num_splits']} -> {first['gqa_num_splits']} at KV {DECODE_KV[0]}).",
        f"A paged cache (vLLM's PagedAttention) adds one page-table entry per page: "
        f"{PAGE_ENTRY_BYTES} bytes per {PAGE_ROWS}-row page of K and V, "
        f"{fmt_pct(nums['page_table_share'])} more bytes; its cost is the gather — each page "
        "is its own small transfer, which a TMA tile load cannot span — which tilesim does "
        "not model yet.",
    ]
    return Section("decode", title, text, nums)


def short(st: Story) -> Section:
    title = "Where it stops paying (2): very short sequences are launch-bound"
    algos = ("standard", "v2") + (("v3",) if st.hopper else ())
    missing = st.missing("short", title, tuple(f"short_{a}" for a in algos))
    if missing:
        return missing
    gpu = st.gpu
    ps = {a: st.p(f"short_{a}") for a in algos}
    w = st.runs["short_v2"].workload
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
            f"{fmt_pct(nums['launch_share'][a])} of it, bound: {ps[a].bound_text()}"
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


def wide(st: Story) -> Section:
    algos = ("v2",) + (("v3",) if st.hopper else ())
    other = st.runs["wide_v2"].workload.head_dim
    title = (
        f"Where it stops paying (3): head dim {other} crowds shared memory"
        if other > st.w.head_dim
        else f"Where it stops paying (3): head dim {st.w.head_dim} crowds shared memory"
    )
    missing = st.missing("wide", title, tuple(f"wide_{a}" for a in algos))
    if missing:
        return missing
    gpu = st.gpu
    nums: dict = {"head_dim": st.w.head_dim, "other_head_dim": other, "by_algo": {}}
    parts = []
    for a in algos:
        base, wide = st.runs[a], st.runs[f"wide_{a}"]
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
            f"{a}: d={st.w.head_dim} runs {cb['block_m']}x{cb['block_n']} tiles, "
            f"{n['smem_per_cta'] / 1024:.0f} KiB per CTA, {lb.ctas_per_sm} CTA(s) per SM "
            f"({lb.occupancy_limiter}-limited), {pb.tflops:.0f} TFLOPS; d={other} "
            f"{cw['block_m']}x{cw['block_n']} x {cw['num_stages']} stages, "
            f"{n['other_smem_per_cta'] / 1024:.0f} KiB per CTA, {lw.ctas_per_sm} per SM "
            f"({lw.occupancy_limiter}-limited), {pw.tflops:.0f} TFLOPS, bound: {pw.bound_text()}"
        )
    wide_d, narrow_d = max(other, st.w.head_dim), min(other, st.w.head_dim)
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


def is_not(st: Story) -> Section:
    algos = [
        a
        for a in ("standard", "v1", "v2", "v3")
        if a in st.runs and st.runs[a].counters is not None
    ]
    flops = {a: st.runs[a].counters.matmul_flops for a in algos}
    exps = {a: st.runs[a].counters.exp_count for a in algos}
    w = st.w
    closed = w.dense_flops()
    s, p2 = st.p("standard"), st.p("v2")
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
        + (", plus, with the causal mask, from the blocks it never computes." if not same else "."),
    ]
    return Section("not", "What FlashAttention is not", text, nums)
