"""Rewrite every ``examples/NN_name.out`` from a fresh run: ``python -m tests.examples.regen``."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.examples.test_examples import regenerate


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for path in regenerate(Path(tmp)):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
