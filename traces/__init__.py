"""Tile schedules of the four attention algorithms, as traces the engine replays.

``build(algo, workload, gpu, config=None, profile=...) -> Trace`` picks the
generator from ``ALGORITHMS`` and gives each launch its compiled facts from the
kernel profile (``compiled.py``; the GPU architecture's by default);
``counters.counters(trace)`` counts its work; ``expand.expand`` unrolls one CTA;
``files.save`` / ``files.load`` read and write ``*.trace.json`` and
``files.validate(trace, gpu)`` checks a trace against a GPU.

``workload.pass_`` picks the pass: "fwd" the forward generators, "bwd" the
backward ones in ``BACKWARD`` (``standard_bwd``, ``flash_v1_bwd``,
``flash_v2_bwd``), "fwd_bwd" one trace of the forward's launches followed by the
backward's, tensors merged by name. Without a config each pass runs its own
default (the backward's tiles are smaller); the backward's params that differ
from the forward's (``block_m``, ``T_r``, ...) are renamed ``<name>_bwd`` in its
launches. A config given applies to both passes. (The functions
``counters`` and ``expand`` are not re-exported here: they would hide the
modules of the same name.)
"""

from __future__ import annotations

import ast
import dataclasses

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from . import (
    compiled,
    flash_v1,
    flash_v1_bwd,
    flash_v2,
    flash_v2_bwd,
    flash_v3,
    sdpa_flash,
    sdpa_math,
    standard,
    standard_bwd,
)
from .config import (
    NAMED_CONFIGS,
    check_algo,
    check_fits,
    default_config,
    describe_config,
    named_config,
)
from .expand import FlatOp
from .expr import free_names
from .files import load, save, validate
from .ir import Launch, Trace
from .tiles import kept_bytes
from .workload import KernelConfig, Workload


def __getattr__(name: str):
    """``Counters`` is imported on first use: it needs numpy, which building and
    checking a trace do not (``tilesim --help`` stays light)."""
    if name == "Counters":
        from .counters import Counters

        return Counters
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ALGORITHMS = {"standard": standard, "v1": flash_v1, "v2": flash_v2, "v3": flash_v3}
# v3's backward is not modelled yet (check_algo says so)
BACKWARD = {"standard": standard_bwd, "v1": flash_v1_bwd, "v2": flash_v2_bwd}
# Kernels others wrote, each its own schedule of the forward: PyTorch SDPA's backends
EXTERNAL = {"sdpa-flash": sdpa_flash, "sdpa-math": sdpa_math}


def build_external(name: str, workload: Workload, gpu: GPU, profile=compiled.DEFAULT) -> Trace:
    """The trace of the external kernel ``name`` (a key of ``EXTERNAL``) on ``workload``."""
    if name not in EXTERNAL:
        raise TilesimError(f"unknown external kernel {name!r} (choose from {', '.join(EXTERNAL)})")
    if workload.pass_ != "fwd" or workload.dtype not in ("fp16", "bf16"):
        raise TilesimError(f"{name}: tilesim has its forward schedule for fp16 and bf16 only")
    if workload.group > 1 or (workload.causal and workload.causal_shift):
        raise TilesimError(
            f"{name}: tilesim has its schedule of multi-head attention only (no grouped-query "
            "heads, no causal diagonal shifted by a longer KV)"
        )
    if name == "sdpa-flash":
        splits = sdpa_flash.num_splits(workload, gpu)
        if splits > 1:
            return sdpa_flash.build_split(workload, gpu, splits)
        # One split: FlashAttention-2's own kernel, tilesim's v2 schedule with its tiles.
        config = NAMED_CONFIGS["fa2"].make(workload, gpu)
        trace = build("v2", workload, gpu, config, profile=profile)
        return dataclasses.replace(trace, algo="sdpa-flash")
    return sdpa_math.build(workload, gpu)


