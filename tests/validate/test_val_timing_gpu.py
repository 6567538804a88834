"""`timing.counter_clock_hz` on a real GPU: the SMs' own clock over a captured replay."""

from __future__ import annotations

import pytest

from tilesim.validate.gpu import timing

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def test_the_counted_clock_of_a_matmul_is_a_real_sm_clock():
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    out = torch.empty_like(a)

    def run():
        torch.mm(a, a, out=out)

    hz = timing.counter_clock_hz(run)
    assert hz is not None
    assert 2e8 < hz < 3e9  # an SM clock, not ns or a wrapped counter
    # counted over the replays of the same launches, the clock holds to a few percent
    assert timing.counter_clock_hz(run) == pytest.approx(hz, rel=0.05)


def test_launches_that_cannot_be_captured_have_no_counted_clock():
    def run():
        torch.cuda.synchronize()  # not allowed while a graph is captured

    assert timing.counter_clock_hz(run) is None
