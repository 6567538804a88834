"""The results directory: $TILESIM_RESULTS, else the checkout's results/, else ./results;
a bad environment value is one line and exit 2 from every command that reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.errors import TilesimError
from tilesim.validate import paths

CHECKOUT = Path(__file__).resolve().parents[2]


def test_the_checkout_results_by_default(monkeypatch):
    monkeypatch.delenv(paths.ENV, raising=False)
    assert paths.root() == CHECKOUT / "results"
    assert (paths.raw() / "2026-11-30-h200.json").is_file()
    assert (paths.derived() / "accuracy.json").is_file()
    assert paths.logs().is_dir()


def test_the_environment_names_another_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    assert paths.raw() == tmp_path / "raw"
    assert paths.derived() == tmp_path / "derived"


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["", "   ", "file", "missing", "missing/deeper"]))
def test_a_bad_environment_value_is_one_line(tmp_path_factory, value):
    base = tmp_path_factory.mktemp("env")
    (base / "file").write_text("not a directory")
    env_value = str(base / value) if value.strip() else value
    os.environ[paths.ENV] = env_value
    try:
        with pytest.raises(TilesimError) as err:
            paths.raw()
    finally:
        del os.environ[paths.ENV]
    assert paths.ENV in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("args", [["report"], ["roofline", "-o", "r.png", "-n", "512"]])
def test_the_cli_refuses_a_bad_environment_value(tmp_path, args):
    env = {**os.environ, paths.ENV: str(tmp_path / "nowhere")}
    proc = subprocess.run(
        [sys.executable, "-m", "tilesim", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and paths.ENV in proc.stderr, proc.stderr
    assert not (tmp_path / "r.png").exists()
