"""Every kernel against the float32 reference, on small shapes (Triton interpreter on CPU).

Inputs are fresh random tensors; the output buffer starts as NaN, so a row or
column the kernel never writes fails the ‖out − ref‖/‖ref‖ check. Small tiles
(KernelConfig(32, 16, ...)) keep the interpreter fast and make every sequence
length here span several blocks, with partial last blocks.
"""

from __future__ import annotations

import itertools
import zlib

import pytest
from conftest import make_qkv, poisoned

import tilesim.kernels as K
from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig

torch = pytest.importorskip("torch")
from tilesim.kernels import flash_v1, flash_v2, flash_v3  # noqa: E402
from tilesim.kernels.reference import reference, reference_lse, rel_error  # noqa: E402

# (batch, heads, n_q, n_kv, d): block multiples, partial blocks, n_q != n_kv both ways
SHAPES = [
    (1, 2, 64, 64, 64),
    (2, 2, 100, 100, 64),
    (1, 2, 200, 200, 128),
    (1, 2, 100, 200, 64),
    (1, 2, 200, 130, 128),
]
SHIFTED = (1, 2, 130, 200, 128)  # causal: the diagonal 70 columns right of square's
SMALL = KernelConfig(32, 16, 4, 2)
TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2}  # fp16 kernels land near 3e-4, bf16 near 3e-3


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _check(algo, shape, causal, dtype, device, config, **kwargs):
    b, h, n_q, n_kv, d = shape
    q, k, v = make_qkv(b, h, n_q, n_kv, d, dtype, device, _seed(algo, shape, causal, dtype))
    out = poisoned((b, h, n_q, d), dtype, device)
    result = K.attention(q, k, v, causal=causal, algo=algo, config=config, out=out, **kwargs)
    assert result is out
    err = rel_error(out, reference(q, k, v, causal))
    assert err < TOL[dtype], f"{algo} {shape} causal={causal}: rel error {err:.2e}"


@pytest.mark.parametrize("algo", ["standard", "v1", "v2"])
@pytest.mark.parametrize(("shape", "causal"), list(itertools.product(SHAPES, [False, True])))
def test_fp16_matches_reference(algo, shape, causal, device):
    n_q, n_kv = shape[2], shape[3]
    if causal and n_q > n_kv:  # aligned bottom-right, the first rows would see no key
        with pytest.raises(TilesimError, match="would see no key"):
            _check(algo, shape, causal, torch.float16, device, SMALL)
    elif causal and n_q < n_kv and algo == "v1":  # v1 has no shifted diagonal
        with pytest.raises(TilesimError, match="bottom-right"):
            _check(algo, shape, causal, torch.float16, device, SMALL)
    else:
        _check(algo, shape, causal, torch.float16, device, SMALL)


@pytest.mark.parametrize("algo", ["standard", "v1", "v2"])
@pytest.mark.parametrize("causal", [False, True])
def test_bf16_matches_reference(algo, causal, device):
    if device == "cpu":
        pytest.skip(
            "Triton's interpreter multiplies bf16 bit patterns in tl.dot "
            "(triton-lang/triton#11584); bf16 runs in the gpu tests"
        )
    _check(algo, (1, 2, 100, 100, 64), causal, torch.bfloat16, device, SMALL)


@pytest.mark.parametrize(
    "config",
    [KernelConfig(16, 32, 4, 1), KernelConfig(64, 32, 4, 3), KernelConfig(32, 32, 2, 2)],
    ids=["bn>bm", "bm64", "square"],
)
@pytest.mark.parametrize("causal", [False, True])
def test_v2_other_tiles(config, causal, device):
    _check("v2", (1, 2, 100, 150, 64), causal, torch.float16, device, config)


@pytest.mark.parametrize(
    "config", [KernelConfig(32, 32, 4, 1), KernelConfig(16, 32, 4, 1)], ids=["square", "bn>bm"]
)
def test_v1_other_tiles(config, device):
    _check("v1", (1, 2, 150, 150, 64), True, torch.float16, device, config)


# the released FlashAttention-1 structure (v1's default kernel): 16-row steps, the keys
# of a block split across the warps, Q steps spread over num_splits CTAs
V1_RELEASED = [
    KernelConfig(16, 64, 4, 2, v1_kernel="released"),
    KernelConfig(16, 32, 2, 2, v1_kernel="released", num_splits=3),
]


@pytest.mark.parametrize("config", V1_RELEASED, ids=["one-split", "three-splits"])
@pytest.mark.parametrize(("shape", "causal"), list(itertools.product(SHAPES, [False, True])))
def test_v1_released(config, shape, causal, device):
    n_q, n_kv = shape[2], shape[3]
    if causal and n_q != n_kv:  # v1 has no shifted diagonal; N_q > N_kv sees no key
        with pytest.raises(TilesimError, match="bottom-right|would see no key"):
            _check("v1", shape, causal, torch.float16, device, config)
    else:
        _check("v1", shape, causal, torch.float16, device, config)


