"""A launch's CTA program compiled once, so that the event loop never parses.

The IR is a template: trip counts, tile coordinates and sizes are expressions
over the trace's params, the CTA's grid coordinates and the enclosing loop
variables. Evaluating them through ``eval`` with a dict for every op of every
iteration of every CTA would dominate the simulation, so each expression is
compiled here into a plain Python function ``f(G, L)`` of two sequences: ``G``
the grid coordinates (in grid order) and ``L`` the loop variables (by loop
depth). Params are folded in as constants; an expression that names neither a
grid coordinate nor a loop variable becomes an ``int``. The syntax was already
checked by :func:`tilesim.traces.expr.parse` (only names, integers, ``+ - * //
%``, ``min``, ``max``, ``cdiv``), so the compiled code can never do more than
integer arithmetic.

Deps are resolved here too, following the rules in ``traces/ir.py``: a name
goes to the waiting op's own role if it defines it, else to the other role that
does; the registry key of an event is ``(role, name, step indices of its
enclosing loops)``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..errors import TilesimError
from ..traces import expr as _expr
from ..traces.check import parse_dep
from ..traces.ir import Arrive, Launch, Load, Loop, Mma, Store, Vector, Wait

OP_LOAD, OP_STORE, OP_MMA, OP_VECTOR, OP_WAIT, OP_ARRIVE, OP_LOOP = range(7)


_GLOBALS = {"__builtins__": {}}  # min, max and cdiv are inlined (_Rename.visit_Call)


class _Rename(ast.NodeTransformer):
    """Names -> ``L[depth]`` / ``G[index]`` / constants; records what was used."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.depths: set[int] = set()
        self.grid: set[int] = set()
        self.temps = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        """``min`` / ``max`` / ``cdiv`` inlined as comparisons and floor divisions: the
        same integers as the builtins (the first of equal values), without a call."""
        args = [self.visit(a) for a in node.args]
        if node.func.id == "cdiv":  # -(-a // b), as traces.expr.cdiv
            a, b = args
            floor = ast.BinOp(ast.UnaryOp(ast.USub(), a), ast.FloorDiv(), b)
            return ast.UnaryOp(ast.USub(), floor)
        keep = ast.LtE() if node.func.id == "min" else ast.GtE()
        best = args[0]
        for arg in args[1:]:
            x, y = self._temp(), self._temp()
            test = ast.Compare(
                ast.NamedExpr(ast.Name(x, ast.Store()), best),
                [keep],
                [ast.NamedExpr(ast.Name(y, ast.Store()), arg)],
            )
            best = ast.IfExp(test, ast.Name(x, ast.Load()), ast.Name(y, ast.Load()))
        return best

    def _temp(self) -> str:
        self.temps += 1
        return f"_v{self.temps}"

    def visit_Name(self, node: ast.Name) -> ast.AST:
        name = node.id
        depth = self.scope.loop_depth(name)
        if depth is not None:
            self.depths.add(depth)
            return _subscript("L", depth)
        if name in self.scope.grid_index:
            index = self.scope.grid_index[name]
            self.grid.add(index)
            return _subscript("G", index)
        if name in self.scope.params:
            return ast.Constant(self.scope.params[name])
        raise TilesimError(f"{self.scope.where}: unknown name {name!r} in an expression")


def _subscript(seq: str, index: int) -> ast.AST:
    return ast.Subscript(ast.Name(seq, ast.Load()), ast.Constant(index), ast.Load())


@dataclass
class Scope:
    params: dict
    grid_index: dict  # grid dim name -> position in G
    loop_vars: list = field(default_factory=list)  # enclosing loops, outermost first
    where: str = ""

    def loop_depth(self, name: str) -> int | None:
        for depth in range(len(self.loop_vars) - 1, -1, -1):  # innermost loop wins
            if self.loop_vars[depth] == name:
                return depth
        return None


class CExpr:
    """A compiled expression: ``const`` when it names no grid dim or loop var."""

    __slots__ = ("const", "fn", "depths", "grid", "gsel", "cache")

    def __init__(self, const, fn, depths: frozenset, grid: frozenset) -> None:
        self.const = const
        self.fn = fn  # f(G, L) -> value, or None
        self.depths = depths  # loop depths it reads
        self.grid = grid  # grid positions it reads
        self.gsel = tuple(sorted(grid))
        self.cache: dict = {}  # step sums (see sm._sum); per launch

    def value(self, G, L):
        return self.const if self.fn is None else self.fn(G, L)


