"""The one exception type a user ever sees.

Anything a user can get wrong (an unknown GPU, a tile that overflows shared
memory, a malformed trace file) raises :class:`TilesimError` with one line that
names the problem. The CLI prints that line on stderr and exits with code 2;
any other exception is a bug in tilesim.
"""


class TilesimError(Exception):
    """A bad input, explained in one line."""

    exit_code = 2
