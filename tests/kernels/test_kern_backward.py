"""Backward kernels (standard, v1, v2) against float32 torch autograd, on small shapes.

Under the Triton interpreter on CPU. Inputs and dO are fresh random tensors; the
gradient buffers are poisoned with NaN before the backward launches run, so an
element a kernel never writes fails the ‖grad − ref‖/‖ref‖ check. Small tiles
(KernelConfig(32, 16, ...)) make every sequence length span several blocks, and
the lengths here are not multiples of them (partial last blocks).
"""

from __future__ import annotations

import zlib

import pytest
from conftest import make_qkv

import tilesim.kernels as K
from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig

torch = pytest.importorskip("torch")
from tilesim.kernels.reference import reference, rel_error  # noqa: E402

SMALL = KernelConfig(32, 16, 4, 2)
TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2}  # fp16 gradients land near 3e-4 to 6e-4
BACKWARD = ["standard", "v1", "v2"]


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _inputs(shape, dtype, device, seed):
    b, h, n_q, n_kv, d = shape
    q, k, v = make_qkv(b, h, n_q, n_kv, d, dtype, device, seed)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    do = torch.randn((b, h, n_q, d), generator=gen).to(dtype).to(device)
    return q, k, v, do


def _check_grads(grads, ref, what):
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref, strict=True):
        assert g.shape == r.shape, f"{what}: {name} shape {tuple(g.shape)}"
        err = rel_error(g, r)
        assert err < TOL[g.dtype], f"{what}: {name} rel error {err:.2e}"


def _check(algo, shape, causal, dtype, device, config=SMALL):
    q, k, v, do = _inputs(shape, dtype, device, _seed(algo, shape, causal, dtype))
    (dq, dk, dv), runs = K.backward_launches(q, k, v, do, causal=causal, algo=algo, config=config)
    for g in (dq, dk, dv):
        g.fill_(float("nan"))  # the launches, not the setup, must write every element
    for _, run in runs:
        run()
    ref = K.reference_grads(q, k, v, do, causal)
    _check_grads((dq, dk, dv), ref, f"{algo} {shape} causal={causal}")
    return runs


# (batch, heads, n_q, n_kv, d): no length a multiple of 32; n_q != n_kv both ways
SHAPES = [(1, 2, 100, 100, 64), (1, 1, 72, 50, 128), (2, 1, 40, 90, 64)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=["square-d64", "nq>nk-d128", "nq<nk-d64"])
@pytest.mark.parametrize("algo", BACKWARD)
def test_gradients_match_autograd(algo, shape, causal, device):
    n_q, n_kv = shape[2], shape[3]
    if causal and n_q > n_kv:  # bottom-right: the first rows would see no key
        with pytest.raises(TilesimError, match="would see no key"):
            _check(algo, shape, causal, torch.float16, device)
    elif causal and n_q < n_kv and algo != "standard":  # no backward of a shifted diagonal
        with pytest.raises(TilesimError, match="bottom-right"):
            _check(algo, shape, causal, torch.float16, device)
    else:
        _check(algo, shape, causal, torch.float16, device)


def test_launch_names(device):
    shape = (1, 1, 40, 40, 64)
    names = {
        algo: [n for n, _ in _check(algo, shape, True, torch.float16, device)] for algo in BACKWARD
    }
    assert names == {
        "standard": [f"standard_bwd_{s}" for s in ("dv", "dp", "softmax", "dq", "dk")],
        "v1": ["v1_bwd"],
        "v2": ["v2_bwd_preprocess", "v2_bwd_dkdv", "v2_bwd_dq"],
    }


@pytest.mark.parametrize(
    "config",
    [KernelConfig(16, 32, 4, 1), KernelConfig(32, 32, 2, 3)],
    ids=["bn>bm", "square"],
)
@pytest.mark.parametrize("algo", ["v1", "v2"])
def test_other_tiles(algo, config, device):
    _check(algo, (1, 1, 90, 90, 64), True, torch.float16, device, config)