def build(
    algo: str,
    workload: Workload,
    gpu: GPU,
    config: KernelConfig | None = None,
    profile=compiled.DEFAULT,
) -> Trace:
    """The trace of ``algo`` on ``workload`` for ``gpu`` (``config`` None: the default).

    ``profile``: the kernel profile whose compiled facts (registers, spills, issue
    cycles) the launches take; by default the GPU architecture's, None for none (every
    launch then keeps the generator's estimate, marked as such).
    """
    check_algo(algo, workload, gpu)
    facts = compiled.resolve(profile, gpu)
    if workload.pass_ == "fwd_bwd":
        fwd_w = dataclasses.replace(workload, pass_="fwd")
        bwd_w = dataclasses.replace(workload, pass_="bwd")
        fwd_c = config or default_config(algo, fwd_w, gpu)
        bwd_c = config or default_config(algo, bwd_w, gpu)
        check_fits(algo, fwd_w, fwd_c, gpu)
        check_fits(algo, bwd_w, bwd_c, gpu)
        fwd = ALGORITHMS[algo].build(fwd_w, fwd_c, gpu)
        bwd = BACKWARD[algo].build(bwd_w, bwd_c, gpu)
        fwd = compiled.apply(algo, fwd_w, fwd_c, fwd, gpu, facts)
        bwd = compiled.apply(algo, bwd_w, bwd_c, bwd, gpu, facts)
        return _concat(fwd, bwd, workload)
    if config is None:
        config = default_config(algo, workload, gpu)
    check_fits(algo, workload, config, gpu)
    generator = ALGORITHMS[algo] if workload.pass_ == "fwd" else BACKWARD[algo]
    trace = generator.build(workload, config, gpu)
    return compiled.apply(algo, workload, config, trace, gpu, facts)


def _concat(fwd: Trace, bwd: Trace, workload: Workload) -> Trace:
    """One trace running ``fwd``'s launches then ``bwd``'s; a tensor both use is one tensor.

    The backward's params that differ from the forward's (its tile sizes) are
    renamed in its launches' expressions; ``config`` keeps the forward's fields,
    plus ``bwd``: the backward's fields that differ.
    """
    tensors = {t.name: t for t in fwd.tensors}
    for t in bwd.tensors:
        if tensors.setdefault(t.name, t) != t:  # the generators name tensors consistently
            raise ValueError(f"tensor {t.name} differs between the forward and the backward")
    if set(fwd.params) != set(bwd.params):
        raise ValueError("the forward and the backward were built with different params")
    rename = {k: f"{k}_bwd" for k in fwd.params if fwd.params[k] != bwd.params[k]}
    params = dict(fwd.params)
    params.update({rename[k]: bwd.params[k] for k in rename})
    launches = tuple(_rename_launch(launch, rename) for launch in bwd.launches)
    config = dict(fwd.config)
    differ = {k: v for k, v in bwd.config.items() if fwd.config.get(k) != v}
    if differ:
        config["bwd"] = differ
    return dataclasses.replace(
        fwd,
        tensors=tuple(tensors.values()),
        launches=fwd.launches + launches,
        params=params,
        workload=workload.to_dict(),
        config=config,
    )


def _rename_expr(e, rename: dict):
    """``e`` with the names in ``rename`` replaced (ints and other names unchanged)."""
    if isinstance(e, int) or not rename or not (free_names(e) & rename.keys()):
        return e
    tree = ast.parse(e.strip(), mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in rename:
            node.id = rename[node.id]
    return ast.unparse(tree)


def _rename_ops(ops: tuple, rename: dict) -> tuple:
    out = []
    for op in ops:
        changes = {}
        for f in dataclasses.fields(op):
            value = getattr(op, f.name)
            if f.name == "body":
                changes["body"] = _rename_ops(value, rename)
            elif f.name == "tile":
                changes["tile"] = tuple(_rename_expr(x, rename) for x in value)
            elif f.name in ("nbytes", "m", "n", "k", "exp", "fp32", "smem", "trips"):
                changes[f.name] = _rename_expr(value, rename)
        out.append(dataclasses.replace(op, **changes) if changes else op)
    return tuple(out)


def _rename_launch(launch: Launch, rename: dict) -> Launch:
    if not rename:
        return launch
    roles = tuple(
        dataclasses.replace(r, ops=_rename_ops(r.ops, rename)) for r in launch.program.roles
    )
    return dataclasses.replace(launch, program=dataclasses.replace(launch.program, roles=roles))


__all__ = [
    "ALGORITHMS",
    "BACKWARD",
    "Counters",
    "FlatOp",
    "KernelConfig",
    "Trace",
    "Workload",
    "build",
    "default_config",
    "describe_config",
    "named_config",
    "NAMED_CONFIGS",
    "kept_bytes",
    "load",
    "save",
    "validate",
]
