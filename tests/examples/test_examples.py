"""Each example script runs and prints exactly its expected output (``examples/NN_name.out``).

The engine is deterministic and the examples print rounded figures, so a
deliberate model change needs only a regeneration of the expected files::

    python -m tests.examples.regen            # or: TILESIM_REGEN_EXAMPLES=1 pytest tests/examples

Plot-writing examples get a temporary output directory as their argument.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("[0-9][0-9]_*.py"))
REGEN = os.environ.get("TILESIM_REGEN_EXAMPLES") == "1"


def run_example(script: Path, out_dir: Path) -> str:
    """The script's stdout, run as a user would (its own process, outputs in ``out_dir``)."""
    env = {**os.environ, "TILESIM_OUT": str(out_dir), "PYTHONIOENCODING": "utf-8"}
    r = subprocess.run(
        [sys.executable, str(script), str(out_dir)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=out_dir,
        timeout=600,
    )
    if r.returncode != 0:
        raise AssertionError(f"{script.name} failed:\n{r.stderr}")
    return r.stdout


def expected_path(script: Path) -> Path:
    return script.with_suffix(".out")


def regenerate(out_dir: Path) -> list[Path]:
    written = []
    for script in SCRIPTS:
        path = expected_path(script)
        path.write_text(run_example(script, out_dir), encoding="utf-8")
        written.append(path)
    return written


def test_there_are_examples():
    assert [s.name[:2] for s in SCRIPTS] == [f"{i:02d}" for i in range(1, len(SCRIPTS) + 1)]
    assert len(SCRIPTS) >= 4


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_example_header(script):
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8")))
    assert doc and "Covers:" in doc and "Scenario:" in doc, script.name


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_example_output(script, tmp_path):
    out = run_example(script, tmp_path)
    expected = expected_path(script)
    if REGEN:
        expected.write_text(out, encoding="utf-8")
    assert expected.exists(), f"no {expected.name}: run python -m tests.examples.regen"
    assert out == expected.read_text(encoding="utf-8"), (
        f"{script.name} prints something else than {expected.name}; if the model changed on "
        "purpose, run python -m tests.examples.regen"
    )
    # a plot-writing example leaves its pictures in the directory it was given
    for name in ("roofline.png", "gantt_v2_v3.png"):
        if name in out:
            assert (tmp_path / name).stat().st_size > 10_000


def test_the_timeline_example_prints_what_its_docstring_says():
    """04: in both kernels most exp time runs under a matmul; v3's tensor cores are busier."""
    import re

    text = expected_path(EXAMPLES / "04_timeline.py").read_text(encoding="utf-8")
    got = {
        algo: (int(busy), int(hidden))
        for algo, busy, hidden in re.findall(
            r"^(v\d): .*tensor cores busy (\d+)% of its run, (\d+)% of its exp time", text, re.M
        )
    }
    assert set(got) == {"v2", "v3"}
    assert got["v3"][0] > got["v2"][0]
    assert min(hidden for _, hidden in got.values()) > 50
    assert all("bound: grid" in line for line in text.splitlines()[:2])
