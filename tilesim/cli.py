"""The `tilesim` command line: one typer app assembled from tilesim.commands.*.

Each module of :mod:`tilesim.commands` owns its commands and registers them
here. `main` is the one error path: a bad argument (typer's parsing included),
a `TilesimError` or a file the system refuses is one line on stderr and exit 2;
Ctrl-C is "interrupted" and exit 130; anything else is a bug in tilesim, told in
one line and exit 70 (``TILESIM_TRACEBACK=1`` shows the traceback).
"""

from __future__ import annotations

import errno
import os
import sys

import typer
from typer import _click as click  # the click typer runs on (its own copy)

from .errors import TilesimError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BUG = 70  # EX_SOFTWARE

app = typer.Typer(
    name="tilesim",
    help="Predict, explain and validate attention-kernel performance on GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help text: "[default: 4]" is text, not Rich markup
)


def _register() -> None:
    from .commands import COMMAND_MODULES

    if app.registered_commands or app.registered_groups:
        return
    for module in COMMAND_MODULES:
        module.register(app)


MAX_MESSAGE_CHARS = 600  # a 100,000-character argument is named, not echoed whole


def one_line(text: str) -> str:
    """``text`` on one line: whitespace runs become one space, control characters escaped,
    the middle of a very long message cut."""
    text = " ".join(str(text).split())
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > MAX_MESSAGE_CHARS:
        half = MAX_MESSAGE_CHARS // 2
        text = f"{text[:half]} [... {len(text) - 2 * half} characters ...] {text[-half:]}"
    return text


def usage_message(exc: click.ClickException) -> str:
    """A click/typer parsing error as one line naming the option, without the usage box."""
    bad = click.exceptions.BadParameter
    if isinstance(exc, bad) and not isinstance(exc, click.exceptions.MissingParameter):
        hint = exc.param_hint
        if hint is None and exc.param is not None and exc.ctx is not None:
            hint = exc.param.get_error_hint()
        if isinstance(hint, list | tuple):
            hint = " / ".join(hint)
        text = f"{hint}: {exc.message}" if hint else exc.message
    else:
        text = exc.format_message()
    where = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "tilesim"
    return f"{where}: {text}"


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    print(f"error: {one_line(message)}", file=sys.stderr, flush=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script (and of ``python -m tilesim``)."""
    _register()
    for stream in (sys.stdout, sys.stderr):  # an ASCII terminal gets "\xb5s", not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    command = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        with command.make_context("tilesim", args) as ctx:
            command.invoke(ctx)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:  # `tilesim trace`: its help
        print(exc.format_message())
        sys.exit(0)
    except click.ClickException as exc:
        _fail(usage_message(exc), EXIT_USAGE)
    except typer.Abort:
        print("interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except TilesimError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except OSError as exc:
        if exc.errno == errno.EPIPE:  # `tilesim ... | head`: the reader left; so do we
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the exit-time flush
            sys.exit(0)
        where = f"{exc.filename}: " if exc.filename else ""
        _fail(f"{where}{exc.strerror or exc}", EXIT_USAGE)
    except (RecursionError, MemoryError) as exc:
        _fail(f"input too large or too deeply nested ({type(exc).__name__})", EXIT_USAGE)
    except Exception as exc:
        if os.environ.get("TILESIM_TRACEBACK"):
            raise
        _fail(
            f"internal error ({type(exc).__name__}: {exc}); this is a bug in tilesim, "
            "TILESIM_TRACEBACK=1 shows where",
            EXIT_BUG,
        )
