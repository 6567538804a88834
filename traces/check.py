"""Is a trace well formed, and can this GPU run it? One clear line if not.

`check_trace` checks what holds for any GPU: names, sizes, expressions, deps.
`validate` adds the GPU's limits and features and evaluates every size for
every CTA (through the counters), so the engine never meets a negative byte
count or a division by zero. Errors name the field as a JSON path,
``launches[1].program.roles[0].ops[3].nbytes``, the same in memory and in a
trace file.
"""

from __future__ import annotations

import re

from ..errors import TilesimError
from ..hwmodels.gpu import DTYPE_BYTES, GPU, MMA_PATHS
from . import expr as _expr
from .ir import (
    TRACE_VERSION,
    Arrive,
    CtaProgram,
    Launch,
    Load,
    Loop,
    Mma,
    Op,
    Store,
    Trace,
    Vector,
    Wait,
)

MMA_DTYPES = ("fp16", "bf16", "fp8")
MAX_THREADS_PER_CTA = 1024  # CUDA's limit on every GPU tilesim models
MAX_REGS_PER_THREAD = 255
# Sizes the engine can hold: beyond them a file exhausts memory or time, not the GPU.
MAX_CTAS = (1 << 31) - 1  # CTAs per launch (CUDA's grid limit)
MAX_PARAM = _expr.MAX_LITERAL  # |param|: exact in a float and far from int64's end
MAX_TENSOR_DIM = (1 << 31) - 1
MAX_CYCLES_FIGURE = 1e9  # issue_per_step / issue_per_cta / spill covers, SM cycles
MAX_LOOP_DEPTH = 8  # loops nested in loops
MAX_OPS = 10_000  # ops of one CTA program, loops' bodies included
MAX_LAUNCHES = 64
_DEP = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:@-([1-9][0-9]*))?$")


def parse_dep(dep: str) -> tuple[str, int]:
    """``"v@-1"`` -> ``("v", 1)``; ``"k"`` -> ``("k", 0)``."""
    match = _DEP.match(dep) if isinstance(dep, str) else None
    if not match:
        raise TilesimError(f"dep {dep!r} is not a name or name@-k (k >= 1)")
    return match.group(1), int(match.group(2) or 0)


def check_trace(trace: Trace) -> None:
    """Raise a one-line `TilesimError` naming the first malformed field of ``trace``."""
    if trace.version != TRACE_VERSION:
        raise TilesimError(
            f"version: {trace.version!r} is not supported (this tilesim reads "
            f"version {TRACE_VERSION})"
        )
    if not isinstance(trace.algo, str) or not trace.algo:
        raise TilesimError(f"algo: {trace.algo!r} must be a non-empty string")
    for name, value in trace.params.items():
        _identifier(name, f"params.{name}")
        _int(value, f"params.{name}", minimum=-MAX_PARAM, maximum=MAX_PARAM)
    tensors: dict[str, int] = {}
    for i, t in enumerate(trace.tensors):
        _identifier(t.name, f"tensors[{i}].name")
        if t.name in tensors:
            raise TilesimError(f"tensors[{i}].name: tensor {t.name!r} is defined twice")
        tensors[t.name] = i
        if not t.shape:
            raise TilesimError(f"tensors[{i}].shape: must have at least one dimension")
        for k, s in enumerate(t.shape):
            _int(s, f"tensors[{i}].shape[{k}]", minimum=1, maximum=MAX_TENSOR_DIM)
        if t.dtype not in DTYPE_BYTES:
            raise TilesimError(
                f"tensors[{i}].dtype: unknown dtype {t.dtype!r} "
                f"(choose from {', '.join(DTYPE_BYTES)})"
            )
    if not trace.launches:
        raise TilesimError("launches: a trace needs at least one launch")
    if len(trace.launches) > MAX_LAUNCHES:
        raise TilesimError(f"launches: {len(trace.launches)} launches (at most {MAX_LAUNCHES})")
    for i, launch in enumerate(trace.launches):
        _check_launch(launch, f"launches[{i}]", trace.params, tensors)


