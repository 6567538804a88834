"""The forward's row-softmax kernel alone against float32 torch.softmax.

Every path of ``softmax_fwd_plan`` runs: one pass (non-causal), one pass at each
causal width (block/4, block/2, block), two passes (causal and not, by shrinking the
plan's limits), rows not a multiple of the block or of 8 columns, n_q < n_kv (the
causal diagonal aligned bottom-right). S's
padding columns hold NaN (a row's loads reach up to 7 of them: they must not leak
into P) and P starts as NaN (every element of a row must be written; masked ones 0,
and the padding columns 0: pv reads them).
CPU: the Triton interpreter; the ``gpu`` tests run real row lengths.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from tilesim.kernels import standard  # noqa: E402
from tilesim.traces import standard as plan  # noqa: E402


def _rows(bh, n_q, n_kv, device, seed):
    """S as probs_buffer lays it out: random scores, NaN in the padding columns."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    n_pad = plan.padded_row(n_kv)
    s = torch.full((bh, n_q, n_pad), float("nan"), dtype=torch.float16)
    s[:, :, :n_kv] = (3 * torch.randn((bh, n_q, n_kv), generator=gen)).to(torch.float16)
    return s.to(device), torch.full(
        (bh, n_q, n_pad), float("nan"), dtype=torch.float16, device=device
    )


def _check(bh, n_q, n_kv, causal, device, seed=0):
    s, p = _rows(bh, n_q, n_kv, device, seed)
    standard.softmax_rows(s, p, n_kv, causal)
    x = s[:, :, :n_kv].float()
    # causal, bottom-right: row i sees columns j <= i + n_kv - n_q
    masked = torch.ones(n_q, n_kv, dtype=torch.bool, device=device).triu(1 + n_kv - n_q)
    if causal:
        x = x.masked_fill(masked, float("-inf"))
    ref = torch.softmax(x, -1)
    got = p[:, :, :n_kv].float()
    assert torch.isfinite(got).all(), "a score of P was not written (or NaN leaked in)"
    err = ((got - ref).norm() / ref.norm()).item()
    assert err < 2e-3, f"{(bh, n_q, n_kv, causal)}: rel error {err:.2e}"
    if causal:
        assert (got[:, masked] == 0).all()  # exactly zero past the diagonal
    assert (p[:, :, n_kv:] == 0).all()  # padding columns: zeros


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("bh", "n_q", "n_kv"),
    [(2, 64, 64), (1, 150, 150), (2, 130, 150), (1, 40, 150)],
    ids=["block", "not-multiple-of-8", "fewer-rows", "short-rows"],
)
def test_one_pass(bh, n_q, n_kv, causal, device):
    p = plan.softmax_fwd_plan(n_kv, causal)
    assert p.passes == 1
    # causal rows of 150 scores (block 256): widths 64, 128, 256 all run
    assert p.tiers == (3 if causal else 1)
    _check(bh, n_q, n_kv, causal, device, seed=n_q * n_kv)


@pytest.mark.parametrize("causal", [False, True])
def test_two_pass(causal, device, monkeypatch):
    monkeypatch.setattr(plan, "SOFTMAX_MAX_BLOCK", 32)
    monkeypatch.setattr(plan, "SOFTMAX_FWD_MAX_BLOCK", 64)
    p = plan.softmax_fwd_plan(150, causal)
    assert (p.block, p.passes) == (32, 2)  # five chunks: the last partial; causal rows skip some
    _check(2, 150, 150, causal, device, seed=7)
    _check(1, 20, 150, causal, device, seed=8)  # fewer rows: the diagonal shifted right
    _check(1, 150, 150, causal, device, seed=9)  # causal: a row's later chunks are zeros


def test_plan_limits():
    # non-causal rows up to 16384 in registers; causal rows past 8192 in two passes
    assert plan.softmax_fwd_plan(16384, False)[:3] == (16384, 1, 16)
    assert plan.softmax_fwd_plan(16385, False)[:3] == (8192, 2, 16)
    assert plan.softmax_fwd_plan(8192, True) == (8192, 1, 16, 3)
    assert plan.softmax_fwd_plan(8192, True).widths() == (2048, 4096, 8192)
    assert plan.softmax_fwd_plan(8193, True) == (8192, 2, 16, 1)
    assert plan.softmax_fwd_plan(20, True).widths() == (16, 32)  # none narrower than 16
    # the backward's dS kernel keeps its plan
    assert standard.softmax_launch(16384) == (8192, False, 16)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [8192, 12003, 16384, 20000])
def test_standard_softmax_real_rows(n, causal):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _check(2, n if n <= 16384 else 256, n, causal, "cuda", seed=n)
