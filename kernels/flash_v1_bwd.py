"""FlashAttention (v1) backward in Triton: the released kernel's structure (placeholder)."""

from __future__ import annotations

from . import flash_v1_algorithm1_bwd


def launches(q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv):
    return flash_v1_algorithm1_bwd.launches(q, k, v, do, o, lm, causal, sm_scale, config, dq, dk, dv)