def test_v1_released_keeps_lse(device):
    """The released forward keeps ℓ = 1 and m = the natural-log log-sum-exp per row."""
    q, k, v = make_qkv(1, 2, 100, 100, 64, torch.float16, device, 5)  # causal: N_q = N_kv
    out = poisoned(q.shape, q.dtype, device)
    lm = torch.full((2, 2, 100), float("nan"), device=device)
    for _, run in flash_v1.launches(q, k, v, True, 0.125, V1_RELEASED[1], out, lm=lm):
        run()
    assert torch.equal(lm[0], torch.ones_like(lm[0]))
    ref = reference_lse(q, k, True, 0.125)
    assert torch.allclose(lm[1].reshape(ref.shape), ref, atol=2e-3)


def test_d256(device):
    _check("v2", (1, 1, 40, 40, 256), True, torch.float16, device, KernelConfig(16, 16, 4, 1))


@pytest.mark.parametrize("use_desc", [False, True], ids=["pointers", "tensor-descriptors"])
@pytest.mark.parametrize(
    ("shape", "causal"), [(SHAPES[1], True), (SHIFTED, True), (SHAPES[3], False)]
)
def test_v2_lse_and_load_paths(use_desc, shape, causal, device):
    """Both v2 load paths (pointers; TMA descriptors, as on Hopper) and the stored log-sum-exp."""
    b, h, n_q, n_kv, d = shape
    q, k, v = make_qkv(b, h, n_q, n_kv, d, torch.float16, device, _seed("lse", shape, use_desc))
    out = poisoned((b, h, n_q, d), torch.float16, device)
    out, lse = flash_v2.forward(
        q, k, v, causal, d**-0.5, SMALL, out, use_desc=use_desc, return_lse=True
    )
    assert rel_error(out, reference(q, k, v, causal)) < TOL[torch.float16]
    assert (lse - reference_lse(q, k, causal)).abs().max().item() < 1e-3


# v3's kernel is Hopper-only through the API; its Triton code also runs under the
# interpreter (TMA descriptor loads are emulated, warp specialisation is a hint).
V3_CONFIGS = [
    KernelConfig(32, 16, 4, 2),
    KernelConfig(32, 16, 4, 2, persistent=True),
]


@pytest.mark.parametrize("config", V3_CONFIGS, ids=["plain", "persistent"])
@pytest.mark.parametrize(
    ("shape", "causal"),
    [(SHAPES[0], False), (SHAPES[1], True), (SHIFTED, True), (SHAPES[3], False)],
)
def test_v3_kernel_fp16(config, shape, causal, device):
    b, h, n_q, n_kv, d = shape
    q, k, v = make_qkv(b, h, n_q, n_kv, d, torch.float16, device, _seed("v3", shape, config))
    out = poisoned((b, h, n_q, d), torch.float16, device)
    out, lse = flash_v3.forward(q, k, v, causal, d**-0.5, config, out, return_lse=True)
    assert rel_error(out, reference(q, k, v, causal)) < TOL[torch.float16]
    assert (lse - reference_lse(q, k, causal)).abs().max().item() < 1e-3


@pytest.mark.parametrize(("shape", "causal"), [(SHAPES[1], True), (SHAPES[3], False)])
def test_v3_kernel_fp8(shape, causal, device):
    """e4m3 inputs with per-tensor scales; V goes in transposed (K-major, as fp8 wgmma wants)."""
    b, h, n_q, n_kv, d = shape
    q, k, v = make_qkv(b, h, n_q, n_kv, d, torch.float32, device, _seed("fp8", shape))
    (q8, sq), (k8, sk), (v8, sv) = (K.quantize_fp8(3.0 * t) for t in (q, k, v))
    out = poisoned((b, h, n_q, d), torch.float16, device)
    flash_v3.forward(q8, k8, v8, causal, d**-0.5, SMALL, out, q_scale=sq, k_scale=sk, v_scale=sv)
    ref = reference(q8, k8, v8, causal, q_scale=sq, k_scale=sk, v_scale=sv)
    # e4m3 keeps 3 mantissa bits and P is rounded to e4m3 too: a few percent is the norm
    assert rel_error(out, ref) < 0.1
    # and the scales are applied: ignoring them would be far off
    assert rel_error(out, reference(q8, k8, v8, causal)) > 0.2


@pytest.mark.parametrize("causal", [False, True])
def test_standard_two_pass_softmax(causal, device, monkeypatch):
    """Rows longer than the softmax kernel's register block are read twice (online max/sum)."""
    from tilesim.traces import standard as plan

    monkeypatch.setattr(plan, "SOFTMAX_MAX_BLOCK", 32)
    monkeypatch.setattr(plan, "SOFTMAX_FWD_MAX_BLOCK", 32)
    assert plan.softmax_fwd_plan(150, causal).passes == 2  # the two-pass kernel really runs
    _check("standard", (1, 1, 40, 150, 64), causal, torch.float16, device, SMALL)
