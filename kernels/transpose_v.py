"""The fp8 V transpose both v3 kernels (Triton's and Gluon's) launch before their own.

Hopper's fp8 wgmma wants both operands K-major, and P V's K dimension is the sequence,
so V is passed transposed: [B, H, Nk, d] -> [B, H, d, Nk_pad], one Triton launch
(the ``v3_transpose_v`` launch of `tilesim.kernels.launches`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import Launch


@triton.jit
def _transpose_v_kernel(
    V,  # uint8 view of v [B*H, Nk, d]
    VT,  # uint8 view of vt [B*H, d, Nk_pad]
    n_kv,
    n_pad,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PERMUTE: tl.constexpr,
):
    """One [BLOCK_N, d] tile of one head: read rows of V, write them as columns of Vᵀ.

    Bytes are moved as uint8 (the transpose does not care what they encode); rows
    past ``n_kv`` up to ``n_pad`` are written as zeros (0 x NaN would be NaN). With
    ``PERMUTE`` key r goes to column ``permuted_key_column(r)`` (see ``transpose_v``).
    """
    pid_n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    tile = tl.load(
        V + bh * n_kv * HEAD_DIM + rows[:, None] * HEAD_DIM + offs_d[None, :],
        mask=rows[:, None] < n_kv,
        other=0,
    )
    if PERMUTE:
        # row 32c + 16h + 4t + 2g + i of the tile takes key 32c + 16h + 8g + 2t + i
        # (permuted in registers, so the store stays contiguous)
        tile = tl.reshape(tile, [BLOCK_N // 32, 2, 2, 4, 2, HEAD_DIM])
        tile = tl.permute(tile, [0, 1, 3, 2, 4, 5])
        tile = tl.reshape(tile, [BLOCK_N, HEAD_DIM])
    tl.store(
        VT + bh * HEAD_DIM * n_pad + offs_d[:, None] * n_pad + rows[None, :],
        tl.trans(tile),
        mask=rows[None, :] < n_pad,
    )


def permuted_key_column(key: int) -> int:
    """Where ``transpose_v(..., permute=True)`` puts key ``key`` (a permutation within 32)."""
    r = key % 32
    return key - r + (r & 16) + ((r >> 1) & 3) * 4 + ((r >> 3) & 1) * 2 + (r & 1)


TRANSPOSE_BLOCK_N = 64  # rows of V per program of the fp8 V transpose


class TransposeV:
    """The fp8 V transpose launch for one shape of V: ``TransposeV(v.shape)(v, vt)``."""

    def __init__(self, v_shape, *, permute: bool = False):
        batch, heads, n_kv, d = v_shape
        self.n_kv = n_kv
        self.n_pad = triton.cdiv(n_kv, 16) * 16
        grid = (triton.cdiv(self.n_pad, TRANSPOSE_BLOCK_N), batch * heads)
        meta = dict(HEAD_DIM=d, BLOCK_N=TRANSPOSE_BLOCK_N, PERMUTE=permute, num_warps=4)
        self.launch = Launch(_transpose_v_kernel, grid, meta)

    def __call__(self, v: torch.Tensor, vt: torch.Tensor) -> None:
        self.launch(v.contiguous().view(torch.uint8), vt.view(torch.uint8), self.n_kv, self.n_pad)


def transpose_v(
    v: torch.Tensor, out: torch.Tensor | None = None, *, permute: bool = False
) -> torch.Tensor:
    """Vᵀ for fp8: [B, H, Nk, d] -> [B, H, d, Nk_pad] (Nk_pad: a multiple of 16, for TMA).

    One Triton launch, grid (cdiv(Nk_pad, 64), B·H): fp8 wgmma wants both operands
    K-major, and P V's K dimension is the sequence. (torch's strided ``copy_`` of a
    transposed 1-byte tensor ran at ~0.3 TB/s on the H200: 0.2 ms for a 32 MiB V.)

    ``permute=True`` (the Gluon kernel's fp8 path) also reorders the keys within each
    aligned group of 32 (``permuted_key_column``): the order in which a wgmma
    accumulator row's values sit in a thread's registers, so that P can be the 8-bit A
    operand of P V without moving bytes between lanes. The permutation keeps each
    half of 16 in place, so the zero padding up to a multiple of 16 stays zero.
    """
    batch, heads, _, d = v.shape
    transpose = TransposeV(v.shape, permute=permute)
    if out is None:
        out = torch.empty((batch, heads, d, transpose.n_pad), dtype=v.dtype, device=v.device)
    transpose(v, out)
    return out
