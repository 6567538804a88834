"""Bad inputs to the generators: one TilesimError line naming the problem."""

from __future__ import annotations

import pytest

from tilesim.errors import TilesimError
from tilesim.traces import KernelConfig, Workload, build, default_config
from tilesim.traces.config import smem_bytes


def one_line(err) -> str:
    text = str(err.value)
    assert text and "\n" not in text
    return text


def test_unknown_algorithm(h100):
    with pytest.raises(TilesimError) as err:
        build("v4", Workload(1, 1, 128, 128, 64), h100)
    assert "unknown algorithm 'v4'" in one_line(err)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"head_dim": 96}, "head_dim 96 is not supported"),
        ({"seqlen_q": 0}, "seqlen_q must be a positive integer, got 0"),
        ({"batch": -1}, "batch must be a positive integer, got -1"),
        ({"dtype": "fp4"}, "unknown dtype 'fp4'"),
    ],
)
def test_bad_workload(kwargs, message):
    base = {"batch": 1, "heads": 1, "seqlen_q": 128, "seqlen_kv": 128, "head_dim": 64}
    with pytest.raises(TilesimError) as err:
        Workload(**(base | kwargs))
    assert message in one_line(err)


@pytest.mark.parametrize("algo", ["standard", "v1", "v2", "v3"])
def test_tiles_overflowing_shared_memory_name_both_sizes(algo, h100):
    w = Workload(1, 1, 1024, 1024, 256)
    config = default_config(algo, w, h100).replace(block_m=256, block_n=256, num_stages=4)
    need = smem_bytes(algo, w, config)
    assert need > h100.smem_bytes_per_cta_max
    with pytest.raises(TilesimError) as err:
        build(algo, w, h100, config)
    text = one_line(err)
    assert f"need {need / 1024:.0f} KiB" in text
    assert f"allows {h100.smem_bytes_per_cta_max / 1024:.0f} KiB" in text


def test_v3_and_fp8_on_a100(a100):
    w = Workload(1, 1, 256, 256, 128)
    with pytest.raises(TilesimError) as err:
        build("v3", w, a100)
    message = "v3 needs Hopper's TMA and wgmma, which a100_sxm4_80gb.published does not have"
    assert message in one_line(err)
    fp8 = Workload(1, 1, 256, 256, 128, dtype="fp8")
    with pytest.raises(TilesimError) as err:
        build("v2", fp8, a100)
    assert "fp8 is supported by v3 only" in one_line(err)


def test_fp8_needs_fp8_tensor_cores(h100):
    import dataclasses

    no_fp8 = dataclasses.replace(h100, has_fp8=False)
    with pytest.raises(TilesimError) as err:
        build("v3", Workload(1, 1, 256, 256, 128, dtype="fp8"), no_fp8)
    assert "fp8 needs fp8 tensor cores" in one_line(err)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"num_warps": 2}, "not a multiple of 4"),
        (
            {"num_warps": 4, "pingpong": True},
            "pingpong needs warp_specialize and at least two consumer warpgroups",
        ),
        ({"warp_specialize": False, "pingpong": True}, "pingpong needs warp_specialize"),
        ({"block_m": 64}, "does not split into 2 consumer warpgroups"),
    ],
)
def test_v3_config_that_cannot_be_scheduled(changes, message, h100):
    w = Workload(1, 1, 256, 256, 128)
    config = default_config("v3", w, h100).replace(**changes)
    with pytest.raises(TilesimError) as err:
        build("v3", w, h100, config)
    assert message in one_line(err)


def test_bad_kernel_config():
    with pytest.raises(TilesimError, match="block_m must be a power of two, got 96"):
        KernelConfig(96, 64, 4, 2)
    with pytest.raises(TilesimError, match="num_stages must be a positive integer"):
        KernelConfig(64, 64, 4, 0)
    assert KernelConfig(64, 64, 4, 3).num_stages == 3  # a pipeline depth need not be 2^k
