"""Fixtures of the kernel tests: skip without torch/triton, the device, fresh inputs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")


@pytest.fixture
def device() -> str:
    """Where the kernels run: the GPU if there is one, else the CPU (Triton interpreter)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def make_qkv(batch, heads, n_q, n_kv, d, dtype, device, seed):
    """Fresh random q, k, v (a new seed per case: the kernel must work on any input)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    shape_q, shape_kv = (batch, heads, n_q, d), (batch, heads, n_kv, d)
    q, k, v = (
        torch.randn(s, generator=gen).to(dtype).to(device) for s in (shape_q, shape_kv, shape_kv)
    )
    return q, k, v


def poisoned(shape, dtype, device):
    """An output buffer full of NaN: any element the kernel fails to write shows up."""
    return torch.full(shape, float("nan"), dtype=dtype, device=device)