# the released FlashAttention-1 structure (v1's default kernel): 16-row steps, a K/V
# block per CTA or the head's blocks walked by one (num_splits 1), dQ by atomics
V1_RELEASED = [
    KernelConfig(16, 32, 2, 2, v1_kernel="released"),
    KernelConfig(16, 64, 4, 1, v1_kernel="released", num_splits=2),
]


@pytest.mark.parametrize("config", V1_RELEASED, ids=["one-split", "split-blocks"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=["square-d64", "nq>nk-d128", "nq<nk-d64"])
def test_v1_released(config, shape, causal, device):
    if causal and shape[2] != shape[3]:  # v1 has no shifted diagonal; N_q > N_kv sees no key
        with pytest.raises(TilesimError, match="bottom-right|would see no key"):
            _check("v1", shape, causal, torch.float16, device, config)
        return
    runs = _check("v1", shape, causal, torch.float16, device, config)
    assert [n for n, _ in runs] == ["v1_bwd_dot", "v1_bwd", "v1_bwd_dq"]


def test_d256(device):
    _check("v2", (1, 1, 40, 40, 256), True, torch.float16, device, KernelConfig(16, 16, 4, 1))


@pytest.mark.parametrize("causal", [False, True])
def test_standard_two_pass_softmax_backward(causal, device, monkeypatch):
    """Rows longer than the softmax kernel's register block are read twice."""
    from tilesim.kernels import standard
    from tilesim.traces import standard as plan

    monkeypatch.setattr(plan, "SOFTMAX_MAX_BLOCK", 32)
    assert standard.softmax_launch(90)[1] is False  # the two-pass kernels really run
    _check("standard", (1, 1, 40, 90, 64), causal, torch.float16, device)


def test_runs_repeat(device):
    """A benchmark runs the launches many times: the result must not drift."""
    q, k, v, do = _inputs((1, 1, 50, 50, 64), torch.float16, device, 3)
    for algo in ("v1", "v2"):
        grads, runs = K.backward_launches(q, k, v, do, algo=algo, config=SMALL)
        for _, run in runs:
            run()
        first = [g.clone() for g in grads]
        for _, run in runs:
            run()
        assert all(torch.equal(a, b) for a, b in zip(first, grads, strict=True)), algo


@pytest.mark.parametrize("algo", BACKWARD)
def test_autograd(algo, device):
    shape = (1, 2, 70, 70, 64)
    q, k, v, do = _inputs(shape, torch.float16, device, _seed("autograd", algo))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = K.attention(*leaves, causal=True, algo=algo, config=SMALL, bwd_config=SMALL)
    assert out.requires_grad
    assert rel_error(out.detach(), reference(q, k, v, True)) < TOL[torch.float16]
    out.backward(do)
    ref = K.reference_grads(q, k, v, do, True)
    _check_grads([t.grad for t in leaves], ref, f"autograd {algo}")


def test_autograd_default_backward_config(device):
    """Without bwd_config the backward runs the shared backward default tiles."""
    q, k, v, do = _inputs((1, 1, 70, 70, 64), torch.float16, device, 5)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    K.attention(*leaves, algo="v2", config=SMALL).backward(do)
    _check_grads([t.grad for t in leaves], K.reference_grads(q, k, v, do), "default bwd config")


def test_autograd_only_some_inputs(device):
    q, k, v, do = _inputs((1, 1, 40, 40, 64), torch.float16, device, 6)
    kk = k.clone().requires_grad_()
    K.attention(q, kk, v, algo="v2", config=SMALL, bwd_config=SMALL).backward(do)
    ref = K.reference_grads(q, k, v, do)
    assert rel_error(kk.grad, ref[1]) < TOL[torch.float16]
    assert q.grad is None and v.grad is None


def test_forward_only_is_unchanged(device):
    """No grad needed: the plain forward path (no autograd node, out= honoured)."""
    q, k, v, _ = _inputs((1, 1, 40, 40, 64), torch.float16, device, 7)
    out = torch.empty_like(q)
    assert K.attention(q, k, v, config=SMALL, out=out) is out
    with torch.no_grad():
        r = K.attention(q.clone().requires_grad_(), k, v, config=SMALL)
    assert r.grad_fn is None and not r.requires_grad


def _raises(match, fn, *args, **kwargs):
    with pytest.raises(TilesimError, match=match) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)


