"""Unroll one CTA of a launch into flat ops, for inspection and hand-checking.

Every expression is evaluated for the CTA's grid coordinates and loop
variables; loops disappear. Each role's ops come out in the order that role
issues them: in a loop with ``prefetch = p`` the loads of iteration j + p come
before the rest of iteration j (those of 0..p-1 before the loop), as the
engine issues them. Deps stay as written (``"v@-1"``), with the iteration each
op belongs to beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import TilesimError
from .expr import evaluate
from .ir import Arrive, Load, Loop, Mma, Op, Store, Trace, Vector, Wait

DEFAULT_MAX_OPS = 1_000_000  # an expansion larger than this is an error, not a hang


@dataclass(frozen=True)
class FlatOp:
    role: str
    iters: tuple[tuple[str, int], ...]  # (loop var, value) of the enclosing loops, outermost first
    op: Load | Store | Mma | Vector | Wait | Arrive  # with every expression evaluated to an int


def grid_coords(trace: Trace, launch_index: int, cta_index: int) -> dict[str, int]:
    """The grid coordinates of CTA (work item) ``cta_index``; the first dim varies fastest."""
    if not 0 <= launch_index < len(trace.launches):
        raise TilesimError(
            f"launch index {launch_index} out of range "
            f"(the trace has {len(trace.launches)} launches)"
        )
    launch = trace.launches[launch_index]
    if not 0 <= cta_index < launch.num_ctas:
        raise TilesimError(
            f"CTA index {cta_index} out of range "
            f"(launch {launch.name!r} has {launch.num_ctas} CTAs)"
        )
    coords, rest = {}, cta_index
    for name, size in launch.grid:
        coords[name] = rest % size
        rest //= size
    return coords


def expand(
    trace: Trace, launch_index: int, cta_index: int, max_ops: int = DEFAULT_MAX_OPS
) -> list[FlatOp]:
    """The flat op list of one CTA (work item): role after role, each in issue order."""
    env = {**trace.params, **grid_coords(trace, launch_index, cta_index)}
    out: list[FlatOp] = []
    for role in trace.launches[launch_index].program.roles:
        _unroll(role.name, role.ops, env, (), out, max_ops)
    return out


def _unroll(role: str, ops, env: dict, iters: tuple, out: list, max_ops: int) -> None:
    for op in ops:
        if isinstance(op, Loop):
            trips = max(0, evaluate(op.trips, env))
            loads = tuple(o for o in op.body if isinstance(o, Load)) if op.prefetch else ()
            rest = tuple(o for o in op.body if not isinstance(o, Load)) if op.prefetch else op.body
            for j in range(min(op.prefetch, trips)):  # the pipeline's prologue
                _unroll(role, loads, {**env, op.var: j}, (*iters, (op.var, j)), out, max_ops)
            for j in range(trips):
                ahead = j + op.prefetch
                if op.prefetch and ahead < trips:
                    _unroll(
                        role, loads, {**env, op.var: ahead}, (*iters, (op.var, ahead)), out, max_ops
                    )
                _unroll(role, rest, {**env, op.var: j}, (*iters, (op.var, j)), out, max_ops)
        else:
            if len(out) >= max_ops:
                raise TilesimError(f"expansion exceeds {max_ops} ops; pass a larger max_ops")
            out.append(FlatOp(role, iters, _evaluated(op, env)))


def _evaluated(op: Op, env: dict):
    if isinstance(op, Load | Store):
        return dataclasses.replace(
            op, tile=tuple(evaluate(t, env) for t in op.tile), nbytes=evaluate(op.nbytes, env)
        )
    if isinstance(op, Mma):
        return dataclasses.replace(
            op, m=evaluate(op.m, env), n=evaluate(op.n, env), k=evaluate(op.k, env)
        )
    if isinstance(op, Vector):
        return dataclasses.replace(
            op,
            exp=evaluate(op.exp, env),
            fp32=evaluate(op.fp32, env),
            smem=evaluate(op.smem, env),
        )
    return op
