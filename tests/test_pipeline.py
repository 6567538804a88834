"""One prediction pipeline: every way of predicting a job gives the same bytes.

`runner.predict` (one job here), `run_jobs` (serial, a process pool, the disk cache),
`runner.Pool` (spawned workers beside a GPU run), `tilesim.predict` (the API) and
`report` (a results file's measured point) must agree to the last bit, each job with
its clock and its external schedule where it has them.
"""

from __future__ import annotations

import json

import pytest

import tilesim
from tilesim import runner
from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.traces import default_config
from tilesim.traces.workload import Workload
from tilesim.validate import report, schema

GPU = load_gpu("h200")
SMALL = Workload(1, 2, 512, 512, 64)
ODD = Workload(1, 3, 1000, 1000, 128, causal=True, dtype="bf16")
JOBS = [
    runner.Job(GPU, "v2", SMALL),
    runner.Job(GPU, "v1", ODD, clock_hz=1.755e9),
    runner.Job(GPU, "standard", SMALL, clock_hz=1.5e9, counted=True),
    runner.Job(GPU, "sdpa-flash", ODD),  # an external kernel: its own config
    runner.Job(GPU, "v2", Workload(1, 2, 512, 512, 64, pass_="bwd"), fidelity="detailed"),
]


def _bytes(pred) -> str:
    d = pred.to_dict() if not isinstance(pred, dict) else dict(pred)
    d["sim_wall_s"] = 0.0
    return json.dumps(d, sort_keys=True)


@pytest.fixture(scope="module")
def alone():
    return [_bytes(runner.predict(job)) for job in JOBS]


def test_run_jobs_serial_and_in_processes_agree_with_one_at_a_time(alone, tmp_path):
    for workers in (1, 2):
        outcomes, stats = runner.run_jobs(JOBS, workers=workers, cache_dir=tmp_path)
        assert [_bytes(o.prediction) for o in outcomes] == alone
    assert stats.cached == len(JOBS)  # the second run read every entry back from disk


def test_the_background_pool_agrees(alone):
    with runner.Pool(2) as pool:
        futures = [pool.submit(job) for job in JOBS]
        results = [f.result(timeout=300) for f in futures]
    assert [_bytes(r["prediction"]) for r in results] == alone


def test_a_job_the_model_cannot_run_is_one_error_in_every_path():
    huge = default_config("v2", SMALL, GPU).replace(block_m=256, block_n=256, num_stages=4)
    bad = runner.Job(GPU, "v2", SMALL, huge)  # more shared memory than an SM has
    with pytest.raises(TilesimError):
        runner.predict(bad)
    (outcome,), _ = runner.run_jobs([bad])
    assert outcome.prediction is None and "\n" not in outcome.error
    with runner.Pool(1) as pool:
        assert "error" in pool.submit(bad).result(timeout=300)


def test_the_api_is_the_same_job(alone):
    pred = tilesim.predict(gpu=GPU, algo="v2", batch=1, heads=2, seqlen=512, head_dim=64)
    assert _bytes(pred) == alone[0]


def test_report_predicts_a_measured_point_as_the_job(alone, tmp_path):
    doc = schema.new_results("validate", {"device": {"name": "NVIDIA H200"}, "date": "2026-12-04"})
    job = JOBS[1]
    doc["measurements"].append(
        schema.kernel_record(
            "v1",
            ODD,
            default_config("v1", ODD, GPU),
            "ok",
            time_s=1e-3,
            clock_sm_MHz=job.clock_hz / 1e6,
        )
    )
    path = schema.save_results(doc, tmp_path / "2026-12-04-h200.json")
    (point,) = report.build_report([path], preset="h200", measured_clock=True).points
    assert point.predicted_s == runner.predict(job).time_s
