"""The kernels on a real GPU at realistic shapes, through the public API with default configs.

Skipped without CUDA. v3 (TMA descriptors, warp specialisation, fp8) runs only here:
the interpreter emulates its loads but not its compiled Hopper code paths.
"""

from __future__ import annotations

import zlib

import pytest
from conftest import make_qkv, poisoned

import tilesim.kernels as K
from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig

torch = pytest.importorskip("torch")
from tilesim.kernels.reference import reference  # noqa: E402

pytestmark = pytest.mark.gpu

TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2}


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


# v3 runs without warp specialisation (its warp-specialised build deadlocked on an
# H200, experiments/2026-11-30-tuning/README.md), so it takes an explicit config rather than
# the default.
V3_CONFIGS = {
    64: KernelConfig(128, 128, 8, 3, "wgmma"),
    128: KernelConfig(128, 128, 8, 3, "wgmma"),
    256: KernelConfig(128, 64, 8, 2, "wgmma"),
}


def _check(algo, shape, causal, dtype, seed, config=None):
    b, h, n_q, n_kv, d = shape
    if algo == "v3" and config is None:
        config = V3_CONFIGS[d]
    q, k, v = make_qkv(b, h, n_q, n_kv, d, dtype, "cuda", seed)
    out = poisoned((b, h, n_q, d), dtype, "cuda")
    K.attention(q, k, v, causal=causal, algo=algo, config=config, out=out)
    err = K.rel_error(out, reference(q, k, v, causal))
    assert err < TOL[dtype], f"{algo} {shape} {dtype} causal={causal}: rel error {err:.2e}"


ALGOS = ["standard", "v1", "v2", "v3"]


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_d128_default_config(algo, dtype, causal):
    if algo == "v3" and not _hopper():
        pytest.skip("v3 needs Hopper")
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    _check(
        algo,
        (2, 8, 2048, 2048, 128),
        causal,
        dt,
        seed=zlib.crc32(f"{algo}{dtype}{causal}".encode()),
    )


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("d", [64, 256])
def test_other_head_dims(algo, d):
    if algo == "v3" and not _hopper():
        pytest.skip("v3 needs Hopper")
    _check(algo, (1, 4, 1024, 1024, d), True, torch.float16, seed=d)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("causal", [False, True])
def test_partial_blocks(algo, causal):
    """Sequence lengths that are no multiple of any tile (TMA tiles run past a head's end)."""
    if algo == "v3" and not _hopper():
        pytest.skip("v3 needs Hopper")
    _check(algo, (2, 4, 1000, 1000, 128), causal, torch.float16, seed=7)
    if causal and algo == "v1":  # v1 has no shifted diagonal (traces.config.check_serving)
        with pytest.raises(TilesimError, match="bottom-right"):
            _check(algo, (1, 4, 333, 777, 64), causal, torch.float16, seed=8)
    else:
        _check(algo, (1, 4, 333, 777, 64), causal, torch.float16, seed=8)


# the paper's Algorithm 1 (`--config fa1-algorithm1`): one CTA per head, wgmma tiles
V1_ALGORITHM1 = KernelConfig(64, 128, 4, 1, "wgmma")


@pytest.mark.parametrize("causal", [False, True])
def test_v1_algorithm1(causal):
    _check("v1", (2, 8, 1024, 1024, 64), causal, torch.float16, seed=21, config=V1_ALGORITHM1)
    _check("v1", (1, 4, 1000, 1000, 128), causal, torch.float16, seed=22, config=V1_ALGORITHM1)


@pytest.mark.skipif(not _hopper(), reason="v3 needs Hopper")
@pytest.mark.parametrize(
    "config",
    [
        KernelConfig(128, 128, 8, 2, "wgmma"),
        KernelConfig(128, 64, 8, 3, "wgmma"),
        # persistent needs more shared memory than the non-persistent loop (Triton
        # 3.6 asked 262,168 B at 3 stages, over the H200's 232,448): 2 stages
        KernelConfig(128, 128, 8, 2, "wgmma", persistent=True),
    ],
    ids=["bn128-s2", "bn64-s3", "persistent"],
)
@pytest.mark.parametrize("causal", [False, True])
def test_v3_configs(config, causal):
    _check("v3", (2, 8, 2048, 2048, 128), causal, torch.float16, seed=11, config=config)
    _check("v3", (1, 4, 1000, 1000, 128), causal, torch.float16, seed=12, config=config)


@pytest.mark.skipif(not _hopper(), reason="v3 needs Hopper")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("n", "d"), [(2048, 128), (1000, 64)])
def test_v3_fp8(causal, n, d):
    q, k, v = make_qkv(2, 8, n, n, d, torch.float32, "cuda", seed=n + d)
    (q8, sq), (k8, sk), (v8, sv) = (K.quantize_fp8(2.0 * t) for t in (q, k, v))
    out = poisoned(q.shape, torch.float16, "cuda")
    K.attention(
        q8,
        k8,
        v8,
        causal=causal,
        algo="v3",
        config=V3_CONFIGS[d],
        out=out,
        q_scale=sq,
        k_scale=sk,
        v_scale=sv,
    )
    ref = reference(q8, k8, v8, causal, q_scale=sq, k_scale=sk, v_scale=sv)
    assert K.rel_error(out, ref) < 0.1


@pytest.mark.skipif(not _hopper(), reason="v3 needs Hopper")
def test_v3_rejects_configs_it_cannot_run():
    q, k, v = make_qkv(1, 2, 256, 256, 128, torch.float16, "cuda", seed=1)
    with pytest.raises(TilesimError, match="ping-pong"):
        K.attention(q, k, v, algo="v3", config=KernelConfig(128, 128, 8, 2, pingpong=True))
    # warp_specialize=True runs the Gluon kernel (test_kern_v3_gluon_gpu.py; persistent or
    # not), which supports head_dim 64 and 128 only
    ws = KernelConfig(128, 64, 8, 2, warp_specialize=True, persistent=True)
    q, k, v = make_qkv(1, 1, 128, 128, 256, torch.float16, "cuda", seed=1)
    with pytest.raises(TilesimError, match="head_dim"):
        K.attention(q, k, v, algo="v3", config=ws)


def test_standard_launches_are_three_kernels():
    q, k, v = make_qkv(1, 2, 512, 512, 64, torch.float16, "cuda", seed=3)
    out, runs = K.launches(q, k, v, algo="standard", causal=True)
    assert [name for name, _ in runs] == ["standard_qk", "standard_softmax", "standard_pv"]
    out.fill_(float("nan"))
    for _, run in runs:
        run()
    assert K.rel_error(out, reference(q, k, v, True)) < TOL[torch.float16]


def test_standard_long_rows_take_the_two_pass_softmax():
    """Rows longer than the softmax kernel's register block (8192 causal, 16384 not) are
    read twice; a non-causal row of 10000 is read once."""
    _check("standard", (1, 1, 64, 10000, 64), True, torch.float16, seed=5)
    _check("standard", (1, 1, 64, 10000, 64), False, torch.float16, seed=6)
    _check("standard", (1, 1, 64, 17000, 64), False, torch.float16, seed=7)
