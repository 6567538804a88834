"""The fp8 V transpose of v3: every byte lands at its transposed place, the padding is zero."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from tilesim.kernels import flash_v3  # noqa: E402


@pytest.mark.parametrize("n_kv, d", [(100, 64), (64, 128), (130, 64)])
def test_transpose_v_moves_every_byte(device, n_kv, d):
    gen = torch.Generator(device="cpu").manual_seed(n_kv * 1000 + d)
    raw = torch.randint(0, 256, (2, 3, n_kv, d), generator=gen, dtype=torch.uint8)
    v = raw.view(torch.float8_e4m3fn).to(device)
    out = torch.full((2, 3, d, -(-n_kv // 16) * 16), 0x7F, dtype=torch.uint8, device=device)
    got = flash_v3.transpose_v(v, out.view(torch.float8_e4m3fn)).view(torch.uint8).cpu()
    assert torch.equal(got[..., :n_kv], raw.transpose(2, 3))
    assert not got[..., n_kv:].any(), "the padding columns must be zero"
