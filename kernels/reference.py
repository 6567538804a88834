"""The torch reference every kernel is checked against: softmax(Q Kᵀ · scale) V in float32.

Causal masking is aligned bottom-right, as FlashAttention >= 2.1 (and PyTorch's
``causal_lower_right``): query row ``i`` of ``Nq`` sees key columns
``j <= i + Nk - Nq`` — the queries are the last rows of the sequence. With
``Nq == Nk`` it is ``is_causal``'s lower triangle. Every kernel in this package
uses the same convention. Grouped-query heads: k and v may have fewer heads than
q (a divisor of them); query head ``h`` reads K/V head ``h // (H / H_kv)``.

The reference works one (batch, head) slice at a time so that its n x n float32
score matrix stays a few hundred MB even at the shapes the GPU tests use.
"""

from __future__ import annotations

import math

import torch


def default_scale(head_dim: int) -> float:
    """The usual 1/sqrt(d) softmax scale."""
    return 1.0 / math.sqrt(head_dim)


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool, sm_scale: float) -> torch.Tensor:
    """Scaled, masked scores of one slice: q [Nq, d], k [Nk, d] in float32 -> [Nq, Nk]."""
    s = (q @ k.transpose(-1, -2)) * sm_scale
    if causal:
        n_q, n_k = s.shape[-2], s.shape[-1]
        keep = torch.ones(n_q, n_k, dtype=torch.bool, device=s.device).tril(n_k - n_q)
        s = s.masked_fill(~keep, float("-inf"))
    return s


def _kv_head(q: torch.Tensor, k: torch.Tensor, h: int) -> int:
    """The K/V head query head ``h`` reads (grouped-query heads)."""
    return h // (q.shape[1] // k.shape[1])


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
    *,
    q_scale: float = 1.0,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
) -> torch.Tensor:
    """Attention in float32 math: q [B, H, Nq, d], k and v [B, H_kv, Nk, d] -> float32
    [B, H, Nq, d].

    ``q_scale``/``k_scale``/``v_scale`` dequantise fp8 inputs (real value = stored
    value x scale), as :func:`tilesim.kernels.attention` does for ``algo="v3"``.
    """
    sm_scale = default_scale(q.shape[-1]) if sm_scale is None else sm_scale
    batch, heads, n_q, _ = q.shape
    out = torch.empty(batch, heads, n_q, v.shape[-1], dtype=torch.float32, device=q.device)
    # float32 products in full precision: never TF32 on an Ampere/Hopper GPU
    with _no_tf32():
        for b in range(batch):
            for h in range(heads):
                hk = _kv_head(q, k, h)
                qs = q[b, h].float() * q_scale
                ks = k[b, hk].float() * k_scale
                vs = v[b, hk].float() * v_scale
                p = torch.softmax(_scores(qs, ks, causal, sm_scale), dim=-1)
                out[b, h] = p @ vs
    return out


def reference_lse(
    q: torch.Tensor, k: torch.Tensor, causal: bool = False, sm_scale: float | None = None
) -> torch.Tensor:
    """Natural-log log-sum-exp of each score row, float32 [B, H, Nq] (what v2 stores)."""
    sm_scale = default_scale(q.shape[-1]) if sm_scale is None else sm_scale
    batch, heads, n_q, _ = q.shape
    out = torch.empty(batch, heads, n_q, dtype=torch.float32, device=q.device)
    with _no_tf32():
        for b in range(batch):
            for h in range(heads):
                s = _scores(q[b, h].float(), k[b, _kv_head(q, k, h)].float(), causal, sm_scale)
                out[b, h] = torch.logsumexp(s, dim=-1)
    return out


class _no_tf32:
    """Turn TF32 matmuls off for a block (a no-op on the CPU)."""

    def __enter__(self):
        self._saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        return self

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self._saved
        return False


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; NaN or Inf anywhere in ``out`` gives inf."""
    diff = out.double() - ref.double()
    if not torch.isfinite(diff).all():
        return math.inf
    return float(diff.norm() / ref.double().norm())
