"""Kernel profiles: the compiled facts of tilesim's kernels, one data file per target.

A trace generator knows a kernel's tiles, not what the compiler made of them. A
profile holds what it made: for every kernel variant (algorithm, pass, launch,
head dim, mask, dtype, tiles, warps, stages, MMA path, v3's schedule flags, v1's
program and, for the standard row kernels, the row plan) its registers per thread, the local
memory it spilled to, the issue-cycle cover of each wait on a spill reload in its
MMA loop, and its SASS issue cycles at 1-4 warps per scheduler (per step of the
innermost MMA loop, and once per CTA). Each file is one architecture and one
toolchain (``sm90a-triton-3.6.json``: sm_90a code from Triton 3.6), written by
``python -m tilesim.validate.profile`` compiling the kernels on the CPU, with its
provenance. Reading one needs only the standard library.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import TilesimError
from ..inputs import read_json

SCHEMA_VERSION = 1
KIND = "kernel-profile"
DIRECTORY = Path(__file__).resolve().parent
# The profile an architecture's GPUs read by default (file name without .json).
DEFAULT_PROFILES = {"hopper": "sm90a-triton-3.6"}
# The code target of each architecture (what a profile for it is compiled for).
TARGETS = {"hopper": "sm_90a", "ampere": "sm_80"}
MAX_FILE_BYTES = 64 << 20


@dataclass(frozen=True, order=True)
class Variant:
    """One compiled kernel: everything its code depends on that tilesim can select."""

    algo: str  # standard | v1 | v2 | v3
    pass_: str  # fwd | bwd
    launch: str  # the trace's launch name (qk, softmax, flash_v2, bwd_dkdv, ...)
    head_dim: int
    causal: bool
    dtype: str  # fp16 | bf16 | fp8
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    mma_path: str  # wgmma | mma_sync
    # what the code assumes of the shape: the largest of the tile (block_m for N_q,
    # block_n for N_kv), 16 and 1 that divides N (the kernels skip bounds checks on whole
    # tiles; Triton specialises integer arguments divisible by 16), and one head
    # (Triton makes an integer argument of 1 a constant)
    seqlen_q_align: int
    seqlen_kv_align: int
    single_head: bool
    warp_specialize: bool = False
    pingpong: bool = False
    persistent: bool = False
    num_splits: int = 1  # v2's decode kernel: KV splits, and heads packed per K/V head
    pack_gqa: bool = False
    # the standard row kernels' plan (traces.standard.softmax_fwd_plan / softmax_plan);
    # 0 for every other launch
    row_block: int = 0  # register block of a row (one pass) or the chunk (two passes)
    row_passes: int = 0
    row_warps: int = 0
    row_tiers: int = 0  # causal one-pass forward rows: compiled widths (the backward: 0)
    v1_kernel: str = ""  # v1's program (KernelConfig.v1_kernel); "" for the other algorithms

    def to_dict(self) -> dict:
        """Every field; the decode kernel's only when set (older files stay as they were)."""
        d = dataclasses.asdict(self)
        if d["num_splits"] == 1:
            del d["num_splits"]
        if not d["pack_gqa"]:
            del d["pack_gqa"]
        return d


@dataclass(frozen=True)
class KernelFacts:
    """What the compiler made of one variant."""

    kernel: str  # the Triton function's name
    registers_per_thread: int
    local_bytes_per_thread: int  # spilled registers (Triton's n_spills)
    # per step of the innermost MMA loop: for each wait on spill reloads, the cycles the
    # warp issued since they went out (validate/sass.py)
    spill_reload_covers: tuple[int, ...] = ()
    # SASS replayed on one warp scheduler with 1..4 warps (validate/issue.py): per step
    # of the innermost MMA loop, and once per CTA (the whole kernel where it has no
    # such loop); both empty for a kernel without MMAs
    issue_per_step_cycles: tuple[float, ...] = ()
    issue_per_cta_cycles: tuple[float, ...] = ()
    sass_loop_instructions: tuple[int, ...] = ()  # per loop body, in SASS order


@dataclass(frozen=True)
class Provenance:
    """Where a profile's numbers come from."""

    target: str  # e.g. sm_90a
    toolchain: str  # e.g. triton 3.6.0
    date: str
    command: str
    git_commit: str = ""
    notes: tuple[str, ...] = ()  # what the numbers assume (the issue model's latencies, ...)


@dataclass(frozen=True)
class Profile:
    name: str
    arch: str  # the hwmodels architecture it serves: hopper | ampere
    provenance: Provenance
    entries: dict  # Variant -> KernelFacts
    failures: dict = dataclasses.field(default_factory=dict)  # Variant -> why it did not compile

    def get(self, variant: Variant) -> KernelFacts | None:
        return self.entries.get(variant)

    def failure(self, variant: Variant) -> str | None:
        """Why ``variant``'s kernel did not compile, or None."""
        return self.failures.get(variant)

    def to_dict(self) -> dict:
        return {
            "kind": KIND,
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "arch": self.arch,
            "provenance": dataclasses.asdict(self.provenance),
            "entries": [
                {"variant": v.to_dict(), **dataclasses.asdict(self.entries[v])}
                for v in sorted(self.entries)
            ],
            "failures": [
                {"variant": v.to_dict(), "error": self.failures[v]} for v in sorted(self.failures)
            ],
        }


