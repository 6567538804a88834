"""The `tilesim` command line: one typer app assembled from tilesim.commands.*.

Each module of :mod:`tilesim.commands` owns its commands and registers them
here. Errors a user can cause are `TilesimError`s: one line on stderr, exit 2.
"""

from __future__ import annotations

import sys

import typer

from .errors import TilesimError

app = typer.Typer(
    name="tilesim",
    help="Predict, explain and validate attention-kernel performance on GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from .commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        module.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script (and of ``python -m tilesim``)."""
    _register()
    try:
        app(args=argv, prog_name="tilesim")
    except TilesimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
