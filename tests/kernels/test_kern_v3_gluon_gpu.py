"""v3's Gluon warp-specialised kernel (config.warp_specialize=True) on a Hopper GPU.

Skipped without CUDA (the interpreter cannot run Gluon). The CPU part checks that
the module imports on any Triton and that the dispatch refuses, in one line, what
the Gluon kernel does not support.
"""

from __future__ import annotations

import importlib

import pytest
from conftest import make_qkv, poisoned

from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig

torch = pytest.importorskip("torch")
import tilesim.kernels as K  # noqa: E402
from tilesim.kernels.reference import reference, reference_lse  # noqa: E402

WS = KernelConfig(128, 128, 8, 2, "wgmma", warp_specialize=True)
WS_PP = WS.replace(pingpong=True)
TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2}


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def test_module_imports_on_any_triton():
    """Importing never fails; without Gluon the config is refused in one line."""
    mod = importlib.import_module("tilesim.kernels.gluon")
    problem = mod.check_config(WS, 128)
    if mod.AVAILABLE:
        assert problem is None
    else:
        assert "gluon" in problem.lower() and "\n" not in problem


def test_dispatch_refuses_what_the_gluon_kernel_cannot_run():
    from tilesim.kernels import flash_v3, gluon

    if not gluon.AVAILABLE:
        pytest.skip("this Triton has no Gluon warp_specialize")
    assert flash_v3.check_config(WS_PP) is None
    assert "warp_specialize" in flash_v3.check_config(
        WS.replace(warp_specialize=False, pingpong=True)
    )
    for bad, words in (
        (WS.replace(num_warps=4), "num_warps=8"),
        (WS.replace(block_m=64), "block_m=128"),
        (WS.replace(block_n=32), "block_n"),
    ):
        problem = flash_v3.check_config(bad)
        assert problem and words in problem and "\n" not in problem
    assert "head_dim" in gluon.check_config(WS, 256)
    assert "shared memory" in gluon.check_config(WS.replace(num_stages=4), 128)
    assert gluon.check_config(WS.replace(num_stages=3), 128) is None
    assert gluon.check_config(WS.replace(persistent=True), 128) is None


gpu = pytest.mark.gpu
hopper = pytest.mark.skipif(not _hopper(), reason="the Gluon v3 needs Hopper")


def _run(shape, causal, dtype, config, seed):
    b, h, n_q, n_kv, d = shape
    q, k, v = make_qkv(b, h, n_q, n_kv, d, dtype, "cuda", seed)
    out = poisoned((b, h, n_q, d), dtype, "cuda")
    K.attention(q, k, v, causal=causal, algo="v3", config=config, out=out)
    return K.rel_error(out, reference(q, k, v, causal))


@gpu
@hopper
@pytest.mark.parametrize("config", [WS, WS_PP], ids=["ws", "ws_pingpong"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape",
    [
        (2, 4, 1024, 1024, 128),
        (1, 3, 1000, 1000, 128),  # partial last Q and K/V blocks
        (2, 2, 333, 333, 64),
        (1, 2, 256, 700, 64),  # more keys than queries
        (1, 2, 700, 200, 128),  # fewer keys than queries (causal: refused, rows see no key)
        (1, 1, 64, 64, 128),  # one block, half a CTA of rows
    ],
)
def test_fp16_matches_reference(shape, causal, config):
    seed = sum(shape) + 7 * causal + 3 * config.pingpong
    if causal and shape[2] > shape[3]:
        # bottom-right causal leaves the first N_q - N_kv rows without a key: refused
        with pytest.raises(TilesimError, match="would see no key"):
            _run(shape, causal, torch.float16, config, seed)
        return
    err = _run(shape, causal, torch.float16, config, seed)
    assert err < TOL[torch.float16], f"{shape} causal={causal}: rel error {err:.2e}"


@gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_bf16_and_three_stages(causal):
    err = _run((2, 4, 2048, 2048, 128), causal, torch.bfloat16, WS_PP.replace(num_stages=3), 5)
    assert err < TOL[torch.bfloat16]


@gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("n", "d"), [(2048, 128), (1000, 64)])
def test_fp8_matches_reference(causal, n, d):
    q, k, v = make_qkv(2, 4, n, n, d, torch.float32, "cuda", seed=n + d + causal)
    (q8, sq), (k8, sk), (v8, sv) = (K.quantize_fp8(2.0 * t) for t in (q, k, v))
    out = poisoned(q.shape, torch.float16, "cuda")
    scales = dict(q_scale=sq, k_scale=sk, v_scale=sv)
    K.attention(q8, k8, v8, causal=causal, algo="v3", config=WS_PP, out=out, **scales)
    assert K.rel_error(out, reference(q8, k8, v8, causal, **scales)) < 0.1


