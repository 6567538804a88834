"""tilesim.kernels.attention: every bad input is a one-line TilesimError; defaults work."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import make_qkv, poisoned

import tilesim.kernels as K
from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig

torch = pytest.importorskip("torch")


@pytest.fixture
def qkv(device):
    return make_qkv(1, 2, 64, 64, 64, torch.float16, device, seed=0)


def _raises(match, *args, **kwargs):
    with pytest.raises(TilesimError, match=match) as info:
        K.attention(*args, **kwargs)
    assert "\n" not in str(info.value)


def test_unknown_algorithm(qkv):
    _raises("unknown algorithm 'v4'", *qkv, algo="v4")


def test_unsupported_head_dim(device):
    q, k, v = make_qkv(1, 2, 64, 64, 32, torch.float16, device, seed=1)
    _raises("head_dim 32 is not supported", q, k, v)


def test_shapes_disagree(qkv, device):
    q, k, v = qkv
    _raises("shapes disagree", q[:, :1], k, v)  # more K/V heads than query heads
    q3 = torch.cat([q, q[:, :1]], dim=1)  # 3 query heads over 2 K/V heads
    _raises("H a multiple of H_kv", q3, k, v)
    _raises("shapes disagree", q, k, v[:, :1])
    _raises("shapes disagree", q, k, v[:, :, :32])
    _raises("head dims disagree", q[..., :32].contiguous(), k, v)
    _raises("must be 4-D", q[0], k[0], v[0])
    _raises("must be a torch.Tensor", q.tolist(), k, v)


def test_dtypes(qkv):
    q, k, v = qkv
    _raises("dtypes disagree", q, k.float(), v)
    _raises("dtype torch.float32 is not supported", q.float(), k.float(), v.float())
    q8, k8, v8 = (t.to(torch.float8_e4m3fn) for t in qkv)
    _raises("fp8 inputs are supported by v3 only", q8, k8, v8, algo="v2")


def test_v3_needs_hopper(qkv):
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9:
        pytest.skip("this GPU is a Hopper")
    _raises("v3 needs an NVIDIA Hopper GPU", *qkv, algo="v3")


def test_scalars_and_options(qkv):
    _raises("sm_scale must be a positive finite number", *qkv, sm_scale=-1.0)
    _raises("sm_scale must be a number", *qkv, sm_scale="0.1")
    _raises("causal must be True or False", *qkv, causal=1)
    _raises("apply to fp8 inputs only", *qkv, q_scale=2.0)
    _raises("config must be a KernelConfig", *qkv, config={"block_m": 64})
    _raises("at least 16", *qkv, config=KernelConfig(8, 16, 4, 1))


def test_tile_that_does_not_fit_names_both_sizes(qkv):
    _raises(r"need \d+ KiB of shared memory per CTA", *qkv, config=KernelConfig(256, 256, 8, 8))


def test_out_buffer(qkv, device):
    q, k, v = qkv
    _raises("out must be", *qkv, out=torch.empty(1, 2, 64, 32, dtype=torch.float16, device=device))
    _raises("out must be", *qkv, out=torch.empty(q.shape, dtype=torch.float32, device=device))


def test_default_config_and_scale(device):
    """config=None takes traces.config.default_config; sm_scale changes the result."""
    q, k, v = make_qkv(1, 2, 80, 96, 64, torch.float16, device, seed=2)
    ref = K.reference(q, k, v, True)
    out = K.attention(q, k, v, causal=True)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert K.rel_error(out, ref) < 5e-3
    out = K.attention(q, k, v, causal=True, sm_scale=0.3, out=poisoned(q.shape, q.dtype, device))
    assert K.rel_error(out, K.reference(q, k, v, True, 0.3)) < 5e-3
    assert K.rel_error(out, ref) > 1e-2


def test_import_without_torch_gives_one_clear_line():
    """tilesim.kernels imports where torch is absent; using it explains what to install."""
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"
        "import importlib.util as u; u.find_spec = lambda name, *a: None\n"
        "import tilesim.kernels as K\n"
        "from tilesim.errors import TilesimError\n"
        "try:\n    K.attention(1, 2, 3)\nexcept TilesimError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "tilesim.kernels needs torch and triton: pip install 'tilesim[kernels]'"
    )


def test_v3_refuses_what_it_cannot_run(monkeypatch):
    """Ping-pong only with warp specialisation, which runs the Gluon kernel; Triton's own
    warp-specialised build (deadlocked on an H200) only when asked for, without ping-pong."""
    from tilesim.kernels import flash_v3, gluon

    assert flash_v3.check_config(KernelConfig(128, 128, 8, 3, "wgmma")) is None
    assert "ping-pong" in flash_v3.check_config(KernelConfig(128, 128, 8, 2, pingpong=True))
    ws = KernelConfig(128, 128, 8, 2, "wgmma", warp_specialize=True)
    monkeypatch.delenv(flash_v3.WARP_SPECIALIZE_ENV, raising=False)
    assert flash_v3.check_config(ws) == gluon.check_config(ws)
    monkeypatch.setenv(flash_v3.WARP_SPECIALIZE_ENV, "1")
    assert flash_v3.check_config(ws) is None
    assert "ping-pong" in flash_v3.check_config(ws.replace(pingpong=True))
    assert "num_warps=8" in flash_v3.check_config(ws.replace(num_warps=4))
    assert flash_v3.launch_warps(ws) == 4  # Triton adds the producer and second consumer group
