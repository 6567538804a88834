"""The fp8 V transpose of v3: every byte lands at its transposed place, the padding is zero."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from tilesim.kernels import transpose_v  # noqa: E402


@pytest.mark.parametrize("n_kv, d", [(100, 64), (64, 128), (130, 64)])
def test_transpose_v_moves_every_byte(device, n_kv, d):
    gen = torch.Generator(device="cpu").manual_seed(n_kv * 1000 + d)
    raw = torch.randint(0, 256, (2, 3, n_kv, d), generator=gen, dtype=torch.uint8)
    v = raw.view(torch.float8_e4m3fn).to(device)
    out = torch.full((2, 3, d, -(-n_kv // 16) * 16), 0x7F, dtype=torch.uint8, device=device)
    got = transpose_v.transpose_v(v, out.view(torch.float8_e4m3fn)).view(torch.uint8).cpu()
    assert torch.equal(got[..., :n_kv], raw.transpose(2, 3))
    assert not got[..., n_kv:].any(), "the padding columns must be zero"


def test_permuted_key_column_is_a_permutation_within_each_half_of_32():
    cols = [transpose_v.permuted_key_column(k) for k in range(96)]
    assert sorted(cols) == list(range(96))
    assert all(c // 16 == k // 16 for k, c in enumerate(cols)), "halves of 16 must stay put"
    # a lane of a wgmma accumulator row holds keys 2t, 2t+1, 8+2t, 9+2t of each 16; the
    # 8-bit A operand wants them at 4t..4t+3 (t = lane % 4)
    for t in range(4):
        for h in (0, 16):
            got = [cols[h + k] for k in (2 * t, 2 * t + 1, 8 + 2 * t, 9 + 2 * t)]
            assert got == [h + 4 * t + i for i in range(4)]


@pytest.mark.parametrize("n_kv, d", [(100, 64), (130, 128)])
def test_transpose_v_permuted_puts_each_key_at_its_column(device, n_kv, d):
    gen = torch.Generator(device="cpu").manual_seed(n_kv + d)
    raw = torch.randint(0, 256, (1, 2, n_kv, d), generator=gen, dtype=torch.uint8)
    v = raw.view(torch.float8_e4m3fn).to(device)
    n_pad = -(-n_kv // 16) * 16
    out = torch.full((1, 2, d, n_pad), 0x7F, dtype=torch.uint8, device=device)
    got = transpose_v.transpose_v(v, out.view(torch.float8_e4m3fn), permute=True)
    got = got.view(torch.uint8).cpu()
    want = torch.zeros((1, 2, d, n_pad), dtype=torch.uint8)
    for key in range(n_kv):
        want[..., transpose_v.permuted_key_column(key)] = raw[..., key, :]
    assert torch.equal(got, want), "every key at its permuted column, the padding zero"
