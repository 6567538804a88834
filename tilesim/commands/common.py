"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout (sorted keys, stable across runs)."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")
