"""The results files under ``results/raw/``: versioned JSON, checked on load.

Three kinds share one envelope::

    {"schema_version": 1, "kind": "validate" | "bench" | "calibrate",
     "metadata": {...GPU, clocks, versions, date, git commit...},
     "measurements": [ {...}, ... ]}

A ``validate`` measurement is one kernel run of tilesim's own kernels::

    {"algo": "v2", "workload": {Workload fields}, "config": {KernelConfig fields},
     "status": "ok" | "wrong" | "skipped" | "error", "note": "...",
     "time_s": 1.2e-3, "rel_error": 3e-4, "tflops": 450.0,
     "predictions": {"h200": {"time_s": ..., "bound": ...}, ...}}

It stores everything a later CPU run needs to predict the point again with the
current model (``workload`` + ``config``); the stored ``predictions`` are a
record of what the model said on the day, never used for the accuracy figures.

The pass is the workload's ``pass_``: "fwd" (the forward alone) or "bwd" (the
backward's launches alone, timed after an untimed forward; ``rel_error`` is then
the worst of dq, dk, dv). A backward measurement also has ``parts``: each
launch's own time, by launch name.

A ``bench`` measurement adds ``impl`` ("tilesim-v2", "sdpa-flash", ...) and, for
standard attention and every backward, ``parts`` (each launch's time). A ``calibrate``
measurement is one micro-benchmark figure: ``name``, ``value``, ``unit``,
``method`` and its raw ``samples``.

Files are written atomically (temp file + rename): a crash never leaves half a file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..errors import TilesimError
from ..inputs import read_json
from ..traces.workload import ALGOS, KernelConfig, Workload

SCHEMA_VERSION = 1
KINDS = ("validate", "bench", "calibrate")
STATUSES = ("ok", "wrong", "skipped", "error")
# Name of the committed accuracy baseline beside the results (not a results file).
ACCURACY_FILE = "accuracy.json"
MAX_FILE_BYTES = 256 << 20


def new_results(kind: str, metadata: dict) -> dict:
    if kind not in KINDS:
        raise TilesimError(f"unknown results kind {kind!r} (choose from {', '.join(KINDS)})")
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "metadata": dict(metadata),
        "measurements": [],
    }


def save_json(obj: Any, path: str | os.PathLike) -> Path:
    """Write ``obj`` as JSON atomically (sorted keys: identical input, identical file)."""
    return save_text(json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n", path)


def save_text(text: str, path: str | os.PathLike) -> Path:
    """Write ``text`` to ``path`` through a temp file and a rename: never half a file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TilesimError(f"cannot write {str(path)!r}: {exc.strerror}") from None
    return write_atomic(path, text)


def save_results(doc: dict, path: str | os.PathLike) -> Path:
    check_results(doc, str(path))
    return save_json(doc, path)


def load_json(path: str | os.PathLike) -> Any:
    """A JSON file's document; one line naming the file if it is not UTF-8 JSON of
    finite numbers (``NaN``, ``Infinity`` and ``1e999`` are refused with their field)."""
    doc = read_json(path, str(path), MAX_FILE_BYTES)
    bad = _non_finite(doc)
    if bad is not None:
        raise TilesimError(f"{path}: {bad} is not a finite number")
    return doc


def load_results(path: str | os.PathLike) -> dict:
    """Load and check a results file; a bad one raises one line naming the file and field."""
    doc = load_json(path)
    check_results(doc, str(path))
    return doc


def load_measurement_files(paths) -> tuple[list[tuple[Path, dict]], list[str]]:
    """The validate/bench/calibrate files among ``paths``, checked, and a note for each
    other JSON file passed over (an accuracy baseline, an issue or ncu record), so a
    glob such as ``results/raw/*.json`` reads what it can."""
    docs, notes = [], []
    for path in map(Path, paths):
        doc = load_json(path)
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if isinstance(doc, dict) and kind not in KINDS and "measurements" not in doc:
            notes.append(f"{path}: skipped (kind {kind!r} holds no measurements)")
            continue
        check_results(doc, str(path))
        docs.append((path, doc))
    return docs, notes


