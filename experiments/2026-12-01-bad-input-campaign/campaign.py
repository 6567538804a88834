"""An adversarial campaign against the CLI's input contract, run from outside.

Every case is one `python -m tilesim ...` subprocess in a fresh temp folder, with a
timeout and an address-space limit, classified by what it did: succeeded (finite
output, nothing half-written), refused cleanly (exit 2, one stderr line), or broke
the contract (traceback, hang, memory, wrong exit code, several lines, a file left
behind, NaN/inf in the output). The cases are listed in this file, so each one can
be re-run by its id; the trace mutations are drawn with a fixed seed.

    python experiments/2026-12-01-bad-input-campaign/campaign.py            # all, 2 workers
    python .../campaign.py --only trace-mut-017 --show                      # one case, verbose
    python .../campaign.py --only output --jobs 1 --out /tmp/r.json         # one group
    python .../campaign.py --list                                           # ids and commands
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TIMEOUT_S = 60
MEMORY_BYTES = 4 << 30
SEED = 25
MUTATIONS = 240

SMALL = ["-b", "1", "-H", "1", "-n", "256", "-d", "64"]
PRESET = ROOT / "hwmodels" / "presets" / "h100_sxm5_80gb.toml"
RESULTS = ROOT / "results" / "raw" / "2026-11-30-h200.json"
BENCH = ROOT / "results" / "raw" / "2026-11-30-h200-bench.json"
CALIBRATE = ROOT / "results" / "raw" / "2026-11-30-h200-calibrate.json"
PYTHON = sys.executable  # --python: another interpreter (another tree's tilesim)
# where a command writes by default, inside the repository: never touched by a case
GUARDED = [ROOT / "hwmodels" / "presets", ROOT / "results" / "raw", ROOT]


@dataclass
class Case:
    """One command line. In ``argv`` and ``shell``, ``{tmp}`` is the case's own folder
    and ``{fx}`` the shared fixtures (valid files, made once)."""

    id: str
    argv: list[str]
    expect: str = "error"  # error: must be refused; ok: must succeed; any: either
    files: dict = field(default_factory=dict)  # name -> bytes | str | ("fifo",) | ("dir",) ...
    mentions: tuple[str, ...] = ()  # an error must name one of these (case-insensitive)
    env: dict = field(default_factory=dict)
    shell: str | None = None  # a bash line instead of argv (pipes)
    interrupt_after_s: float | None = None  # Ctrl-C after this long: exit 130 expected
    timeout_s: float = TIMEOUT_S
    keeps: tuple[str, ...] = ()  # files under these may stay after a failure (a cache)

    @property
    def group(self) -> str:
        return self.id.rsplit("-", 1)[0]

    def command(self) -> str:
        if self.shell is not None:
            return self.shell
        return "tilesim " + " ".join(_quote(a) for a in self.argv)


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[\w@%+=:,./{}-]+", arg) else json.dumps(arg)


# -- the cases ------------------------------------------------------------------------------

BASES = {
    "predict": ["predict", *SMALL],
    "compare": [
        "compare",
        "--seqlens",
        "256",
        "--head-dims",
        "64",
        "--tokens",
        "256",
        "--hidden",
        "64",
        "-j",
        "1",
    ],
    "explain": ["explain", "-n", "256", "-d", "64", "-b", "1", "-H", "1", "-j", "1"],
    "roofline": ["roofline", "-o", "{tmp}/r.png", *SMALL, "-j", "1"],
    "gantt": ["gantt", "-o", "{tmp}/g.png", "-b", "1", "-H", "1", "-n", "256", "-d", "64"],
    "whatif": [
        "whatif",
        "--vary",
        "hbm_bandwidth_Bps=1x,2x",
        "--algos",
        "v2",
        "-n",
        "256",
        "-d",
        "64",
        "-b",
        "1",
        "-H",
        "1",
        "-j",
        "1",
        "--no-cache",
    ],
    "trace-show": ["trace", "show", *SMALL],
    "trace-export": ["trace", "export", "-o", "{tmp}/t.trace.json", *SMALL],
    "trace-replay": ["trace", "replay", "{fx}/v2.trace.json"],
    "hw-list": ["hw", "list"],
    "hw-show": ["hw", "show", "h100"],
    "calibrate": ["calibrate", "--from-results", "{fx}/cal.json", "--preset-out", "{tmp}/p.toml"],
    "report": ["report", "{fx}/small.json", "-j", "1"],
    "validate": ["validate", "--quick"],  # no GPU here: "needs CUDA", one line
    "bench": ["bench"],
}
GPU_ONLY = ("validate", "bench")
# the last option of each base, given without its value
DANGLING = {
    "predict": "--gpu",
    "compare": "--seqlens",
    "explain": "--dtype",
    "roofline": "--algos",
    "gantt": "--window",
    "whatif": "--vary",
    "trace-show": "--cta",
    "trace-export": "-o",
    "trace-replay": "--fidelity",
    "hw-list": "--json=",
    "hw-show": "--set",
    "calibrate": "--transfer-to",
    "report": "--gpu-preset",
    "validate": "--algos",
    "bench": "--impls",
}


def parse_cases():
    for name, base in BASES.items():
        gpu = name in GPU_ONLY
        yield Case(f"parse-{name}-help", [*base, "--help"], "ok")
        yield Case(f"parse-{name}-plain", base, "error" if gpu else "ok", mentions=("CUDA",))
        yield Case(f"parse-{name}-unknown", [*base, "--bogus"], mentions=("--bogus",))
        yield Case(f"parse-{name}-stray", [*base, "stray"], mentions=("stray",))
        yield Case(
            f"parse-{name}-dangling",
            [*base, DANGLING[name]],
            mentions=(DANGLING[name].rstrip("="),),
        )
        yield Case(f"parse-{name}-dash", [*base, "-"], mentions=("-",))
    yield Case("parse-none", [], "ok")
    yield Case("parse-nosuch", ["predikt"], mentions=("predikt",))
    yield Case("parse-trace-nosub", ["trace", "nosuch"], mentions=("nosuch",))
    yield Case("parse-hw-nosub", ["hw", "nosuch"], mentions=("nosuch",))
    yield Case("parse-trace-alone", ["trace"], "ok")
    yield Case("parse-unicode-opt", ["predict", "—gpu", "h100"], mentions=("—gpu",))
    yield Case("parse-nul", ["predict", "--gpu", "h1\x01"], mentions=("--gpu", "h1"))
    yield Case("parse-long-arg", ["predict", "--gpu", "x" * 100_000], mentions=("x",))


INT_BAD = ["abc", "nan", "inf", "-1", "0", "1e300", "9" * 25, "9" * 400, "1.5", "", "0x10"]
INT_ODD = [" 4 ", "1_0", "+2", "٣"]  # int() takes these: a success or a clean refusal
# (command, option, base without the option, values for which 0 / -1 are legal)
INT_OPTIONS = [
    ("predict", "-b", BASES["predict"], ()),
    ("predict", "-H", BASES["predict"], ()),
    ("predict", "-n", BASES["predict"], ()),
    ("predict", "--seqlen-kv", BASES["predict"], ()),
    ("predict", "-d", BASES["predict"], ()),
    ("predict", "--block-m", BASES["predict"], ()),
    ("predict", "--block-n", BASES["predict"], ()),
    ("predict", "--num-warps", BASES["predict"], ()),
    ("predict", "--num-stages", BASES["predict"], ()),
    ("predict", "--timeline-sms", [*BASES["predict"], "--timeline", "{tmp}/t.json"], ()),
    ("compare", "--tokens", BASES["compare"], ()),
    ("compare", "--hidden", BASES["compare"], ()),
    ("compare", "-j", BASES["compare"], ()),
    ("explain", "-b", BASES["explain"], ()),
    ("explain", "-j", BASES["explain"], ()),
    ("roofline", "-n", BASES["roofline"], ()),
    ("gantt", "--sms", BASES["gantt"], ()),
    ("gantt", "-H", BASES["gantt"], ()),
    ("whatif", "-b", BASES["whatif"], ()),
    ("whatif", "-j", BASES["whatif"], ()),
    ("trace-show", "--cta", BASES["trace-show"], ("0",)),
    ("trace-show", "--launch", [*BASES["trace-show"], "--cta", "0"], ("0",)),
    ("trace-export", "--heads", BASES["trace-export"], ()),
    ("report", "-j", BASES["report"], ()),
    ("bench", "--seed", ["bench", "--grid", "random"], ("0", "-1")),
    ("bench", "--points", ["bench", "--grid", "random"], ()),
    ("validate", "--workers", ["validate", "--quick"], ("0",)),
    ("validate", "--points", ["validate", "--grid", "random"], ()),
]
FLOAT_BAD = ["abc", "nan", "inf", "-inf", "-1", "1e999", "1e300", ""]
FLOAT_OPTIONS = [
    ("bench", "--warmup-ms"),
    ("bench", "--rep-ms"),
    ("bench", "--time-budget-s"),
    ("validate", "--warmup-ms"),
    ("validate", "--rep-ms"),
    ("validate", "--time-budget-s"),
]


def _without(base: list[str], option: str) -> list[str]:
    """``base`` with ``option`` and its value taken out (so the case's value is the only one)."""
    out, skip = [], False
    aliases = {"-b": "--batch", "-H": "--heads", "-n": "--seqlen", "-d": "--head-dim"}
    names = {option, aliases.get(option, option)}
    names |= {k for k, v in aliases.items() if v == option}
    for arg in base:
        if skip:
            skip = False
            continue
        if arg in names:
            skip = True
            continue
        out.append(arg)
    return out


# the field a message names for an option (Workload's, KernelConfig's)
FIELDS = {
    "-b": "batch",
    "-H": "heads",
    "--heads": "heads",
    "-n": "seqlen",
    "-d": "head_dim",
    "--seqlen-kv": "seqlen_kv",
    "--block-m": "block_m",
    "--block-n": "block_n",
    "--num-warps": "num_warps",
    "--num-stages": "num_stages",
    "--cta": "CTA index",
    "--launch": "launch index",
    "--tokens": "tokens",
    "--hidden": "hidden",
}


def number_cases():
    for k, (command, option, base, legal) in enumerate(INT_OPTIONS):
        stem = f"int-{command}{option.replace('-', '_')}"
        base = _without(base, option)
        for i, value in enumerate(INT_BAD):
            if k > 2 and (i + k) % 2:  # predict's -b -H -n get every value, the rest half
                continue
            expect = "any" if value in legal else "error"
            names = (option, FIELDS.get(option, option))
            if command in GPU_ONLY and (
                value in legal or option == "--seed" and value.isdigit() and int(value) < 2**63
            ):
                expect, names = "error", ("CUDA",)  # a legal value; no GPU: refused either way
            yield Case(f"{stem}-{i}", [*base, option, value], expect, mentions=names)
        for i, value in enumerate(INT_ODD):
            if k > 2 and (i + k) % 2:
                continue
            yield Case(
                f"{stem}-odd{i}",
                [*base, option, value],
                "error" if command in GPU_ONLY else "any",
                mentions=(option, FIELDS.get(option, option), "CUDA"),
            )
    for command, option in FLOAT_OPTIONS:
        base = ["validate", "--quick"] if command == "validate" else ["bench"]
        for i, value in enumerate(FLOAT_BAD):
            yield Case(
                f"float-{command}{option.replace('-', '_')}-{i}",
                [*base, option, value],
                # a budget of 1e300 s is no budget: legal, then no GPU
                mentions=("CUDA",)
                if (option, value) == ("--time-budget-s", "1e300")
                else (option,),
            )
    # lists of numbers
    for i, value in enumerate(
        [
            "",
            ",",
            "a,b",
            "256,-1",
            "256,0",
            "9" * 30,
            "1e3",
            "256,,512",
            "256;512",
            "nan",
            " 256 , 512 ",
            "256," * 200,
        ]
    ):
        # empty items are skipped (one parser, lenient): "256,,512" and "256," are lists
        legal = re.fullmatch(r"[\s,]*256[\s,]*(512[\s,]*)?|(256,)+", value)
        expect = "any" if legal else "error"
        yield Case(
            f"list-compare-{i}",
            _without(BASES["compare"], "--seqlens") + ["--seqlens", value],
            expect,
            mentions=("--seqlens", "seqlen"),
        )
        yield Case(
            f"list-whatif-{i}",
            _without(BASES["whatif"], "-n") + ["-n", value],
            expect,
            mentions=("--seqlens", "-n", "seqlen"),
        )
        yield Case(
            f"list-validate-{i}", ["validate", "--seqlens", value], mentions=("--seqlens", "CUDA")
        )
    for i, value in enumerate(
        ["", "x", "1:", ":2", "2:1", "0:1e999", "nan:1", "-5:1", "0:0", "1:2:3", "0:100000000"]
    ):
        yield Case(
            f"window-gantt-{i}",
            [*BASES["gantt"], "--window", value],
            "any" if value in ("0:100000000",) else "error",
            mentions=("--window", "window"),
        )
        yield Case(
            f"window-predict-{i}",
            [*BASES["predict"], "--timeline", "{tmp}/t.json", "--timeline-window", value],
            "any" if value in ("0:100000000",) else "error",
            mentions=("--timeline-window", "window"),
        )


SET_POOL = [
    "nan",
    "-1",
    "1e300",
    "abc",
    "inf",
    "0",
    "1e-300",
    "-inf",
    "9" * 25,
    "0x",
    "nanx",
    "-2x",
    "1e400x",
    "",
    "true",
    "1.5",
]


def _fields() -> list[str]:
    out = subprocess.run(
        [PYTHON, "-m", "tilesim", "hw", "show", "h100", "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return sorted(json.loads(out.stdout)["fields"])


def set_cases(fields: list[str]):
    for i, name in enumerate(fields):
        for j in range(3):  # each field three values of the pool, every value used
            value = SET_POOL[(3 * i + j) % len(SET_POOL)]
            yield Case(
                f"set-hw-{name}-{j}",
                ["hw", "show", "h100", "--set", f"{name}={value}", "--json"],
                "any",
                mentions=(name,),
            )
        for j in range(2):
            value = SET_POOL[(2 * i + j + 7) % len(SET_POOL)]
            yield Case(
                f"set-predict-{name}-{j}",
                [*BASES["predict"], "--json", "--set", f"{name}={value}"],
                "any",
                mentions=(name,),
            )
    syntax = [
        "sm_count",
        "=",
        "==",
        "sm_count==2",
        " sm_count = 66 ",
        "SM_COUNT=66",
        "sm_count=66=1",
        "name=x\ny",
        "arch=volta",
        "arch=",
        "has_tma=maybe",
        "has_tma=1",
        "display_name=" + "x" * 5000,
        "sm_count=1",
        "sm_count=4096",
        "sm_count=4097",
        "l2_bytes=0",
        "smem_bytes_per_sm=0",
        "sm_clock_hz=1",
        "sm_clock_hz=1e-300x",
        "max_ctas_per_sm=0",
        "hbm_bandwidth_Bps=1e-6x",
        "launch_overhead_s=1e9",
        "tensor_clock_ratio=1e-9",
    ]
    for i, value in enumerate(syntax):
        expect = "any"
        if value in (
            "sm_count",
            "=",
            "==",
            "sm_count==2",
            "arch=volta",
            "arch=",
            "has_tma=maybe",
            "sm_count=4097",
            "name=x\ny",
        ):
            expect = "error"
        yield Case(
            f"set-syntax-{i}",
            [*BASES["predict"], "--json", "--set", value],
            expect,
            mentions=("--set", value.split("=")[0].strip() or "=", "sm_count"),
        )
    yield Case(
        "set-twice",
        [*BASES["predict"], "--set", "sm_count=66", "--set", "sm_count=1x", "--json"],
        "any",
    )
    yield Case("set-whatif-conflict", [*BASES["whatif"], "--set", "hbm_bandwidth_Bps=2x"], "any")
    yield Case(
        "set-trace-export",
        [*BASES["trace-export"], "--set", "smem_bytes_per_cta_max=1"],
        mentions=("smem",),
    )


def name_cases():
    names = [
        ("gpu-unknown", [*BASES["predict"], "--gpu", "h900"], ("h900",)),
        ("gpu-empty", [*BASES["predict"], "--gpu", ""], ("--gpu", "gpu")),
        ("gpu-space", [*BASES["predict"], "--gpu", " "], ("--gpu", "gpu")),
        ("gpu-nofile", [*BASES["predict"], "--gpu", "{tmp}/no.toml"], ("no.toml",)),
        ("gpu-dir", [*BASES["predict"], "--gpu", "{tmp}"], ("gpu", "director")),
        ("gpu-dottoml-dir", [*BASES["predict"], "--gpu", "{tmp}/d.toml"], ("d.toml",)),
        ("gpu-traversal", [*BASES["predict"], "--gpu", "../../../etc/passwd"], ("passwd",)),
        ("algo-unknown", [*BASES["predict"], "--algo", "v4"], ("v4",)),
        ("algo-case", [*BASES["predict"], "--algo", "V2"], ("V2", "algo")),
        ("algo-empty", [*BASES["predict"], "--algo", ""], ("algo",)),
        ("dtype-unknown", [*BASES["predict"], "--dtype", "fp4"], ("fp4",)),
        ("dtype-int8", [*BASES["trace-show"], "--dtype", "int8"], ("int8",)),
        ("pass-unknown", [*BASES["predict"], "--pass", "sideways"], ("sideways",)),
        ("config-unknown", [*BASES["predict"], "--config", "fa9"], ("fa9",)),
        ("mma-unknown", [*BASES["predict"], "--mma-path", "tcgen05"], ("tcgen05",)),
        ("fidelity-unknown", [*BASES["predict"], "--fidelity", "exact"], ("exact",)),
        ("fidelity-replay", [*BASES["trace-replay"], "--fidelity", "slow"], ("slow",)),
        ("fidelity-report", [*BASES["report"], "--fidelity", "x"], ("x",)),
        ("fidelity-gantt", [*BASES["gantt"], "--fidelity", "x"], ("x",)),
        ("profile-unknown", [*BASES["predict"], "--profile", "sm99"], ("sm99",)),
        ("profile-nofile", [*BASES["predict"], "--profile", "{tmp}/no.json"], ("no.json",)),
        ("profile-dir", [*BASES["predict"], "--profile", "{tmp}"], ("profile", "director")),
        ("vary-unknown", _without(BASES["whatif"], "--vary") + ["--vary", "nope=1x"], ("nope",)),
        (
            "vary-noeq",
            _without(BASES["whatif"], "--vary") + ["--vary", "sm_count"],
            ("sm_count", "--vary"),
        ),
        (
            "vary-empty",
            _without(BASES["whatif"], "--vary") + ["--vary", "sm_count="],
            ("sm_count", "--vary"),
        ),
        ("vary-bool", _without(BASES["whatif"], "--vary") + ["--vary", "has_tma=true,false"], ()),
        (
            "vary-twice",
            [*BASES["whatif"], "--vary", "hbm_bandwidth_Bps=3x"],
            ("hbm_bandwidth_Bps",),
        ),
        (
            "vary-many",
            _without(BASES["whatif"], "--vary")
            + ["--vary", "sm_count=" + ",".join(f"{i}" for i in range(1, 3000))],
            (),
        ),
        ("algos-unknown", _without(BASES["whatif"], "--algos") + ["--algos", "v2,v9"], ("v9",)),
        ("algos-empty", _without(BASES["whatif"], "--algos") + ["--algos", ","], ("--algos",)),
        ("compare-algos", [*BASES["compare"], "--algos", "flash"], ("flash",)),
        ("roofline-algos", [*BASES["roofline"], "--algos", "v5"], ("v5",)),
        ("gantt-algo", [*BASES["gantt"], "--algo", "v2,zz"], ("zz",)),
        ("hwshow-unknown", ["hw", "show", "b200"], ("b200",)),
        ("hwshow-path", ["hw", "show", "{tmp}/none.toml"], ("none.toml",)),
        ("report-timing", [*BASES["report"], "--timing", "cuda"], ("cuda",)),
        ("report-preset", [*BASES["report"], "--gpu-preset", "nope"], ("nope",)),
        ("cal-step", ["calibrate", "--only", "hbm,warp"], ("warp",)),
        ("cal-base", ["calibrate", "--base", "x100"], ("x100",)),
        (
            "cal-transfer",
            [
                "calibrate",
                "--from-results",
                "{fx}/cal.json",
                "--transfer-to",
                "a100",
                "--preset-out",
                "{tmp}/p.toml",
            ],
            ("a100",),
        ),
        (
            "cal-base-fr",
            [
                "calibrate",
                "--from-results",
                "{fx}/cal.json",
                "--base",
                "nope",
                "--preset-out",
                "{tmp}/p.toml",
            ],
            ("nope",),
        ),
        ("bench-impl", ["bench", "--impls", "v2,sdpa-magic"], ("sdpa-magic",)),
        ("bench-mask", ["bench", "--mask", "half"], ("half",)),
        ("bench-dtype", ["bench", "--dtype", "fp8"], ("fp8",)),
        ("bench-pass", ["bench", "--pass", "fwd_bwd"], ("fwd_bwd",)),
        ("bench-grid", ["bench", "--grid", "sparse"], ("sparse",)),
        ("validate-algos", ["validate", "--algos", "v7"], ("v7",)),
        ("validate-presets", ["validate", "--presets", "nope"], ("nope",)),
        ("validate-mask", ["validate", "--mask", ""], ("--mask",)),
        ("validate-pass", ["validate", "--pass", "both"], ("both",)),
        ("validate-grid", ["validate", "--grid", "rand"], ("rand",)),
        ("validate-headdims", ["validate", "--head-dims", "96"], ("96", "--head-dims")),
        ("scheduler-bad", [*BASES["whatif"], "--scheduler", "ftp://x"], ("ftp://x", "scheduler")),
        ("scheduler-down", [*BASES["whatif"], "--scheduler", "tcp://127.0.0.1:1"], ("scheduler",)),
    ]
    for name, argv, mentions in names:
        yield Case(
            f"name-{name}",
            argv,
            "any" if not mentions else "error",
            mentions=mentions,
            files={"d.toml": ("dir",)} if "d.toml" in " ".join(argv) else {},
            timeout_s=300 if name == "vary-many" else TIMEOUT_S,  # 3,000 legal points
        )


def conflict_cases():
    cases = [
        ("v3-a100", [*BASES["predict"], "--algo", "v3", "--gpu", "a100"], "error", ("v3",)),
        ("v3-bwd", [*BASES["predict"], "--algo", "v3", "--pass", "bwd"], "error", ("v3", "bwd")),
        ("fp8-v1", [*BASES["predict"], "--algo", "v1", "--dtype", "fp8"], "error", ("fp8",)),
        ("fp8-a100", [*BASES["predict"], "--dtype", "fp8", "--gpu", "a100"], "error", ("fp8",)),
        ("fa3-v2", [*BASES["predict"], "--config", "fa3", "--algo", "v2"], "any", ("fa3",)),
        ("persistent-v2", [*BASES["predict"], "--persistent"], "error", ("persistent",)),
        ("pingpong-v1", [*BASES["predict"], "--algo", "v1", "--pingpong"], "error", ("pingpong",)),
        ("d256-v3", [*BASES["predict"], "--algo", "v3", "-d", "256"], "any", ("256",)),
        (
            "block-smem",
            [*BASES["predict"], "--block-m", "256", "--block-n", "256", "-d", "128"],
            "error",
            ("shared memory", "smem"),
        ),
        ("warps-3", [*BASES["predict"], "--num-warps", "3"], "error", ("--num-warps", "warps")),
        ("warps-64", [*BASES["predict"], "--num-warps", "64"], "error", ("warps", "threads")),
        ("block-7", [*BASES["predict"], "--block-m", "7"], "error", ("block_m", "--block-m")),
        ("mma-sync-v3", [*BASES["predict"], "--algo", "v3", "--mma-path", "mma_sync"], "any", ()),
        (
            "wgmma-a100",
            [*BASES["predict"], "--gpu", "a100", "--mma-path", "wgmma"],
            "error",
            ("wgmma",),
        ),
        (
            "window-no-timeline",
            [*BASES["predict"], "--timeline-window", "0:1"],
            "error",
            ("--timeline",),
        ),
        ("sms-no-timeline", [*BASES["predict"], "--timeline-sms", "2"], "error", ("--timeline",)),
        ("transfer-alone", ["calibrate", "--transfer-to", "h100"], "error", ("--from-results",)),
        ("random-bwd", ["bench", "--grid", "random", "--pass", "bwd"], "error", ("--pass",)),
        ("random-impl", ["bench", "--grid", "random", "--impls", "v2"], "error", ("v2", "grid")),
        (
            "stored-baseline",
            [*BASES["report"], "--stored", "--update-baseline", "--baseline", "{tmp}/b.json"],
            "any",
            ("--stored",),
        ),
        ("seqlen-kv-causal", [*BASES["predict"], "--causal", "--seqlen-kv", "512"], "any", ()),
        ("kv-shorter-causal", [*BASES["predict"], "--causal", "--seqlen-kv", "128"], "any", ()),
        ("cta-out-of-grid", [*BASES["trace-show"], "--cta", "99999"], "error", ("CTA index",)),
        (
            "launch-out",
            [*BASES["trace-show"], "--cta", "0", "--launch", "5"],
            "error",
            ("launch index",),
        ),
        ("tokens-lt-n", [*BASES["compare"], "--tokens", "128"], "error", ("--tokens",)),
        ("hidden-lt-d", [*BASES["compare"], "--hidden", "32"], "error", ("--hidden",)),
        ("tokens-indivisible", [*BASES["compare"], "--tokens", "300"], "any", ("--tokens",)),
        ("no-cache-and-dir", [*BASES["whatif"], "--cache-dir", "{tmp}/c"], "any", ()),
        (
            "from-results-bench",
            ["calibrate", "--from-results", "{fx}/bench.json", "--preset-out", "{tmp}/p.toml"],
            "error",
            ("calibrate",),
        ),
        (
            "transfer-wrong-die",
            [
                "calibrate",
                "--from-results",
                "{fx}/cal.json",
                "--base",
                "a100",
                "--transfer-to",
                "h100",
                "--preset-out",
                "{tmp}/p.toml",
            ],
            "error",
            ("a100", "h200"),
        ),
        ("bwd-fp8", [*BASES["predict"], "--pass", "bwd", "--dtype", "fp8"], "error", ("fp8",)),
        ("explain-bwd-v3only", [*BASES["explain"], "--pass", "bwd", "--gpu", "h100"], "any", ()),
        ("gantt-v3-a100", [*BASES["gantt"], "--algo", "v3", "--gpu", "a100"], "error", ("v3",)),
        (
            "roofline-v3-a100",
            [*BASES["roofline"], "--algos", "v3", "--gpu", "a100"],
            "error",
            ("v3",),
        ),
        ("whatif-v3-a100", [*BASES["whatif"], "--algos", "v3", "--gpu", "a100"], "error", ("v3",)),
    ]
    for name, argv, expect, mentions in cases:
        yield Case(f"conflict-{name}", argv, expect, mentions=mentions)


OUTPUTS = [
    ("predict_timeline", [*BASES["predict"], "--timeline"], ".json"),
    ("predict_gantt", [*BASES["predict"], "--gantt"], ".png"),
    ("replay_timeline", [*BASES["trace-replay"], "--timeline"], ".json"),
    ("replay_gantt", [*BASES["trace-replay"], "--gantt"], ".png"),
    ("roofline", _without(BASES["roofline"], "-o") + ["-o"], ".png"),
    ("gantt", _without(BASES["gantt"], "-o") + ["-o"], ".png"),
    ("export", _without(BASES["trace-export"], "-o") + ["-o"], ".trace.json"),
    ("whatif_plot", [*BASES["whatif"], "--plot"], ".png"),
    ("report_png", [*BASES["report"], "--png"], ".png"),
    ("report_md", [*BASES["report"], "--markdown"], ".md"),
    ("report_baseline", [*BASES["report"], "--update-baseline", "--baseline"], ".json"),
    ("cal_preset", _without(BASES["calibrate"], "--preset-out") + ["--preset-out"], ".toml"),
    ("cal_out", ["calibrate", "--quick", "-o"], ".json"),
    ("bench_out", ["bench", "-o"], ".json"),
    ("validate_out", ["validate", "--quick", "-o"], ".json"),
]
TARGETS = [  # (name, path, files, expect)
    ("dir", "{tmp}", {}, "error"),
    ("missing", "{tmp}/missing/out{X}", {}, "error"),
    ("proc", "/proc/out{X}", {}, "error"),
    ("newline", "{tmp}/a\nb{X}", {}, "any"),
    ("suffix", "{tmp}/out.txt", {}, "error"),
    ("exists", "{tmp}/old{X}", {"old{X}": "old contents"}, "ok"),
    ("fifo", "{tmp}/fifo{X}", {"fifo{X}": ("fifo",)}, "error"),
    ("long", "{tmp}/" + "x" * 300 + "{X}", {}, "error"),
    ("empty", "", {}, "error"),
    ("devfull", "/dev/full", {}, "error"),
    ("dangling", "{tmp}/link{X}", {"link{X}": ("link", "{tmp}/nowhere/x")}, "any"),
    ("dirlink", "{tmp}/dl{X}", {"dl{X}": ("link", "{tmp}")}, "error"),
    ("sys", "/sys/out{X}", {}, "error"),
    ("trailing-slash", "{tmp}/out{X}/", {}, "any"),  # a Path drops the slash: out{X} written
]
FEW_TARGETS = ("dir", "missing", "proc", "fifo", "exists", "devfull", "newline")


def output_cases():
    for name, argv, suffix in OUTPUTS:
        gpu = argv[0] in GPU_ONLY or name == "cal_out"
        for target, path, files, expect in TARGETS:
            if gpu and target not in FEW_TARGETS:
                continue
            if name == "report_md" and target == "suffix":
                expect = "ok"
            mentions = (argv[-1],)
            if gpu:  # the path is checked first; then no GPU
                mentions = ("CUDA",) if expect != "error" else mentions
                expect = "error"
            path = path.replace("{X}", suffix)
            files = {k.replace("{X}", suffix): v for k, v in files.items()}
            yield Case(
                f"output-{name}-{target}", [*argv, path], expect, files=files, mentions=mentions
            )
    # the cache folder of whatif
    whatif = _without(BASES["whatif"], "--no-cache")
    for target, path, files in [
        ("file", "{tmp}/c", {"c": "x"}),
        ("proc", "/proc/c", {}),
        ("missing-parent", "{tmp}/a/b/c", {}),
        ("empty", "", {}),
    ]:
        yield Case(
            f"output-cache-{target}",
            [*whatif, "--cache-dir", path],
            "any" if target in ("missing-parent", "empty") else "error",
            files=files,
            mentions=("--cache-dir", "cache"),
        )
    yield Case(
        "output-same-as-input",
        ["trace", "replay", "{tmp}/in.trace.json", "--timeline", "{tmp}/in.trace.json"],
        "any",
        files={"in.trace.json": ("copy", "v2.trace.json")},
    )
    yield Case(
        "output-gantt-equals-timeline",
        [*BASES["predict"], "--timeline", "{tmp}/x.png", "--gantt", "{tmp}/x.png"],
        "any",
    )


def _results_variants(doc: dict, kind: str):
    """(name, bytes, expect) of a results file gone wrong."""
    text = json.dumps(doc)
    m0 = doc["measurements"][0]

    def edit(fn):
        d = copy.deepcopy(doc)
        fn(d)
        return json.dumps(d).encode()

    yield "empty", b"", "error"
    yield "latin1", text.replace("{", '{"note": "caf\xe9", ', 1).encode("latin-1"), "error"
    yield "bom", b"\xef\xbb\xbf" + text.encode(), "any"
    yield "truncated", text.encode()[: len(text) // 2], "error"
    yield "not-json", b"measurements: []\n", "error"
    yield "array", b"[1, 2]", "error"
    yield "null", b"null", "error"
    yield "nan-literal", text.replace("{", '{"x": NaN, ', 1).encode(), "error"
    yield (
        "bigint",
        text.replace('"schema_version": 1', '"schema_version": ' + "9" * 5000).encode(),
        "error",
    )
    yield "deep", b"[" * 200_000 + b"]" * 200_000, "error"
    yield "kind", edit(lambda d: d.update(kind="issue")), "error"
    yield "version", edit(lambda d: d.update(schema_version=99)), "error"
    yield "meta-str", edit(lambda d: d.update(metadata="x")), "error"
    yield "device-str", edit(lambda d: d["metadata"].update(device="H200")), "any"
    yield "meas-dict", edit(lambda d: d.update(measurements={"a": 1})), "error"
    yield "meas-empty", edit(lambda d: d.update(measurements=[])), "any"
    yield "meas-null-item", edit(lambda d: d["measurements"].append(None)), "error"
    if kind == "calibrate":
        yield "value-str", edit(lambda d: d["measurements"][0].update(value="fast")), "error"
        yield "value-neg", edit(lambda d: d["measurements"][0].update(value=-1)), "error"
        yield "value-1e999", edit(lambda d: d["measurements"][0].update(value=1e308 * 10)), "error"
        yield "value-huge", edit(lambda d: d["measurements"][0].update(value=1e300)), "error"
        yield "name-missing", edit(lambda d: d["measurements"][0].pop("name")), "error"
        yield "name-int", edit(lambda d: d["measurements"][0].update(name=5)), "error"
        yield "base-unknown", edit(lambda d: d["metadata"].update(base_preset="x100")), "error"
        yield "base-int", edit(lambda d: d["metadata"].update(base_preset=7)), "error"
        yield (
            "sm-count",
            edit(
                lambda d: [
                    r.update(value=1e300)
                    for r in d["measurements"]
                    if r["name"] == "device_sm_count"
                ]
            ),
            "error",
        )
        return
    yield "clock-str", edit(lambda d: d["measurements"][0].update(clock_sm_MHz="fast")), "error"
    yield "clock-zero", edit(lambda d: d["measurements"][0].update(clock_sm_MHz=0)), "error"
    yield "clock-huge", edit(lambda d: d["measurements"][0].update(clock_sm_MHz=1e300)), "error"
    yield (
        "time-1e999",
        text.replace(f'"time_s": {json.dumps(m0["time_s"])}', '"time_s": 1e999', 1).encode(),
        "error",
    )
    yield "time-neg", edit(lambda d: d["measurements"][0].update(time_s=-1)), "error"
    yield "time-zero", edit(lambda d: d["measurements"][0].update(time_s=0)), "error"
    yield "time-str", edit(lambda d: d["measurements"][0].update(time_s="1ms")), "error"
    yield "time-tiny", edit(lambda d: d["measurements"][0].update(time_s=1e-300)), "error"
    yield "causal-no", edit(lambda d: d["measurements"][0]["workload"].update(causal="no")), "error"
    yield "workload-list", edit(lambda d: d["measurements"][0].update(workload=[1])), "error"
    yield (
        "batch-huge",
        edit(lambda d: d["measurements"][0]["workload"].update(batch=10**9)),
        "error",
    )
    yield "batch-float", edit(lambda d: d["measurements"][0]["workload"].update(batch=2.5)), "error"
    yield (
        "headdim-str",
        edit(lambda d: d["measurements"][0]["workload"].update(head_dim="128")),
        "error",
    )
    yield "algo-unknown", edit(lambda d: d["measurements"][0].update(algo="v9")), "error"
    yield "config-bad", edit(lambda d: d["measurements"][0]["config"].update(block_m=-64)), "error"
    yield (
        "config-extra",
        edit(lambda d: d["measurements"][0]["config"].update(colour="red")),
        "error",
    )
    yield "status-odd", edit(lambda d: d["measurements"][0].update(status="maybe")), "error"
    yield "medians-str", edit(lambda d: d["measurements"][0].update(time_medians_s="x")), "error"
    yield (
        "medians-neg",
        edit(lambda d: d["measurements"][0].update(time_medians_s=[-1, 2])),
        "error",
    )
    if "predictions" in m0:
        yield "preds-list", edit(lambda d: d["measurements"][0].update(predictions=[1, 2])), "error"
    yield "dup-keys", text.replace('"kind": ', '"kind": "bench", "kind": ', 1).encode(), "any"


def _copy(path: Path, n: int) -> dict:
    """``path`` cut to its ``n`` smallest timed points (quick to predict again; not SDPA's
    math backend, whose schedule takes a minute at the smallest bench shape)."""
    doc = json.loads(path.read_text())
    timed = [
        m for m in doc["measurements"] if m.get("status") == "ok" and m.get("impl") != "sdpa-math"
    ]
    doc["measurements"] = sorted(timed, key=lambda m: m["flops"])[:n]
    return doc


def file_cases():
    small, bench = _copy(RESULTS, 4), _copy(BENCH, 6)
    for kind, doc in (("validate", small), ("bench", bench)):
        for name, data, expect in _results_variants(doc, kind):
            yield Case(
                f"results-{kind}-{name}",
                ["report", "{tmp}/r.json", "-j", "1"],
                expect,
                files={"r.json": data},
                mentions=("r.json",),
            )
    for name, data, expect in _results_variants(small, "validate"):
        if name in (
            "empty",
            "latin1",
            "truncated",
            "time-1e999",
            "causal-no",
            "clock-str",
            "preds-list",
            "device-str",
            "kind",
            "deep",
        ):
            yield Case(
                f"results-roofline-{name}",
                [*BASES["roofline"], "--results", "{tmp}/r.json", "-g", "h200"],
                "any" if expect == "any" else "error",
                files={"r.json": data},
                mentions=("r.json",),
            )
    cal = json.loads(CALIBRATE.read_text())
    for name, data, expect in _results_variants(cal, "calibrate"):
        yield Case(
            f"results-calibrate-{name}",
            ["calibrate", "--from-results", "{tmp}/c.json", "--preset-out", "{tmp}/p.toml"],
            expect,
            files={"c.json": data},
            mentions=("c.json",),
        )
    # files that are not files
    for name, files, expect in [
        ("missing", {}, "error"),
        ("dir", {"r.json": ("dir",)}, "error"),
        ("fifo", {"r.json": ("fifo",)}, "error"),
        ("devzero", {"r.json": ("link", "/dev/zero")}, "error"),
        ("devnull", {"r.json": ("link", "/dev/null")}, "error"),
        ("loop", {"r.json": ("link", "{tmp}/r.json")}, "error"),
        ("huge", {"r.json": ("big", 300 << 20)}, "error"),
        ("symlink-ok", {"r.json": ("copy", "small.json")}, "ok"),
    ]:
        for cmd, argv in [
            ("report", ["report", "{tmp}/r.json", "-j", "1"]),
            ("roofline", [*BASES["roofline"], "--results", "{tmp}/r.json"]),
            (
                "calibrate",
                ["calibrate", "--from-results", "{tmp}/r.json", "--preset-out", "{tmp}/p.toml"],
            ),
            ("replay", ["trace", "replay", "{tmp}/r.json"]),
            ("gpu", [*BASES["predict"], "--gpu", "{tmp}/r.json"]),
            ("profile", [*BASES["predict"], "--profile", "{tmp}/r.json"]),
        ]:
            e = expect
            if name == "symlink-ok" and cmd in ("calibrate", "replay", "gpu", "profile"):
                e = "error"  # a validate file is not a calibrate file, trace, preset or profile
            yield Case(f"file-{cmd}-{name}", argv, e, files=files, mentions=("r.json",))
    yield Case(
        "file-report-glob-mixed",
        ["report", "{tmp}/small.json", "{tmp}/cal.json", "-j", "1"],
        "ok",
        files={"small.json": ("copy", "small.json"), "cal.json": ("copy", "cal.json")},
    )
    yield Case(
        "file-report-only-other",
        ["report", "{tmp}/cal.json"],
        "error",
        files={"cal.json": ("copy", "cal.json")},
        mentions=("cal.json", "measurement"),
    )
    yield Case(
        "file-report-twice", ["report", "{fx}/small.json", "{fx}/small.json", "-j", "1"], "any"
    )
    yield Case(
        "file-roofline-many",
        [
            *BASES["roofline"],
            "--results",
            "{fx}/small.json",
            "--results",
            "{fx}/bench.json",
            "{fx}/cal.json",
        ],
        "ok",
    )


def _preset_variants():
    text = PRESET.read_text()

    def sub(key, value):
        return re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text, count=1)

    yield "empty", "", "error"
    yield "latin1", ("# caf\xe9\n" + text).encode("latin-1"), "error"
    yield "bad-toml", text + "\n[[[", "error"
    yield "missing-field", re.sub(r"(?m)^sm_count = .*$", "", text), "error"
    yield "sm-str", sub("sm_count", '"many"'), "error"
    yield "sm-float", sub("sm_count", "132.5"), "error"
    yield "sm-zero", sub("sm_count", "0"), "error"
    yield "sm-huge", sub("sm_count", "9" * 25), "error"
    yield "sm-bigint", sub("sm_count", "9" * 5000), "error"
    yield "bw-nan", sub("hbm_bandwidth_Bps", "nan"), "error"
    yield "bw-inf", sub("hbm_bandwidth_Bps", "inf"), "error"
    yield "bw-neg", sub("hbm_bandwidth_Bps", "-1.0"), "error"
    yield "bw-tiny", sub("hbm_bandwidth_Bps", "1e-300"), "error"
    yield "bw-table", sub("hbm_bandwidth_Bps", "{ a = 1 }"), "error"
    yield "bw-date", sub("hbm_bandwidth_Bps", "1979-05-27"), "error"
    yield "bool-int", sub("has_tma", "1"), "error"
    yield "arch-unknown", sub("arch", '"volta"'), "error"
    yield "unknown-key", text + "\nwarp_size = 32\n", "error"
    yield "dup-key", text + "\nsm_count = 66\n", "error"
    yield "nul", text.replace("sm_count", "sm_\x00count", 1), "error"
    yield "base-unknown", 'base = "x100"\nsm_count = 66\n', "error"
    yield "base-self", 'base = "{tmp}/p.toml"\nsm_count = 66\n', "error"
    yield "base-int", "base = 5\n", "error"
    yield "only-base", 'base = "h100_sxm5_80gb"\n', "any"
    yield "overlay", 'base = "h100_sxm5_80gb"\nsm_count = 66\n', "any"
    yield "overlay-bad", 'base = "h100_sxm5_80gb"\nsm_count = -66\n', "error"
    yield "smem-tiny", sub("smem_bytes_per_cta_max", "1"), "any"
    yield "clock-1hz", sub("sm_clock_hz", "1.0"), "any"


def preset_cases():
    for name, data, expect in _preset_variants():
        if isinstance(data, str):
            data = data.replace("{tmp}", "@TMP@")
        for cmd, argv in [
            ("hw", ["hw", "show", "{tmp}/p.toml", "--json"]),
            ("predict", [*BASES["predict"], "--gpu", "{tmp}/p.toml", "--json"]),
        ]:
            yield Case(
                f"preset-{cmd}-{name}",
                argv,
                expect,
                files={"p.toml": data},
                mentions=("p.toml",) if expect == "error" else (),
            )
    cycle = {"a.toml": 'base = "@TMP@/b.toml"\n', "b.toml": 'base = "@TMP@/a.toml"\n'}
    yield Case("preset-cycle", ["hw", "show", "{tmp}/a.toml"], files=cycle, mentions=("toml",))
    yield Case(
        "preset-no-suffix",
        ["hw", "show", "{tmp}/p"],
        "any",
        files={"p": PRESET.read_text()},
        mentions=("p",),
    )
    profile = '{"format": "tilesim-profile", "kernels": 7}'
    for name, data in [
        ("empty", ""),
        ("garbage", "{{{"),
        ("wrong", profile),
        ("list", "[]"),
        ("latin1", b"\xff\xfe"),
    ]:
        yield Case(
            f"profile-{name}",
            [*BASES["predict"], "--profile", "{tmp}/pr.json"],
            files={"pr.json": data},
            mentions=("pr.json", "profile"),
        )


def trace_file_cases():
    for name, files, expect in [
        ("missing", {}, "error"),
        ("empty", {"t.trace.json": ""}, "error"),
        ("dir", {"t.trace.json": ("dir",)}, "error"),
        ("fifo", {"t.trace.json": ("fifo",)}, "error"),
        ("devzero", {"t.trace.json": ("link", "/dev/zero")}, "error"),
        ("huge", {"t.trace.json": ("big", 70 << 20)}, "error"),
        ("latin1", {"t.trace.json": b'{"format": "tilesim-trace", "algo": "\xe9"}'}, "error"),
        ("deep", {"t.trace.json": "[" * 100_000 + "]" * 100_000}, "error"),
        ("bigint", {"t.trace.json": '{"version": ' + "9" * 5000 + "}"}, "error"),
        ("symlink", {"t.trace.json": ("link", "{fx}/v2.trace.json")}, "ok"),
        ("results", {"t.trace.json": ("copy", "small.json")}, "error"),
        ("preset", {"t.trace.json": PRESET.read_text()}, "error"),
    ]:
        yield Case(
            f"tracefile-{name}",
            ["trace", "replay", "{tmp}/t.trace.json"],
            expect,
            files=files,
            mentions=("t.trace.json",),
        )
    yield Case(
        "tracefile-suffix",
        ["trace", "replay", "{tmp}/t.json"],
        "any",
        files={"t.json": ("copy", "v2.trace.json")},
        mentions=("t.json",),
    )


def extreme_cases():
    cases = [
        ("n-limit", ["predict", "-b", "1", "-H", "1", "-n", "65536", "-d", "64"], "any"),
        ("n-over", ["predict", "-b", "1", "-H", "1", "-n", "65537", "-d", "64"], "error"),
        ("b-grid", ["predict", "-b", "100000", "-H", "128", "-n", "4096"], "any"),
        ("b-huge", ["predict", "-b", "1000000000"], "error"),
        ("heads-huge", ["predict", "-H", "1000000000"], "error"),
        ("kv-huge", [*BASES["predict"], "--seqlen-kv", "10000000"], "error"),
        ("kv-1", [*BASES["predict"], "--seqlen-kv", "1"], "any"),
        ("n-1", ["predict", "-b", "1", "-H", "1", "-n", "1", "-d", "64"], "any"),
        ("n-odd", ["predict", "-b", "1", "-H", "1", "-n", "257", "-d", "64"], "any"),
        ("d-1", ["predict", "-b", "1", "-H", "1", "-n", "256", "-d", "1"], "error"),
        ("bwd-large", ["predict", "--pass", "bwd", "-n", "16384", "-b", "1", "-H", "1"], "any"),
        (
            "standard-64k",
            ["predict", "--algo", "standard", "-n", "65536", "-b", "1", "-H", "1"],
            "any",
        ),
        (
            "v1-64k",
            ["predict", "--algo", "v1", "-n", "65536", "-b", "1", "-H", "1", "-d", "64"],
            "any",
        ),
        (
            "detailed-big",
            ["predict", "-n", "32768", "-b", "1", "-H", "4", "--fidelity", "detailed"],
            "any",
        ),
        ("sm-1", [*BASES["predict"], "--set", "sm_count=1", "-n", "8192"], "any"),
        ("sm-4096", [*BASES["predict"], "--set", "sm_count=4096"], "any"),
        ("hbm-slow", [*BASES["predict"], "--set", "hbm_bandwidth_Bps=1e-12x"], "any"),
        ("clock-slow", [*BASES["predict"], "--set", "sm_clock_hz=1e-12x"], "any"),
        ("launch-huge", [*BASES["predict"], "--set", "launch_overhead_s=1e6"], "any"),
        ("stages-max", [*BASES["predict"], "--num-stages", "100000"], "error"),
        ("block-huge", [*BASES["predict"], "--block-m", "1048576"], "error"),
        (
            "timeline-all",
            [*BASES["predict"], "--timeline", "{tmp}/t.json", "--timeline-sms", "4096"],
            "any",
        ),
        (
            "timeline-big",
            [
                "predict",
                "-n",
                "16384",
                "-b",
                "2",
                "--fidelity",
                "detailed",
                "--timeline",
                "{tmp}/t.json",
                "--timeline-sms",
                "4096",
            ],
            "any",
        ),
        ("gantt-sms-max", [*BASES["gantt"], "--sms", "132"], "any"),
        ("gantt-sms-over", [*BASES["gantt"], "--sms", "1000000"], "error"),
        (
            "compare-wide",
            [
                "compare",
                "--seqlens",
                ",".join(["256"] * 500),
                "--head-dims",
                "64",
                "-j",
                "1",
                "--tokens",
                "256",
                "--hidden",
                "64",
            ],
            "any",
        ),
        (
            "whatif-product",
            [
                "whatif",
                "--vary",
                "sm_count=" + ",".join(map(str, range(1, 60))),
                "--vary",
                "hbm_bandwidth_Bps=" + ",".join(f"{x}x" for x in range(1, 60)),
                "-n",
                "256",
                "-d",
                "64",
                "-b",
                "1",
                "-H",
                "1",
                "--no-cache",
            ],
            "any",
        ),
        ("explain-default", ["explain", "-j", "1"], "any"),
        ("hw-show-all", ["hw", "show", "h200-cal", "--json"], "ok"),
        ("trace-show-big", ["trace", "show", "-b", "1000", "-H", "64", "--json"], "any"),
        ("trace-show-cta", [*BASES["trace-show"], "--cta", "0", "--json"], "ok"),
    ]
    for name, argv, expect in cases:
        long = name in ("timeline-big", "whatif-product")  # legal, minutes: a longer timeout
        yield Case(f"extreme-{name}", argv, expect, timeout_s=300 if long else TIMEOUT_S)


def process_cases():
    """Ctrl-C, a closed pipe, an odd environment."""
    for name, argv in [
        (
            "predict",
            [
                "predict",
                "-n",
                "32768",
                "-b",
                "4",
                "--fidelity",
                "detailed",
                "--timeline",
                "{tmp}/t.json",
                "--gantt",
                "{tmp}/g.png",
            ],
        ),
        (
            "whatif",
            [
                "whatif",
                "--vary",
                "sm_count=0.5x,1x,2x",
                "--algos",
                "standard,v2",
                "-n",
                "16384",
                "-j",
                "1",
                "--cache-dir",
                "{tmp}/c",
                "--plot",
                "{tmp}/w.png",
            ],
        ),
        ("compare", ["compare", "-j", "2", "--json"]),
        (
            "report",
            [
                "report",
                "{fx}/big.json",
                "-j",
                "1",
                "--png",
                "{tmp}/r.png",
                "--markdown",
                "{tmp}/r.md",
            ],
        ),
        ("explain", ["explain", "-j", "1", "--markdown"]),
        (
            "gantt",
            [
                "gantt",
                "-n",
                "32768",
                "-H",
                "16",
                "--algo",
                "standard,v1,v2,v3",
                "-o",
                "{tmp}/g.png",
            ],
        ),
    ]:
        yield Case(f"signal-int-{name}", argv, "interrupt", interrupt_after_s=2.5, keeps=("c/",))
    py = f"{PYTHON} -m tilesim"
    yield Case("signal-pipe-hwshow", [], "ok", shell=f"{py} hw show h100 --json | head -c 10")
    yield Case("signal-pipe-trace", [], "ok", shell=f"{py} trace show --json | head -n 1")
    yield Case("signal-pipe-help", [], "ok", shell=f"{py} predict --help | head -n 1")
    yield Case(
        "signal-stdout-full",
        [],
        "error",
        shell=f"{py} hw show h100 --json > /dev/full",
        mentions=("stdout", "space"),
    )
    yield Case("signal-stdout-closed", [], "any", shell=f"{py} hw list >&-")
    for name, env in [
        ("ascii", {"PYTHONIOENCODING": "ascii"}),
        ("c-locale", {"LC_ALL": "C", "LANG": "C"}),
        ("narrow", {"COLUMNS": "5"}),
        ("wide", {"COLUMNS": "100000"}),
        ("no-home", {"HOME": "/nonexistent"}),
        ("mpl-ro", {"MPLCONFIGDIR": "/proc/mpl"}),
    ]:
        yield Case(f"env-{name}-predict", [*BASES["predict"]], "ok", env=env)
        yield Case(f"env-{name}-hwshow", ["hw", "show", "h100"], "ok", env=env)
        yield Case(f"env-{name}-gantt", BASES["gantt"], "ok", env=env)


# -- trace mutations ------------------------------------------------------------------------

BAD_VALUES = [
    None,
    True,
    False,
    -1,
    0,
    1,
    2**31,
    2**63,
    10**30,
    1e300,
    -1e300,
    1e-300,
    1.5,
    "x",
    "",
    [],
    {},
    [1, 2],
    {"a": 1},
    "x" * 10_000,
    10**16,
    1e16,
    -(2**63),
]
BAD_EXPRESSIONS = [
    "min(d)",
    "cdiv(d)",
    "cdiv(N_q, 0)",
    "N_q // 0",
    "N_q % 0",
    "max(" + ",".join(["1"] * 100) + ")",
    "9" * 40,
    "d*d*d*d*d*d*d*d*d*d*d*d",
    "+".join(["1"] * 200_000),
    "(" * 100_000 + "1" + ")" * 100_000,
    "__import__('os').system('true')",
    "d.real",
    "d/2",
    "d**2",
    "1e3",
    "d and 1",
    "lambda: 1",
    "unknown_name",
    "N_q - 100000",
    "-" * 5000 + "1",
    "d if d else 1",
    "[d]",
    "d;1",
    "ｄ",
    "d\n",
    "",
    " ",
    "2147483648 * 2147483648 * 4",
    "cdiv(N_q, -1)",
    "max()",
    "min(d, d, d)",
    "T_c - 1",
]


def _leaves(doc, prefix=()):
    """Every path in a JSON document (values and containers)."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, (*prefix, i))


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def _put(doc, path, value):
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _mutate(doc: dict, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of a trace document: (what was done, the file's bytes)."""
    doc = copy.deepcopy(doc)
    paths = list(_leaves(doc))[1:]
    kind = rng.choice(
        [
            "value",
            "value",
            "value",
            "delete",
            "add",
            "expr",
            "expr",
            "expr",
            "dup",
            "text",
            "text",
            "deps",
            "loop",
            "issue",
            "grid",
            "roles",
        ]
    )
    path = rng.choice(paths)
    where = ".".join(map(str, path))
    if kind == "value":
        value = rng.choice(BAD_VALUES)
        _put(doc, path, value)
        what = f"{where} = {json.dumps(value)[:40]}"
    elif kind == "delete":
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        what = f"del {where}"
    elif kind == "add":
        dicts = [p for p in paths if isinstance(_get(doc, p), dict)]
        target = rng.choice(dicts)
        _get(doc, target)["extra_" + rng.choice("abc")] = rng.choice(BAD_VALUES)
        what = f"add key under {'.'.join(map(str, target))}"
    elif kind == "expr":
        strings = [
            p
            for p in paths
            if isinstance(_get(doc, p), str | int)
            and p[-1]
            in ("nbytes", "m", "n", "k", "exp", "fp32", "smem", "trips", "prefetch", "tile")
            or (len(p) > 1 and p[-2] == "tile")
        ]
        target = rng.choice(strings or paths)
        value = rng.choice(BAD_EXPRESSIONS)
        _put(doc, target, value)
        what = f"{'.'.join(map(str, target))} = expr {value[:30]!r}"
    elif kind == "dup":
        lists = [p for p in paths if isinstance(_get(doc, p), list) and _get(doc, p)]
        target = rng.choice(lists)
        items = _get(doc, target)
        times = rng.choice([2, 100, 20_000])
        items.extend(copy.deepcopy(items[0]) for _ in range(times))
        what = f"{'.'.join(map(str, target))} x{times}"
    elif kind == "deps":
        ops = [p for p in paths if isinstance(_get(doc, p), dict) and "op" in _get(doc, p)]
        target = rng.choice(ops)
        op = _get(doc, target)
        dep = rng.choice(["self", "nowhere", "x@-0", "x@-1000000", "cycle", "@", "a@b", "s@-1"])
        own = op.get("id") or op.get("name") or "q"
        op["deps"] = {"self": [own], "nowhere": ["nope"], "cycle": [own, own]}.get(dep, [dep])
        if dep == "self" and "id" not in op:
            op["id"] = own
        what = f"{'.'.join(map(str, target))}.deps = {dep}"
    elif kind == "loop":
        loops = [
            p for p in paths if isinstance(_get(doc, p), dict) and _get(doc, p).get("op") == "loop"
        ]
        target = rng.choice(loops) if loops else ()
        value = rng.choice([10**12, 2**21, 2**21 + 1, 10**16, 1e12, -1, 0, "T_c * T_c * T_c"])
        key = rng.choice(["trips", "prefetch"])
        if loops:
            _get(doc, target)[key] = value
        what = f"{'.'.join(map(str, target))}.{key} = {value}"
    elif kind == "issue":
        launch = rng.randrange(len(doc["launches"]))
        key = rng.choice(["issue_per_cta", "issue_per_step", "spill_reload_covers"])
        value = rng.choice([1e16, 1e9, 1e9 + 1, -1, float("nan"), "x", [1e16] * 4, [], 1e308])
        doc["launches"][launch][key] = value
        what = f"launches.{launch}.{key} = {value!r}"[:80]
    elif kind == "grid":
        launch = rng.randrange(len(doc["launches"]))
        value = rng.choice([0, -1, 2**31, 2**31 - 1, 10**9, "N_q", 1.5, None])
        grid = doc["launches"][launch]["grid"]
        grid[rng.randrange(len(grid))][1] = value
        what = f"launches.{launch}.grid = {value}"
    elif kind == "roles":
        launch = doc["launches"][rng.randrange(len(doc["launches"]))]
        roles = launch["program"]["roles"]
        choice = rng.choice(["none", "zero-warps", "many", "warps-huge", "threads-0"])
        if choice == "none":
            roles.clear()
        elif choice == "zero-warps":
            roles[0]["warps"] = 0
        elif choice == "many":
            roles.extend(copy.deepcopy(roles[0]) for _ in range(200))
        elif choice == "warps-huge":
            roles[0]["warps"] = 10**9
        else:
            launch["threads"] = 0
        what = f"roles {choice}"
    else:  # text-level
        text = json.dumps(doc, indent=1).encode()
        how = rng.choice(["cut", "flip", "latin1", "bom", "digits", "nan", "tail", "dupkey"])
        at = rng.randrange(len(text))
        if how == "cut":
            data = text[:at]
        elif how == "flip":
            data = text[:at] + bytes([text[at] ^ (1 << rng.randrange(8))]) + text[at + 1 :]
        elif how == "latin1":
            data = text[:at] + b"\xe9" + text[at:]
        elif how == "bom":
            data = b"\xef\xbb\xbf" + text
        elif how == "digits":
            data = re.sub(rb"\b(\d+)\b", lambda m: m.group(1) * 50, text, count=1 + at % 5)
        elif how == "nan":
            data = text.replace(b": 0", b": NaN", 1)
        elif how == "tail":
            data = text + b"\n{}"
        else:
            data = text.replace(b'"algo":', b'"algo": "v9", "algo":', 1)
        return f"text {how} at {at}", data
    return what, json.dumps(doc).encode()


def mutation_cases(fixtures: Path):
    rng = random.Random(SEED)
    bases = sorted(fixtures.glob("*.trace.json"))
    docs = {p.name: json.loads(p.read_text()) for p in bases}
    for i in range(MUTATIONS):
        name = rng.choice(sorted(docs))
        what, data = _mutate(docs[name], rng)
        argv = ["trace", "replay", "{tmp}/m.trace.json", "--json"]
        if i % 10 == 0:
            argv += ["--fidelity", "detailed"]
        if i % 10 == 5:
            argv += ["--timeline", "{tmp}/t.json"]
        if i % 20 == 7:
            argv += ["--gantt", "{tmp}/g.png"]
        case = Case(f"trace-mut-{i:03d}", argv, "any", files={"m.trace.json": data})
        case.note = f"{name}: {what}"
        yield case


# -- fixtures -------------------------------------------------------------------------------


def make_fixtures(folder: Path) -> None:
    """Valid inputs, written by tilesim itself (the trace files) or cut from the committed
    results (small enough to predict in seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    exports = {
        "v2.trace.json": ["--algo", "v2", *SMALL],
        "v3-causal.trace.json": ["--algo", "v3", *SMALL, "--causal"],
        "standard-bwd.trace.json": ["--algo", "standard", *SMALL, "--pass", "bwd"],
        "v1.trace.json": ["--algo", "v1", *SMALL],
        "v2-fwd_bwd.trace.json": ["--algo", "v2", *SMALL, "--pass", "fwd_bwd"],
    }
    for name, args in exports.items():
        subprocess.run(
            [PYTHON, "-m", "tilesim", "trace", "export", "-o", str(folder / name), *args],
            check=True,
            capture_output=True,
            cwd=folder,
        )
    (folder / "small.json").write_text(json.dumps(_copy(RESULTS, 4)))
    (folder / "big.json").write_text(json.dumps(_copy(RESULTS, 60)))
    (folder / "bench.json").write_text(json.dumps(_copy(BENCH, 6)))
    shutil.copy(CALIBRATE, folder / "cal.json")


def _materialize(files: dict, tmp: Path, fx: Path) -> None:
    for name, data in files.items():
        path = tmp / name
        if isinstance(data, tuple):
            how = data[0]
            if how == "dir":
                path.mkdir()
            elif how == "fifo":
                os.mkfifo(path)
            elif how == "link":
                os.symlink(_fill(data[1], tmp, fx), path)
            elif how == "copy":
                shutil.copy(fx / data[1], path)
            elif how == "big":
                with open(path, "wb") as fh:
                    fh.write(b'{"a": "' + b" " * (data[1] - 10) + b'"}')
            continue
        if isinstance(data, str):
            data = data.replace("@TMP@", str(tmp)).encode("utf-8", "surrogateescape")
        path.write_bytes(data)


def _fill(text: str, tmp: Path, fx: Path) -> str:
    return text.replace("{tmp}", str(tmp)).replace("{fx}", str(fx))


# -- running and judging --------------------------------------------------------------------


def _limit() -> None:
    """The case's process: the memory limit, and Ctrl-C as a terminal delivers it (a
    campaign started in the background inherits SIGINT ignored, and so would its cases)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _tree(folder: Path) -> dict[str, float]:
    out = {}
    for root, dirs, names in os.walk(folder):
        for n in names + dirs:
            p = Path(root) / n
            with contextlib.suppress(OSError):
                out[str(p.relative_to(folder))] = p.lstat().st_mtime_ns
    return out


def _guarded() -> dict[str, float]:
    """The files of the places a command writes by default (the repository's own)."""
    out = {}
    for folder in GUARDED:
        for p in folder.iterdir():
            if p.is_file() or folder is not ROOT:
                out[str(p)] = p.lstat().st_mtime_ns
    return out


NON_FINITE = re.compile(r"(?<![\w.])-?(nan|inf|infinity)(?![\w])", re.IGNORECASE)


def _non_finite_json(text: str) -> bool:
    bad = []

    def note(name):
        bad.append(name)
        return 0

    try:
        json.loads(text, parse_constant=note)
    except ValueError:
        return False
    return bool(bad)


def judge(case: Case, rc, out: str, err: str, new: list[str], tmp: Path, seconds: float) -> str:
    """The case's class (see README.md)."""
    if rc is None:
        return "hang"
    text = out + err
    if "Traceback (most recent call last)" in text:
        return "traceback"
    if rc < 0 or rc == 137 or "MemoryError" in text:
        return "memory-or-crash"
    lines = err.splitlines()
    if case.expect == "interrupt":
        if rc == 0:
            return "ok-finished-first"
        if rc != 130:
            return "wrong-exit"
        if lines != ["interrupted"]:
            return "multi-line"
        return "partial-file" if new else "clean-interrupt"
    if rc == 0:
        if any(n.endswith(".tmp") or "/." in "/" + n for n in new):
            return "partial-file"
        if "--json" in case.argv and _non_finite_json(out):
            return "non-finite"
        if "--json" not in case.argv and case.shell is None and NON_FINITE.search(out):
            return "non-finite"
        for n in new:
            p = tmp / n
            if (
                p.suffix == ".json"
                and p.is_file()
                and _non_finite_json(p.read_text("utf-8", "replace"))
            ):
                return "non-finite"
        if case.expect == "error":
            return "accepted-bad-input"
        return "ok"
    if rc == 2:
        if len(lines) != 1 or not lines[0].startswith("error: "):
            return "multi-line"
        if new:
            return "partial-file"
        if case.expect == "ok":
            return "refused-good-input"
        if case.mentions and not any(m.lower() in lines[0].lower() for m in case.mentions):
            return "clean-error-vague"
        return "clean-error"
    return "wrong-exit"


def run_case(case: Case, fx: Path, show: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="tilesim-campaign-") as name:
        tmp = Path(name)
        _materialize(case.files, tmp, fx)
        before, guarded = _tree(tmp), _guarded()
        env = dict(os.environ, TILESIM_TRACEBACK="1", **case.env)
        env.pop("TILESIM_FUZZ_EXAMPLES", None)
        if case.shell is not None:
            cmd = ["bash", "-o", "pipefail", "-c", _fill(case.shell, tmp, fx)]
        else:
            cmd = [PYTHON, "-m", "tilesim", *(_fill(a, tmp, fx) for a in case.argv)]
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=tmp,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_limit,
            start_new_session=True,
        )
        rc = None
        try:
            if case.interrupt_after_s is not None:
                try:
                    out, err = proc.communicate(timeout=case.interrupt_after_s)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=case.timeout_s)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        seconds = time.perf_counter() - start
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        after = _tree(tmp)
        new = sorted(
            n for n in after if n not in before and not n.startswith(case.keeps or ("\0",))
        )
        if case.expect not in ("ok", "any") and rc == 0:
            new = []  # files of a success are its outputs
        elif rc == 0:
            new = [n for n in new if n.endswith(".tmp") or "/." in "/" + n]
        cls = judge(case, rc, out, err, new, tmp, seconds)
        if _guarded() != guarded:
            cls = "wrote-into-repo"
        first = err.strip().splitlines()[-1] if err.strip() else ""
        if show:
            print(
                f"$ {case.command()}\nrc={rc} {seconds:.1f}s class={cls}\n--- stdout\n"
                f"{out[-3000:]}\n--- stderr\n{err[-3000:]}\n--- new files {new}"
            )
        return {
            "id": case.id,
            "class": cls,
            "rc": rc,
            "s": round(seconds, 1),
            "err": first[:160],
            **({"note": case.note} if getattr(case, "note", None) else {}),
        }


