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

SCHEMA_VERSION = 1
KIND = "kernel-profile"
DIRECTORY = Path(__file__).resolve().parent
# The profile an architecture's GPUs read by default (file name without .json).
DEFAULT_PROFILES = {"hopper": "sm90a-triton-3.6"}
# The code target of each architecture (what a profile for it is compiled for).
TARGETS = {"hopper": "sm_90a", "ampere": "sm_80"}


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


def _facts(d: dict, where: str) -> KernelFacts:
    names = {f.name for f in dataclasses.fields(KernelFacts)}
    unknown = set(d) - names
    if unknown:
        raise TilesimError(f"{where}: unknown fields {', '.join(sorted(unknown))}")
    tuples = {k: tuple(v) for k, v in d.items() if isinstance(v, list)}
    return KernelFacts(**{**d, **tuples})


def from_dict(doc: dict, where: str = "profile") -> Profile:
    """A `Profile` from its JSON document; errors name the bad field."""
    if doc.get("kind") != KIND:
        raise TilesimError(f"{where}: kind must be {KIND!r}, got {doc.get('kind')!r}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise TilesimError(
            f"{where}: schema_version {doc.get('schema_version')!r} is not {SCHEMA_VERSION}"
        )
    prov = dict(doc["provenance"])
    prov["notes"] = tuple(prov.get("notes", ()))
    entries = {}
    for i, e in enumerate(doc["entries"]):
        at = f"{where}: entries[{i}]"
        e = dict(e)
        try:
            variant = Variant(**e.pop("variant"))
        except TypeError as exc:
            raise TilesimError(f"{at}.variant: {exc}") from None
        if variant in entries:
            raise TilesimError(f"{at}: variant listed twice")
        entries[variant] = _facts(e, at)
    return Profile(
        name=doc["name"],
        arch=doc["arch"],
        provenance=Provenance(**prov),
        entries=entries,
        failures={Variant(**f["variant"]): f["error"] for f in doc.get("failures", ())},
    )


def load(path: str | Path) -> Profile:
    """Read a profile file (a path, or the name of one in this package)."""
    p = Path(path)
    if p.suffix != ".json":  # a packaged profile's name
        p = DIRECTORY / f"{p.name}.json"
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        known = ", ".join(sorted(x.stem for x in DIRECTORY.glob("*.json"))) or "none"
        raise TilesimError(f"no kernel profile {str(path)!r} (packaged: {known})") from None
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