def validate(trace: Trace, gpu: GPU):
    """Check ``trace`` and that ``gpu`` can run it; returns its `Counters`.

    The engine calls this before simulating. Beyond `check_trace`: each CTA's
    shared memory within the GPU's per-CTA maximum, registers and warps that let
    at least one CTA reside on an SM, and no fp8 Mma, TMA load or wgmma path on
    a GPU without them.
    """
    from .counters import counters
    from .occupancy import occupancy

    check_trace(trace)
    for i, launch in enumerate(trace.launches):
        where = f"launches[{i}] ({launch.name})"
        if launch.smem_bytes > gpu.smem_bytes_per_cta_max:
            raise TilesimError(
                f"{where} needs {launch.smem_bytes} bytes ({launch.smem_bytes / 1024:.0f} KiB) "
                f"of shared memory per CTA; {gpu.name} allows {gpu.smem_bytes_per_cta_max} bytes "
                f"({gpu.smem_bytes_per_cta_max / 1024:.0f} KiB)"
            )
        if launch.mma_path == "wgmma" and not gpu.has_wgmma:
            raise TilesimError(f"{where}.mma_path: wgmma needs Hopper; {gpu.name} has no wgmma")
        occ = occupancy(launch, gpu)
        if occ.ctas_per_sm < 1:
            raise TilesimError(
                f"{where}: one CTA of {launch.threads} threads x {launch.regs_per_thread} "
                f"registers does not fit an SM of {gpu.name} ({occ.limiter} limit)"
            )
        for path, op in _ops(launch.program, f"launches[{i}].program"):
            if isinstance(op, Load) and op.tma and not gpu.has_tma:
                raise TilesimError(f"{path}.tma: TMA loads need Hopper; {gpu.name} has no TMA")
            if isinstance(op, Mma) and op.dtype == "fp8" and not gpu.has_fp8:
                raise TilesimError(
                    f"{path}.dtype: fp8 needs fp8 tensor cores, which {gpu.name} does not have"
                )
    return counters(trace)


# -- launches and programs ------------------------------------------------------------


