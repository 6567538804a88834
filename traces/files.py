"""Trace files: versioned JSON that the engine can replay without the generator.

A ``*.trace.json`` file holds one `Trace`::

    {"format": "tilesim-trace", "version": 1, "algo": "v2",
     "params": {"N_q": 4096, ...}, "workload": {...}, "config": {...},
     "tensors": [{"name": "Q", "shape": [4, 16, 4096, 128], "dtype": "fp16"}, ...],
     "launches": [{"name": "flash_v2", "grid": [["m", 32], ["bh", 64]],
                   "smem_bytes": 98304, "threads": 256, "regs_per_thread": 192,
                   "mma_path": "wgmma", "persistent_ctas": 0,
                   "program": {"roles": [{"name": "main", "warps": 8, "ops": [
                       {"op": "load", "id": "q", "tensor": "Q", "tile": ["bh", "m"],
                        "nbytes": "min(block_m, N_q - block_m*m)*d*e", "tma": false},
                       {"op": "loop", "var": "j", "trips": "T_c", "prefetch": 2,
                        "body": [...]}, ...]}]}}]}

Op kinds: load, store, mma, vector, wait, arrive, loop — their fields are those
of the `tilesim.traces.ir` dataclasses (``async`` for ``async_``); fields with
defaults may be left out. So a user can write the schedule of a new kernel by
hand. A launch may also carry ``spill_reload_covers`` (a list of cycles: the waits
on register-spill reloads per step of its innermost MMA loop, from the kernel
profile), ``issue_per_step`` and ``issue_per_cta`` (4 cycle counts each, at 1-4 warps
per scheduler: what its warps issue besides memory and MMAs per step of that loop and
once per CTA; with them its vector ops only book their pipes, `simulator/sm.py`), and
``estimated`` (why those facts are the generator's estimate, not the profile's).
`load` checks every field (unknown keys too) and every expression, and
evaluates every size for every CTA; a bad file is rejected with one line naming
the field. `save` writes atomically: a temp file renamed into place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..atomic import write_atomic
from ..errors import TilesimError
from ..inputs import read_json
from .check import MAX_LOOP_DEPTH, check_trace, validate
from .ir import (
    TRACE_FORMAT,
    TRACE_VERSION,
    Arrive,
    CtaProgram,
    Launch,
    Load,
    Loop,
    Mma,
    Op,
    Role,
    Store,
    TensorSpec,
    Trace,
    Vector,
    Wait,
)

SUFFIX = ".trace.json"
MAX_FILE_BYTES = 64 << 20  # a generated trace is a few KiB: the program is a template

# op kind -> (class, {json key: (attribute, required)})
_OPS: dict[str, tuple[type, dict[str, tuple[str, bool]]]] = {
    "load": (
        Load,
        {
            "id": ("id", True),
            "tensor": ("tensor", True),
            "tile": ("tile", True),
            "nbytes": ("nbytes", True),
            "tma": ("tma", False),
        },
    ),
    "store": (
        Store,
        {
            "tensor": ("tensor", True),
            "tile": ("tile", True),
            "nbytes": ("nbytes", True),
            "deps": ("deps", False),
        },
    ),
    "mma": (
        Mma,
        {
            "m": ("m", True),
            "n": ("n", True),
            "k": ("k", True),
            "dtype": ("dtype", True),
            "deps": ("deps", False),
            "id": ("id", False),
            "async": ("async_", False),
        },
    ),
    "vector": (
        Vector,
        {
            "exp": ("exp", False),
            "fp32": ("fp32", False),
            "smem": ("smem", False),
            "deps": ("deps", False),
            "id": ("id", False),
            "async": ("async_", False),
        },
    ),
    "wait": (Wait, {"deps": ("deps", True)}),
    "arrive": (Arrive, {"name": ("name", True)}),
    "loop": (
        Loop,
        {
            "var": ("var", True),
            "trips": ("trips", True),
            "body": ("body", True),
            "prefetch": ("prefetch", False),
        },
    ),
}
_KIND = {cls: kind for kind, (cls, _) in _OPS.items()}
_LAUNCH_KEYS = {
    "name": True,
    "grid": True,
    "program": True,
    "smem_bytes": True,
    "threads": True,
    "regs_per_thread": True,
    "mma_path": False,
    "persistent_ctas": False,
    "spill_reload_covers": False,
    "issue_per_step": False,
    "issue_per_cta": False,
    "estimated": False,
}
_TOP_KEYS = {
    "format": True,
    "version": True,
    "algo": True,
    "tensors": True,
    "launches": True,
    "params": False,
    "workload": False,
    "config": False,
}


# -- writing -----------------------------------------------------------------------


def to_dict(trace: Trace) -> dict:
    """The JSON document of ``trace`` (key order fixed: the same trace, the same bytes)."""
    return {
        "format": TRACE_FORMAT,
        "version": trace.version,
        "algo": trace.algo,
        "params": dict(trace.params),
        "workload": dict(trace.workload),
        "config": dict(trace.config),
        "tensors": [
            {"name": t.name, "shape": list(t.shape), "dtype": t.dtype} for t in trace.tensors
        ],
        "launches": [_launch_to_dict(launch) for launch in trace.launches],
    }


def _launch_to_dict(launch: Launch) -> dict:
    return {
        "name": launch.name,
        "grid": [[name, size] for name, size in launch.grid],
        "smem_bytes": launch.smem_bytes,
        "threads": launch.threads,
        "regs_per_thread": launch.regs_per_thread,
        "mma_path": launch.mma_path,
        "persistent_ctas": launch.persistent_ctas,
        **{
            name: list(value)
            for name in ("spill_reload_covers", "issue_per_step", "issue_per_cta")
            if (value := getattr(launch, name))
        },
        **({"estimated": launch.estimated} if launch.estimated else {}),
        "program": {
            "roles": [
                {"name": r.name, "warps": r.warps, "ops": [_op_to_dict(op) for op in r.ops]}
                for r in launch.program.roles
            ]
        },
    }


def _op_to_dict(op: Op) -> dict:
    kind = _KIND[type(op)]
    out: dict = {"op": kind}
    for key, (attr, _) in _OPS[kind][1].items():
        value = getattr(op, attr)
        if key == "body":
            value = [_op_to_dict(o) for o in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


def save(trace: Trace, path: str | os.PathLike) -> Path:
    """Write ``trace`` to ``path`` (``*.trace.json``) atomically; returns the path."""
    path = Path(path)
    if not path.name.endswith(SUFFIX):
        raise TilesimError(f"trace file {str(path)!r} must end in {SUFFIX}")
    check_trace(trace)
    return write_atomic(path, json.dumps(to_dict(trace), indent=1) + "\n")


# -- reading -----------------------------------------------------------------------


def load(path: str | os.PathLike) -> Trace:
    """Read and check a trace file; a bad one raises a `TilesimError` naming the field."""
    name = repr(str(path))
    doc = read_json(path, f"trace file {name}", MAX_FILE_BYTES)
    try:
        return from_dict(doc)
    except TilesimError as exc:
        raise TilesimError(f"{name}: {exc}") from None


def from_dict(doc) -> Trace:
    """Build a `Trace` from a parsed document, checking every field on the way."""
    _object(doc, "the trace file", _TOP_KEYS)
    if doc["format"] != TRACE_FORMAT:
        raise TilesimError(f"format: {doc['format']!r} is not {TRACE_FORMAT!r}")
    version = doc["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version != TRACE_VERSION:
        raise TilesimError(
            f"version: {version!r} is not supported (this tilesim reads version {TRACE_VERSION})"
        )
    tensors = tuple(
        _tensor(t, f"tensors[{i}]") for i, t in enumerate(_list(doc["tensors"], "tensors"))
    )
    launches = tuple(
        _launch(x, f"launches[{i}]") for i, x in enumerate(_list(doc["launches"], "launches"))
    )
    for key in ("params", "workload", "config"):
        if not isinstance(doc.get(key, {}), dict):
            raise TilesimError(f"{key}: must be an object")
    trace = Trace(
        algo=_str(doc["algo"], "algo"),
        tensors=tensors,
        launches=launches,
        params=dict(doc.get("params", {})),
        workload=dict(doc.get("workload", {})),
        config=dict(doc.get("config", {})),
        version=version,
    )
    check_trace(trace)
    from .counters import counters

    counters(trace)  # evaluates every size for every CTA: negative sizes, division by zero
    return trace


def _tensor(t, where: str) -> TensorSpec:
    _object(t, where, {"name": True, "shape": True, "dtype": True})
    shape = tuple(_list(t["shape"], f"{where}.shape"))
    return TensorSpec(_str(t["name"], f"{where}.name"), shape, _str(t["dtype"], f"{where}.dtype"))


def _launch(x, where: str) -> Launch:
    _object(x, where, _LAUNCH_KEYS)
    grid = []
    for k, dim in enumerate(_list(x["grid"], f"{where}.grid")):
        if not isinstance(dim, list) or len(dim) != 2:
            raise TilesimError(f"{where}.grid[{k}]: must be a [name, size] pair")
        grid.append((dim[0], dim[1]))
    program = x["program"]
    _object(program, f"{where}.program", {"roles": True})
    roles = []
    for r, role in enumerate(_list(program["roles"], f"{where}.program.roles")):
        rw = f"{where}.program.roles[{r}]"
        _object(role, rw, {"name": True, "warps": True, "ops": True})
        ops = _ops(role["ops"], f"{rw}.ops")
        roles.append(Role(_str(role["name"], f"{rw}.name"), ops, role["warps"]))
    optional = {k: x[k] for k in ("mma_path", "persistent_ctas") if k in x}
    if "estimated" in x:
        optional["estimated"] = _str(x["estimated"], f"{where}.estimated")
    for name in ("spill_reload_covers", "issue_per_step", "issue_per_cta"):
        if name in x:
            optional[name] = tuple(_list(x[name], f"{where}.{name}"))
    return Launch(
        name=_str(x["name"], f"{where}.name"),
        grid=tuple(grid),
        program=CtaProgram(tuple(roles)),
        smem_bytes=x["smem_bytes"],
        threads=x["threads"],
        regs_per_thread=x["regs_per_thread"],
        **optional,
    )


def _ops(items, where: str, depth: int = 0) -> tuple[Op, ...]:
    if depth > MAX_LOOP_DEPTH:
        raise TilesimError(f"{where}: loops nested deeper than {MAX_LOOP_DEPTH}")
    ops = []
    for i, item in enumerate(_list(items, where)):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise TilesimError(f'{at}: must be an object with an "op" kind')
        kind = item.get("op")
        if not isinstance(kind, str) or kind not in _OPS:
            raise TilesimError(f"{at}.op: unknown op kind {kind!r} (choose from {', '.join(_OPS)})")
        cls, fields = _OPS[kind]
        _object(item, at, {"op": True} | {k: req for k, (_, req) in fields.items()})
        kwargs = {}
        for key, (attr, _) in fields.items():
            if key not in item:
                continue
            value = item[key]
            if key == "body":
                value = _ops(value, f"{at}.body", depth + 1)
            elif key in ("tile", "deps"):
                value = tuple(_list(value, f"{at}.{key}"))
                if key == "deps":
                    for k, d in enumerate(value):
                        _str(d, f"{at}.deps[{k}]")
            elif key in ("id", "tensor", "dtype", "name", "var"):
                value = None if key == "id" and value is None else _str(value, f"{at}.{key}")
            kwargs[attr] = value
        ops.append(cls(**kwargs))
    return tuple(ops)


def _object(x, where: str, keys: dict[str, bool]) -> None:
    """``x`` is an object with every required key and no unknown one."""
    if not isinstance(x, dict):
        raise TilesimError(f"{where}: must be a JSON object")
    prefix = "" if where == "the trace file" else f"{where}."
    for key, required in keys.items():
        if required and key not in x:
            raise TilesimError(f"{prefix}{key}: missing")
    for key in x:
        if key not in keys:
            raise TilesimError(f"{prefix}{key}: unknown field (expected one of {', '.join(keys)})")


def _list(x, where: str) -> list:
    if not isinstance(x, list):
        raise TilesimError(f"{where}: must be a list")
    return x


def _str(x, where: str) -> str:
    if not isinstance(x, str):
        raise TilesimError(f"{where}: {x!r} must be a string")
    return x


__all__ = ["SUFFIX", "from_dict", "load", "save", "to_dict", "validate"]