def one_line(x: Any) -> str:
    return " ".join(str(x).split())


def _non_finite(doc: Any) -> str | None:
    """The JSON path of the first inf or NaN in ``doc`` (walked without recursion)."""
    stack = [("", doc)]
    while stack:
        where, x = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return where or "the document"
        if isinstance(x, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in x.items())
        elif isinstance(x, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(x))
    return None


# -- checking -----------------------------------------------------------------------


def check_results(doc: Any, where: str) -> None:
    if not isinstance(doc, dict):
        raise TilesimError(f"{where}: a results file must hold a JSON object")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TilesimError(
            f"{where}: schema_version is {version!r}; this tilesim reads version {SCHEMA_VERSION}"
        )
    kind = doc.get("kind")
    if kind not in KINDS:
        raise TilesimError(f"{where}: kind is {kind!r} (expected one of {', '.join(KINDS)})")
    if not isinstance(doc.get("metadata"), dict):
        raise TilesimError(f"{where}: metadata must be an object")
    _check_metadata(doc["metadata"], f"{where}: metadata")
    rows = doc.get("measurements")
    if not isinstance(rows, list):
        raise TilesimError(f"{where}: measurements must be a list")
    for i, row in enumerate(rows):
        path = f"{where}: measurements[{i}]"
        if not isinstance(row, dict):
            raise TilesimError(f"{path} must be an object")
        if kind == "calibrate":
            _check_calibration_row(row, path)
        else:
            _check_kernel_row(row, path, kind)


def _check_metadata(meta: dict, where: str) -> None:
    """The metadata fields a report reads: the GPU's name, clocks, SM count."""
    for key in ("device", "nvidia_smi_before", "nvidia_smi_after"):
        value = meta.get(key)
        if value is None or (key != "device" and isinstance(value, list)):
            continue  # nvidia-smi's raw CSV lines where its query failed
        if not isinstance(value, dict):
            raise TilesimError(f"{where}.{key} must be an object, got {_show(value)}")
        if "name" in value and not isinstance(value["name"], str):
            raise TilesimError(f"{where}.{key}.name must be a string, got {_show(value['name'])}")
        for field, number in value.items():
            if field.endswith(("_MHz", "_count", "_bytes", "_W")) and number is not None:
                _check_number(number, f"{where}.{key}.{field}", positive=False)
    named = isinstance(meta.get("device"), dict) and "name" in meta["device"]
    if not named and isinstance(meta.get("nvidia_smi_before"), list):
        raise TilesimError(f"{where}: neither device.name nor nvidia_smi_before.name names the GPU")


