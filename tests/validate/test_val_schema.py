"""Results files: round trip, one-line errors naming the field, atomic writes."""

import json

import pytest

from tilesim.errors import TilesimError
from tilesim.traces.workload import KernelConfig, Workload
from tilesim.validate import schema

W = Workload(4, 16, 4096, 4096, 128, causal=True, dtype="bf16")
C = KernelConfig(128, 64, 8, 4, "wgmma")


def _doc():
    doc = schema.new_results("validate", {"date": "2026-11-30", "gpu": "NVIDIA H200"})
    doc["measurements"].append(
        schema.kernel_record(
            "v2",
            W,
            C,
            "ok",
            time_s=1.5e-3,
            rel_error=2e-3,
            predictions={"h200": {"time_s": 1.4e-3}},
        )
    )
    doc["measurements"].append(schema.kernel_record("v1", W, C, "wrong", rel_error=float("nan")))
    return doc


def test_round_trip(tmp_path):
    doc = _doc()
    path = schema.save_results(doc, tmp_path / "r.json")
    back = schema.load_results(path)
    assert back == json.loads(json.dumps(doc))
    row = back["measurements"][0]
    assert schema.workload_from_record(row) == W
    assert schema.config_from_record(row) == C
    # FLOPs by the shared convention, halved for causal
    assert row["flops"] == 4 * 4 * 16 * 4096 * 4096 * 128 / 2
    assert row["tflops"] == pytest.approx(row["flops"] / 1.5e-3 / 1e12)
    assert schema.ok_rows(back) == [row]


def test_nan_error_is_stored_as_null_with_a_note(tmp_path):
    row = _doc()["measurements"][1]
    assert row["rel_error"] is None
    assert "NaN" in row["note"]


def test_same_input_same_bytes(tmp_path):
    a = schema.save_results(_doc(), tmp_path / "a.json").read_bytes()
    b = schema.save_results(_doc(), tmp_path / "b.json").read_bytes()
    assert a == b


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d.update(schema_version=99), "schema_version"),
        (lambda d: d.update(kind="nonsense"), "kind"),
        (lambda d: d.update(measurements={}), "measurements must be a list"),
        (lambda d: d["measurements"][0].update(status="fine"), "measurements[0].status"),
        (
            lambda d: d["measurements"][0]["workload"].update(head_dim=96),
            "measurements[0].workload",
        ),
        (lambda d: d["measurements"][0]["workload"].update(heads_=3), "unknown field 'heads_'"),
        (lambda d: d["measurements"][0]["config"].update(block_m=100), "measurements[0].config"),
        (lambda d: d["measurements"][0].update(time_s=-1), "measurements[0].time_s"),
        (
            lambda d: d["measurements"][0].update(clock_counter_MHz=0.5),
            "measurements[0].clock_counter_MHz",
        ),
        (
            lambda d: d["measurements"][0].update(clock_counter_MHz="fast"),
            "measurements[0].clock_counter_MHz",
        ),
        (lambda d: d["measurements"][0].pop("workload"), "measurements[0].workload"),
        (lambda d: d["measurements"][1].pop("config"), "measurements[1].config is missing"),
    ],
)
def test_bad_files_name_the_field(tmp_path, mutate, needle):
    doc = json.loads(json.dumps(_doc()))
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TilesimError) as err:
        schema.load_results(path)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg and "bad.json" in msg


def test_not_json_and_missing_file(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(TilesimError, match="not valid JSON"):
        schema.load_results(path)
    with pytest.raises(TilesimError, match="no such file"):
        schema.load_results(tmp_path / "missing.json")


def test_bench_rows_need_an_impl(tmp_path):
    doc = schema.new_results("bench", {})
    doc["measurements"].append(schema.kernel_record(None, W, None, "ok", time_s=1e-3))
    with pytest.raises(TilesimError, match=r"measurements\[0\]\.impl"):
        schema.check_results(doc, "b.json")
    doc["measurements"][0]["impl"] = "sdpa-flash"
    schema.check_results(doc, "b.json")


def test_calibration_rows(tmp_path):
    doc = schema.new_results("calibrate", {})
    doc["measurements"].append({"name": "hbm_read", "value": 4.1e12, "unit": "B/s"})
    schema.check_results(doc, "c.json")
    doc["measurements"].append({"name": "exp2", "value": 0, "unit": "ops/s"})
    with pytest.raises(TilesimError, match=r"measurements\[1\]\.value"):
        schema.check_results(doc, "c.json")


def test_failed_write_leaves_the_old_file(tmp_path):
    path = schema.save_results(_doc(), tmp_path / "r.json")
    before = path.read_bytes()
    doc = _doc()
    doc["metadata"]["bad"] = object()  # not JSON-serialisable
    with pytest.raises(TypeError):
        schema.save_json(doc, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
