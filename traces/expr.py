"""Integer expressions of the trace IR, parsed once and compiled to Python code.

An expression is an int or a string over names (grid coordinates, trace params,
loop variables), integer literals, ``+ - * // %``, parentheses and the
functions ``min``, ``max`` (two or more arguments) and ``cdiv`` (ceiling
division, two). Anything else — attribute access, calls to other functions,
floats — is rejected, so a trace file can never run code. An expression is at
most `MAX_LENGTH` characters, `MAX_DEPTH` levels deep and its literals at most
`MAX_LITERAL`, so parsing it cannot exhaust the stack and its value fits int64
wherever the counters' interval bound says so (traces/counters.py).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from functools import lru_cache

from ..errors import TilesimError

_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def cdiv(a, b):
    """⌈a / b⌉ of integers, or elementwise of integer arrays: the language's ``cdiv``
    (the simulator's compiled expressions inline the same -(-a // b))."""
    return -(-a // b)


FUNCTIONS = {"min": min, "max": max, "cdiv": cdiv}  # what an expression may call
_ARITY = {"min": (2, 64), "max": (2, 64), "cdiv": (2, 2)}  # (fewest, most) arguments
MAX_LENGTH = 2000  # characters
MAX_DEPTH = 32  # nested operations
MAX_LITERAL = 1 << 53  # |integer literal|, and |param| (traces/check.py)


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def _check(node: ast.AST, text: str, depth: int = 0) -> set[str]:
    """Return the free names of a validated expression tree."""
    if depth > MAX_DEPTH:
        raise TilesimError(f"expression {_short(text)} nests deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Expression):
        return _check(node.body, text, depth)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        if abs(node.value) > MAX_LITERAL:
            raise TilesimError(f"expression {_short(text)}: literal above 2^53")
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.BinOp) and isinstance(node.op, _BINOPS):
        return _check(node.left, text, depth + 1) | _check(node.right, text, depth + 1)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _check(node.operand, text, depth + 1)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        fewest, most = _ARITY[node.func.id]
        if not fewest <= len(node.args) <= most or any(
            isinstance(a, ast.Starred) for a in node.args
        ):
            wanted = f"{fewest}" if fewest == most else f"{fewest} to {most}"
            raise TilesimError(
                f"expression {_short(text)}: {node.func.id}() takes {wanted} arguments, "
                f"got {len(node.args)}"
            )
        names: set[str] = set()
        for arg in node.args:
            names |= _check(arg, text, depth + 1)
        return names
    raise TilesimError(f"expression {_short(text)}: {ast.dump(node)[:40]}... is not allowed")


@lru_cache(maxsize=4096)
def parse(expr: int | str) -> tuple[Callable[[dict], int], frozenset[str]]:
    """Compile an expression; returns (function of an env dict, free names)."""
    if isinstance(expr, bool) or not isinstance(expr, int | str):
        raise TilesimError(f"expression {expr!r} must be an int or a string")
    if isinstance(expr, int):
        if abs(expr) > MAX_LITERAL:
            raise TilesimError(f"expression {expr!r} is above 2^53")
        return (lambda env, _v=expr: _v), frozenset()
    if len(expr) > MAX_LENGTH:
        raise TilesimError(
            f"expression {_short(expr)} is {len(expr)} characters long (at most {MAX_LENGTH})"
        )
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise TilesimError(f"expression {_short(expr)} does not parse: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise TilesimError(f"expression {_short(expr)} nests too deeply") from None
    names = frozenset(_check(tree, expr) - set(FUNCTIONS))
    code = compile(tree, "<tilesim-expr>", "eval")

    def fn(env: dict, _code=code) -> int:
        return eval(_code, {"__builtins__": {}, **FUNCTIONS}, env)  # noqa: S307 - checked above

    return fn, names


def evaluate(expr: int | str, env: dict) -> int:
    """Evaluate an expression in ``env``; a missing name is a clear error."""
    fn, names = parse(expr)
    missing = names - env.keys()
    if missing:
        raise TilesimError(
            f"expression {expr!r} uses unknown name(s): {', '.join(sorted(missing))}"
        )
    return fn(env)


@lru_cache(maxsize=4096)  # the checker asks for each op's sizes, on every build
def divisors(expr: int | str) -> tuple[str, ...]:
    """The source of every divisor in ``expr``: right of ``//`` and ``%``, cdiv's second."""
    if isinstance(expr, int):
        return ()
    parse(expr)  # validated: bounded in length and depth
    out = []
    for node in ast.walk(ast.parse(expr.strip(), mode="eval")):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv | ast.Mod):
            out.append(ast.unparse(node.right))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "cdiv":
            out.append(ast.unparse(node.args[1]))
    return tuple(out)


def free_names(expr: int | str) -> frozenset[str]:
    return parse(expr)[1]


def check_names(expr: int | str, known: Iterable[str], where: str) -> None:
    """Raise a one-line error if ``expr`` uses a name not in ``known``."""
    unknown = free_names(expr) - set(known)
    if unknown:
        raise TilesimError(
            f"{where}: expression {expr!r} uses unknown name(s): {', '.join(sorted(unknown))}"
        )
