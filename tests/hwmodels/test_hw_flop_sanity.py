"""No preset predicts attention faster than any kernel has run on its die.

The H200's fastest measured attention kernel reached 71% of its dense tensor peak
(v3 bf16, 705 of 989 TFLOPS; cuDNN 675); the ceiling is 85% of that peak, or the
best fraction measured on the die if higher. A preset that predicts more has a
pipe rate, a clock or an overlap that no measurement supports.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from tilesim.hwmodels import list_presets, load_gpu
from tilesim.simulator import simulate
from tilesim.traces import Workload, build

CEILING = 0.85
RESULTS = Path(__file__).resolve().parents[2] / "results" / "raw"
# Results files of measured kernels, by the datasheet preset of the die they ran on.
MEASURED = {"h200_sxm_141gb": ("2026-11-30-h200.json", "2026-11-30-h200-bench.json")}
DIE = {"h100_sxm5_80gb": "h200_sxm_141gb", "h200_sxm_141gb": "h200_sxm_141gb"}
# The shapes where the model's attention runs fastest (long, d=128, full; causal is slower).
SHAPES = {
    "v2": (Workload(2, 16, 8192, 8192, 128),),
    "v3": (
        Workload(2, 16, 8192, 8192, 128),
        Workload(1, 16, 16384, 16384, 128),
        Workload(2, 16, 8192, 8192, 128, dtype="fp8"),
    ),
}


def datasheet_peak(datasheet: str, dtype: str) -> float:
    return load_gpu(datasheet).peak_tensor_flops("fp8" if dtype == "fp8" else "fp16")


@functools.cache
def best_measured_fraction(datasheet: str) -> float:
    """The best attention TFLOPS measured on this preset's die over its dense peak."""
    best = 0.0
    for name in MEASURED.get(DIE.get(datasheet, ""), ()):
        for row in json.loads((RESULTS / name).read_text())["measurements"]:
            if row.get("status") == "ok" and row.get("tflops"):
                dtype = row["workload"]["dtype"]
                best = max(best, row["tflops"] * 1e12 / datasheet_peak(datasheet, dtype))
    return best


def cases():
    for name in list_presets():
        gpu = load_gpu(name)
        for algo in ("v2", "v3") if gpu.has_wgmma else ("v2",):
            for w in SHAPES[algo]:
                if w.dtype != "fp8" or gpu.has_fp8:
                    yield name, algo, w


def test_the_best_measured_kernel_on_the_h200_is_under_the_ceiling():
    measured = best_measured_fraction("h200_sxm_141gb")
    assert 0.6 < measured < CEILING  # v3 bf16: 705 of 989 TFLOPS


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "algo", "w"),
    list(cases()),
    ids=lambda c: c if isinstance(c, str) else f"N{c.seqlen_q}-{c.dtype}-causal{int(c.causal)}",
)
def test_no_preset_predicts_attention_above_the_ceiling(name, algo, w):
    gpu = load_gpu(name)
    datasheet = name.split(".")[0]
    ceiling = max(CEILING, best_measured_fraction(datasheet))
    fraction = simulate(build(algo, w, gpu), gpu).tflops * 1e12 / datasheet_peak(datasheet, w.dtype)
    assert fraction <= ceiling, f"{name} {algo}: {fraction:.0%} of the dense peak"
