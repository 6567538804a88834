"""Where the measurements live: one results directory with ``raw/`` (what a GPU wrote),
``derived/`` (figures computed from it on the CPU: the accuracy baseline, issue tables)
and ``logs/`` (probe logs, nvidia-smi and pytest transcripts).

The directory is ``$TILESIM_RESULTS`` when set, else the ``results/`` of the source
checkout this package runs from, else ``./results`` (an installed package carries no
measurements). Looked up on each call, so a changed environment takes effect.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import TilesimError

ENV = "TILESIM_RESULTS"
_CHECKOUT = Path(__file__).resolve().parent.parent  # validate/ sits at the checkout's root


def root() -> Path:
    """The results directory (it may not exist yet when it is the ``./results`` fallback)."""
    value = os.environ.get(ENV)
    if value is not None:
        if not value.strip():
            raise TilesimError(f"{ENV} is empty: set it to a results directory or unset it")
        path = Path(value).expanduser()
        if not path.is_dir():
            raise TilesimError(f"{ENV}={value}: not a directory")
        return path
    checkout = _CHECKOUT / "results"
    if (_CHECKOUT / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    return Path.cwd() / "results"


def raw() -> Path:
    """Results files as the GPU commands wrote them (validate, bench, calibrate, ...)."""
    return root() / "raw"


def derived() -> Path:
    """Files computed from the raw ones on the CPU (``accuracy.json``, ``*-issue.json``)."""
    return root() / "derived"


def logs() -> Path:
    """Probe logs and transcripts kept beside the measurements they explain."""
    return root() / "logs"