# the most a compiled fact may be: 255 registers per thread (the ISA's), 16 MiB of local
# memory per thread, 1e9 issue cycles (the trace loader's bound)
MAX_REGISTERS = 255
MAX_LOCAL_BYTES = 1 << 24
MAX_CYCLES = 1e9
_SCALARS = {"str": str, "int": int, "bool": bool}
_ITEMS = {"tuple[int, ...]": int, "tuple[float, ...]": (int, float), "tuple[str, ...]": str}


def _typed(cls, d, where: str):
    """``cls(**d)`` with every field of the type its annotation names (JSON lists become
    tuples); one line naming the field otherwise."""
    if not isinstance(d, dict):
        raise TilesimError(f"{where} must be an object, got {type(d).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(d) - set(fields)
    if unknown:
        raise TilesimError(f"{where}: unknown fields {', '.join(sorted(unknown))}")
    values = {}
    for name, f in fields.items():
        if name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise TilesimError(f"{where}: missing field {name!r}")
            continue
        value, kind = d[name], f.type
        if kind in _ITEMS:
            ok = isinstance(value, list | tuple) and all(
                isinstance(x, _ITEMS[kind]) and not isinstance(x, bool) for x in value
            )
            value = tuple(value) if ok else value
        else:
            want = _SCALARS[kind]
            ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
        if not ok:
            raise TilesimError(f"{where}.{name} must be {kind}, got {value!r:.40}")
        values[name] = value
    return cls(**values)


def _facts(d: dict, where: str) -> KernelFacts:
    facts = _typed(KernelFacts, d, where)
    if not 0 < facts.registers_per_thread <= MAX_REGISTERS:
        raise TilesimError(f"{where}.registers_per_thread must be in [1, {MAX_REGISTERS}]")
    if not 0 <= facts.local_bytes_per_thread <= MAX_LOCAL_BYTES:
        raise TilesimError(f"{where}.local_bytes_per_thread must be in [0, {MAX_LOCAL_BYTES}]")
    for name in ("spill_reload_covers", "issue_per_step_cycles", "issue_per_cta_cycles"):
        if not all(0 <= x <= MAX_CYCLES for x in getattr(facts, name)):  # NaN fails too
            raise TilesimError(f"{where}.{name} must hold cycles in [0, {MAX_CYCLES:.0e}]")
    return facts


def from_dict(doc: dict, where: str = "profile") -> Profile:
    """A `Profile` from its JSON document; errors name the bad field."""
    if not isinstance(doc, dict):
        raise TilesimError(f"{where}: a profile is a JSON object, got {type(doc).__name__}")
    if doc.get("kind") != KIND:
        raise TilesimError(f"{where}: kind must be {KIND!r}, got {doc.get('kind')!r}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise TilesimError(
            f"{where}: schema_version {doc.get('schema_version')!r} is not {SCHEMA_VERSION}"
        )
    for key in ("name", "arch"):
        if not isinstance(doc.get(key), str):
            raise TilesimError(f"{where}: {key} must be a string, got {doc.get(key)!r:.40}")
    if not isinstance(doc.get("entries"), list) or not isinstance(doc.get("failures", []), list):
        raise TilesimError(f"{where}: entries and failures must be lists")
    provenance = _typed(Provenance, doc.get("provenance"), f"{where}: provenance")
    entries = {}
    for i, e in enumerate(doc["entries"]):
        at = f"{where}: entries[{i}]"
        if not isinstance(e, dict):
            raise TilesimError(f"{at} must be an object")
        e = dict(e)
        variant = _typed(Variant, e.pop("variant", None), f"{at}.variant")
        if variant in entries:
            raise TilesimError(f"{at}: variant listed twice")
        entries[variant] = _facts(e, at)
    failures = {}
    for i, f in enumerate(doc.get("failures", ())):
        at = f"{where}: failures[{i}]"
        if not isinstance(f, dict) or not isinstance(f.get("error"), str):
            raise TilesimError(f"{at} must be an object with an error string")
        failures[_typed(Variant, f.get("variant"), f"{at}.variant")] = f["error"]
    return Profile(
        name=doc["name"],
        arch=doc["arch"],
        provenance=provenance,
        entries=entries,
        failures=failures,
    )


def load(path: str | Path) -> Profile:
    """Read a profile file (a path, or the name of one in this package)."""
    p = Path(path)
    if p.suffix != ".json":  # a packaged profile's name
        p = DIRECTORY / f"{p.name}.json"
        if not p.is_file():
            known = ", ".join(sorted(x.stem for x in DIRECTORY.glob("*.json"))) or "none"
            raise TilesimError(f"no kernel profile {str(path)!r} (packaged: {known})")
    doc = read_json(p, f"kernel profile {str(path)!r}", MAX_FILE_BYTES)
    return from_dict(doc, p.name)


@functools.cache
def _packaged(name: str) -> Profile:
    return load(name)


def for_arch(arch: str) -> Profile | None:
    """The default profile of a GPU architecture, or None where there is none."""
    name = DEFAULT_PROFILES.get(arch)
    return _packaged(name) if name else None


def write(profile: Profile, path: str | Path) -> None:
    """Write ``profile`` as JSON, one variant per line, sorted: a new build's diff shows
    the variants that changed."""
    doc = profile.to_dict()
    head = json.dumps({k: v for k, v in doc.items() if k not in ("entries", "failures")}, indent=1)
    lists = [
        f' "{name}": [\n' + ",\n".join("  " + json.dumps(x) for x in doc[name]) + "\n ]"
        for name in ("entries", "failures")
    ]
    Path(path).write_text(head[: -len("\n}")] + ",\n" + ",\n".join(lists) + "\n}\n")