def compile_exprs(exprs: tuple, scope: Scope, prefix: tuple = ()) -> CExpr:
    """Compile one expression (``len(exprs) == 1``, no prefix) or a tuple of them.

    A tuple compiles into one function returning ``prefix + values`` (a tile key
    with its tensor number in front), so a key costs one call.
    """
    bodies = []
    renamer = _Rename(scope)
    for e in exprs:
        if isinstance(e, bool) or not isinstance(e, int | str):
            raise TilesimError(f"{scope.where}: expression {e!r} must be an int or a string")
        _expr.parse(e)  # validates the syntax (raises a one-line error)
        tree = ast.parse(str(e).strip(), mode="eval").body
        bodies.append(renamer.visit(tree))
    single = not prefix and len(bodies) == 1
    body = (
        bodies[0] if single else ast.Tuple([ast.Constant(p) for p in prefix] + bodies, ast.Load())
    )
    if not renamer.depths and not renamer.grid:
        code = compile(ast.fix_missing_locations(ast.Expression(body)), "<tilesim>", "eval")
        value = eval(code, dict(_GLOBALS))  # noqa: S307 - integer arithmetic only (checked)
        return CExpr(value, None, frozenset(), frozenset())
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg("G"), ast.arg("L")],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    lam = ast.Expression(ast.Lambda(args, body))
    code = compile(ast.fix_missing_locations(lam), "<tilesim>", "eval")
    fn = eval(code, dict(_GLOBALS))  # noqa: S307 - integer arithmetic only (checked)
    return CExpr(None, fn, frozenset(renamer.depths), frozenset(renamer.grid))


# -- compiled ops ---------------------------------------------------------------------


@dataclass
class Dep:
    """A resolved dep: the event ``(role, name, path)`` it waits for."""

    role: int
    name: str
    offset: int  # k of "name@-k"
    shared: int  # loop depths shared with the event's definition: min(def, waiter)
    deeper: bool  # the event is defined inside loops the waiter is not in


@dataclass
class Node:
    kind: int
    depth: int  # number of enclosing loops
    deps: tuple = ()
    id: str | None = None
    async_: bool = False
    # Load / Store
    tensor: str = ""
    key: CExpr | None = None
    nbytes: CExpr | None = None
    # Mma: FLOPs (2*m*n*k, one expression) and the pipe rate key
    flops: CExpr | None = None
    dtype: str = ""
    # Vector
    exp: CExpr | None = None
    fp32: CExpr | None = None
    smem: CExpr | None = None  # bytes through shared memory (layout conversions)
    # Loop
    trips: CExpr | None = None
    body: tuple = ()
    prefetch: int = 0
    gsel: tuple = ()  # Load/Store: grid positions its key and size read (cache key)
    cache: dict = field(default_factory=dict)  # Load: tile lists of macro-steps
    group: tuple = ()  # Load / Store: the consecutive ops issued together with it (first only)
    ahead: int = 0  # Load: iterations it is issued ahead by a gating Wait (x@-k: k)
    use: int = 0  # Load: iterations after its own that its first use comes (min dep offset)
    streaming: bool = False  # Load: each tile read once, by one CTA (see _set_streaming)
    loads: tuple = ()  # the Load nodes directly in the body (issued by the prefetcher)
    nested: bool = False  # the body holds another loop
    has_mma: bool = False  # Loop: an Mma directly in its body
    exposed: bool = False  # Loop: a load in its body is used in the iteration that issues it
    aliases: tuple = ()  # (role, name) defined inside, waited on from outside: alias at exit


@dataclass
class CompiledLaunch:
    launch: Launch
    grid_names: tuple
    grid_sizes: tuple
    roles: tuple  # tuple of (role name, tuple of Nodes)
    size_grid_dims: frozenset  # grid positions that any trip count or size reads
    load_tile_grid_dims: tuple  # per Load: grid positions its tile key reads

    def __post_init__(self) -> None:
        n = 1
        for s in self.grid_sizes:
            n *= s
        self.num_items = n

    def coords(self, item: int) -> tuple:
        out = []
        for size in self.grid_sizes:
            out.append(item % size)
            item //= size
        return tuple(out)


