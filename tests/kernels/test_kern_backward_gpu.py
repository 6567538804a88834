"""Backward kernels on a real GPU at realistic shapes, default (shared) backward configs.

Skipped without CUDA. Gradients are checked against float32 torch autograd
(one (batch, head) slice at a time), with the gradient buffers poisoned with NaN
before the backward launches run.
"""

from __future__ import annotations

import zlib

import pytest
from conftest import make_qkv

import tilesim.kernels as K
from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig

torch = pytest.importorskip("torch")
from tilesim.kernels.reference import rel_error  # noqa: E402

pytestmark = pytest.mark.gpu

TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _inputs(shape, dtype, seed):
    b, h, n_q, n_kv, d = shape
    q, k, v = make_qkv(b, h, n_q, n_kv, d, dtype, "cuda", seed)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    do = torch.randn((b, h, n_q, d), generator=gen).to(dtype).to("cuda")
    return q, k, v, do


def _check(algo, shape, causal, dtype, seed, config=None):
    q, k, v, do = _inputs(shape, dtype, seed)
    grads, runs = K.backward_launches(q, k, v, do, causal=causal, algo=algo, config=config)
    for g in grads:
        g.fill_(float("nan"))
    for _, run in runs:
        run()
    ref = K.reference_grads(q, k, v, do, causal)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref, strict=True):
        err = rel_error(g, r)
        assert err < TOL[dtype], (
            f"{algo} {shape} {dtype} causal={causal}: {name} rel error {err:.2e}"
        )


@pytest.mark.parametrize("algo", ["standard", "v1", "v2"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_d128_default_config(algo, dtype, causal):
    seed = zlib.crc32(f"bwd{algo}{dtype}{causal}".encode())
    _check(algo, (2, 8, 2048, 2048, 128), causal, DTYPES[dtype], seed)


@pytest.mark.parametrize("algo", ["standard", "v1", "v2"])
def test_d64_and_partial_blocks(algo):
    _check(algo, (1, 4, 1000, 1000, 64), True, torch.float16, seed=11)
    _check(algo, (1, 4, 333, 777, 128), False, torch.float16, seed=12)


@pytest.mark.parametrize("causal", [False, True])
def test_v1_algorithm4(causal):
    """The paper's Algorithm 4 (`--config fa1-algorithm1`) after the released forward."""
    config = KernelConfig(64, 64, 8, 1, "mma_sync")
    _check("v1", (2, 4, 1024, 1024, 128), causal, torch.float16, seed=23, config=config)


@pytest.mark.parametrize("causal", [False, True])
def test_v2_long(causal):
    _check("v2", (1, 4, 4096, 4096, 128), causal, torch.bfloat16, seed=13)


def test_v2_d256():
    _check("v2", (1, 2, 1024, 1024, 256), True, torch.float16, seed=14)


@pytest.mark.parametrize("algo", ["standard", "v1", "v2"])
def test_autograd(algo):
    q, k, v, do = _inputs((1, 4, 1024, 1024, 128), torch.bfloat16, seed=15)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    K.attention(*leaves, causal=True, algo=algo).backward(do)
    ref = K.reference_grads(q, k, v, do, True)
    for t, r in zip(leaves, ref, strict=True):
        assert rel_error(t.grad, r) < TOL[torch.bfloat16]


def test_v3_and_fp8_refused():
    q, k, v, do = _inputs((1, 2, 256, 256, 128), torch.float16, seed=16)
    with pytest.raises(TilesimError, match="v3 has no backward kernel"):
        K.backward_launches(q, k, v, do, algo="v3")
    with pytest.raises(TilesimError, match="v3 has no backward kernel"):
        K.attention(q.requires_grad_(), k, v, algo="v3")
