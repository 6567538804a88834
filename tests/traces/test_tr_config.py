"""One default config (what tilesim's kernels run) and the named published schedules."""

from __future__ import annotations

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.traces import NAMED_CONFIGS, Workload, build, default_config
from tilesim.traces.config import config_names, describe_config, named_config

H200 = load_gpu("h200")
A100 = load_gpu("a100")


def wl(d=128, **kw):
    return Workload(2, 16, 4096, 4096, d, **kw)


def test_the_default_v3_is_the_gluon_kernels_schedule():
    c = default_config("v3", wl(), H200)
    assert (c.warp_specialize, c.pingpong, c.num_stages, c.persistent) == (True, False, 3, False)
    # fp8 without the mask runs the same kernel persistent; with it, not
    assert default_config("v3", wl(dtype="fp8"), H200).persistent
    assert not default_config("v3", wl(dtype="fp8", causal=True), H200).persistent
    # d = 256: the plain Triton kernel, one warpgroup pair issuing its own TMA loads
    c256 = default_config("v3", wl(256), H200)
    assert (c256.warp_specialize, c256.pingpong, c256.num_stages) == (False, False, 2)


def test_fa3_is_flashattention3s_pingpong_with_two_stages():
    c = named_config("fa3", "v3", wl(), H200)
    assert (c.warp_specialize, c.pingpong, c.num_stages, c.block_m, c.block_n) == (
        True,
        True,
        2,
        128,
        128,
    )
    roles = [r.name for r in build("v3", wl(), H200, c).launches[0].program.roles]
    assert roles == ["producer", "consumer0", "consumer1"]


def test_fa2_and_sdpa_flash_are_one_schedule_on_every_gpu():
    for gpu in (H200, A100):
        fa2 = named_config("fa2", "v2", wl(), gpu)
        assert fa2 == named_config("sdpa-flash", "v2", wl(), gpu)
        assert (fa2.block_m, fa2.block_n, fa2.num_warps, fa2.mma_path) == (128, 64, 4, "mma_sync")
    assert named_config("fa2", "v2", wl(64), H200).block_n == 128


def test_default_name_is_the_default_config():
    for algo in ("standard", "v1", "v2", "v3"):
        for pass_ in ("fwd", "bwd") if algo != "v3" else ("fwd",):
            w = wl(pass_=pass_)
            assert named_config("default", algo, w, H200) == default_config(algo, w, H200)


@pytest.mark.parametrize(
    ("name", "algo", "w", "gpu", "match"),
    [
        ("fa4", "v3", wl(), H200, r"unknown config 'fa4' \(choose from default, fa3"),
        ("fa3", "v2", wl(), H200, "config 'fa3' is a schedule of v3, not of v2"),
        ("fa2", "v2", wl(pass_="bwd"), H200, "not defined for a bwd pass"),
        ("fa3", "v3", wl(), A100, "v3 needs Hopper"),
    ],
)
def test_a_name_that_does_not_apply_is_one_line(name, algo, w, gpu, match):
    with pytest.raises(TilesimError, match=match):
        named_config(name, algo, w, gpu)


def test_every_listed_name_resolves_for_its_algorithm():
    for name in config_names():
        key = {"sdpa-flash": "fa2"}.get(name, name)
        algo = NAMED_CONFIGS[key].algo if key != "default" else "v2"
        assert named_config(name, algo, wl(), H200) is not None


def test_the_label_says_which_kernel_runs_a_config():
    w = wl()
    assert describe_config("v3", w, H200, default_config("v3", w, H200)).startswith("default:")
    assert describe_config("v3", w, H200, None).startswith("default:")
    fa3 = describe_config("v3", w, H200, named_config("fa3", "v3", w, H200))
    assert fa3.startswith("fa3:") and "Gluon" in fa3
    # FlashAttention-3's schedule at d = 256: no kernel of ours runs it
    w256 = wl(256)
    assert "no kernel runs it" in describe_config(
        "v3", w256, H200, named_config("fa3", "v3", w256, H200)
    )
    custom = default_config("v2", w, H200).replace(block_n=32)
    assert describe_config("v2", w, H200, custom).startswith("custom: no kernel has run")


