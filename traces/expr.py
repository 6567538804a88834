"""Integer expressions of the trace IR, parsed once and compiled to Python code.

An expression is an int or a string over names (grid coordinates, trace params,
loop variables), integer literals, ``+ - * // %``, parentheses and the
functions ``min``, ``max`` and ``cdiv`` (ceiling division). Anything else —
attribute access, calls to other functions, floats — is rejected, so a trace
file can never run code.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from functools import lru_cache

from ..errors import TilesimError

_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_FUNCS = {"min": min, "max": max, "cdiv": lambda a, b: -(-a // b)}


def _check(node: ast.AST, text: str) -> set[str]:
    """Return the free names of a validated expression tree."""
    if isinstance(node, ast.Expression):
        return _check(node.body, text)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.BinOp) and isinstance(node.op, _BINOPS):
        return _check(node.left, text) | _check(node.right, text)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _check(node.operand, text)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and node.args
        and not node.keywords
    ):
        names: set[str] = set()
        for arg in node.args:
            names |= _check(arg, text)
        return names
    raise TilesimError(f"expression {text!r}: {ast.dump(node)[:40]}... is not allowed")


@lru_cache(maxsize=4096)
def parse(expr: int | str) -> tuple[Callable[[dict], int], frozenset[str]]:
    """Compile an expression; returns (function of an env dict, free names)."""
    if isinstance(expr, bool) or not isinstance(expr, int | str):
        raise TilesimError(f"expression {expr!r} must be an int or a string")
    if isinstance(expr, int):
        return (lambda env, _v=expr: _v), frozenset()
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise TilesimError(f"expression {expr!r} does not parse: {exc.msg}") from None
    names = frozenset(_check(tree, expr) - set(_FUNCS))
    code = compile(tree, "<tilesim-expr>", "eval")

    def fn(env: dict, _code=code) -> int:
        return eval(_code, {"__builtins__": {}, **_FUNCS}, env)  # noqa: S307 - checked above

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


def free_names(expr: int | str) -> frozenset[str]:
    return parse(expr)[1]


def check_names(expr: int | str, known: Iterable[str], where: str) -> None:
    """Raise a one-line error if ``expr`` uses a name not in ``known``."""
    unknown = free_names(expr) - set(known)
    if unknown:
        raise TilesimError(
            f"{where}: expression {expr!r} uses unknown name(s): {', '.join(sorted(unknown))}"
        )
