"""The one exception type a user ever sees.

Anything a user can get wrong (an unknown GPU, a tile that overflows shared
memory, a malformed trace file) raises :class:`TilesimError` with one line that
names the problem. The CLI prints that line on stderr and exits with code 2;
any other exception is a bug in tilesim.
"""


class TilesimError(Exception):
    """A bad input, explained in one line."""

    exit_code = 2


def shown(value) -> str:
    """A number a user gave, as a message shows it: a 400-digit integer by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"a {len(str(abs(value)))}-digit number"
    return repr(value)