@gpu
@hopper
@pytest.mark.parametrize("config", [WS.replace(num_stages=3), WS_PP], ids=["s3", "pingpong"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("n", "d"), [(2048, 128), (1000, 64), (333, 128)])
def test_fp8_permuted_p_operand_matches_the_plain_one(config, causal, n, d):
    """permute_p=True (Vᵀ's keys permuted within 32, P without lane shuffles) computes
    the same attention: a key whose P and V columns disagreed would move the output by
    O(1), far above the fp32 summation-order difference allowed here."""
    from tilesim.kernels import gluon

    q, k, v = make_qkv(1, 3, n, n, d, torch.float32, "cuda", seed=3 * n + d + causal)
    (q8, sq), (k8, sk), (v8, sv) = (K.quantize_fp8(2.0 * t) for t in (q, k, v))
    scales = dict(q_scale=sq, k_scale=sk, v_scale=sv)
    outs = []
    for permute_p in (False, True):
        out = poisoned(q.shape, torch.float16, "cuda")
        for _, run in gluon.launches(
            q8, k8, v8, causal, d**-0.5, config, out, permute_p=permute_p, **scales
        ):
            run()
        outs.append(out)
    assert K.rel_error(outs[1], reference(q8, k8, v8, causal, **scales)) < 0.1
    assert K.rel_error(outs[1], outs[0]) < 1e-3


@gpu
@hopper
def test_lse_matches_reference():
    from tilesim.kernels import flash_v3

    q, k, v = make_qkv(1, 2, 1000, 1000, 128, torch.float16, "cuda", seed=11)
    out = poisoned(q.shape, torch.float16, "cuda")
    _, lse = flash_v3.forward(q, k, v, True, 128**-0.5, WS_PP, out, return_lse=True)
    ref = reference_lse(q, k, True)
    assert torch.allclose(lse, ref.to(lse.dtype), atol=2e-3, rtol=1e-4)


@gpu
@hopper
def test_refuses_head_dim_256_in_one_line():
    q, k, v = make_qkv(1, 1, 128, 128, 256, torch.float16, "cuda", seed=1)
    with pytest.raises(TilesimError, match="head_dim 64 and 128"):
        K.attention(q, k, v, algo="v3", config=WS.replace(block_n=64))


@gpu
@hopper
@pytest.mark.parametrize("dtype", ["fp16", "fp8"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("shape", "ctas", "stages"),
    [
        ((1, 3, 1000, 1000, 128), 5, 3),  # 24 tiles of 8 blocks (partial last)
        ((2, 2, 333, 333, 64), 1, 2),  # one CTA runs every tile in turn
        ((1, 2, 700, 200, 128), 3, 3),  # 2 K/V blocks per tile: phases cross tiles
        ((2, 4, 1024, 1024, 128), None, 3),  # one CTA per SM
    ],
)
def test_persistent_grid_matches_reference(dtype, causal, shape, ctas, stages):
    """A persistent CTA loops over tiles: Q reloaded per tile (double-buffered for fp8),
    the K/V ring's slots and phases running on across tiles (block counts not multiples
    of the stages); every tile must come out right."""
    from tilesim.kernels import gluon

    b, h, n_q, n_kv, d = shape
    config = WS.replace(persistent=True, num_stages=stages)
    seed = sum(shape) + 7 * causal + stages
    if dtype == "fp16":
        q, k, v = make_qkv(b, h, n_q, n_kv, d, torch.float16, "cuda", seed)
        scales, tol = {}, TOL[torch.float16]
    else:
        q, k, v = make_qkv(b, h, n_q, n_kv, d, torch.float32, "cuda", seed)
        (q, sq), (k, sk), (v, sv) = (K.quantize_fp8(2.0 * t) for t in (q, k, v))
        scales, tol = dict(q_scale=sq, k_scale=sk, v_scale=sv), 0.1
    out = poisoned((b, h, n_q, d), torch.float16, "cuda")
    runs = gluon.launches(q, k, v, causal, d**-0.5, config, out, ctas=ctas, **scales)
    assert [name for name, _ in runs] == (
        ["v3_transpose_v", "v3_fwd"] if dtype == "fp8" else ["v3_fwd"]
    )
    for _, run in runs:
        run()
    err = K.rel_error(out, reference(q, k, v, causal, **scales))
    assert err < tol, f"{shape} ctas={ctas} causal={causal}: rel error {err:.2e}"
