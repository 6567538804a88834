"""The README's commands run as written: each ``tilesim ...`` line of its ``sh`` blocks.

The commands are read from README.md, so an edit there is tested as it stands.
``[--option]`` groups are the README's notation for optional flags: a line with them
runs twice, without them and with all of them. Each runs in a shell (globs and
redirections as a user's would) in a scratch folder that sees the repository's
``results/`` (the committed measurements), in README order, so ``trace replay
v3.trace.json`` finds the file ``trace export`` wrote. The Python block runs too, and
each ``make`` command is resolved by make (``make -n``: `make test` is this suite).

Not run here, by design: the commands that need a CUDA GPU (`GPU_COMMANDS`), the
minutes-long ones (`HEAVY`: run them with ``TILESIM_README_FULL=1``), and the prose's
commands with placeholders (``<H200 files>``, ``<date>-<gpu>``: the transfer one is
``tests/validate/test_val_transfer.py``'s, with the committed files).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GPU_COMMANDS = ("tilesim bench", "tilesim calibrate", "tilesim validate", "pytest -m gpu")
TIMEOUT_S = 900
# README commands known not to work yet, with the fix that is due (strict: a fixed one fails
# here until it is taken off the list).
KNOWN_BROKEN: dict[str, str] = {}


def _sh_lines(text: str) -> list[str]:
    """The command lines of the README's sh blocks, comments dropped."""
    lines, in_sh = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_sh = line.strip() in ("```sh", "```bash", "```console")
            continue
        if in_sh:
            command = re.split(r"\s#\s|\s+#$", line, maxsplit=1)[0].strip()
            if command:
                lines.append(command)
    return lines


def readme_commands(text: str) -> list[str]:
    """The ``tilesim`` command lines of the README's sh blocks; a line with ``[--flag]``
    groups twice: without them, and with every one of them."""
    commands = []
    for line in _sh_lines(text):
        if not (line.startswith("tilesim ") or line.startswith("pytest ")):
            continue
        bare = re.sub(r"\s*\[[^\]]*\]", "", line).strip()
        commands.append(bare)
        if bare != line:
            commands.append(re.sub(r"\[([^\]]*)\]", r"\1", line))
    return commands


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))
# Minutes each on two cores (the full compare grids): run with TILESIM_README_FULL=1.
MAKE_DEMO = "tilesim compare --gpu h100"  # what `make demo` runs after its install
HEAVY = (
    MAKE_DEMO,
    "tilesim compare --gpu a100",
    "tilesim compare --gpu h100 --pass fwd_bwd",
    # every committed measurement predicted again: minutes (the --stored run below checks
    # that the glob's files are read in seconds)
    "tilesim report results/raw/*.json",
)
FULL = bool(os.environ.get("TILESIM_README_FULL"))
CPU_COMMANDS = [c for c in COMMANDS if not c.startswith(GPU_COMMANDS)]


def _case(command: str):
    if command in KNOWN_BROKEN:
        return pytest.param(
            command, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BROKEN[command])
        )
    if command in HEAVY and not FULL:
        return pytest.param(
            command, marks=pytest.mark.skip(reason="minutes: set TILESIM_README_FULL=1")
        )
    return command


CASES = [_case(c) for c in [*CPU_COMMANDS, MAKE_DEMO]]


def test_the_readme_has_commands_and_names_its_gpu_ones():
    assert len(CPU_COMMANDS) >= 10
    assert any(c.startswith(GPU_COMMANDS) for c in COMMANDS)


def test_the_readme_optional_flags_run_too():
    with_flags = [c for c in COMMANDS if "--timeline t.json" in c]
    assert with_flags == [
        "tilesim predict --gpu h100 --algo v2 -b 4 -H 16 -n 4096 -d 128 --causal --json "
        "--timeline t.json"
    ]


def test_the_readme_python_block_runs_as_written(capsys):
    text = README.read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    exec(compile(block, "README.md", "exec"), {})
    time_s, tflops, bound = capsys.readouterr().out.split()
    assert float(time_s) > 0 and float(tflops) > 0
    from tilesim.simulator.prediction import BOUNDS

    assert bound in BOUNDS