# classes that break the contract (the targets: none of these)
FAILURES = (
    "traceback",
    "hang",
    "memory-or-crash",
    "wrong-exit",
    "multi-line",
    "partial-file",
    "wrote-into-repo",
    "non-finite",
    "accepted-bad-input",
    "refused-good-input",
    "ok-finished-first",
)


SERVING = ["predict", "-b", "2", "-H", "8", "-n", "1", "--seqlen-kv", "1024", "-d", "64"]


def serving_cases():
    """The serving options (GQA, decode against a KV cache, varlen, pages, split-KV)."""
    for option, legal in (("--kv-heads", ()), ("--page-size", ("0",)), ("--num-splits", ())):
        for i, value in enumerate(INT_BAD + ["3", "7", "1024"]):
            yield Case(
                f"serving-int{option.replace('-', '_')}-{i}",
                [*SERVING, option, value],
                "any"
                if value in legal or value in ("3", "7", "1024") and option != "--kv-heads"
                else "error",
                mentions=(option, option.strip("-").replace("-", "_")),
            )
    for i, value in enumerate(
        [
            "",
            ",",
            "a,b",
            "512,-1",
            "512,0",
            "9" * 30,
            "512",
            "512,1024,2048",
            "512,100000000",
            "512,,1024",
            "1e3,2",
        ]
    ):
        yield Case(
            f"serving-seqlens-kv-{i}",
            [*SERVING, "--seqlens-kv", value],
            "any" if value in ("512,1024", "512,,1024") else "error",
            mentions=("--seqlens-kv", "seqlens_kv"),
        )
    conflicts = [
        ("kv-heads-indivisible", ["--kv-heads", "3"], "error", ("kv_heads", "--kv-heads")),
        ("kv-heads-more", ["--kv-heads", "16"], "error", ("kv_heads", "--kv-heads")),
        ("kv-heads-v1", ["--kv-heads", "2", "--algo", "v1"], "any", ("kv", "v1")),
        ("kv-heads-standard", ["--kv-heads", "2", "--algo", "standard"], "any", ()),
        ("kv-heads-v3", ["--kv-heads", "2", "--algo", "v3"], "any", ()),
        ("kv-heads-bwd", ["--kv-heads", "2", "--pass", "bwd"], "any", ("bwd", "kv")),
        ("splits-v3", ["--num-splits", "4", "--algo", "v3"], "error", ("--num-splits", "v3")),
        ("splits-huge", ["--num-splits", "100000"], "error", ("--num-splits", "num_splits")),
        ("pack-gqa-v1", ["--pack-gqa", "--algo", "v1"], "error", ("--pack-gqa", "v1")),
        ("pack-gqa-mha", ["--pack-gqa"], "any", ()),
        ("pack-gqa-gqa", ["--pack-gqa", "--kv-heads", "2"], "any", ()),
        ("page-size-3", ["--page-size", "3"], "error", ("page_size", "--page-size")),
        ("page-size-big", ["--page-size", "4096"], "any", ("page",)),
        ("decode-causal", ["--causal"], "any", ()),
        ("kv-short-causal", ["--causal", "-n", "2048"], "any", ()),
        ("seqlens-kv-longest", ["--seqlens-kv", "512,4096"], "any", ("seqlen_kv",)),
        ("decode-fp8-v2", ["--dtype", "fp8"], "error", ("fp8",)),
        ("decode-explain", None, "any", ()),
        ("kv-huge-scores", ["-n", "65536", "--seqlen-kv", "131072"], "error", ("seqlen",)),
    ]
    for name, extra, expect, mentions in conflicts:
        argv = (
            [
                "explain",
                "-n",
                "1",
                "--seqlen-kv",
                "1024",
                "-d",
                "64",
                "-b",
                "2",
                "-H",
                "8",
                "--kv-heads",
                "2",
                "-j",
                "1",
            ]
            if extra is None
            else [*SERVING, *extra]
        )
        yield Case(f"serving-{name}", argv, expect, mentions=mentions)
    for command in ("validate", "bench"):
        for i, value in enumerate(["serving", "servng"]):
            yield Case(
                f"serving-{command}-grid-{i}",
                [command, "--grid", value, "--points", "3"],
                mentions=("CUDA",) if value == "serving" else ("--grid",),
            )


