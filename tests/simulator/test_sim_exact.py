"""The engine's predictions, bit for bit: a speed-up of the engine must not move them.

``exact.json`` holds every field of the `Prediction` (but ``sim_events`` and
``sim_wall_s``, which measure the engine, not the kernel) for a set of small
cases across algorithms, passes, dtypes, GPUs, fidelities and what-if variants.
They are compared with ``==``: floats included. Fields added to the `Prediction`
later are not compared until the file is regenerated. After a deliberate change
to the predictions (then the golden file moves too)::

    TILESIM_REGEN_EXACT=1 pytest tests/simulator/test_sim_exact.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tilesim

PATH = Path(__file__).with_name("exact.json")
REGEN = os.environ.get("TILESIM_REGEN_EXACT") == "1"
CASES = (
    dict(gpu="h200-cal", algo="v2", batch=2, heads=8, seqlen=3000, head_dim=64, causal=True),
    dict(gpu="h200-cal", algo="v2", batch=4, heads=8, seqlen=2048, head_dim=128),
    dict(gpu="h200-cal", algo="standard", batch=1, heads=2, seqlen=1024, head_dim=128),
    dict(gpu="h200-cal", algo="v1", batch=1, heads=16, seqlen=1000, head_dim=128),
    dict(gpu="h200-cal", algo="v3", batch=1, heads=8, seqlen=2048, head_dim=128, dtype="bf16"),
    dict(gpu="h200-cal", algo="v3", batch=1, heads=8, seqlen=1024, head_dim=128, dtype="fp8"),
    dict(gpu="h100", algo="v2", batch=1, heads=4, seqlen=1024, head_dim=64, pass_="bwd"),
    dict(gpu="h100", algo="v1", batch=1, heads=4, seqlen=1024, head_dim=64, pass_="bwd"),
    dict(gpu="h100", algo="standard", batch=1, heads=1, seqlen=1024, head_dim=64, pass_="fwd_bwd"),
    dict(gpu="a100", algo="standard", batch=1, heads=2, seqlen=1024, head_dim=64),
    dict(gpu="a100", algo="v1", batch=2, heads=8, seqlen=1024, head_dim=64, causal=True),
    dict(gpu="h100", algo="v3", batch=2, heads=8, seqlen=1024, head_dim=64, causal=True),
    dict(gpu="h100", algo="v2", batch=1, heads=8, seqlen=2048, head_dim=128, fidelity="detailed"),
    dict(gpu="h100", algo="standard", batch=1, heads=1, seqlen=1024, head_dim=64,
         fidelity="detailed"),
    dict(gpu="h200-cal", algo="v2", batch=4, heads=8, seqlen=2048, head_dim=128,
         overrides={"sm_count": 144}),
    dict(gpu="h200-cal", algo="standard", batch=1, heads=2, seqlen=1024, head_dim=128,
         overrides={"hbm_bandwidth_Bps": "2x", "l2_bytes": "0.5x"}),
    dict(gpu="h200-cal", algo="v2", batch=3, heads=5, seqlen=777, head_dim=64,
         overrides={"sm_clock_hz": "2x"}),
)  # fmt: skip


def key(case: dict) -> str:
    return json.dumps(case, sort_keys=True)


def compute(case: dict) -> dict:
    d = json.loads(tilesim.predict(**case).fingerprint())
    d.pop("sim_events")
    return d


def _subset(stored, got, where: str) -> list[str]:
    """Where ``got`` differs from ``stored`` in the keys ``stored`` has."""
    if isinstance(stored, dict) and isinstance(got, dict):
        out = []
        for k in stored:
            if k not in got:
                out.append(f"{where}.{k}: missing")
            else:
                out += _subset(stored[k], got[k], f"{where}.{k}")
        return out
    if isinstance(stored, list) and isinstance(got, list) and len(stored) == len(got):
        out = []
        for i, (a, b) in enumerate(zip(stored, got, strict=True)):
            out += _subset(a, b, f"{where}[{i}]")
        return out
    return [] if stored == got else [f"{where}: {got!r} != {stored!r}"]


@pytest.fixture(scope="module")
def exact() -> dict:
    if REGEN:
        doc = {key(c): compute(c) for c in CASES}
        PATH.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return json.loads(PATH.read_text())


def test_every_case_is_stored(exact):
    assert sorted(exact) == sorted(key(c) for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['gpu']}-{c['algo']}-{c['seqlen']}")
def test_prediction_is_bit_identical(exact, case):
    diffs = _subset(exact[key(case)], compute(case), "prediction")
    assert not diffs, "; ".join(diffs[:5]) + " (deliberate? TILESIM_REGEN_EXACT=1)"
