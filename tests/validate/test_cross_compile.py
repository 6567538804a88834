"""Compiling on the CPU gives the kernels the H200 compiled: the same registers, spills
and SASS loops for every variant of the committed GPU measurement (Triton 3.6 only)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
pytest.importorskip("torch")

GPU_FILE = (
    Path(__file__).resolve().parents[2] / "results" / "raw" / "2026-12-01-h200-registers.json"
)  # compiled on the H200 by triton 3.6.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not triton.__version__.startswith("3.6"),
        reason=f"the GPU file was compiled by triton 3.6, this is {triton.__version__}",
    ),
]


def test_cpu_compiled_kernels_equal_the_gpu_compiled_ones():
    # its own process: the test session interprets the kernels (tests/conftest.py)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run(
        [sys.executable, "-m", "tilesim.validate.profile", "--check", str(GPU_FILE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.strip().endswith("237 kernels compared, 0 differ")


REBUILD = """
from pathlib import Path
from tilesim.profiles import load
from tilesim.validate.profile import rebuild
profile = load(Path("profiles/sm90a-triton-3.6.json"))
targets = {v for v in profile.entries if v.algo == "v2" and v.pass_ == "fwd" and v.head_dim == 64
           and v.dtype == "fp16" and not v.causal and v.seqlen_kv_align < v.block_n}
assert len(targets) == 4, targets
rebuilt = rebuild(targets, log=lambda *a: None)
assert rebuilt == {v: profile.entries[v] for v in targets}, rebuilt
print("rebuilt", len(rebuilt))
"""


def test_v2_entries_with_a_masked_last_block_rebuild_to_the_profile():
    """The profile's v2 full forward at N off the tiles (the masked last block's issue
    once per CTA) is what the profile command's cases compile to now."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-c", REBUILD], capture_output=True, text=True, env=env, cwd=root,
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.strip().endswith("rebuilt 4")
