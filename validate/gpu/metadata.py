"""Who, what and where of a measurement: GPU, clocks, software versions, date, commit.

A timing is worth little without the state of the card it was taken on, so every
results file records ``nvidia-smi``'s view of the GPU before and after the run
(SM and memory clocks, max SM clock, power limit, temperature, driver). tilesim
only reads the card's settings; it never changes them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

# Queried fields, in order, and the key each value gets in the metadata.
NVIDIA_SMI_FIELDS = (
    ("name", "name"),
    ("clocks.sm", "clocks_sm_MHz"),
    ("clocks.mem", "clocks_mem_MHz"),
    ("clocks.max.sm", "clocks_max_sm_MHz"),
    ("power.limit", "power_limit_W"),
    ("temperature.gpu", "temperature_C"),
    ("driver_version", "driver_version"),
    ("uuid", "uuid"),  # which physical GPU: runs on two machines differ here
)
_TEXT_KEYS = {"name", "driver_version", "uuid"}
_NUMBER = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(?:MHz|W|C|%)?\s*$")
REPO_ROOT = Path(__file__).resolve().parents[2]


def nvidia_smi_command(fields: tuple[str, ...] | None = None) -> list[str]:
    query = ",".join(f for f, _ in NVIDIA_SMI_FIELDS) if fields is None else ",".join(fields)
    return ["nvidia-smi", f"--query-gpu={query}", "--format=csv"]


def parse_nvidia_smi_csv(text: str) -> list[dict]:
    """Parse ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv`` output, one dict per GPU.

    Numbers lose their unit (which the key carries); "[N/A]" and the like become None.
    """
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return []
    rows = []
    body = lines[1:] if lines[0].lower().startswith("name") else lines
    for line in body:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(NVIDIA_SMI_FIELDS):
            continue  # not a row of our query (a warning line, say)
        row: dict = {}
        for (_, key), cell in zip(NVIDIA_SMI_FIELDS, cells, strict=True):
            if key in _TEXT_KEYS:
                row[key] = cell
                continue
            m = _NUMBER.match(cell)
            row[key] = float(m.group(1)) if m else None
        rows.append(row)
    return rows


def query_nvidia_smi(index: int = 0) -> dict | None:
    """The GPU's state now, or None when nvidia-smi is absent or fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            nvidia_smi_command(), capture_output=True, text=True, timeout=20, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = parse_nvidia_smi_csv(out)
    return rows[index] if index < len(rows) else None


def today() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d")


def timestamp() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_commit() -> str | None:
    """The checkout's commit; ``TILESIM_GIT_COMMIT`` overrides (a copy without .git)."""
    env = os.environ.get("TILESIM_GIT_COMMIT")
    if env:
        return env
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def source_digest(root: Path = REPO_ROOT) -> str:
    """SHA-256 over the package's Python sources and presets, in sorted path order.

    Identifies the code that ran when the working tree has no git metadata.
    """
    h = hashlib.sha256()
    for sub in ("tilesim", "hwmodels", "traces", "simulator", "kernels", "validate"):
        base = root / sub
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in (".py", ".toml") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


PEER_DISTRIBUTIONS = ("flash-attn-4", "nvidia-cutlass-dsl")  # the bench's fa4 impl


def software_versions() -> dict:
    """Versions of Python, tilesim and, when installed, numpy, torch, triton, CUDA and the
    bench's peer kernels."""
    from ...version import __version__

    versions = {"python": platform.python_version(), "tilesim": __version__}
    try:
        import numpy

        versions["numpy"] = numpy.__version__
    except ImportError:
        pass
    try:
        import torch

        versions["torch"] = torch.__version__
        versions["cuda"] = torch.version.cuda
    except ImportError:
        pass
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    for dist in PEER_DISTRIBUTIONS:  # read from their metadata, not imported
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[dist] = importlib.metadata.version(dist)
    return versions


def device_properties() -> dict:
    """What torch reports about GPU 0 (needs torch with CUDA)."""
    import torch

    p = torch.cuda.get_device_properties(0)
    props = {
        "name": p.name,
        "sm_count": p.multi_processor_count,
        "total_memory_bytes": p.total_memory,
        "compute_capability": f"{p.major}.{p.minor}",
    }
    l2 = getattr(p, "L2_cache_size", None)
    if l2:
        props["l2_bytes"] = int(l2)
    return props


def collect(extra: dict | None = None) -> dict:
    """Metadata for a results file taken on this machine (call before the run)."""
    meta = {
        "date": today(),
        "started": timestamp(),
        "git_commit": git_commit(),
        "source_digest": source_digest(),
        "host": platform.node(),
        "versions": software_versions(),
        "nvidia_smi_before": query_nvidia_smi(),
    }
    try:
        meta["device"] = device_properties()
    except Exception as exc:  # no torch / no CUDA: a CPU-side file
        meta["device"] = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    if extra:
        meta.update(extra)
    return meta


def finish(meta: dict) -> dict:
    """Add the after-run state (clocks may have dropped under load)."""
    meta["nvidia_smi_after"] = query_nvidia_smi()
    meta["finished"] = timestamp()
    return meta


def gpu_slug(device_name: str) -> str:
    """A short file-name tag for a GPU name: "NVIDIA H200" -> "h200"."""
    name = device_name.lower().replace("nvidia", "").strip()
    m = re.search(r"\b([ahlbg]\d{2,3}[a-z]?)\b", name)
    if m:
        return m.group(1)
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "gpu"


class ClockSampler:
    """Samples ``nvidia-smi clocks.sm`` every ``interval_ms`` in the background.

    Read-only: it queries the clock, never sets it. No nvidia-smi: no samples.
    """

    def __init__(self, interval_ms: int = 50):
        self.interval_ms = interval_ms
        self.samples: list[tuple[float, float]] = []  # (perf_counter, MHz)
        self._proc = None
        self._thread = None

    def __enter__(self):
        if shutil.which("nvidia-smi") is None:
            return self
        cmd = [
            "nvidia-smi",
            "--query-gpu=clocks.sm",
            "--format=csv,noheader,nounits",
            f"--loop-ms={self.interval_ms}",
            "--id=0",
        ]
        try:
            self._proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
        except OSError:
            return self
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:
                self.samples.append((time.perf_counter(), float(line.strip())))
            except ValueError:
                continue

    def __exit__(self, *exc):
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._thread.join(timeout=5)
        return False

    def between(self, t0: float, t1: float) -> list[float]:
        return [mhz for t, mhz in self.samples if t0 <= t <= t1]
