"""Property-based tests of the input contract: whatever a user types or a file holds,
tilesim either succeeds with finite output or says what is wrong in one line (exit 2);
never a traceback, never a partial file.

Budget: about 20 s on one core (bounded examples, no deadline: a simulation may take a
second). Sizes a generator draws stay small where they are legal, so that a legal draw
is quick to simulate, and reach far beyond every limit where they are not.
"""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from contextlib import suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.test_errors import run
from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu, preset_path
from tilesim.traces import build
from tilesim.traces.files import load, save, to_dict
from tilesim.traces.workload import Workload
from tilesim.validate import paths, schema

FUZZ = settings(
    max_examples=int(os.environ.get("TILESIM_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize="TILESIM_FUZZ_EXAMPLES" not in os.environ,  # CI: the same examples every run
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


def assert_contract(code: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert err.startswith("error: ") and err.count("\n") == 1, err


def finite_json(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in the JSON output")

    return json.loads(text, parse_constant=refuse)


# -- values a user might type ---------------------------------------------------------

NASTY = st.sampled_from(
    ["", "-1", "0", "nan", "inf", "-inf", "1e300", "1e-300", "9" * 25, "9" * 40, "0x10",
     "1.5", "abc", "12abc", "\n", "a\nb", "ü", "--", "-n", " 64 ", "2x", "0x", "-2x"]
)  # fmt: skip
SMALL_INT = st.integers(min_value=1, max_value=4).map(str)
SEQLEN = st.sampled_from(["128", "256", "512", "1000"])
VALUE = st.one_of(NASTY, SMALL_INT, st.text(max_size=6))

OPTIONS = {
    "-b": SMALL_INT,
    "-H": SMALL_INT,
    "-n": SEQLEN,
    "-d": st.sampled_from(["64", "128", "96", "0"]),
    "--dtype": st.sampled_from(["fp16", "bf16", "fp8", "fp4", "FP16"]),
    "--algo": st.sampled_from(["standard", "v1", "v2", "v3", "v4", ""]),
    "--gpu": st.sampled_from(["a100", "h100", "h200", "nope", "/no/such.toml"]),
    "--set": st.sampled_from(
        [
            "sm_count=1e300",
            "sm_count=66",
            "hbm_bandwidth_Bps=2x",
            "hbm_bandwidth_Bps=1e-300",
            "l2_bytes=0",
            "nope=1",
            "has_tma=maybe",
            "sm_clock_hz=" + "9" * 25,
            "=",
            "x",
        ]
    ),  # fmt: skip
    "--block-m": st.sampled_from(["64", "128", "96", "0", "1048576"]),
    "--num-stages": st.sampled_from(["1", "2", "0", "100000"]),
    "--fidelity": st.sampled_from(["fast", "detailed", "exact"]),
    "--timeline-window": st.sampled_from(["0:5", "5:0", "a:b", "0:1e300", "nan:1"]),
    "--pass": st.sampled_from(["fwd", "bwd", "sideways"]),
    # serving shapes: grouped heads, a longer cache, varlen, pages, the decode kernel
    "--kv-heads": st.sampled_from(["1", "2", "3", "0", "8"]),
    "--seqlen-kv": st.sampled_from(["1", "128", "4096", "100", "70000", "2000000"]),
    "--seqlens-kv": st.sampled_from(["128", "1,2", "300,100", "0,1", "abc", ","]),
    "--page-size": st.sampled_from(["0", "16", "24", "-1"]),
    "--num-splits": st.sampled_from(["1", "2", "3", "200", "0"]),
}
FLAGS = ["--causal", "--json", "--persistent", "--no-pingpong", "--pack-gqa"]


@st.composite
def command_lines(draw):
    command = draw(st.sampled_from([["predict"], ["trace", "show"], ["trace", "export"]]))
    args = list(command)
    for name in draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=5, unique=True)):
        args += [name, draw(st.one_of(OPTIONS[name], VALUE))]
    for flag in draw(st.lists(st.sampled_from(FLAGS), max_size=2, unique=True)):
        args.append(flag)
    if draw(st.booleans()):  # an unknown option or a stray argument
        args.append(draw(st.sampled_from(["--bogus", "stray", "-z", "--set"])))
    if "-n" not in args:  # legal draws stay small: quick to simulate
        args += ["-n", "256", "-b", "1", "-H", "1"]
    return args


SERVING = {
    "batch": st.integers(-1, 3),
    "heads": st.integers(1, 8),
    "seqlen_q": st.sampled_from([1, 2, 64, 300, 1 << 17]),
    "seqlen_kv": st.sampled_from([1, 100, 4096, 1 << 20, (1 << 20) + 1]),
    "head_dim": st.sampled_from([64, 128, 96]),
    "causal": st.booleans(),
    "kv_heads": st.one_of(st.none(), st.integers(-1, 9), st.just("2")),
    "seqlens_kv": st.one_of(
        st.none(), st.lists(st.integers(-1, 5000), max_size=4).map(tuple), st.just("1,2")
    ),
    "page_size": st.sampled_from([0, 1, 16, 24, -16, True]),
    "page_table": st.one_of(
        st.none(),
        st.lists(st.lists(st.integers(-1, 9), max_size=300).map(tuple), max_size=4).map(tuple),
        st.just(((0, "1"),)),
    ),
}


@FUZZ
@given(kw=st.fixed_dictionaries({}, optional=SERVING))
def test_workloads_are_built_or_refused_in_one_line(kw):
    """Any serving fields: a valid workload whose FLOPs and K/V bytes are finite and
    positive, or one TilesimError line (never another exception)."""
    base = {"batch": 1, "heads": 4, "seqlen_q": 64, "seqlen_kv": 64, "head_dim": 64}
    try:
        w = Workload(**(base | kw))
    except TilesimError as exc:
        assert "\n" not in str(exc)
        return
    assert w.heads % w.num_kv_heads == 0
    assert not (w.causal and w.seqlen_q > w.seqlen_kv)
    assert 0 < w.flops() < math.inf and w.kv_bytes() > 0
    assert Workload(**w.to_dict()) == w


@FUZZ
@given(args=command_lines(), output=st.sampled_from(["ok", "dir", "missing", "suffix", None]))
def test_cli_arguments_succeed_or_fail_in_one_line(args, output):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        target = {
            "ok": tmp / "out.trace.json",
            "dir": tmp,
            "missing": tmp / "no" / "out.trace.json",
            "suffix": tmp / "out.txt",
            None: None,
        }[output]
        if args[:2] == ["trace", "export"]:
            args = [*args, "-o", str(target or tmp / "t.trace.json")]
        elif target is not None and args[0] == "predict":
            timeline = tmp / "t.json" if output == "ok" else target
            args = [*args, "--timeline", str(timeline)]
        code, out, err = run(*args)
        assert_contract(code, out, err)
        left = sorted(p.name for p in tmp.rglob("*"))
        if code != 0:
            assert left == [], left  # no partial file, no temp file
        else:
            assert not any(name.endswith(".tmp") for name in left), left
            if "--json" in args:
                finite_json(out)


JOBS = st.sampled_from(["1", "1", "1", "0", "-1", "1025", "9" * 30])
SWEEP_VALUES = st.sampled_from(
    ["256", "512", "256,512", "", ",", "0", "-512", "abc", "9" * 30, "1e300", "64", "96"]
)
VARY = st.sampled_from(
    ["hbm_bandwidth_Bps=1x,2x", "sm_count=0.5x,1x", "sm_count=1e300x", "nope=1x", "=", "x",
     "hbm_bandwidth_Bps=", "l2_bytes=1x,0x", "has_tma=true,false", "sm_count=1,2,3"]
)  # fmt: skip


@st.composite
def sweep_lines(draw):
    """whatif / compare / gantt / roofline / hw show with small legal sizes or bad values."""
    command = draw(st.sampled_from(["whatif", "compare", "gantt", "roofline", "hw"]))
    if command == "whatif":
        args = ["whatif", "--vary", draw(VARY), "--algos", draw(st.sampled_from(["v2", "v9", ""]))]
        args += ["-n", draw(SWEEP_VALUES), "-d", draw(st.sampled_from(["64", "65", "x"]))]
        args += ["-b", draw(st.sampled_from(["1", "0"])), "-H", "1", "--no-cache"]
        args += ["-j", draw(JOBS)]
    elif command == "compare":
        args = ["compare", "--seqlens", draw(SWEEP_VALUES), "--head-dims", "64"]
        args += ["--tokens", draw(st.sampled_from(["512", "0", "-5", "513", "9" * 30]))]
        args += ["--hidden", draw(st.sampled_from(["64", "0", "100"])), "-j", draw(JOBS), "--json"]
    elif command == "gantt":
        args = ["gantt", "-o", "g.png", "-n", draw(SWEEP_VALUES), "-b", "1", "-H", "1", "-d", "64"]
        args += ["--window", draw(st.sampled_from(["0:2", "2:0", "x", "0:1e999", "-1:1"]))]
        args += ["--sms", draw(st.sampled_from(["1", "0", "33", "1000000", "two"]))]
    elif command == "roofline":
        args = ["roofline", "-o", draw(st.sampled_from(["r.png", "r.svg", "r", "r.jpg"]))]
        args += ["-n", draw(SWEEP_VALUES), "-b", "1", "-H", "1", "-d", "64", "-j", "1"]
        args += ["--algos", draw(st.sampled_from(["v2", "v1,v2", "v5", ""]))]
    else:
        args = ["hw", "show", draw(st.sampled_from(["h100", "a100", "x"])), "--json"]
        args += ["--set", draw(st.one_of(OPTIONS["--set"], VALUE))]
    return args


@FUZZ
@given(args=sweep_lines())
def test_sweeps_and_pictures_succeed_or_fail_in_one_line(args):
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            code, out, err = run(*args)
        finally:
            os.chdir(cwd)
        assert_contract(code, out, err)
        left = sorted(p.name for p in Path(tmp).rglob("*"))
        if code != 0:
            assert left == [], left
        elif "--json" in args:
            finite_json(out)


# -- preset files ------------------------------------------------------------------------

PRESET = preset_path("h100_sxm5_80gb").read_text(encoding="utf-8")
PRESET_LINES = [i for i, line in enumerate(PRESET.splitlines()) if " = " in line]
TOML_VALUES = st.one_of(
    st.sampled_from(["0", "-1", "1e300", "1e-300", "nan", "inf", "9" * 25, "true", '"x"',
                     "[1, 2]", "{a = 1}", "1_000", "0x10", "", "'''", "1979-05-27", "9" * 5000]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)  # fmt: skip


@FUZZ
@given(
    edits=st.lists(st.tuples(st.sampled_from(PRESET_LINES), TOML_VALUES), min_size=1, max_size=3),
    garbage=st.one_of(st.none(), st.binary(max_size=8)),
)
def test_preset_files_load_or_fail_in_one_line(edits, garbage):
    lines = PRESET.splitlines()
    for index, value in edits:
        key = lines[index].split(" = ")[0]
        lines[index] = f"{key} = {value}"
    data = "\n".join(lines).encode()
    if garbage is not None:
        data += b"\n" + garbage
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.toml"
        path.write_bytes(data)
        code, out, err = run("hw", "show", str(path), "--json")
        assert_contract(code, out, err)
        if code == 0:
            doc = finite_json(out)
            for field in doc["fields"].values():
                value = field["value"]
                assert not isinstance(value, float) or math.isfinite(value)


# -- results files -----------------------------------------------------------------------


def _small_results() -> dict:
    doc = schema.load_results(paths.raw() / "2026-11-30-h200.json")
    doc = copy.deepcopy(doc)
    doc["measurements"] = doc["measurements"][:3]
    return doc


RESULTS = _small_results()
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _paths(doc, prefix=()):
    """Every (path to a value) of a JSON document."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    if not path:
        return value
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


RESULT_PATHS = [p for p in _paths(RESULTS) if "samples" not in p][:4000]


@FUZZ
@given(
    edits=st.lists(st.tuples(st.sampled_from(RESULT_PATHS), JSON_VALUES), min_size=1, max_size=3),
    encoding=st.sampled_from(["utf-8", "latin-1", "truncated", "bigint"]),
)
def test_results_files_load_or_fail_in_one_line(edits, encoding):
    from tilesim.validate.report import collect_points, preset_of

    doc = copy.deepcopy(RESULTS)
    for path, value in edits:
        try:
            doc = _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced this path's parent
    text = json.dumps(doc, ensure_ascii=False)
    data = {
        "utf-8": text.encode(),
        "latin-1": text.replace("H200", "H2ü0").encode("latin-1", "replace"),
        "truncated": text.encode()[: len(text) // 2],
        "bigint": text.replace('"schema_version": 1', '"schema_version": ' + "9" * 5000).encode(),
    }[encoding]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        path.write_bytes(data)
        try:
            loaded = schema.load_results(path)
        except TilesimError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            return
        if loaded["kind"] != "validate":
            return
        own, ext = collect_points([(path.name, loaded)])  # what `report` does next
        lo, hi = schema.TIME_RANGE_S
        for p in own + ext:
            assert lo <= p.measured_s <= hi
        with suppress(TilesimError):
            preset_of([(path.name, loaded)])


# -- trace files --------------------------------------------------------------------------

GPU = load_gpu("h100")
TRACE = to_dict(build("v2", Workload(1, 1, 256, 256, 64, causal=True), GPU))
TRACE_PATHS = list(_paths(TRACE))
EXPRESSIONS = st.sampled_from(
    ["min(d)", "cdiv(d)", "cdiv(N_q, 0)", "max(1, 2, 3)", "d*d*d*d*d*d*d*d*d*d", "N_q // 0",
     "-" * 50 + "1", "+".join(["1"] * 3000), "(" * 300 + "1" + ")" * 300, "9" * 40,
     "__import__('os')", "m.x", "1.5", "j @ 2", "T_c - 1", "block_m", "", " ",
     "N_q % 0", "m // 0", "cdiv(m, 0)", "bh % (m - m)", "cdiv(bh, m)", "m // block_m"]
)  # fmt: skip
TILE_PATHS = [p for p in TRACE_PATHS if len(p) > 1 and p[-2] == "tile"]
TRACE_VALUES = st.one_of(
    JSON_VALUES,
    EXPRESSIONS,
    st.integers(min_value=0, max_value=1 << 70),
    st.sampled_from([10**12, 10**16, 1e16, -1, 0, 1, 2**31, 2**63]),
)


@FUZZ
@given(
    edits=st.lists(
        st.one_of(
            st.tuples(st.sampled_from(TRACE_PATHS), TRACE_VALUES),
            st.tuples(st.sampled_from(TILE_PATHS), EXPRESSIONS),  # coordinates are not counted
        ),
        min_size=1,
        max_size=3,
    ),
    cut=st.one_of(st.none(), st.integers(min_value=0, max_value=4000)),
)
def test_trace_files_load_or_fail_in_one_line(edits, cut):
    from tilesim.simulator import simulate
    from tilesim.traces.counters import counters

    doc = copy.deepcopy(TRACE)
    for path, value in edits:
        try:
            doc = _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(doc)
    if cut is not None:
        text = text[:cut] + text[cut + 1 :]  # one character dropped
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.trace.json"
        path.write_text(text)
        try:
            trace = load(path)
        except TilesimError as exc:
            assert "\n" not in str(exc)
            return
        c = counters(trace)
        if sum(lc.loads + lc.mmas for lc in c.launches) > 200_000:
            return  # legal but long: the engine's speed is not under test here
        try:
            pred = simulate(trace, GPU, "fast")
        except TilesimError as exc:
            assert "\n" not in str(exc)
            return
        assert math.isfinite(pred.time_s) and pred.time_s >= 0
        json.dumps(pred.to_dict(), allow_nan=False)


# -- kernel profiles ----------------------------------------------------------------------


def _small_profile() -> dict:
    doc = json.loads((Path(schema.__file__).parents[1] / "profiles" / "sm90a-triton-3.6.json")
                     .read_text())  # fmt: skip
    doc["entries"] = [e for e in doc["entries"] if e["variant"]["algo"] == "v2"][:4]
    doc["failures"] = doc["failures"][:1]
    return doc


PROFILE = _small_profile()
PROFILE_PATHS = [p for p in _paths(PROFILE) if p][:3000]


@FUZZ
@given(
    edits=st.lists(st.tuples(st.sampled_from(PROFILE_PATHS), JSON_VALUES), min_size=1, max_size=3)
)
def test_profile_files_load_or_fail_in_one_line(edits):
    doc = copy.deepcopy(PROFILE)
    for path, value in edits:
        try:
            doc = _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.json"
        path.write_text(json.dumps(doc))
        code, out, err = run("predict", "-b", "1", "-H", "1", "-n", "256", "-d", "64",
                             "--profile", str(path), "--json")  # fmt: skip
        assert_contract(code, out, err)
        if code == 0:
            finite_json(out)


# -- the GPU commands' arguments -------------------------------------------------------------

GPU_BAD = {  # option: values each refused, by the option's name, before CUDA is looked for
    "--seqlens": ["a", "0", "-1", "1,x"],
    "--head-dims": ["96", "x", "0"],
    "--mask": ["x", ""],
    "--pass": ["x", "both"],
    "--grid": ["x"],
    "--warmup-ms": ["nan", "-1", "inf", "1e300"],
    "--rep-ms": ["0", "nan", "-inf"],
    "--time-budget-s": ["0", "inf", "nan", "-5"],
    "--points": ["0", "-1", "9" * 30],
    "--seed": ["-1", "-" + "9" * 30],
}
GPU_LEGAL = {"--seqlens": "1024", "--head-dims": "128", "--mask": "full", "--rep-ms": "5"}


@FUZZ
@given(
    command=st.sampled_from(["validate", "bench"]),
    bad=st.sampled_from(sorted(GPU_BAD)).flatmap(
        lambda o: st.tuples(st.just(o), st.sampled_from(GPU_BAD[o]))
    ),
    others=st.lists(st.sampled_from(sorted(GPU_LEGAL)), max_size=3, unique=True),
)
def test_gpu_commands_name_a_bad_argument_before_the_gpu(command, bad, others):
    option, value = bad
    args = [command]
    for o in others:
        if o != option:
            args += [o, GPU_LEGAL[o]]
    args += [option, value]
    if option in ("--points", "--seed"):
        args += ["--grid", "random"]
    code, out, err = run(*args)
    assert_contract(code, out, err)
    assert code == 2 and "CUDA" not in err, err
    assert option in err or repr(value) in err or value in err, err


def test_an_exported_trace_round_trips(tmp_path):
    path = save(build("v2", Workload(1, 1, 256, 256, 64), GPU), tmp_path / "t.trace.json")
    assert to_dict(load(path)) == json.loads(path.read_text())


@pytest.fixture(autouse=True)
def _no_cwd_litter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
