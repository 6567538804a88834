"""The public API on a real GPU: repeated calls through the plans and direct launches,
CUDA-graph capture and replay of a forward and backward, torch.compile over the custom
operator, and the host time per call."""

from __future__ import annotations

import time

import pytest
from conftest import make_qkv

import tilesim.kernels as K
from tilesim.kernels import launch, plans

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

OVERHEAD_LIMIT_S = 40e-6  # per forward call; the bench records the figure (target 20 µs)


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def _fresh(shape, dtype, seed):
    b, h, n_q, n_kv, d = shape
    return make_qkv(b, h, n_q, n_kv, d, dtype, "cuda", seed)


V3_CASES = [  # (shape, causal, dtype): Gluon one-tile and persistent, fp8, Triton d = 256
    ((2, 3, 1000, 1000, 128), True, torch.float16),
    ((2, 4, 1024, 777, 64), False, torch.bfloat16),
    ((2, 4, 1024, 1024, 128), False, torch.float8_e4m3fn),
    ((1, 2, 512, 512, 256), False, torch.float16),
]


@pytest.mark.parametrize(("shape", "causal", "dtype"), V3_CASES)
def test_repeated_v3_calls_compute_their_own_inputs(shape, causal, dtype):
    if not _hopper():
        pytest.skip("v3 needs a Hopper GPU")
    for seed in (1, 2, 3):  # the first call makes the plan, the later ones launch directly
        q, k, v = _fresh(shape, torch.float16, seed)
        scales = {}
        if dtype == torch.float8_e4m3fn:
            (q, qs), (k, ks), (v, vs) = (K.quantize_fp8(t) for t in (q, k, v))
            scales = {"q_scale": qs, "k_scale": ks, "v_scale": vs}
        elif dtype != q.dtype:
            q, k, v = (t.to(dtype) for t in (q, k, v))
        out = K.attention(q, k, v, causal=causal, algo="v3", **scales)
        ref = K.reference(q, k, v, causal, **scales)
        tol = {torch.float16: 5e-3, torch.bfloat16: 3e-2, torch.float8_e4m3fn: 1e-1}[dtype]
        assert K.rel_error(out, ref) < tol


def _grads(q, k, v, do, algo):
    out = K.attention(q, k, v, causal=True, algo=algo)
    return (out, *torch.autograd.grad(out, (q, k, v), do))


def test_a_cuda_graph_replays_forward_and_backward_on_new_inputs():
    shape = (2, 4, 384, 384, 64)
    q, k, v = (t.requires_grad_() for t in _fresh(shape, torch.float16, 10))
    do = torch.randn_like(q)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile and make the plans outside the capture
        for _ in range(2):
            _grads(q, k, v, do, "v2")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = _grads(q, k, v, do, "v2")
    for seed in (11, 12):
        new = _fresh(shape, torch.float16, seed)
        with torch.no_grad():
            for t, n in zip((q, k, v, do), (*new, torch.randn_like(q)), strict=True):
                t.copy_(n)
        graph.replay()
        torch.cuda.synchronize()
        qd, kd, vd = (t.detach() for t in (q, k, v))
        assert K.rel_error(static[0], K.reference(qd, kd, vd, True)) < 5e-3
        for got, want in zip(static[1:], K.reference_grads(qd, kd, vd, do, True), strict=True):
            assert K.rel_error(got, want) < 1e-2


def test_a_cuda_graph_replays_the_v3_forward():
    if not _hopper():
        pytest.skip("v3 needs a Hopper GPU")
    q, k, v = _fresh((2, 4, 1024, 1024, 128), torch.float16, 13)
    K.attention(q, k, v, algo="v3")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = K.attention(q, k, v, algo="v3")
    for seed in (14, 15):
        new = _fresh((2, 4, 1024, 1024, 128), torch.float16, seed)
        for t, n in zip((q, k, v), new, strict=True):
            t.copy_(n)
        graph.replay()
        torch.cuda.synchronize()
        assert K.rel_error(out, K.reference(q, k, v)) < 5e-3


def test_torch_compile_traces_the_op_without_a_graph_break():
    """fullgraph=True raises on any graph break; inductor compiles around the op."""
    algo = "v3" if _hopper() else "v2"
    q, k, v = _fresh((2, 4, 512, 512, 128), torch.float16, 16)

    def forward(q, k, v):
        return K.attention(q, k, v, causal=True, algo=algo) * 2

    out = torch.compile(forward, fullgraph=True)(q, k, v)
    assert K.rel_error(out / 2, K.reference(q, k, v, True)) < 5e-3

    do = torch.randn_like(q)

    def loss(q, k, v):
        return (K.attention(q, k, v, causal=True, algo="v2").float() * do.float()).sum()

    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    torch.compile(loss, fullgraph=True)(qg, kg, vg).backward()
    ref = K.reference_grads(q, k, v, do, True)
    for got, want in zip((qg.grad, kg.grad, vg.grad), ref, strict=True):
        assert K.rel_error(got, want) < 1e-2


def test_a_forward_call_costs_microseconds_of_host_time():
    algo = "v3" if _hopper() else "v2"
    q, k, v = _fresh((1, 8, 1536, 1536, 128), torch.float16, 17)
    K.attention(q, k, v, causal=True, algo=algo)
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(50):
            K.attention(q, k, v, causal=True, algo=algo)
        rounds.append((time.perf_counter() - t0) / 50)
        torch.cuda.synchronize()
    per_call = sorted(rounds)[2]
    print(f"{algo} host time per call: {per_call * 1e6:.1f} µs")
    assert per_call < OVERHEAD_LIMIT_S
    # the launch went to the launcher's C function, not through Triton's Python launcher
    plan = plans.forward_plan(q, k, v, True, None, algo, None, None, None, None)
    assert plan.run.__self__.launch.direct.__func__ is launch.Launch._raw