def _work_dims(size_exprs: list, grid_sizes: tuple) -> frozenset:
    """Grid dims along which the work of a CTA (a size or trip count) changes.

    An expression may name a dim without depending on it in practice: a
    partial-tile guard ``min(block_m, N_q - block_m*m)`` is block_m for every m
    when N_q is a multiple of block_m. Each dim is sampled at its ends and
    middle (the others at 0, loop variables at 0 and 1); a dim is a work dim if
    any value changes. Wave sampling relies on this to find the period of the
    grid (scheduler.period).
    """
    dims: set[int] = set()
    ndim = len(grid_sizes)
    for dim in range(ndim):
        size = grid_sizes[dim]
        picks = sorted({x for x in (0, 1, size // 2, size - 2, size - 1) if 0 <= x < size})
        for ce, depth in size_exprs:
            if dim not in ce.grid or dim in dims:
                continue
            for loop_value in (0, 1):
                L = [loop_value] * depth
                values = set()
                for x in picks:
                    G = [0] * ndim
                    G[dim] = x
                    values.add(ce.fn(G, L))
                if len(values) > 1:
                    dims.add(dim)
                    break
    return frozenset(dims)


def single_load_tensors(launches) -> frozenset:
    """Tensors that exactly one Load op of the whole trace reads."""
    count: dict[str, int] = {}

    def walk(ops) -> None:
        for op in ops:
            if isinstance(op, Loop):
                walk(op.body)
            elif isinstance(op, Load):
                count[op.tensor] = count.get(op.tensor, 0) + 1

    for launch in launches:
        for role in launch.program.roles:
            walk(role.ops)
    return frozenset(t for t, n in count.items() if n == 1)


def compile_launch(
    launch: Launch,
    params: dict,
    tensor_index: dict,
    where: str,
    single_load: frozenset = frozenset(),
) -> CompiledLaunch:
    grid_names = tuple(name for name, _ in launch.grid)
    grid_sizes = tuple(size for _, size in launch.grid)
    roles = launch.program.roles
    defs = [_definitions(role.ops, 0, {}) for role in roles]  # role -> {name: depth}
    size_exprs: list = []  # (CExpr, loop depth) of sizes and trip counts that read the grid
    tile_dims: list[frozenset] = []
    compiled_roles = []
    waited_outside: set[tuple[int, str]] = set()
    for r, role in enumerate(roles):
        scope = Scope(params, {n: i for i, n in enumerate(grid_names)}, [], f"{where}.{role.name}")
        ctx = _Ctx(r, defs, scope, tensor_index, size_exprs, tile_dims, waited_outside)
        compiled_roles.append((role.name, ctx.block(role.ops, 0)))
    # Loops alias the events of their last iteration for waiters outside them.
    for _, nodes in compiled_roles:
        _set_aliases(nodes, waited_outside, _role_of(compiled_roles, nodes))
    # How many iterations after its own each load is first used (latency hiding).
    uses: dict = {}
    for _, nodes in compiled_roles:
        _collect_uses(nodes, uses)
    all_dims = frozenset(range(len(grid_sizes)))
    for _, nodes in compiled_roles:
        _set_streaming(nodes, all_dims, single_load)
        _set_exposed(nodes)
    for r, (_, nodes) in enumerate(compiled_roles):
        _set_uses(nodes, r, uses)
    return CompiledLaunch(
        launch=launch,
        grid_names=grid_names,
        grid_sizes=grid_sizes,
        roles=tuple(compiled_roles),
        size_grid_dims=_work_dims(size_exprs, grid_sizes),
        load_tile_grid_dims=tuple(tile_dims),
    )


def _grouped(nodes: list) -> tuple:
    """Merge runs of consecutive Loads (and of Stores) into one node each.

    A role issues such a run at one instant, so the engine moves it as one
    transfer: its first node carries the run in ``group`` and the rest are
    dropped from the block. Deps on any load of the run wait for the whole run.

    Each load also learns how far ahead it is issued: a load after a ``Wait`` on
    ``x@-k`` (a producer refilling a k-deep ring buffer) runs k iterations
    ahead. (Loads of a loop with ``prefetch = p`` run p ahead: set at run time.)
    """
    out: list = []
    ahead = 0
    for node in nodes:
        if node.kind == OP_WAIT:
            ahead = max([0] + [dep.offset for dep in node.deps])
        prev = out[-1] if out else None
        if node.kind == OP_LOAD:
            node.ahead = ahead
        if prev is not None and node.kind in (OP_LOAD, OP_STORE) and prev.kind == node.kind:
            prev.group = prev.group + (node,)
            continue
        if node.kind in (OP_LOAD, OP_STORE):
            node.group = (node,)
        out.append(node)
    return tuple(out)


def _collect_uses(nodes, uses: dict) -> None:
    for node in nodes:
        if node.kind == OP_LOOP:
            _collect_uses(node.body, uses)
        for dep in node.deps:
            if not dep.deeper:
                key = (dep.role, dep.name)
                uses[key] = min(uses.get(key, dep.offset), dep.offset)


def _set_uses(nodes, role: int, uses: dict) -> None:
    for node in nodes:
        if node.kind == OP_LOOP:
            _set_uses(node.body, role, uses)
        elif node.kind == OP_LOAD:
            for m in node.group:
                m.use = uses.get((role, m.id), 0)


def _set_streaming(nodes, all_dims: frozenset, single_load: frozenset) -> None:
    """Mark loads whose every tile is read once by one CTA, and by nothing else.

    Such a load (standard attention's P tiles in O = P V, v1's K_j and V_j) sits
    in one loop, names every grid coordinate and the loop variable in its tile,
    and its tensor is read by no other Load of the trace. (Deeper loads are left
    alone: v1's causal Q_{i + first(j)} names both loop variables yet is read
    again for every j.) Its tiles always miss and are
    never looked up again, so a macro-step may insert them into L2 as one entry:
    adjacent in LRU order either way, one dict operation instead of c.
    """
    for node in nodes:
        if node.kind == OP_LOOP:
            _set_streaming(node.body, all_dims, single_load)
        elif node.kind == OP_LOAD:
            for m in node.group:
                m.streaming = (
                    m.tensor in single_load
                    and m.key.grid == all_dims
                    and m.depth == 1
                    and m.key.depths == frozenset((0,))
                )


def _set_exposed(nodes) -> None:
    """Mark loops that wait, every iteration, for loads issued in that iteration.

    Such a loop (v1's inner loop with one stage: load Q_i, O_i, then use them)
    exposes the full latency each iteration, and identical CTAs run it in
    lockstep: all load, then all compute. Its transfers are bursts whose
    contention a macro-step (one long transfer per CTA, drifting out of phase)
    does not reproduce, so the fast fidelity runs it exactly (steps.py).
    """
    for node in nodes:
        if node.kind != OP_LOOP:
            continue
        _set_exposed(node.body)
        if node.prefetch == 0:
            node.exposed = any(
                m.ahead + m.use < 1 for n in node.body if n.kind == OP_LOAD for m in n.group
            )


def _role_of(compiled_roles, nodes) -> int:
    for i, (_, n) in enumerate(compiled_roles):
        if n is nodes:
            return i
    raise AssertionError("unreachable")


def _definitions(ops, depth: int, out: dict) -> dict:
    for op in ops:
        if isinstance(op, Loop):
            _definitions(op.body, depth + 1, out)
            continue
        name = op.name if isinstance(op, Arrive) else getattr(op, "id", None)
        if name is not None:
            out[name] = depth
    return out


def _set_aliases(nodes, waited_outside: set, role: int) -> set:
    """Return the names defined in ``nodes`` (recursively); set each loop's aliases."""
    defined: set[str] = set()
    for node in nodes:
        if node.kind == OP_LOOP:
            inner = _set_aliases(node.body, waited_outside, role)
            node.aliases = tuple(
                sorted(n for n in inner if (role, n) in waited_outside)  # sorted: deterministic
            )
            defined |= inner
        elif node.kind == OP_LOAD:
            defined.update(m.id for m in node.group)
        elif node.id is not None:
            defined.add(node.id)
    return defined


class _Ctx:
    def __init__(self, role, defs, scope, tensor_index, size_exprs, tile_dims, waited_outside):
        self.role = role
        self.size_exprs = size_exprs
        self.defs = defs
        self.scope = scope
        self.tensor_index = tensor_index
        self.tile_dims = tile_dims
        self.waited_outside = waited_outside

    def size(self, *exprs) -> CExpr:
        c = compile_exprs(exprs, self.scope)
        if c.grid:
            self.size_exprs.append((c, len(self.scope.loop_vars)))
        return c

    def deps(self, deps: tuple, depth: int) -> tuple:
        out = []
        for text in deps:
            name, offset = parse_dep(text)
            own = self.defs[self.role]
            if name in own:
                role = self.role
            else:
                owners = [r for r, d in enumerate(self.defs) if name in d]
                if not owners:
                    raise TilesimError(f"{self.scope.where}: dep {text!r} names nothing defined")
                role = owners[0]
            def_depth = self.defs[role][name]
            shared = min(def_depth, depth)
            if def_depth > depth:
                self.waited_outside.add((role, name))
            out.append(Dep(role, name, offset if shared else 0, shared, def_depth > depth))
        return tuple(out)

    def block(self, ops, depth: int) -> tuple:
        nodes = []
        for i, op in enumerate(ops):
            where = self.scope.where
            self.scope.where = f"{where}.ops[{i}]"
            nodes.append(self.node(op, depth))
            self.scope.where = where
        return _grouped(nodes)

    def node(self, op, depth: int) -> Node:
        if isinstance(op, Load):
            key = compile_exprs(tuple(op.tile), self.scope, prefix=(self.tensor_index[op.tensor],))
            self.tile_dims.append(key.grid)
            nbytes = self.size(op.nbytes)
            return Node(
                OP_LOAD,
                depth,
                id=op.id,
                tensor=op.tensor,
                key=key,
                nbytes=nbytes,
                gsel=tuple(sorted(key.grid | nbytes.grid)),
            )
        if isinstance(op, Store):
            key = compile_exprs(tuple(op.tile), self.scope, prefix=(self.tensor_index[op.tensor],))
            return Node(
                OP_STORE,
                depth,
                deps=self.deps(op.deps, depth),
                tensor=op.tensor,
                key=key,
                nbytes=self.size(op.nbytes),
            )
        if isinstance(op, Mma):
            # negative sizes are empty work, as a loop with trips <= 0 runs nothing
            flops = self.size(f"max(0, 2*({op.m})*({op.n})*({op.k}))")
            return Node(
                OP_MMA,
                depth,
                deps=self.deps(op.deps, depth),
                id=op.id,
                async_=op.async_,
                flops=flops,
                dtype=op.dtype,
            )
        if isinstance(op, Vector):
            return Node(
                OP_VECTOR,
                depth,
                deps=self.deps(op.deps, depth),
                id=op.id,
                async_=op.async_,
                exp=self.size(op.exp),
                fp32=self.size(op.fp32),
                smem=self.size(op.smem),
            )
        if isinstance(op, Wait):
            return Node(OP_WAIT, depth, deps=self.deps(op.deps, depth))
        if isinstance(op, Arrive):
            return Node(OP_ARRIVE, depth, id=op.name)
        if isinstance(op, Loop):
            trips = self.size(op.trips)
            self.scope.loop_vars.append(op.var)
            body = self.block(op.body, depth + 1)
            self.scope.loop_vars.pop()
            loads = (
                tuple(m for n in body if n.kind == OP_LOAD for m in n.group)
                if op.prefetch > 0
                else ()
            )
            nested = any(n.kind == OP_LOOP for n in body)
            return Node(
                OP_LOOP,
                depth,
                id=op.var,
                trips=trips,
                body=body,
                prefetch=max(int(op.prefetch), 0),
                loads=loads,
                nested=nested,
                has_mma=any(n.kind == OP_MMA for n in body),
            )
        raise TilesimError(f"{self.scope.where}: unknown op {type(op).__name__}")
