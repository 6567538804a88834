"""Every file a user hands tilesim is read through here: a regular file, bounded, UTF-8.

The type is checked before the file is opened: a FIFO would block the read forever and
``/dev/zero`` never ends. At most ``max_bytes`` are read, whatever the size says. Each
problem is one `TilesimError` line that starts with the caller's ``label`` (the file as
the user named it).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import TilesimError


def read_text(path: str | os.PathLike, label: str, max_bytes: int) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark dropped)."""
    path = Path(path)
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise TilesimError(f"{label}: is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise TilesimError(f"{label}: not a regular file (a pipe or a device)")
        if info.st_size > max_bytes:
            raise TilesimError(f"{label}: larger than {_size(max_bytes)}")
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise TilesimError(f"{label}: no such file") from None
    except OSError as exc:
        raise TilesimError(f"{label}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise TilesimError(f"{label}: larger than {_size(max_bytes)}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TilesimError(f"{label}: not UTF-8 text (byte {exc.start})") from None


def parse_json(text: str, label: str) -> Any:
    """``text`` as JSON; malformed, too deep or an integer too long to read is one line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TilesimError(
            f"{label}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise TilesimError(f"{label}: JSON nested too deeply") from None
    except ValueError:  # an integer of thousands of digits (int_max_str_digits)
        raise TilesimError(f"{label}: not valid JSON (an integer of thousands of digits)") from None


def read_json(path: str | os.PathLike, label: str, max_bytes: int) -> Any:
    """The JSON document of ``path`` (see `read_text` and `parse_json`)."""
    return parse_json(read_text(path, label, max_bytes), label)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