def test_the_readme_make_commands_are_real_targets():
    """``make demo`` / ``make test`` run the whole install (and `test` the whole suite):
    here each is resolved by make without running it (``make -n``), and `demo`'s command
    is one the verbatim test runs."""
    text = README.read_text(encoding="utf-8")
    makes = [line for line in _sh_lines(text) if line.startswith("make ")]
    makes += re.findall(r"`(make [^`]+)`", text)
    assert {"make demo", "make test", "make bench", "make bench BENCH_ARGS=--whatif"} <= set(makes)
    # as a user's shell runs them, not as a sub-make of `make test` (which would print
    # "Entering/Leaving directory" and pass its jobserver flags down)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    for line in makes:
        r = subprocess.run(
            [*line.split(), "-n"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
        )
        assert r.returncode == 0, f"{line}: {r.stderr}"
    demo = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert demo.stdout.strip().splitlines()[-1].endswith(MAKE_DEMO)


def test_the_readme_defines_every_bound_label_as_the_code_does():
    from tilesim.simulator.prediction import BOUNDS

    text = README.read_text(encoding="utf-8")
    listed = re.findall(r"^- `(\w+)`: (.*)$", text, flags=re.MULTILINE)
    assert {label: what for label, what in listed if label in BOUNDS} == BOUNDS


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readme")
    (folder / "results").symlink_to(ROOT / "results")
    return folder


def producers(command: str) -> list[str]:
    """The README's earlier commands that write a file ``command`` reads (``-o FILE`` /
    ``--out FILE``): a reader run alone (another test worker ran the writer) runs them
    first, as the README's reader would have."""
    written = {}
    for c in CPU_COMMANDS[: CPU_COMMANDS.index(command)] if command in CPU_COMMANDS else ():
        for name in re.findall(r"(?:-o|--out)\s+(\S+)", c):
            written[name] = c
    return [written[t] for t in command.split()[1:] if t in written]


def test_a_reader_of_an_earlier_commands_file_runs_its_writer_first():
    assert producers("tilesim trace replay v3.trace.json --gpu h200") == [
        "tilesim trace export --gpu h100 --algo v3 -n 8192 -o v3.trace.json"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("command", CASES)
def test_readme_command_runs_verbatim(command, scratch):
    tilesim = Path(sys.executable).parent / "tilesim"
    env = dict(os.environ, PATH=f"{tilesim.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if shutil.which("tilesim", path=env["PATH"]) is None:
        pytest.skip("the tilesim console script is not installed")
    for writer in producers(command):
        subprocess.run(writer, shell=True, cwd=scratch, env=env, check=True, timeout=TIMEOUT_S)
    result = subprocess.run(
        command, shell=True, cwd=scratch, env=env, capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr


def test_the_readme_report_glob_reads_every_committed_file(scratch):
    """The README's `report` line with the stored predictions: every file the glob matches
    is read or passed over with a note, and the figures come out, in seconds."""
    command = "tilesim report results/raw/*.json --stored --gpu-preset h200_sxm_141gb"
    assert COMMANDS.count("tilesim report results/raw/*.json") == 1
    tilesim = Path(sys.executable).parent / "tilesim"
    env = dict(os.environ, PATH=f"{tilesim.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run(
        command, shell=True, cwd=scratch, env=env, capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MAPE random (seed 12)" in result.stdout and "MAPE grid" in result.stdout
    assert "note: passed over" in result.stderr and "Traceback" not in result.stderr


def test_the_readme_names_the_algorithms_compare_runs_on_the_a100():
    from tilesim.errors import TilesimError
    from tilesim.hwmodels import load_gpu
    from tilesim.traces.config import check_algo
    from tilesim.traces.workload import ALGOS, Workload

    text = README.read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if x.startswith("tilesim compare --gpu a100 ")]
    listed = re.findall(r"\b(standard|v1|v2|v3)\b", line.split("#", 1)[1].split(" over ")[0])
    gpu, runs = load_gpu("a100"), []
    for algo in ALGOS:
        try:
            check_algo(algo, Workload(4, 16, 4096, 4096, 128), gpu)
        except TilesimError:
            continue
        runs.append(algo)
    assert listed == runs == ["standard", "v1", "v2"]
