"""`tilesim explain` as data: its numbers are the engine's, on every GPU.

Each test rebuilds a prediction the story cites with `simulate` and compares
bit for bit (the engine is deterministic), or recomputes a closed form.
"""

from __future__ import annotations

import pytest

from tilesim.explain import DECODE_KV, SHORT_SEQLEN, build_explanation, main_workload
from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import Workload, build, default_config
from tilesim.traces.config import named_config
from tilesim.traces.counters import counters

B, H, N, D = 1, 4, 512, 64  # a small shape: the whole story in well under a second


def _sim(gpu, algo, w, config=None):
    return simulate(build(algo, w, gpu, config), gpu)


@pytest.fixture(scope="module", params=["a100", "h100", "h200"])
def story(request):
    gpu = load_gpu(request.param)
    w = main_workload(gpu, N, D, B, H, causal=False, dtype="fp16")
    return gpu, w, build_explanation(gpu, w)


@pytest.fixture(scope="module")
def h100_story():
    gpu = load_gpu("h100")
    w = main_workload(gpu, N, D, B, H, causal=False, dtype="fp16")
    return gpu, w, build_explanation(gpu, w)


def test_default_shape_is_16k_tokens_and_hidden_2048():
    w = main_workload(load_gpu("h100"), 4096, 128, None, None, False, "fp16")
    assert (w.batch, w.heads) == (4, 16)
    w = main_workload(load_gpu("a100"), 2048, 64, None, None, False, "fp16")
    assert (w.batch, w.heads) == (8, 32)


def test_every_section_on_every_gpu(story):
    gpu, _, expl = story
    keys = [s.key for s in expl.sections]
    assert keys == ["setup", "standard", "v1", "v2", "v3", "decode", "short", "wide", "not"]
    for s in expl.sections:
        assert s.paragraphs and all(p.strip() for p in s.paragraphs), s.key
        assert "Not predicted" not in " ".join(s.paragraphs), (s.key, expl.errors)
    assert expl.errors == {}
    algos = [row["algo"] for row in expl.table]
    hopper = gpu.has_tma and gpu.has_wgmma
    assert algos == (
        ["standard", "v1", "v2", "v3", "v3_fp8"] if hopper else ["standard", "v1", "v2"]
    )


def test_standard_numbers_equal_the_engine(story):
    gpu, w, expl = story
    p = _sim(gpu, "standard", w)
    n = expl.section("standard").numbers
    assert n["time_s"] == p.time_s
    assert n["hbm_bytes"] == p.hbm_bytes
    assert n["tflops"] == p.tflops
    assert n["bound"] == p.bound
    assert n["intensity_flop_per_byte"] == p.matmul_flops / p.hbm_bytes
    # S is B*H*N*N fp16 elements; S and P are each written once and read once
    assert n["s_bytes"] == B * H * N * N * 2
    assert n["score_traffic_bytes"] == 4 * n["s_bytes"]
    assert n["ridge_flop_per_byte"] == gpu.ridge_point_flop_per_byte(
        "fp16", default_config("v2", w, gpu).mma_path
    )
    # the prose cites the same figures
    text = " ".join(expl.section("standard").paragraphs)
    assert f"{p.tflops:.0f} TFLOPS" in text and f"bound: {p.bound}" in text