def all_cases(fx: Path) -> list[Case]:
    cases = [
        *parse_cases(),
        *number_cases(),
        *set_cases(_fields()),
        *name_cases(),
        *conflict_cases(),
        *serving_cases(),
        *output_cases(),
        *file_cases(),
        *preset_cases(),
        *trace_file_cases(),
        *extreme_cases(),
        *process_cases(),
        *mutation_cases(fx),
    ]
    ids = Counter(c.id for c in cases)
    assert max(ids.values()) == 1, [i for i, n in ids.items() if n > 1]
    return cases


def combine(before: Path, after: Path, out: Path) -> None:
    """One compact file of two runs (the tree before the fixes, and after): their
    summaries, and per case its class in each, the later run's exit code, seconds and
    first stderr line (temp folders written {tmp}), one case per line."""
    new = json.loads(after.read_text())
    old = {"summary": None, "cases": []} if str(before) == "-" else json.loads(before.read_text())
    was = {r["id"]: r["class"] for r in old["cases"]}
    rows = []
    for r in new["cases"]:
        err = re.sub(r"/tmp/tilesim-(campaign|fixtures)-\w+", "{tmp}", r["err"])[:100]
        rows.append([r["id"], was.get(r["id"]), r["class"], r["rc"], r["s"], err])
    head = {"before": old["summary"], "after": new["summary"]}
    columns = ["id", "before", "after", "rc", "s", "stderr"]
    lines = ",\n".join(json.dumps(row, ensure_ascii=False) for row in rows)
    text = json.dumps(head, indent=1)[:-2]
    out.write_text(f'{text},\n "columns": {json.dumps(columns)},\n "cases": [\n{lines}\n]}}\n')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="case ids or id prefixes (groups)")
    ap.add_argument("--out", type=Path, default=HERE / "results.json")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--show", action="store_true", help="print each case's output")
    ap.add_argument("--python", default=sys.executable, help="the interpreter to run tilesim")
    ap.add_argument("--root", type=Path, default=ROOT, help="that tilesim's tree (guarded)")
    ap.add_argument(
        "--combine",
        nargs=2,
        type=Path,
        metavar=("BEFORE", "AFTER"),
        help="merge two runs' files into --out (the committed results.json); BEFORE - : none",
    )
    args = ap.parse_args()
    if args.combine:
        combine(*args.combine, args.out)
        return
    global PYTHON
    PYTHON = args.python
    GUARDED[:] = [args.root / "hwmodels" / "presets", args.root / "results" / "raw", args.root]
    with tempfile.TemporaryDirectory(prefix="tilesim-fixtures-") as name:
        fx = Path(name)
        make_fixtures(fx)
        cases = all_cases(fx)
        if args.only:
            cases = [c for c in cases if any(c.id == o or c.id.startswith(o) for o in args.only)]
        if args.list:
            for c in cases:
                print(f"{c.id}\t{c.expect}\t{c.command()!r}\t{getattr(c, 'note', '')}")
            return
        start = time.perf_counter()
        results = []
        with ThreadPoolExecutor(args.jobs) as pool:
            for i, r in enumerate(pool.map(lambda c: run_case(c, fx, args.show), cases), 1):
                results.append(r)
                if r["class"] in FAILURES:
                    print(
                        f"[{i}/{len(cases)}] {r['id']}: {r['class']} ({r['err']})",
                        file=sys.stderr,
                        flush=True,
                    )
                elif i % 50 == 0:
                    print(f"[{i}/{len(cases)}] ...", file=sys.stderr, flush=True)
    counts = Counter(r["class"] for r in results)
    mutations = Counter(r["class"] for r in results if r["id"].startswith("trace-mut-"))
    summary = {
        "cases": len(results),
        "trace_mutations": sum(mutations.values()),
        "seed": SEED,
        "timeout_s": TIMEOUT_S,
        "memory_limit_bytes": MEMORY_BYTES,
        "wall_s": round(time.perf_counter() - start),
        "classes": dict(sorted(counts.items())),
        "mutation_classes": dict(sorted(mutations.items())),
        "failures": sum(counts[c] for c in FAILURES),
    }
    doc = {"summary": summary, "cases": results}
    args.out.write_text(json.dumps(doc, indent=0, sort_keys=False) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
