"""The custom operators: their fake (meta) functions, PyTorch's op checks, and a
torch.compile(fullgraph=True) of a function that calls attention, forward and backward."""

from __future__ import annotations

import pytest
from conftest import make_qkv

import tilesim.kernels as K

torch = pytest.importorskip("torch")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402


# standard keeps P: rows of 70 keys padded to 80 (a multiple of 16)
@pytest.mark.parametrize(
    ("algo", "state"), [("standard", (6, 100, 80)), ("v1", (2, 6, 100)), ("v2", (6, 100))]
)
def test_fake_outputs_have_the_real_shapes(algo, state):
    with FakeTensorMode():
        q = torch.empty(2, 3, 100, 64, dtype=torch.float16)
        k = torch.empty(2, 3, 70, 64, dtype=torch.float16)
        out, lse = torch.ops.tilesim.attention(q, k, k, True, 0.1, algo, "", "", 1.0, 1.0, 1.0)
        dq, dk, dv = torch.ops.tilesim.attention_backward(q, q, k, k, out, lse, True, 0.1, algo, "")
    assert out.shape == q.shape and out.dtype == q.dtype
    assert tuple(lse.shape) == state
    assert lse.dtype == (torch.float16 if algo == "standard" else torch.float32)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, k.shape)


def test_fake_fp8_output_is_fp16():
    with FakeTensorMode():
        q = torch.empty(1, 2, 64, 128, dtype=torch.float8_e4m3fn)
        out, _ = torch.ops.tilesim.attention(q, q, q, False, 0.1, "v3", "", "", 0.5, 0.5, 0.5)
    assert out.dtype == torch.float16


def test_pytorch_op_checks_pass(device):
    """Schema, fake tensors, autograd registration, AOT dispatch with dynamic shapes."""
    q, k, v = make_qkv(1, 2, 64, 64, 64, torch.float16, device, seed=8)
    args = (q.requires_grad_(), k, v, True, 0.125, "v2", "", "", 1.0, 1.0, 1.0)
    torch.library.opcheck(torch.ops.tilesim.attention.default, args)
    out, lse = torch.ops.tilesim.attention(q.detach(), k, v, *args[3:])
    torch.library.opcheck(
        torch.ops.tilesim.attention_backward.default,
        (torch.randn_like(q), q.detach(), k, v, out, lse, True, 0.125, "v2", ""),
    )


def test_a_compiled_function_traces_attention_without_a_graph_break(device):
    """fullgraph=True fails on any graph break; aot_eager traces forward and backward
    through the fake and autograd registrations (inductor runs on the GPU test)."""
    q, k, v = make_qkv(1, 2, 64, 64, 64, torch.float16, device, seed=9)
    do = torch.randn_like(q)

    def loss(q, k, v):
        return (K.attention(q, k, v, causal=True).float() * do.float()).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    compiled(qg, kg, vg).backward()
    ref = K.reference_grads(q, k, v, do, True)
    for got, want in zip((qg.grad, kg.grad, vg.grad), ref, strict=True):
        assert K.rel_error(got, want) < 1e-2
