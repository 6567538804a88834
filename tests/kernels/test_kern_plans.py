"""Call plans: a signature is checked and set up once; later calls reuse it, and still
compute on their own inputs and still get every one-line error."""

from __future__ import annotations

import pytest
from conftest import make_qkv, poisoned

import tilesim.kernels as K
from tilesim.errors import TilesimError
from tilesim.kernels import api, launch, plans

torch = pytest.importorskip("torch")


def test_a_repeated_call_reuses_its_plan_on_new_inputs(device):
    q, k, v = make_qkv(1, 2, 80, 96, 64, torch.float16, device, seed=3)
    K.attention(q, k, v, causal=True)
    n_calls, n_plans = len(api._CALLS), len(plans._FORWARD)
    q2, k2, v2 = make_qkv(1, 2, 80, 96, 64, torch.float16, device, seed=4)
    out = K.attention(q2, k2, v2, causal=True)
    assert (len(api._CALLS), len(plans._FORWARD)) == (n_calls, n_plans)
    assert K.rel_error(out, K.reference(q2, k2, v2, True)) < 5e-3


def test_a_cached_signature_still_gets_its_errors(device):
    q, k, v = make_qkv(1, 2, 64, 64, 64, torch.float16, device, seed=5)
    K.attention(q, k, v, causal=True, sm_scale=1.0)
    with pytest.raises(TilesimError, match="causal must be True or False"):
        K.attention(q, k, v, causal=1, sm_scale=1.0)
    with pytest.raises(TilesimError, match="sm_scale must be a number"):
        K.attention(q, k, v, causal=True, sm_scale=True)
    with pytest.raises(TilesimError, match="out must be"):
        K.attention(q, k, v, causal=True, out=torch.empty(1, 2, 64, 32, device=device))
    with pytest.raises(TilesimError, match="config must be a KernelConfig"):
        K.attention(q, k, v, config={"block_m": 64})


def test_an_out_buffer_is_filled_on_every_call(device):
    q, k, v = make_qkv(1, 2, 64, 64, 64, torch.float16, device, seed=6)
    for _ in range(2):
        out = poisoned(q.shape, q.dtype, device)
        assert K.attention(q, k, v, out=out) is out
        assert K.rel_error(out, K.reference(q, k, v)) < 5e-3


def test_non_contiguous_inputs_take_their_own_plan(device):
    q, k, v = make_qkv(1, 64, 2, 2, 64, torch.float16, device, seed=7)  # [B, N, H, d]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [1, 2, 64, 64], heads strided
    assert not q.is_contiguous()
    for _ in range(2):
        assert K.rel_error(K.attention(q, k, v), K.reference(q, k, v)) < 5e-3


def test_config_keys_round_trip():
    from tilesim.traces.workload import KernelConfig

    config = KernelConfig(128, 64, 8, 3, "wgmma", warp_specialize=True, persistent=True)
    assert plans.config_of(plans.config_key(config)) == config
    assert plans.config_key(None) == "" and plans.config_of("") is None


def test_a_rebased_descriptor_keeps_its_layout_and_moves_its_base():
    class Desc:
        def __init__(self, base):
            self.base, self.shape, self.block_shape = base, [8, 4], [2, 4]

    template = Desc("a")
    desc = launch.rebase(template, "b")
    assert (desc.base, desc.shape, desc.block_shape, template.base) == ("b", [8, 4], [2, 4], "a")
