"""The prediction cache: a folder of small JSON files, one per prediction.

Each is named by ``sha256`` of the canonical JSON of (GPU fields, trace, fidelity,
model version); the model version is tilesim's version plus a digest of the engine's
sources, so a changed engine never reads a stale entry. Entries are written atomically
and checked on reading (format, key, digest, plausible figures): an entry that is
corrupted or edited by hand is simulated again, not trusted.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from functools import lru_cache
from pathlib import Path

from .atomic import write_atomic
from .errors import TilesimError
from .hwmodels.gpu import GPU
from .traces.files import to_dict as trace_to_dict
from .traces.ir import Trace
from .version import __version__

CACHE_FORMAT = "tilesim-prediction-cache"


@lru_cache(maxsize=1)
def model_version() -> str:
    """tilesim's version + a digest of the engine's sources: what a cached prediction depends
    on besides its GPU and trace (the trace already carries the generators' output)."""
    from . import simulator

    sim_dir = Path(simulator.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(sim_dir.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def cache_key(gpu: GPU, trace: Trace, fidelity: str) -> str:
    """sha256 of the canonical JSON of everything a prediction depends on."""
    doc = {
        "gpu": gpu.to_dict(),
        "trace": trace_to_dict(trace),
        "fidelity": fidelity,
        "model": model_version(),
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


class Cache:
    """Predictions on disk, one JSON file per key: ``<dir>/<key[:2]>/<key>.json``."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        if self.dir.exists() and not self.dir.is_dir():
            raise TilesimError(f"cache directory {str(self.dir)!r} is a file")

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored prediction dict, or None (absent, corrupted or edited: then it is redone)."""
        try:
            doc = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT or doc.get("key") != key:
            return None
        pred = doc.get("prediction")
        if not isinstance(pred, dict) or doc.get("digest") != _digest(pred):
            return None
        return pred if plausible_prediction(pred) else None

    def put(self, key: str, prediction: dict) -> None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TilesimError(
                f"cannot create cache directory {str(path.parent)!r}: {exc.strerror}"
            ) from None
        doc = {"format": CACHE_FORMAT, "key": key, "prediction": prediction}
        doc["digest"] = _digest(prediction)
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
        write_atomic(path, text)


def _digest(prediction: dict) -> str:
    """sha256 of a prediction's canonical JSON: an entry edited by hand no longer matches."""
    text = json.dumps(prediction, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plausible_prediction(d: dict) -> bool:
    """A prediction dict whose figures are finite, its time positive, its counts >= 0."""

    def numbers(x):
        if isinstance(x, dict):
            for v in x.values():
                yield from numbers(v)
        elif isinstance(x, list | tuple):
            for v in x:
                yield from numbers(v)
        elif isinstance(x, int | float) and not isinstance(x, bool):
            yield x

    time_s = d.get("time_s")
    if isinstance(time_s, bool) or not isinstance(time_s, int | float) or not time_s > 0:
        return False
    return all(math.isfinite(v) and v >= 0 for v in numbers(d))
