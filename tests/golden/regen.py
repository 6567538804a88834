"""Rewrite ``tests/golden/predictions.json`` from the current engine.

Run ``python -m tests.golden.regen`` after a deliberate change to the predictions.
"""

from __future__ import annotations

from tests.golden.test_golden import regenerate


def main() -> None:
    print(f"wrote {regenerate()}")


if __name__ == "__main__":
    main()