def _check_launch(launch: Launch, where: str, params: dict, tensors: dict) -> None:
    if not isinstance(launch.name, str) or not launch.name:
        raise TilesimError(f"{where}.name: {launch.name!r} must be a non-empty string")
    if not launch.grid:
        raise TilesimError(f"{where}.grid: needs at least one dimension")
    grid_names: list[str] = []
    for k, (name, size) in enumerate(launch.grid):
        _identifier(name, f"{where}.grid[{k}][0]")
        if name in grid_names or name in params:
            raise TilesimError(f"{where}.grid[{k}][0]: name {name!r} is already in use")
        grid_names.append(name)
        _int(size, f"{where}.grid[{k}][1]", minimum=1, maximum=MAX_CTAS)
    if launch.num_ctas > MAX_CTAS:
        raise TilesimError(
            f"{where}.grid: {launch.num_ctas} CTAs (at most {MAX_CTAS}, CUDA's grid limit)"
        )
    _int(launch.smem_bytes, f"{where}.smem_bytes", minimum=0)
    _int(launch.threads, f"{where}.threads", minimum=1, maximum=MAX_THREADS_PER_CTA)
    _int(launch.regs_per_thread, f"{where}.regs_per_thread", minimum=1, maximum=MAX_REGS_PER_THREAD)
    _int(launch.persistent_ctas, f"{where}.persistent_ctas", minimum=0, maximum=MAX_CTAS)
    for k, cover in enumerate(launch.spill_reload_covers):
        _int(cover, f"{where}.spill_reload_covers[{k}]", minimum=0, maximum=int(MAX_CYCLES_FIGURE))
    for name in ("issue_per_step", "issue_per_cta"):
        cycles = getattr(launch, name)
        if cycles and len(cycles) != 4:
            raise TilesimError(f"{where}.{name}: needs 4 figures (1-4 warps per scheduler)")
        for k, value in enumerate(cycles):
            _number(value, f"{where}.{name}[{k}]")
    if launch.mma_path not in MMA_PATHS:
        raise TilesimError(
            f"{where}.mma_path: unknown path {launch.mma_path!r} "
            f"(choose from {', '.join(MMA_PATHS)})"
        )
    roles = launch.program.roles
    if not roles:
        raise TilesimError(f"{where}.program.roles: a CTA program needs at least one role")
    defined: list[set[str]] = []
    for r, role in enumerate(roles):
        rw = f"{where}.program.roles[{r}]"
        if not isinstance(role.name, str) or not role.name:
            raise TilesimError(f"{rw}.name: {role.name!r} must be a non-empty string")
        if any(other.name == role.name for other in roles[:r]):
            raise TilesimError(f"{rw}.name: role {role.name!r} is defined twice")
        _int(role.warps, f"{rw}.warps", minimum=1, maximum=MAX_THREADS_PER_CTA // 32)
        _check_size(role.ops, f"{rw}.ops")
        names: set[str] = set()
        _collect_ids(role.ops, names, f"{rw}.ops")
        defined.append(names)
    warps = sum(role.warps for role in roles)
    if warps * 32 != launch.threads:
        raise TilesimError(
            f"{where}.threads: {launch.threads} threads but its roles have "
            f"{warps} warps ({warps * 32} threads)"
        )
    known = frozenset(params) | frozenset(grid_names)
    for r, role in enumerate(roles):
        others = [defined[o] for o in range(len(roles)) if o != r]
        at = f"{where}.program.roles[{r}].ops"
        _check_ops(role.ops, at, known, tensors, defined[r], others, params)


def _check_size(ops, where: str) -> None:
    """At most MAX_OPS ops and MAX_LOOP_DEPTH nested loops (walked without recursion)."""
    count, stack = 0, [(ops, 0)]
    while stack:
        body, depth = stack.pop()
        if not isinstance(body, tuple | list):
            raise TilesimError(f"{where}: must be a list of ops")
        count += len(body)
        if count > MAX_OPS:
            raise TilesimError(f"{where}: more than {MAX_OPS} ops in one CTA program")
        for op in body:
            if isinstance(op, Loop):
                if depth + 1 > MAX_LOOP_DEPTH:
                    raise TilesimError(f"{where}: loops nested deeper than {MAX_LOOP_DEPTH}")
                stack.append((op.body, depth + 1))


def _collect_ids(ops: tuple[Op, ...], names: set[str], where: str) -> None:
    for i, op in enumerate(ops):
        name, field = None, "id"
        if isinstance(op, Load | Mma | Vector):
            name = op.id
        elif isinstance(op, Arrive):
            name, field = op.name, "name"
        elif isinstance(op, Loop):
            _collect_ids(op.body, names, f"{where}[{i}].body")
        if name is None:
            continue
        _identifier(name, f"{where}[{i}].{field}")
        if name in names:
            raise TilesimError(f"{where}[{i}].{field}: {name!r} is defined twice in this role")
        names.add(name)


def _check_ops(
    ops, where: str, known: frozenset, tensors: dict, own: set, others: list, params: dict
) -> None:
    if not isinstance(ops, tuple | list):
        raise TilesimError(f"{where}: must be a list of ops")
    for i, op in enumerate(ops):
        at = f"{where}[{i}]"
        if isinstance(op, Load | Store):
            if op.tensor not in tensors:
                raise TilesimError(
                    f"{at}.tensor: unknown tensor {op.tensor!r} (the trace "
                    f"defines {', '.join(tensors) or 'none'})"
                )
            for k, t in enumerate(op.tile):
                _expression(t, f"{at}.tile[{k}]", known, params)
                _divisors(t, f"{at}.tile[{k}]", params, tile=True)
            _expression(op.nbytes, f"{at}.nbytes", known, params)
            if isinstance(op, Load):
                _bool(op.tma, f"{at}.tma")
        elif isinstance(op, Mma):
            for f in ("m", "n", "k"):
                _expression(getattr(op, f), f"{at}.{f}", known, params)
            if op.dtype not in MMA_DTYPES:
                raise TilesimError(
                    f"{at}.dtype: unknown Mma dtype {op.dtype!r} "
                    f"(choose from {', '.join(MMA_DTYPES)})"
                )
            _bool(op.async_, f"{at}.async")
        elif isinstance(op, Vector):
            _expression(op.exp, f"{at}.exp", known, params)
            _expression(op.fp32, f"{at}.fp32", known, params)
            _expression(op.smem, f"{at}.smem", known, params)
            _bool(op.async_, f"{at}.async")
        elif isinstance(op, Loop):
            _identifier(op.var, f"{at}.var")
            if op.var in known:
                raise TilesimError(f"{at}.var: loop variable {op.var!r} is already in use")
            _expression(op.trips, f"{at}.trips", known, params)
            _int(op.prefetch, f"{at}.prefetch", minimum=0, maximum=1024)
            if op.prefetch and not any(isinstance(b, Load) for b in op.body):
                raise TilesimError(f"{at}.prefetch: {op.prefetch} but the loop body has no load")
            _check_ops(op.body, f"{at}.body", known | {op.var}, tensors, own, others, params)
            continue
        elif not isinstance(op, Wait | Arrive):
            raise TilesimError(f"{at}: {type(op).__name__} is not an op")
        deps = getattr(op, "deps", ())
        for k, dep in enumerate(deps):
            try:
                name, _ = parse_dep(dep)
            except TilesimError as exc:
                raise TilesimError(f"{at}.deps[{k}]: {exc}") from None
            if name in own:
                continue
            owners = sum(name in o for o in others)
            if owners == 0:
                raise TilesimError(
                    f"{at}.deps[{k}]: {dep!r} names nothing the CTA program "
                    "defines (a Load id, an Mma/Vector id or an Arrive name)"
                )
            if owners > 1:
                raise TilesimError(f"{at}.deps[{k}]: {dep!r} is defined by several other roles")


def _ops(program: CtaProgram, where: str):
    """(path, op) for every op of a program, loops included."""

    def walk(ops, at):
        for i, op in enumerate(ops):
            yield f"{at}[{i}]", op
            if isinstance(op, Loop):
                yield from walk(op.body, f"{at}[{i}].body")

    for r, role in enumerate(program.roles):
        yield from walk(role.ops, f"{where}.roles[{r}].ops")


# -- fields ----------------------------------------------------------------------------


def _expression(e, where: str, known: frozenset, params: dict) -> None:
    """A size, trip count or tile coordinate: an int >= 0 or a valid expression, none of
    whose divisors of params and literals is zero (code that no CTA runs is not counted,
    so the counters' evaluation would not see it)."""
    if isinstance(e, bool) or not isinstance(e, int | str):
        raise TilesimError(f"{where}: {e!r} must be an integer or an expression string")
    if isinstance(e, int):
        if e < 0:
            raise TilesimError(f"{where}: {e} must not be negative")
        if e > _expr.MAX_LITERAL:
            raise TilesimError(f"{where}: ~1e+{int(e.bit_length() * 0.30103)} is above 2^53")
        return
    try:
        names = _expr.free_names(e)
    except TilesimError as exc:
        raise TilesimError(f"{where}: {exc}") from None
    unknown = names - known
    if unknown:
        raise TilesimError(
            f"{where}: expression {e!r} uses unknown name(s): {', '.join(sorted(unknown))}"
        )
    _divisors(e, where, params, tile=False)


def _divisors(e, where: str, params: dict, tile: bool) -> None:
    """No divisor of params and literals is zero; a tile coordinate (``tile``) divides
    only by those: the counters evaluate sizes for every CTA, but not coordinates (they
    enumerate no head index)."""
    for d in _expr.divisors(e):
        if not _expr.free_names(d) <= params.keys():
            if not tile:
                continue
            raise TilesimError(
                f"{where}: expression {e!r} divides by {d!r}; a tile coordinate may divide "
                "by params and literals only"
            )
        if _expr.evaluate(d, params) == 0:
            value = "" if d.lstrip("-").isdigit() else f" ({d} = 0)"
            raise TilesimError(f"{where}: expression {e!r} divides by zero{value}")


def _int(value, where: str, minimum: int | None = 0, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        shown = repr(value) if not isinstance(value, str) or len(value) < 60 else "a long string"
        raise TilesimError(f"{where}: {shown} must be an integer")
    shown = value if abs(value) < 10**15 else f"~1e+{int(value.bit_length() * 0.30103)}"
    if minimum is not None and value < minimum:
        raise TilesimError(f"{where}: {shown} must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise TilesimError(f"{where}: {shown} must be <= {maximum}")


def _number(value, where: str) -> None:
    """A finite, non-negative number of cycles, at most MAX_CYCLES_FIGURE."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TilesimError(f"{where}: {value!r} must be a number")
    if not 0 <= value <= MAX_CYCLES_FIGURE:
        shown = f"{value:.3g}" if isinstance(value, float) or abs(value) > 1e15 else value
        raise TilesimError(f"{where}: {shown} must be a number of cycles in [0, 1e9]")


def _bool(value, where: str) -> None:
    if not isinstance(value, bool):
        raise TilesimError(f"{where}: {value!r} must be true or false")


def _identifier(name, where: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or name in _expr.FUNCTIONS:
        raise TilesimError(f"{where}: {name!r} is not a valid name")