def _show(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_number(x: Any, where: str, positive: bool = True) -> None:
    """A finite number (> 0, or >= 0 with ``positive=False``); bools are not numbers."""
    ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    if not ok or (x <= 0 if positive else x < 0):
        sign = "positive" if positive else "non-negative"
        raise TilesimError(f"{where} must be a {sign} finite number, got {_show(x)}")


def _check_kernel_row(row: dict, path: str, kind: str) -> None:
    if kind == "bench" and not isinstance(row.get("impl"), str):
        raise TilesimError(f"{path}.impl must be a string")
    algo = row.get("algo")
    if kind == "validate" and not isinstance(algo, str):
        raise TilesimError(f"{path}.algo must be a string")
    if algo is not None and algo not in ALGOS:
        raise TilesimError(f"{path}.algo is {_show(algo)} (expected one of {', '.join(ALGOS)})")
    status = row.get("status")
    if status not in STATUSES:
        raise TilesimError(f"{path}.status is {status!r} (expected one of {', '.join(STATUSES)})")
    w = workload_from_record(row, path)
    if row.get("config") is not None:
        config_from_record(row, path)
    elif kind == "validate" and w.pass_ != "fwd_bwd":  # fwd_bwd: each pass its default
        raise TilesimError(f"{path}.config is missing")
    if status == "ok":
        t = row.get("time_s")
        if not _positive_number(t):
            raise TilesimError(f"{path}.time_s must be a positive number, got {_show(t)}")
    for key in ("time_s", "clock_sm_MHz", "clock_counter_MHz", "flops", "tflops"):
        if row.get(key) is not None:
            _check_number(row[key], f"{path}.{key}")
    if row.get("time_s") is not None:
        _check_range(row["time_s"], TIME_RANGE_S, f"{path}.time_s", "s")
    for key in ("clock_sm_MHz", "clock_counter_MHz"):
        if row.get(key) is not None:
            _check_range(row[key], CLOCK_RANGE_MHZ, f"{path}.{key}", "MHz")
    if row.get("rel_error") is not None:
        _check_number(row["rel_error"], f"{path}.rel_error", positive=False)
    for key in ("time_medians_s",):
        if row.get(key) is not None:
            if not isinstance(row[key], list):
                raise TilesimError(f"{path}.{key} must be a list")
            for i, x in enumerate(row[key]):
                _check_number(x, f"{path}.{key}[{i}]")
                _check_range(x, TIME_RANGE_S, f"{path}.{key}[{i}]", "s")
    parts = row.get("parts")
    if parts is not None:
        if not isinstance(parts, dict):
            raise TilesimError(f"{path}.parts must be an object, got {_show(parts)}")
        for name, x in parts.items():
            _check_number(x, f"{path}.parts.{name}")
            _check_range(x, TIME_RANGE_S, f"{path}.parts.{name}", "s")
    predictions = row.get("predictions")
    if predictions is not None:
        if not isinstance(predictions, dict):
            raise TilesimError(f"{path}.predictions must be an object, got {_show(predictions)}")
        for preset, pred in predictions.items():
            at = f"{path}.predictions.{preset}"
            if not isinstance(pred, dict):
                raise TilesimError(f"{at} must be an object, got {_show(pred)}")
            if "time_s" in pred:
                _check_number(pred["time_s"], f"{at}.time_s")


# What a micro-benchmark figure can be, by unit (the ranges tilesim's GPU fields allow):
# a derived preset outside them would fail anyway, after divisions that underflow to zero.
VALUE_RANGES = {
    "SMs": (1, 4096),
    "B": (1, 2**50),
    "B/s": (1e6, 1e16),
    "FLOP/s": (1e9, 1e18),
    "ops/s": (1e6, 1e18),
    "Hz": (1e6, 1e11),
    "s": (1e-12, 1e3),
    "s/step": (1e-12, 1e3),
}
# a kernel's time (s) and the SM clock it ran at (MHz)
TIME_RANGE_S = (1e-9, 1e6)
CLOCK_RANGE_MHZ = (1, 10_000)


def _check_calibration_row(row: dict, path: str) -> None:
    if not isinstance(row.get("name"), str):
        raise TilesimError(f"{path}.name must be a string")
    if not _positive_number(row.get("value")):
        raise TilesimError(f"{path}.value must be a positive number, got {_show(row.get('value'))}")
    if not isinstance(row.get("unit"), str):
        raise TilesimError(f"{path}.unit must be a string")
    if row["unit"] in VALUE_RANGES:
        _check_range(row["value"], VALUE_RANGES[row["unit"]], f"{path}.value", row["unit"])
    samples = row.get("samples")
    if samples is not None and not isinstance(samples, list | dict):
        raise TilesimError(f"{path}.samples must be a list, got {_show(samples)}")


def _check_range(x: float, bounds: tuple[float, float], where: str, unit: str) -> None:
    lo, hi = bounds
    if not lo <= x <= hi:
        raise TilesimError(f"{where} must be within [{lo:.4g}, {hi:.4g}] {unit}, got {x:.4g}")


def _positive_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x > 0 and math.isfinite(x)


def workload_from_record(row: dict, path: str = "measurement") -> Workload:
    data = row.get("workload")
    if not isinstance(data, dict):
        raise TilesimError(f"{path}.workload must be an object")
    fields = {f for f in Workload.__dataclass_fields__}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise TilesimError(f"{path}.workload has unknown field {unknown[0]!r}")
    try:
        return Workload(**data)
    except TypeError as exc:
        raise TilesimError(f"{path}.workload: {exc}") from None
    except TilesimError as exc:
        raise TilesimError(f"{path}.workload: {exc}") from None


def config_from_record(row: dict, path: str = "measurement") -> KernelConfig | None:
    """The row's KernelConfig; None for a forward + backward point, whose passes each ran
    their own default (`traces.build` picks them again)."""
    data = row.get("config")
    if data is None and (row.get("workload") or {}).get("pass_") == "fwd_bwd":
        return None
    if not isinstance(data, dict):
        raise TilesimError(f"{path}.config must be an object")
    fields = {f for f in KernelConfig.__dataclass_fields__}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise TilesimError(f"{path}.config has unknown field {unknown[0]!r}")
    try:
        return KernelConfig(**data)
    except TypeError as exc:
        raise TilesimError(f"{path}.config: {exc}") from None
    except TilesimError as exc:
        raise TilesimError(f"{path}.config: {exc}") from None


def kernel_record(
    algo: str | None,
    workload: Workload,
    config: KernelConfig | None,
    status: str,
    *,
    time_s: float | None = None,
    rel_error: float | None = None,
    note: str = "",
    **extra: Any,
) -> dict:
    """One validate/bench measurement row (FLOPs and TFLOPS filled in from the shape)."""
    if status not in STATUSES:
        raise TilesimError(f"unknown status {status!r}")
    if rel_error is not None and not math.isfinite(rel_error):
        # JSON has no NaN; a non-finite error is recorded as null plus a note
        rel_error = None
        note = note or "output is not finite (NaN/inf)"
    flops = attention_flops(workload)
    row = {
        "algo": algo,
        "workload": workload.to_dict(),
        "config": config.to_dict() if config is not None else None,
        "status": status,
        "note": note,
        "time_s": time_s,
        "rel_error": rel_error,
        "flops": flops,
        "tflops": flops / time_s / 1e12 if time_s else None,
    }
    row.update(extra)
    return row


def attention_flops(w: Workload) -> float:
    """Matmul FLOPs by the shared convention (`Workload.flops`): 4·B·H·N_q·N_kv·d
    forward, less the masked triangle when causal, times 2.5 for the backward."""
    return w.flops()


def ok_rows(doc: dict) -> list[dict]:
    return [row for row in doc["measurements"] if row.get("status") == "ok"]


# -- calibrate rows ------------------------------------------------------------------


def measurement(
    name: str, value: float, unit: str, method: str, samples: Sequence[float] = (), **extra
) -> dict:
    """One raw calibration row (the schema of a ``calibrate`` results file)."""
    row = {"name": name, "value": float(value), "unit": unit, "method": method}
    row["samples"] = [float(s) for s in samples]
    row.update(extra)
    return row


def summary_lines(rows: Sequence[dict], fmt: Callable[[dict], str] | None = None) -> list[str]:
    """One line per measurement for the console."""
    fmt = fmt or _fmt_row
    return [fmt(row) for row in rows]


def _fmt_row(row: dict) -> str:
    unit = row["unit"]
    value = row["value"]
    scaled = {
        "B/s": (1e12, "TB/s"),
        "FLOP/s": (1e12, "TFLOP/s"),
        "ops/s": (1e12, "Tops/s"),
        "s": (1e-6, "us"),
        "Hz": (1e6, "MHz"),
    }
    div, label = scaled.get(unit, (1.0, unit))
    return f"{row['name']:<34} {value / div:10.3f} {label:<8} {row.get('method', '')}"