def test_v1_v2_numbers_equal_the_engine(story):
    gpu, w, expl = story
    p1, p2 = _sim(gpu, "v1", w), _sim(gpu, "v2", w)
    s = _sim(gpu, "standard", w)
    n1, n2 = expl.section("v1").numbers, expl.section("v2").numbers
    assert n1["time_s"] == p1.time_s and n1["hbm_bytes"] == p1.hbm_bytes
    assert n1["bytes_saved"] == s.hbm_bytes - p1.hbm_bytes
    assert n1["score_traffic_bytes"] == 0
    assert n2["time_s"] == p2.time_s and n2["v1_time_s"] == p1.time_s
    assert n2["speedup_vs_standard"] == s.time_s / p2.time_s
    # the released kernel's num_splits CTAs per (batch, head)
    c1 = default_config("v1", w, gpu)
    assert n1["v1_kernel"] == n2["v1_kernel"] == c1.v1_kernel == "released"
    assert n2["v1_ctas"] == n1["ctas"] == B * H * c1.num_splits
    assert n2["v2_ctas"] == B * H * -(-N // default_config("v2", w, gpu).block_m)
    c1, c2 = counters(build("v1", w, gpu)), counters(build("v2", w, gpu))
    assert (n2["v1_fp32_ops"], n2["v2_fp32_ops"]) == (c1.fp32_ops, c2.fp32_ops)
    assert n2["v2_fp32_ops"] < n2["v1_fp32_ops"]  # v2 rescales once at the end


def test_v3_on_hopper_equals_the_engine(h100_story):
    gpu, w, expl = h100_story
    n = expl.section("v3").numbers
    assert n["applies"] is True
    p3 = _sim(gpu, "v3", w)
    assert n["time_s"] == p3.time_s
    # FlashAttention-3's ping-pong schedule (a named config), predicted beside the default
    fa3 = named_config("fa3", "v3", w, gpu)
    assert fa3 != default_config("v3", w, gpu)
    pa = _sim(gpu, "v3", w, fa3)
    assert n["fa3_time_s"] == pa.time_s
    roles = [r.name for r in build("v3", w, gpu, fa3).launches[0].program.roles]
    assert n["fa3_roles"] == roles
    assert roles[0] == "producer" and len(roles) == 3
    assert "triton_time_s" not in n  # the default is what the kernel runs: one v3 story
    fp8 = Workload(B, H, N, N, D, dtype="fp8")
    pf = _sim(gpu, "v3", fp8)
    assert n["fp8_time_s"] == pf.time_s and n["fp8_tflops"] == pf.tflops
    # exp vs GEMM time of a tile: (exp / sfu per clk) / (FLOPs / tensor per clk); with the
    # datasheet's 16 and 4096 (8192 fp8) per clk that is 64/d at fp16, 128/d at fp8
    per_exp = 4 * D * gpu.sfu_ops_per_clk_per_sm
    assert n["exp_to_gemm_time"] == pytest.approx(
        gpu.tensor_fp16_wgmma_flop_per_clk_per_sm / per_exp
    )
    assert n["fp8_exp_to_gemm_time"] == pytest.approx(
        gpu.tensor_fp8_wgmma_flop_per_clk_per_sm / per_exp
    )
    sheet = load_gpu("h100_sxm5_80gb")
    per_exp = 4 * D * sheet.sfu_ops_per_clk_per_sm
    assert sheet.tensor_fp16_wgmma_flop_per_clk_per_sm / per_exp == pytest.approx(64 / D)
    assert n["roles"] == [r.name for r in build("v3", w, gpu).launches[0].program.roles]
    assert n["tma_loads"] > 0
    fp8_row = next(r for r in expl.table if r["algo"] == "v3_fp8")
    assert fp8_row["time_s"] == pf.time_s and fp8_row["precision"] == "fp8→fp16"


def test_v3_on_a100_says_why_not():
    gpu = load_gpu("a100")
    w = main_workload(gpu, N, D, B, H, causal=False, dtype="fp16")
    expl = build_explanation(gpu, w)
    s = expl.section("v3")
    assert s.numbers["applies"] is False
    assert s.numbers["has_tma"] is False and s.numbers["has_wgmma"] is False
    text = " ".join(s.paragraphs)
    assert "does not apply" in text and "TMA" in text and "wgmma" in text
    assert s.numbers["reason"] in text  # tilesim's own error, quoted


def test_limits_equal_the_engine(h100_story):
    gpu, w, expl = h100_story
    dec = expl.section("decode").numbers["by_kv"]
    assert sorted(dec) == sorted(DECODE_KV)
    for kv in DECODE_KV:
        wd = Workload(B, H, 1, kv, D)  # seqlen_q = 1 against the KV cache
        for algo in ("standard", "v2", "v3"):
            assert dec[kv]["time_s"][algo] == _sim(gpu, algo, wd).time_s
        # one query row: 4*N*d FLOPs over 2*N*d*2 bytes of K and V, about 1 FLOP/byte
        assert dec[kv]["intensity_flop_per_byte"] == pytest.approx(1.0, rel=0.05)
        # the split-KV schedule, against one CTA per (batch, head) and against GQA
        n = dec[kv]
        split = default_config("v2", wd, gpu)
        assert n["num_splits"] == split.num_splits > 1
        whole = _sim(gpu, "v2", wd, split.replace(num_splits=1, pack_gqa=False))
        assert n["whole_time_s"] == whole.time_s and n["whole_ctas"] == B * H
        assert n["split_speedup"] == whole.time_s / n["time_s"]["v2"]
        wg = Workload(B, H, 1, kv, D, kv_heads=n["gqa_kv_heads"])
        assert H // n["gqa_kv_heads"] == 4  # H = 4: the largest group up to 8
        assert n["gqa_time_s"] == _sim(gpu, "v2", wg).time_s < n["time_s"]["v2"]
        assert n["kv_bytes_per_token"] == 4 * n["gqa_kv_bytes_per_token"] == 2 * H * kv * D * 2
        assert n["hbm_share"] == wd.kv_bytes() / n["time_s"]["v2"] / gpu.hbm_bandwidth_Bps
    short = expl.section("short").numbers
    ws = Workload(1, H, SHORT_SEQLEN, SHORT_SEQLEN, D)
    ps = _sim(gpu, "standard", ws)
    assert short["time_s"]["standard"] == ps.time_s
    assert short["launches"]["standard"] == 3
    assert short["launch_share"]["standard"] == 3 * gpu.launch_overhead_s / ps.time_s
    wide = expl.section("wide").numbers["by_algo"]["v2"]
    ww = Workload(B, H * D // 256, N, N, 256)  # the same H*d
    pw = _sim(gpu, "v2", ww)
    assert wide["other_tflops"] == pw.tflops
    assert wide["other_ctas_per_sm"] == pw.ctas_per_sm
    assert wide["other_smem_per_cta"] == build("v2", ww, gpu).launches[-1].smem_bytes


def test_same_flops_and_exponentials(story):
    gpu, w, expl = story
    n = expl.section("not").numbers
    closed = 4 * B * H * N * N * D
    assert n["closed_form_flops"] == closed
    assert set(n["matmul_flops"].values()) == {closed}
    assert set(n["exp_count"].values()) == {B * H * N * N}


def test_causal_flash_skips_what_standard_masks():
    gpu = load_gpu("h100")
    w = main_workload(gpu, N, D, B, H, causal=True, dtype="fp16")
    expl = build_explanation(gpu, w)
    flops = expl.section("not").numbers["matmul_flops"]
    closed = 4 * B * H * N * N * D
    assert flops["standard"] == closed  # the math path masks a full product
    assert closed / 2 <= flops["v2"] < closed  # whole blocks above the diagonal are skipped
    assert "skip" in " ".join(expl.section("not").paragraphs)


def test_table_rows_equal_the_engine(h100_story):
    gpu, w, expl = h100_story
    for row in expl.table:
        if row["algo"] == "v3_fp8":
            continue
        p = _sim(gpu, row["algo"], w)
        assert (row["time_s"], row["tflops"], row["bound"], row["waves"]) == (
            p.time_s,
            p.tflops,
            p.bound,
            p.waves,
        )
        assert row["ctas"] == [lp.ctas for lp in p.launches]
    std = expl.table[0]
    assert std["extra_tensors"] == ["P", "S"] and std["extra_bytes"] == 2 * B * H * N * N * 2
    v2 = next(r for r in expl.table if r["algo"] == "v2")
    assert v2["extra_tensors"] == ["LSE"] and v2["score_hbm_bytes"] == 0
    v3 = next(r for r in expl.table if r["algo"] == "v3")
    assert "TMA" in v3["features"] and "TMA" not in expl.table[0]["features"]
    assert ("warp-spec" in v3["features"]) == default_config("v3", w, gpu).warp_specialize


def test_deterministic(h100_story):
    gpu, w, expl = h100_story
    assert build_explanation(gpu, w).to_dict() == expl.to_dict()
