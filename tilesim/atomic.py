"""Every file tilesim writes goes through here: checked first, written whole or not at all.

`check_writable` is called before long work (a sweep, a simulation) so that a
bad output path fails in a second, not after the run. `write_atomic` writes a
temp file in the target's directory and renames it into place; on any failure
(an OSError, Ctrl-C, a bug in the code producing the bytes) the temp file is
removed and the target is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from .errors import TilesimError


def _prefix(option: str | None) -> str:
    return f"{option}: " if option else ""


def check_writable(
    path: str | os.PathLike, option: str | None = None, suffixes: Iterable[str] | None = None
) -> Path:
    """Raise one line unless ``path`` can be written (suffix, folder, permissions)."""
    path = Path(path)
    at, name = _prefix(option), repr(str(path))
    if suffixes is not None:
        suffixes = tuple(suffixes)
        if not any(path.name.lower().endswith(s) for s in suffixes):
            raise TilesimError(f"{at}{name} must end in {' or '.join(suffixes)}")
    directory = path.parent if str(path.parent) else Path(".")
    try:
        if path.is_dir():
            raise TilesimError(f"{at}{name} is a directory; give a file name")
        if not directory.is_dir():
            raise TilesimError(f"{at}directory {str(directory)!r} does not exist")
        if path.exists() and not path.is_file():
            raise TilesimError(f"{at}{name} is not a regular file")
    except OSError as exc:  # a name too long, a loop of links
        raise TilesimError(f"{at}cannot write {name} ({exc.strerror or exc})") from None
    try:  # the only sure test: what write_atomic will do
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TilesimError(f"{at}cannot write {name} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)
    return path


def write_atomic(
    path: str | os.PathLike,
    data: str | bytes | Callable[[BinaryIO], None],
    *,
    option: str | None = None,
    fsync: bool = False,
) -> Path:
    """Write ``data`` (text, bytes, or a function writing to a binary file) to ``path``.

    The file gets a plain file's mode (0666 less the umask), not mkstemp's 0600.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    at, name = _prefix(option), repr(str(path))
    if not directory.is_dir():
        raise TilesimError(f"{at}cannot write {name}: directory {str(directory)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TilesimError(f"{at}cannot write {name}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise TilesimError(f"{at}cannot write {name}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
