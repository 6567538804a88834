"""Golden predictions: a change to a predicted time must be deliberate.

``predictions.json`` holds the engine's prediction for every GPU x algorithm x
a few shapes (fast fidelity, default kernel configs). The engine is
deterministic, so they are checked to a relative 1e-9. When a change to the
engine, a preset or a generator moves them on purpose, regenerate and commit
the file (its diff is the change in predictions)::

    python -m tests.golden.regen        # or: TILESIM_REGEN_GOLDEN=1 pytest tests/golden
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import Workload, build
from tilesim.traces.config import check_algo

PATH = Path(__file__).with_name("predictions.json")
TOLERANCE = 1e-9
REGEN = os.environ.get("TILESIM_REGEN_GOLDEN") == "1"
GPUS = ("a100", "h100", "h200")
ALGOS = ("standard", "v1", "v2", "v3")
SHAPES = (
    Workload(1, 4, 1024, 1024, 64),
    Workload(2, 8, 2048, 2048, 128, causal=True),
    Workload(1, 4, 1000, 1000, 128, dtype="bf16"),  # partial tiles
)
FIELDS = (
    "time_s",
    "cycles",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "matmul_flops",
    "exp_count",
    "l2_hit_rate",
    "bound",
    "waves",
    "ctas_per_sm",
)
FLOATS = (
    "time_s",
    "cycles",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "matmul_flops",
    "exp_count",
    "l2_hit_rate",
)


def cases():
    for gpu_name in GPUS:
        gpu = load_gpu(gpu_name)
        for algo in ALGOS:
            for w in SHAPES:
                try:
                    check_algo(algo, w, gpu)
                except Exception:
                    continue
                yield gpu_name, algo, w


def key(gpu_name: str, algo: str, w: Workload) -> str:
    return f"{gpu_name}/{algo}/B{w.batch}-H{w.heads}-N{w.seqlen_q}-d{w.head_dim}-{w.dtype}" + (
        "-causal" if w.causal else ""
    )


def compute(gpu_name: str, algo: str, w: Workload) -> dict:
    gpu = load_gpu(gpu_name)
    p = simulate(build(algo, w, gpu), gpu, "fast")
    d = p.to_dict()
    return {"config": d["config"], **{f: d[f] for f in FIELDS}}


def regenerate() -> Path:
    doc = {
        "about": "tilesim golden predictions (fast fidelity); regenerate with "
        "`python -m tests.golden.regen`",
        "tolerance": TOLERANCE,
        "predictions": {key(*c): compute(*c) for c in cases()},
    }
    tmp = PATH.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, PATH)
    return PATH


@pytest.fixture(scope="module")
def golden() -> dict:
    if REGEN:
        regenerate()
    return json.loads(PATH.read_text())["predictions"]


def test_every_case_has_a_golden_prediction(golden):
    assert sorted(golden) == sorted(key(*c) for c in cases())
    assert len(golden) >= 30


@pytest.mark.parametrize("case", list(cases()), ids=lambda c: key(*c))
def test_prediction_matches_golden(golden, case):
    expected = golden[key(*case)]
    got = compute(*case)
    hint = "deliberate? regenerate with `python -m tests.golden.regen`"
    assert got["config"] == expected["config"], f"default config changed ({hint})"
    for field in FIELDS:
        if field in FLOATS:
            assert got[field] == pytest.approx(expected[field], rel=TOLERANCE, abs=1e-15), (
                f"{field}: {got[field]!r} != {expected[field]!r} ({hint})"
            )
        else:
            assert got[field] == expected[field], f"{field} ({hint})"
