"""Timelines (Perfetto / Chrome trace JSON) and the Prediction's JSON schema."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.simulator import SCHEMA_VERSION, Prediction, simulate
from tilesim.traces import Workload, build


@pytest.fixture(scope="module")
def v2_timeline():
    gpu = load_gpu("h100")
    trace = build("v2", Workload(1, 4, 1024, 1024, 128), gpu)
    return simulate(trace, gpu, "detailed", timeline=True, timeline_sms=3)


def test_perfetto_json_has_the_required_structure(v2_timeline, tmp_path):
    path = v2_timeline.timeline.write(tmp_path / "t.json")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    assert events
    names = {
        (e["pid"], e.get("args", {}).get("name"))
        for e in events
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert (0, "memory") in names
    assert {(1, "SM 0"), (2, "SM 1"), (3, "SM 2")} <= names
    assert not any(e["pid"] > 3 for e in events)  # only the first 3 SMs
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert threads[(1, 0)] == "tensor" and threads[(1, 1)] == "sfu"
    xs = [e for e in events if e["ph"] == "X" and e["pid"] > 0]
    assert xs and all(e["dur"] >= 0 and e["ts"] >= 0 for e in xs)
    assert {e["tid"] for e in xs} >= {0, 1, 2, 3}  # every pipe did something
    counters = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"HBM", "L2"}
    assert any(e["args"].get("read_GBps", 0) > 0 for e in counters if e["name"] == "HBM")
    launches = [e for e in events if e["ph"] == "X" and e["pid"] == 0]
    assert [e["name"] for e in launches] == ["flash_v2"]
    end_us = v2_timeline.time_s * 1e6
    assert max(e["ts"] + e["dur"] for e in xs) <= end_us + 1e-6


def test_busy_intervals_of_one_pipe_never_overlap(v2_timeline):
    by_track = defaultdict(list)
    for e in v2_timeline.timeline.to_perfetto()["traceEvents"]:
        if e["ph"] == "X" and e["pid"] > 0:
            by_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    assert len(by_track) >= 4
    for track, spans in by_track.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end - 1e-9, track


def test_hbm_counter_matches_the_bytes_moved(v2_timeline):
    # the binned read rate, integrated over time, is the bytes read
    tl = v2_timeline.timeline
    width_s = tl.recorder.bin / tl.clock
    hbm = tl.recorder.bins["hbm"]
    read = sum(v[0] for v in hbm.values())
    written = sum(v[1] for v in hbm.values())
    assert read == pytest.approx(v2_timeline.hbm_read_bytes, rel=1e-6)
    assert written == pytest.approx(v2_timeline.hbm_write_bytes, rel=1e-6)
    assert width_s > 0


def test_timeline_window_clips_events():
    gpu = load_gpu("h100")
    trace = build("v2", Workload(1, 4, 1024, 1024, 128), gpu)
    p = simulate(
        trace, gpu, "detailed", timeline=True, timeline_sms=1, timeline_window_s=(2e-6, 4e-6)
    )
    xs = [e for e in p.timeline.to_perfetto()["traceEvents"] if e["ph"] in ("X", "C")]
    assert xs
    assert all(2.0 - 1e-9 <= e["ts"] <= 4.0 + 1e-9 for e in xs)


def test_timeline_options_are_checked(tmp_path):
    gpu = load_gpu("h100")
    trace = build("v2", Workload(1, 1, 256, 256, 64), gpu)
    with pytest.raises(TilesimError):
        simulate(trace, gpu, timeline=True, timeline_window_s=(3e-6, 1e-6))
    p = simulate(trace, gpu, timeline=True)
    with pytest.raises(TilesimError, match="does not exist"):
        p.timeline.write(tmp_path / "missing" / "t.json")
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_no_timeline_unless_asked():
    gpu = load_gpu("h100")
    p = simulate(build("v2", Workload(1, 1, 256, 256, 64), gpu), gpu)
    assert p.timeline is None


# -- the Prediction record ------------------------------------------------------------

SCHEMA_KEYS = {
    "schema_version",
    "gpu",
    "algo",
    "workload",
    "config",
    "fidelity",
    "time_s",
    "cycles",
    "tflops",
    "matmul_flops",
    "exp_count",
    "fp32_ops",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "compulsory_hbm_bytes",
    "l2_hit_rate",
    "l2_bytes",
    "smem_bytes",
    "utilisation",
    "bound",
    "slot_fill",
    "waves",
    "ctas_per_sm",
    "launches",
    "sim_events",
    "sim_wall_s",
    "estimated_launches",
}
LAUNCH_KEYS = {
    "name",
    "time_s",
    "cycles",
    "ctas",
    "ctas_per_sm",
    "occupancy_limiter",
    "waves",
    "persistent_ctas",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "matmul_flops",
    "utilisation",
    "bound",
    "simulated_ctas",
    "slot_fill",
    "clock_hz",
}


def test_prediction_json_schema_is_stable():
    gpu = load_gpu("a100")
    p = simulate(build("standard", Workload(1, 2, 512, 512, 64), gpu), gpu)
    doc = json.loads(p.to_json())
    assert set(doc) == SCHEMA_KEYS
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    assert set(doc["utilisation"]) == {"hbm", "l2", "tensor", "sfu", "fp32", "smem"}
    assert [lp["name"] for lp in doc["launches"]] == ["qk", "softmax", "pv"]
    for lp in doc["launches"]:
        assert set(lp) == LAUNCH_KEYS
    assert doc["time_s"] == pytest.approx(sum(lp["time_s"] for lp in doc["launches"]))
    assert doc["tflops"] == pytest.approx(doc["matmul_flops"] / doc["time_s"] / 1e12)
    assert doc["workload"]["seqlen_q"] == 512 and doc["config"]["block_m"] == 128
    assert doc["estimated_launches"] == [
        {"launch": name, "why": "no kernel profile for ampere GPUs"}
        for name in ("qk", "softmax", "pv")
    ]
    assert Prediction.from_dict(doc) == p
    assert p.to_json() == p.to_json()  # sorted keys: the same text every time


def test_from_dict_rejects_another_schema():
    with pytest.raises(TilesimError, match="schema_version"):
        Prediction.from_dict({"schema_version": 99})


def test_a_sampled_run_says_so_in_its_prediction_and_timeline(v2_timeline, tmp_path):
    gpu = load_gpu("h100")
    fast = simulate(build("v2", Workload(4, 16, 4096, 4096, 128), gpu), gpu, timeline=True)
    assert fast.sampled
    doc = json.loads(fast.timeline.write(tmp_path / "fast.json").read_text())
    assert "CTAs simulated" in doc["otherData"]["sampled"]
    marks = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert len(marks) == 1 and marks[0]["name"].startswith("sampled: flash_v2: ")
    # detailed simulates every CTA and iteration: a complete timeline
    assert not v2_timeline.sampled
    doc = json.loads(v2_timeline.timeline.write(tmp_path / "detailed.json").read_text())
    assert doc["otherData"] == {"sampled": False}
    assert not any(e["ph"] == "i" for e in doc["traceEvents"])


def test_a_timeline_holds_a_bounded_number_of_intervals_and_says_so(monkeypatch, tmp_path):
    """A detailed run of a big grid on every SM would fill the memory: the timeline keeps
    the first MAX_INTERVALS, counts the rest, and its file and the CLI say what is left out."""
    from tilesim.simulator import timeline
    from tilesim.simulator.timeline import Timeline

    gpu = load_gpu("h100")
    trace = build("v2", Workload(1, 4, 1024, 1024, 128), gpu)
    full = simulate(trace, gpu, "detailed", timeline=True, timeline_sms=3).timeline
    total = sum(len(log) for log in full.sm_logs.values())
    assert full.truncated == "" and "truncated" not in full.to_perfetto()["otherData"]
    monkeypatch.setattr(timeline, "MAX_INTERVALS", total // 2)
    monkeypatch.setattr(Timeline, "__init__", _budget(Timeline.__init__, total // 2))
    cut = simulate(trace, gpu, "detailed", timeline=True, timeline_sms=3).timeline
    assert sum(len(log) for log in cut.sm_logs.values()) == total // 2
    assert cut.truncated == f"the first {total // 2:,} busy intervals of {total:,}"
    assert cut.to_perfetto()["otherData"]["truncated"] == cut.truncated


def _budget(init, n):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.left = n

    return patched


def test_a_timeline_window_keeps_only_the_intervals_that_reach_into_it():
    gpu = load_gpu("h100")
    trace = build("v2", Workload(1, 4, 1024, 1024, 128), gpu)
    window = (8e-6, 12e-6)  # the run: 24 µs, the first busy interval at 6 µs
    tl = simulate(
        trace, gpu, "detailed", timeline=True, timeline_sms=3, timeline_window_s=window
    ).timeline
    lo, hi = (t * gpu.sm_clock_hz for t in window)
    kept = [iv for log in tl.sm_logs.values() for iv in log]
    assert kept and all(iv[2] >= lo and iv[1] <= hi for iv in kept)
    every = simulate(trace, gpu, "detailed", timeline=True, timeline_sms=3).timeline
    inside = [iv for log in every.sm_logs.values() for iv in log if iv[2] >= lo and iv[1] <= hi]
    assert kept == inside