# -- v1: the released FlashAttention-1 kernel's structure, and Algorithm 1 --------------


@pytest.mark.parametrize(("d", "block_n"), [(64, 256), (128, 128)])
def test_the_default_v1_is_the_released_kernels_structure(d, block_n):
    for pass_, warps in (("fwd", 4), ("bwd", 8)):
        c = default_config("v1", wl(d, pass_=pass_), H200)
        assert (c.v1_kernel, c.block_m, c.block_n, c.mma_path) == (
            "released",
            16,
            block_n,
            "mma_sync",
        )
        assert c.num_warps == warps
    assert named_config("fa1", "v1", wl(), H200) == default_config("v1", wl(), H200)
    assert describe_config("v1", wl(), H200, named_config("fa1", "v1", wl(), H200)).startswith(
        "default:"
    )


def _slots(w, gpu):
    from tilesim.traces.occupancy import occupancy

    one = default_config("v1", w, gpu).replace(num_splits=1)
    return gpu.sm_count * occupancy(build("v1", w, gpu, one).launches[0], gpu).ctas_per_sm


@pytest.mark.parametrize("gpu", [H200, A100], ids=["h200", "a100"])
def test_num_splits_fills_the_waves_the_way_the_released_launcher_does(gpu):
    for bh in (1, 4, 16, 48, 128, 200, 1024, _slots(Workload(1, 1, 4096, 4096, 64), gpu)):
        w = Workload(1, bh, 4096, 4096, 64)
        c = default_config("v1", w, gpu)
        waves = bh * c.num_splits / _slots(w, gpu)
        efficiency = waves / -(-waves // 1)
        # the fewest splits within 95% of the best wave efficiency, at most 30
        assert 1 <= c.num_splits <= 30
        assert efficiency > 0.95 * max(
            (bh * s / _slots(w, gpu)) / -(-(bh * s / _slots(w, gpu)) // 1) for s in range(1, 31)
        )
        if bh % _slots(w, gpu) == 0:
            assert c.num_splits == 1  # whole waves of heads: nothing to split


def test_the_backward_splits_over_kv_blocks_only_when_heads_leave_sms_idle():
    few = default_config("v1", Workload(1, 4, 4096, 4096, 64, pass_="bwd"), H200)
    many = default_config("v1", Workload(8, 16, 4096, 4096, 64, pass_="bwd"), H200)
    assert few.num_splits == 4096 // few.block_n  # one CTA per K/V block
    assert many.num_splits == 1  # one CTA per head
    # causal with 10 or more K/V blocks: always split (load balance)
    causal = default_config("v1", Workload(8, 16, 4096, 4096, 64, True, pass_="bwd"), H200)
    assert causal.num_splits == 16


def test_fa1_algorithm1_is_the_papers_tiles_in_both_passes():
    for pass_, tiles in (("fwd", (64, 128)), ("bwd", (64, 64))):
        c = named_config("fa1-algorithm1", "v1", wl(64, pass_=pass_), H200)
        assert (c.v1_kernel, c.num_splits) == ("algorithm1", 1)
        assert (c.block_m, c.block_n) == tiles
    with pytest.raises(TilesimError, match="num_splits belongs to v1_kernel='released'"):
        c = named_config("fa1-algorithm1", "v1", wl(), H200)
        build("v1", wl(), H200, c.replace(num_splits=2))


def test_d256_runs_algorithm1_which_the_released_kernel_refused():
    for pass_ in ("fwd", "bwd"):
        w = wl(256, pass_=pass_)
        assert default_config("v1", w, H200) == named_config("fa1-algorithm1", "v1", w, H200)