def test_bad_inputs(device):
    q, k, v, do = _inputs((1, 2, 64, 64, 64), torch.float16, device, 8)
    bl = K.backward_launches
    _raises("v3 has no backward kernel", bl, q, k, v, do, algo="v3")
    _raises("unknown algorithm 'v4'", bl, q, k, v, do, algo="v4")
    q8, k8, v8, do8 = (t.to(torch.float8_e4m3fn) for t in (q, k, v, do))
    _raises("not fp8", bl, q8, k8, v8, do8, algo="v2")
    _raises("do must be a torch.Tensor", bl, q, k, v, do.tolist())
    _raises("do must be torch.float16 ", bl, q, k, v, do[:, :, :32])
    _raises("do must be torch.float16 ", bl, q, k, v, do.float())
    _raises("shapes disagree", bl, q, k, v[:, :1], do)
    _raises("grouped-query heads", bl, q, k[:, :1], v[:, :1], do)  # no GQA backward
    _raises("head_dim 32 is not supported", bl, *(t[..., :32] for t in (q, k, v, do)))
    _raises("causal must be True or False", bl, q, k, v, do, causal="yes")
    _raises("sm_scale must be a positive", bl, q, k, v, do, sm_scale=-1.0)
    _raises("config must be a KernelConfig", bl, q, k, v, do, config=(64, 64))
    _raises("need .* of shared memory", bl, q, k, v, do, config=KernelConfig(512, 512, 8, 4))


def test_bad_grad_requests(device):
    q, k, v, _ = _inputs((1, 2, 64, 64, 64), torch.float16, device, 9)
    qg = q.clone().requires_grad_()
    at = K.attention
    # refused at forward time, before any kernel runs
    _raises("v3 has no backward kernel", at, qg, k, v, algo="v3")
    _raises("out= cannot be used", at, qg, k, v, out=torch.empty_like(q))
    _raises("bwd_config applies only", at, q, k, v, bwd_config=SMALL)
    _raises("config must be a KernelConfig", at, qg, k, v, bwd_config="64x64")


@pytest.mark.parametrize("n", [3, 13, 100])
def test_standard_padding_poisoned(n, device, monkeypatch):
    """Standard's S, P, dP and dS buffers start as NaN: its kernels read their rows up to
    the padding (N rounded up to 16, so that accesses stay 16-byte vectors) and must
    write zeros there before any kernel reads them, forward and backward."""
    from tilesim.kernels import standard, standard_bwd

    def poisoned_buffer(q, n_kv):
        return standard.torch.full(
            (q.shape[0] * q.shape[1], q.shape[2], standard.padded_row(n_kv)),
            float("nan"),
            dtype=q.dtype,
            device=q.device,
        )

    monkeypatch.setattr(standard, "probs_buffer", poisoned_buffer)
    monkeypatch.setattr(standard_bwd, "probs_buffer", poisoned_buffer)
    for causal in (False, True):
        shape = (1, 2, n, n, 64)
        q, k, v, do = _inputs(shape, torch.float16, device, _seed("pad", n, causal))
        out = K.attention(q, k, v, causal=causal, algo="standard", config=SMALL)
        assert rel_error(out, reference(q, k, v, causal)) < TOL[torch.float16]
        _check("standard", shape, causal, torch.float16, device)
