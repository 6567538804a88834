"""Serving shapes against the float32 reference: grouped-query heads, a KV cache longer
than the queries (causal aligned bottom-right), and the split-KV decode kernel.

CPU: the Triton interpreter, tiny shapes with small tiles so that every length spans
several blocks and ends in a partial one; the ``gpu`` tests run real decode shapes.
"""

from __future__ import annotations

import zlib

import pytest
from conftest import poisoned

import tilesim.kernels as K
from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig

torch = pytest.importorskip("torch")
from tilesim.kernels import flash_decode, flash_v2, flash_v3  # noqa: E402
from tilesim.kernels.reference import reference, reference_lse, rel_error  # noqa: E402

TOL = 5e-3  # fp16


def _qkv(b, h, hk, n_q, n_kv, d, device, *parts):
    gen = torch.Generator(device="cpu").manual_seed(zlib.crc32(repr(parts).encode()))
    q = torch.randn((b, h, n_q, d), generator=gen)
    k, v = (torch.randn((b, hk, n_kv, d), generator=gen) for _ in range(2))
    return tuple(t.half().to(device) for t in (q, k, v))


# (batch, heads, kv heads, n_q, n_kv, d)
GQA = [(1, 4, 2, 40, 40, 64), (2, 6, 2, 30, 90, 64), (1, 4, 1, 50, 70, 128)]


@pytest.mark.parametrize("use_desc", [False, True], ids=["pointers", "tensor-descriptors"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", GQA, ids=["square", "shifted", "mqa-d128"])
def test_v2_grouped_heads(shape, causal, use_desc, device):
    b, h, hk, n_q, n_kv, d = shape
    q, k, v = _qkv(*shape, device, "v2", shape, causal, use_desc)
    out = poisoned((b, h, n_q, d), torch.float16, device)
    config = KernelConfig(32, 16, 4, 2)
    out, lse = flash_v2.forward(
        q, k, v, causal, d**-0.5, config, out, use_desc=use_desc, return_lse=True
    )
    assert rel_error(out, reference(q, k, v, causal)) < TOL
    assert (lse - reference_lse(q, k, causal)).abs().max().item() < 1e-3


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", GQA[1:], ids=["shifted", "mqa-d128"])
def test_v3_triton_grouped_heads(shape, causal, device):
    b, h, hk, n_q, n_kv, d = shape
    q, k, v = _qkv(*shape, device, "v3", shape, causal)
    out = poisoned((b, h, n_q, d), torch.float16, device)
    out, lse = flash_v3.forward(q, k, v, causal, d**-0.5, KernelConfig(32, 16, 4, 2), out,
                                return_lse=True)  # fmt: skip
    assert rel_error(out, reference(q, k, v, causal)) < TOL
    assert (lse - reference_lse(q, k, causal)).abs().max().item() < 1e-3


def test_standard_takes_the_shifted_diagonal(device):
    q, k, v = _qkv(1, 2, 2, 30, 90, 64, device, "standard")
    out = K.attention(q, k, v, causal=True, algo="standard", config=KernelConfig(32, 16, 4, 2))
    assert rel_error(out, reference(q, k, v, True)) < TOL


# (batch, heads, kv heads, n_q, n_kv, d), causal, config
DECODE = [
    ((2, 4, 2, 1, 300, 64), False, KernelConfig(16, 32, 4, 2, num_splits=3, pack_gqa=True)),
    ((2, 4, 2, 3, 300, 64), True, KernelConfig(16, 32, 4, 2, num_splits=4, pack_gqa=True)),
    ((1, 8, 1, 5, 200, 64), True, KernelConfig(16, 32, 4, 2, pack_gqa=True)),  # one split
    ((1, 4, 2, 5, 200, 64), True, KernelConfig(16, 32, 4, 2, num_splits=2)),  # not packed
    ((1, 2, 2, 1, 200, 128), False, KernelConfig(16, 32, 4, 2, num_splits=7)),  # MHA
    ((1, 8, 2, 20, 100, 64), True, KernelConfig(32, 16, 4, 2, num_splits=2, pack_gqa=True)),
]


@pytest.mark.parametrize(("shape", "causal", "config"), DECODE)
def test_decode_kernel(shape, causal, config, device):
    """Split KV, packed heads (several Q blocks in the last case), causal bottom-right."""
    b, h, hk, n_q, n_kv, d = shape
    q, k, v = _qkv(*shape, device, "decode", shape, causal, config)
    out = poisoned((b, h, n_q, d), torch.float16, device)
    out, lse = flash_v2.forward(q, k, v, causal, d**-0.5, config, out, return_lse=True)
    assert rel_error(out, reference(q, k, v, causal)) < TOL
    assert (lse - reference_lse(q, k, causal)).abs().max().item() < 1e-3


def test_decode_launches_are_the_split_kernel_and_the_combine(device):
    q, k, v = _qkv(1, 4, 1, 1, 256, 64, device, "launches")
    config = KernelConfig(16, 32, 4, 2, num_splits=4, pack_gqa=True)
    out, runs = K.launches(q, k, v, config=config)
    assert [name for name, _ in runs] == ["flash_decode", "combine"]
    for _, run in runs:
        run()
    assert rel_error(out, reference(q, k, v)) < TOL
    one = flash_decode.Forward(q, k, v, False, 0.125, config.replace(num_splits=1))
    assert one.buffers() == (None, None)


def test_the_default_config_runs_the_decode_kernel(device):
    q, k, v = _qkv(2, 8, 2, 1, 1000, 64, device, "default")
    out = K.attention(q, k, v, causal=True)
    assert rel_error(out, reference(q, k, v, True)) < TOL


def test_bad_serving_inputs_are_one_line_errors(device):
    q, k, v = _qkv(1, 6, 4, 8, 16, 64, device, "bad")
    with pytest.raises(TilesimError, match="H a multiple of H_kv") as info:
        K.attention(q, k, v)
    assert "\n" not in str(info.value)
    q, k, v = _qkv(1, 4, 2, 40, 16, 64, device, "bad2")
    with pytest.raises(TilesimError, match="the first 24 query rows would see no key"):
        K.attention(q, k, v, causal=True)
    with pytest.raises(TilesimError, match="grouped-query heads.* not v1"):
        K.attention(q, k, v, algo="v1")
    q, k, v = _qkv(1, 4, 4, 8, 16, 64, device, "bad3")
    with pytest.raises(TilesimError, match="schedule of the v2 forward"):
        K.attention(
            q, k, v, algo="standard", config=KernelConfig(16, 16, 4, 2, num_splits=1, pack_gqa=True)
        )


# -- on the GPU: real decode shapes ----------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("n_kv", [1000, 8192, 65536])
@pytest.mark.parametrize(("batch", "heads", "kv_heads"), [(1, 32, 8), (4, 32, 32), (16, 32, 4)])
def test_decode_on_the_gpu(batch, heads, kv_heads, n_kv):
    q, k, v = _qkv(batch, heads, kv_heads, 1, n_kv, 128, "cuda", "gpu", n_kv)
    out = K.attention(q, k, v)
    assert rel_error(out, reference(q, k, v)) < TOL


@pytest.mark.gpu
@pytest.mark.parametrize("algo", ["v2", "v3"])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_prefill_on_the_gpu(algo, causal):
    if algo == "v3" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("v3 needs Hopper")
    q, k, v = _qkv(2, 16, 4, 1000, 1500, 128, "cuda", algo, causal)
    out = K.attention(q, k, v, causal=causal, algo=algo)
    assert rel_error(out, reference(q, k, v, causal)) < TOL
