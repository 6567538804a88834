"""Analytic counters of a trace: FLOPs, exponentials, FP32 ops and HBM bytes.

They are counted by walking the IR, not by closed forms, so that the tests can
hold the generators against the closed forms (4·B·H·N²·d FLOPs, the
FlashAttention paper's IO complexities) and so that a hand-written trace gets
the same counters as a generated one.

The walk is vectorised instead of running the program once per CTA: only the
grid dimensions that a size or trip-count expression names are enumerated (the
head index ``bh`` appears only in tile coordinates, so the B·H heads of a
launch are counted once and multiplied), and each loop expands every
(CTA, iteration) pair of the enclosing level into numpy arrays, one entry per
pair. A trace of 10^5 CTAs with partial tiles and causal trip counts costs a
few array operations per op.

Two byte counts bracket what a cache can do:

* ``no_reuse``: every Load and Store goes to HBM (an L2 that never hits).
* ``compulsory``: each tensor read once — if its first access is a Load; a
  tensor first written by the trace (standard's S and P, v1's O after ``init``)
  needs no HBM read — plus each stored tensor written once. It counts whole
  tensors, whatever part of them the trace touches.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..errors import TilesimError
from . import expr as _expr
from .ir import Launch, Load, Loop, Mma, Op, Store, Trace, Vector

# (CTA, iteration) pairs expanded at once; bigger loops are walked in chunks.
MAX_PAIRS = 1 << 21
MAX_TRIPS = MAX_PAIRS  # iterations of one loop in one CTA
MAX_WALK = 1 << 28  # (CTA, iteration) pairs walked per launch: seconds, not hours
# Every value, intermediate ones included, stays below this (an interval bound over
# the expression, from each name's largest magnitude): int64 arithmetic is exact.
INT64_SAFE = 1 << 62


@dataclass(frozen=True)
class LaunchCounters:
    name: str
    ctas: int  # CTAs of the grid (work items of a persistent launch)
    smem_per_cta: int  # bytes
    threads: int
    matmul_flops: int  # 2*m*n*k per Mma
    exp_count: int
    fp32_ops: int
    read_bytes: int  # every Load
    write_bytes: int  # every Store
    loads: int  # Load ops executed
    stores: int
    mmas: int
    read_bytes_by_tensor: dict = field(default_factory=dict)  # tensor -> bytes, no reuse
    write_bytes_by_tensor: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Counters:
    matmul_flops: int
    exp_count: int
    fp32_ops: int
    compulsory_read_bytes: int
    compulsory_write_bytes: int
    no_reuse_read_bytes: int
    no_reuse_write_bytes: int
    smem_per_cta: int  # the largest of the launches
    ctas: tuple[int, ...]  # per launch
    launches: tuple[LaunchCounters, ...]
    read_bytes_by_tensor: dict = field(default_factory=dict)  # no reuse, over all launches
    write_bytes_by_tensor: dict = field(default_factory=dict)

    @property
    def compulsory_hbm_bytes(self) -> int:
        return self.compulsory_read_bytes + self.compulsory_write_bytes

    @property
    def no_reuse_hbm_bytes(self) -> int:
        return self.no_reuse_read_bytes + self.no_reuse_write_bytes

    def to_dict(self) -> dict:
        out = {
            "matmul_flops": self.matmul_flops,
            "exp_count": self.exp_count,
            "fp32_ops": self.fp32_ops,
            "compulsory_hbm_bytes": self.compulsory_hbm_bytes,
            "compulsory_read_bytes": self.compulsory_read_bytes,
            "compulsory_write_bytes": self.compulsory_write_bytes,
            "no_reuse_hbm_bytes": self.no_reuse_hbm_bytes,
            "no_reuse_read_bytes": self.no_reuse_read_bytes,
            "no_reuse_write_bytes": self.no_reuse_write_bytes,
            "smem_per_cta": self.smem_per_cta,
            "ctas": list(self.ctas),
            "read_bytes_by_tensor": dict(self.read_bytes_by_tensor),
            "write_bytes_by_tensor": dict(self.write_bytes_by_tensor),
        }
        out["launches"] = [
            {k: (dict(v) if isinstance(v, dict) else v) for k, v in vars(lc).items()}
            for lc in self.launches
        ]
        return out


def counters(trace: Trace) -> Counters:
    """Count the work and traffic of every launch of ``trace``."""
    launches = tuple(
        _count_launch(trace, launch, f"launches[{i}]") for i, launch in enumerate(trace.launches)
    )
    reads = _merge(lc.read_bytes_by_tensor for lc in launches)
    writes = _merge(lc.write_bytes_by_tensor for lc in launches)
    sizes = {t.name: t.nbytes for t in trace.tensors}
    first = _first_access(trace)
    return Counters(
        matmul_flops=sum(lc.matmul_flops for lc in launches),
        exp_count=sum(lc.exp_count for lc in launches),
        fp32_ops=sum(lc.fp32_ops for lc in launches),
        compulsory_read_bytes=sum(sizes[t] for t, kind in first.items() if kind == "load"),
        compulsory_write_bytes=sum(sizes[t] for t in writes),
        no_reuse_read_bytes=sum(reads.values()),
        no_reuse_write_bytes=sum(writes.values()),
        smem_per_cta=max((lc.smem_per_cta for lc in launches), default=0),
        ctas=tuple(lc.ctas for lc in launches),
        launches=launches,
        read_bytes_by_tensor=reads,
        write_bytes_by_tensor=writes,
    )


# -- one launch ------------------------------------------------------------------


class _Acc:
    """Running totals of one launch (Python ints: no overflow when summing)."""

    def __init__(self) -> None:
        self.flops = self.exp = self.fp32 = 0
        self.loads = self.stores = self.mmas = 0
        self.walked = 0  # (CTA, iteration) pairs expanded so far
        self.reads: dict[str, int] = {}
        self.writes: dict[str, int] = {}


def _count_launch(trace: Trace, launch: Launch, path: str) -> LaunchCounters:
    used: set[str] = set()
    for role in launch.program.roles:
        _size_names(role.ops, used)
    dims = [(name, size) for name, size in launch.grid if name in used]
    enumerated = 1
    for _, size in dims:
        enumerated *= size
    weight = launch.num_ctas // enumerated if enumerated else 0

    acc = _Acc()
    bounds = {name: abs(value) for name, value in trace.params.items()}
    bounds.update((name, size - 1) for name, size in launch.grid)
    # enumerate the named dims (first fastest) in chunks of whole CTAs
    for start in range(0, enumerated, MAX_PAIRS):
        flat = np.arange(start, min(enumerated, start + MAX_PAIRS), dtype=np.int64)
        env: dict = dict(trace.params)
        rest = flat
        for name, size in dims:
            env[name] = rest % size
            rest = rest // size
        for r, role in enumerate(launch.program.roles):
            _walk(role.ops, env, bounds, len(flat), acc, f"{path}.program.roles[{r}].ops")

    return LaunchCounters(
        name=launch.name,
        ctas=launch.num_ctas,
        smem_per_cta=launch.smem_bytes,
        threads=launch.threads,
        matmul_flops=acc.flops * weight,
        exp_count=acc.exp * weight,
        fp32_ops=acc.fp32 * weight,
        read_bytes=sum(acc.reads.values()) * weight,
        write_bytes=sum(acc.writes.values()) * weight,
        loads=acc.loads * weight,
        stores=acc.stores * weight,
        mmas=acc.mmas * weight,
        read_bytes_by_tensor={t: b * weight for t, b in acc.reads.items()},
        write_bytes_by_tensor={t: b * weight for t, b in acc.writes.items()},
    )


def _walk(ops: tuple[Op, ...], env: dict, bounds: dict, n: int, acc: _Acc, path: str) -> None:
    """Add the work of ``ops`` run once for each of the ``n`` entries of ``env``'s arrays.

    ``bounds``: each name's largest magnitude, for the int64 guard of `_values`.
    """
    for i, op in enumerate(ops):
        where = f"{path}[{i}]"
        if isinstance(op, Load | Store):
            nbytes = _total(op.nbytes, env, bounds, n, f"{where}.nbytes")
            book = acc.reads if isinstance(op, Load) else acc.writes
            book[op.tensor] = book.get(op.tensor, 0) + nbytes
            if isinstance(op, Load):
                acc.loads += n
            else:
                acc.stores += n
        elif isinstance(op, Mma):
            m = _values(op.m, env, bounds, n, f"{where}.m")
            nn = _values(op.n, env, bounds, n, f"{where}.n")
            k = _values(op.k, env, bounds, n, f"{where}.k")
            if n and int(m.max()) * int(nn.max()) * int(k.max()) >= INT64_SAFE:
                raise TilesimError(f"{where}: m*n*k is too large (at most 2^62)")
            acc.flops += 2 * _exact_sum(m * nn * k)
            acc.mmas += n
        elif isinstance(op, Vector):
            acc.exp += _total(op.exp, env, bounds, n, f"{where}.exp")
            acc.fp32 += _total(op.fp32, env, bounds, n, f"{where}.fp32")
        elif isinstance(op, Loop):
            trips = _values(op.trips, env, bounds, n, f"{where}.trips", signed=True)
            trips = np.maximum(trips, 0)
            most = int(trips.max()) if n else 0
            if most > MAX_TRIPS:
                raise TilesimError(
                    f"{where}.trips: {most} iterations in one CTA (at most {MAX_TRIPS})"
                )
            inner = {**bounds, op.var: max(most - 1, 0)}
            _walk_loop(op, trips, env, inner, n, acc, f"{where}.body")


def _walk_loop(
    op: Loop, trips: np.ndarray, env: dict, bounds: dict, n: int, acc: _Acc, path: str
) -> None:
    """Expand every (entry, iteration) pair of the loop and walk its body on them."""
    acc.walked += _exact_sum(trips)
    if acc.walked > MAX_WALK:
        raise TilesimError(
            f"{path}: more than {MAX_WALK} (CTA, iteration) pairs to count in one launch "
            "(a trace too large to simulate)"
        )
    ends = np.cumsum(trips)
    start = 0
    while start < n:
        # the largest run of entries whose pairs fit MAX_PAIRS (at least one entry)
        base = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, base + MAX_PAIRS, side="right")))
        t = trips[start:stop]
        total = int(t.sum())
        if total:
            owner = np.repeat(np.arange(start, stop), t)
            firsts = np.cumsum(t) - t
            inner = {k: (v[owner] if isinstance(v, np.ndarray) else v) for k, v in env.items()}
            inner[op.var] = np.arange(total, dtype=np.int64) - np.repeat(firsts, t)
            _walk(op.body, inner, bounds, total, acc, path)
        start = stop


def _total(e, env: dict, bounds: dict, n: int, where: str) -> int:
    return _exact_sum(_values(e, env, bounds, n, where))


def _exact_sum(values: np.ndarray) -> int:
    """The sum of int64 values below 2^62, exact (halves of 31 bits summed apart)."""
    if not len(values):
        return 0
    if int(np.abs(values).max()) * len(values) < INT64_SAFE:
        return int(values.sum())
    low = (1 << 31) - 1
    return (int((values >> 31).sum()) << 31) + int((values & low).sum())


def _values(e, env: dict, bounds: dict, n: int, where: str, signed: bool = False) -> np.ndarray:
    """Evaluate expression ``e`` for all n entries; sizes must not be negative."""
    fn, names = _compiled(e)
    missing = names - env.keys()
    if missing:
        raise TilesimError(
            f"{where}: expression {e!r} uses unknown name(s): {', '.join(sorted(missing))}"
        )
    if names and _bound(e, tuple(bounds[k] for k in sorted(names))) >= INT64_SAFE:
        raise TilesimError(f"{where}: expression {e!r} can exceed 2^62 (too large to count)")
    try:
        with np.errstate(divide="raise"):
            v = fn(env)
        values = np.broadcast_to(np.asarray(v, dtype=np.int64), (n,))
    except (ZeroDivisionError, FloatingPointError):
        raise TilesimError(f"{where}: expression {e!r} divides by zero") from None
    except OverflowError:
        raise TilesimError(f"{where}: expression {e!r} is too large") from None
    if not signed and n and values.min() < 0:
        raise TilesimError(
            f"{where}: expression {e!r} evaluates to {int(values.min())} "
            "(sizes must not be negative)"
        )
    return values


def _amin(*args):
    out = args[0]
    for a in args[1:]:
        out = np.minimum(out, a)
    return out


def _amax(*args):
    out = args[0]
    for a in args[1:]:
        out = np.maximum(out, a)
    return out


_ARRAY_FUNCS = {"min": _amin, "max": _amax, "cdiv": _expr.cdiv}


@lru_cache(maxsize=65536)
def _bound(e, magnitudes: tuple) -> int:
    """The largest magnitude any node of ``e`` can take, names at most ``magnitudes``."""
    names = dict(zip(sorted(_expr.free_names(e)), magnitudes, strict=True))
    tree = ast.parse(e.strip(), mode="eval").body
    worst = 0

    def walk(node) -> int:
        nonlocal worst
        if isinstance(node, ast.Constant):
            b = abs(node.value)
        elif isinstance(node, ast.Name):
            b = names[node.id]
        elif isinstance(node, ast.UnaryOp):
            b = walk(node.operand)
        elif isinstance(node, ast.BinOp):
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Mult):
                b = left * right
            elif isinstance(node.op, ast.Mod):
                b = right
            elif isinstance(node.op, ast.FloorDiv):
                b = left + 1
            else:
                b = left + right
        else:  # min / max / cdiv
            args = [walk(a) for a in node.args]
            b = args[0] + 1 if node.func.id == "cdiv" else max(args)
        worst = max(worst, b)
        return b

    walk(tree)
    return worst


@lru_cache(maxsize=4096)
def _compiled(e) -> tuple[Callable[[dict], object], frozenset[str]]:
    """The expression as a function of an env of numpy arrays (min/max elementwise)."""
    names = _expr.free_names(e)  # validates the syntax first
    if isinstance(e, int):
        return (lambda env, _v=e: _v), names
    code = compile(ast.parse(e.strip(), mode="eval"), "<tilesim-expr>", "eval")
    scope = {"__builtins__": {}, **_ARRAY_FUNCS}
    return (lambda env: eval(code, scope, env)), names  # noqa: S307 - validated by expr.parse


# -- helpers ---------------------------------------------------------------------


def _size_names(ops: tuple[Op, ...], out: set[str]) -> None:
    """Names used by the size and trip-count expressions (not by tile coordinates)."""
    for op in ops:
        if isinstance(op, Load | Store):
            out |= _expr.free_names(op.nbytes)
        elif isinstance(op, Mma):
            for e in (op.m, op.n, op.k):
                out |= _expr.free_names(e)
        elif isinstance(op, Vector):
            for e in (op.exp, op.fp32, op.smem):
                out |= _expr.free_names(e)
        elif isinstance(op, Loop):
            out |= _expr.free_names(op.trips)
            _size_names(op.body, out)


def _first_access(trace: Trace) -> dict[str, str]:
    """tensor -> "load" | "store": its first access in launch and program order."""
    first: dict[str, str] = {}

    def visit(ops: tuple[Op, ...]) -> None:
        for op in ops:
            if isinstance(op, Load):
                first.setdefault(op.tensor, "load")
            elif isinstance(op, Store):
                first.setdefault(op.tensor, "store")
            elif isinstance(op, Loop):
                visit(op.body)

    for launch in trace.launches:
        for role in launch.program.roles:
            visit(role.ops)
    return first


def _merge(books) -> dict[str, int]:
    out: dict[str, int] = {}
    for book in books:
        for tensor, nbytes in book.items():
            out[tensor] = out.get(tensor, 0) + nbytes
    return out
