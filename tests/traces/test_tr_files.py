"""Trace files: round trips, and every kind of malformed file rejected with its field named."""

# ruff: noqa: E501 - the tables of malformed cases read best one case per line

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from tilesim.errors import TilesimError
from tilesim.traces import KernelConfig, Workload, build, default_config, named_config
from tilesim.traces.files import from_dict, load, save, to_dict, validate
from tilesim.traces.ir import Load, Mma, Trace

CASES = [
    ("standard", {}),
    ("standard", {"causal": True, "seqlen_q": 700}),
    ("v1", {}),
    ("v1", {"causal": True}),
    ("v2", {"causal": True, "seqlen_q": 1000}),
    ("v3", {}),
    ("v3", {"causal": True, "dtype": "fp8"}),
    # serving shapes: grouped heads, decode (split KV, heads packed, the combine launch)
    ("v3", {"kv_heads": 1, "causal": True, "seqlen_q": 512}),
    ("v2", {"kv_heads": 1, "seqlen_q": 1, "seqlen_kv": 8192}),
]


@pytest.mark.parametrize("algo,shape", CASES)
def test_round_trip_gives_an_equal_trace(algo, shape, h100, tmp_path):
    w = Workload(
        **({"batch": 2, "heads": 3, "seqlen_q": 1024, "seqlen_kv": 1024, "head_dim": 128} | shape)
    )
    trace = build(algo, w, h100)
    path = save(trace, tmp_path / "t.trace.json")
    back = load(path)
    assert back == trace
    assert isinstance(back, Trace)
    # the same trace gives the same bytes
    save(back, tmp_path / "u.trace.json")
    assert (tmp_path / "t.trace.json").read_bytes() == (tmp_path / "u.trace.json").read_bytes()


def test_round_trip_persistent(h100, tmp_path):
    w = Workload(1, 2, 512, 512, 128)
    trace = build("v3", w, h100, default_config("v3", w, h100).replace(persistent=True))
    assert load(save(trace, tmp_path / "p.trace.json")) == trace


def test_round_trip_spill_reloads_and_issue_cycles(gpus, tmp_path):
    # v1's backward at d = 128 as compiled waits on reloaded spills (the kernel profile),
    # and its issue cycles are known
    w = Workload(1, 2, 512, 512, 128, pass_="bwd")
    trace = build("v1", w, gpus["h200"], KernelConfig(64, 64, 8, 1, "wgmma"))
    assert trace.launches[0].spill_reload_covers and len(trace.launches[0].issue_per_step) == 4
    assert load(save(trace, tmp_path / "s.trace.json")) == trace


def test_file_header(h100, tmp_path):
    save(build("v2", Workload(1, 1, 256, 256, 64), h100), tmp_path / "x.trace.json")
    doc = json.loads((tmp_path / "x.trace.json").read_text())
    assert doc["format"] == "tilesim-trace" and doc["version"] == 1 and doc["algo"] == "v2"


def test_hand_written_trace_with_defaults_left_out():
    doc = {
        "format": "tilesim-trace",
        "version": 1,
        "algo": "copy",
        "params": {"N": 1000, "T": 250},
        "tensors": [{"name": "X", "shape": [1000], "dtype": "fp32"}, {"name": "Y", "shape": [1000], "dtype": "fp32"}],
        "launches": [
            {
                "name": "copy",
                "grid": [["c", 4]],
                "smem_bytes": 1024,
                "threads": 128,
                "regs_per_thread": 32,
                "program": {
                    "roles": [
                        {
                            "name": "main",
                            "warps": 4,
                            "ops": [
                                {"op": "loop", "var": "j", "trips": "cdiv(T, 10)", "body": [
                                    {"op": "load", "id": "x", "tensor": "X", "tile": ["c", "j"], "nbytes": 40},
                                    {"op": "vector", "fp32": 10, "deps": ["x"]},
                                    {"op": "store", "tensor": "Y", "tile": ["c", "j"], "nbytes": 40},
                                ]},
                            ],
                        }
                    ]
                },
            }
        ],
    }  # fmt: skip
    trace = from_dict(doc)
    assert trace.launches[0].mma_path == "mma_sync" and trace.launches[0].persistent_ctas == 0
    loop = trace.launches[0].program.roles[0].ops[0]
    assert loop.prefetch == 0 and loop.body[0] == Load("x", "X", ("c", "j"), 40)
    from tilesim.traces.counters import counters

    assert counters(trace).no_reuse_read_bytes == 4 * 25 * 40


# -- malformed files ---------------------------------------------------------------------

SINGLE_ROLE = KernelConfig(128, 64, 4, 2, "wgmma")  # 8 warps would split into two warpgroups


@pytest.fixture(scope="module")
def doc(gpus):
    w = Workload(1, 2, 512, 512, 64, causal=True)
    # one role (4 warps): the op paths below are that role's
    return to_dict(build("v2", w, gpus["h100"], SINGLE_ROLE))


def op_path(doc, *indices):
    """The op dict at launches[0].program.roles[0].ops[i].body[j]..."""
    node = doc["launches"][0]["program"]["roles"][0]["ops"][indices[0]]
    for i in indices[1:]:
        node = node["body"][i]
    return node


# op 0 is the Q load; op 1 the first K/V loop (body: load k, load v, mma, vector, mma)
OPS = "launches[0].program.roles[0].ops"
MALFORMED = [
    ("missing version", lambda d: d.pop("version"), "version: missing"),
    ("bad version", lambda d: d.update(version=2), "version: 2 is not supported"),
    ("version as text", lambda d: d.update(version="1"), "version: '1' is not supported"),
    ("wrong format", lambda d: d.update(format="other"), "format: 'other'"),
    ("unknown top field", lambda d: d.update(extra=1), "extra: unknown field"),
    ("unknown op kind", lambda d: op_path(d, 1, 2).update(op="matmul"), f"{OPS}[1].body[2].op: unknown op kind 'matmul'"),
    ("unknown op field", lambda d: op_path(d, 0).update(bytes=4), f"{OPS}[0].bytes: unknown field"),
    ("missing op field", lambda d: op_path(d, 0).pop("nbytes"), f"{OPS}[0].nbytes: missing"),
    ("negative size", lambda d: op_path(d, 0).update(nbytes=-4), f"{OPS}[0].nbytes: -4 must not be negative"),
    ("float size", lambda d: op_path(d, 1, 0).update(nbytes=1.5), f"{OPS}[1].body[0].nbytes: 1.5 must be an integer"),
    ("bool size", lambda d: op_path(d, 1, 2).update(m=True), f"{OPS}[1].body[2].m: True must be an integer"),
    ("negative trips", lambda d: op_path(d, 1).update(trips=-1), f"{OPS}[1].trips: -1 must not be negative"),
    ("unknown tensor", lambda d: op_path(d, 0).update(tensor="Z"), f"{OPS}[0].tensor: unknown tensor 'Z'"),
    ("unknown name", lambda d: op_path(d, 1, 0).update(nbytes="block_n*d*e*zz"), f"{OPS}[1].body[0].nbytes: expression 'block_n*d*e*zz' uses unknown name(s): zz"),
    ("loop var outside its loop", lambda d: op_path(d, 0).update(nbytes="j*d"), f"{OPS}[0].nbytes: expression 'j*d' uses unknown name(s): j"),
    ("forbidden call", lambda d: op_path(d, 0).update(nbytes="__import__('os')"), f"{OPS}[0].nbytes: expression"),
    ("forbidden attribute", lambda d: op_path(d, 0).update(tile=["bh.real", "m"]), f"{OPS}[0].tile[0]: expression"),
    ("forbidden power", lambda d: op_path(d, 0).update(nbytes="d**2"), f"{OPS}[0].nbytes: expression"),
    ("syntax error", lambda d: op_path(d, 0).update(nbytes="d*"), f"{OPS}[0].nbytes: expression 'd*' does not parse"),
    ("unknown tensor dtype", lambda d: d["tensors"][1].update(dtype="fp64"), "tensors[1].dtype: unknown dtype 'fp64'"),
    ("unknown mma dtype", lambda d: op_path(d, 1, 2).update(dtype="int4"), f"{OPS}[1].body[2].dtype: unknown Mma dtype 'int4'"),
    ("undefined dep", lambda d: op_path(d, 1, 2).update(deps=["q", "kk"]), f"{OPS}[1].body[2].deps[1]: 'kk' names nothing"),
    ("bad dep syntax", lambda d: op_path(d, 1, 2).update(deps=["k@+1"]), f"{OPS}[1].body[2].deps[0]: dep 'k@+1'"),
    ("zero grid", lambda d: d["launches"][0]["grid"][0].__setitem__(1, 0), "launches[0].grid[0][1]: 0 must be >= 1"),
    ("threads mismatch", lambda d: d["launches"][0].update(threads=64), "launches[0].threads: 64 threads but its roles have"),
    ("negative shape", lambda d: d["tensors"][0]["shape"].__setitem__(0, -1), "tensors[0].shape[0]: -1 must be >= 1"),
    ("duplicate id", lambda d: op_path(d, 1, 1).update(id="k"), f"{OPS}[1].body[1].id: 'k' is defined twice"),
    ("tma not bool", lambda d: op_path(d, 0).update(tma="yes"), f"{OPS}[0].tma: 'yes' must be true or false"),
    ("negative at run time", lambda d: op_path(d, 0).update(nbytes="(N_q - 1000)*d"), f"{OPS}[0].nbytes: expression '(N_q - 1000)*d' evaluates to -"),
    ("division by zero", lambda d: op_path(d, 0).update(nbytes="d // (m - m)"), f"{OPS}[0].nbytes: expression 'd // (m - m)' divides by zero"),
    ("division by zero where no CTA goes", lambda d: (op_path(d, 1).update(trips=0), op_path(d, 1, 0).update(nbytes="N_q % 0")), f"{OPS}[1].body[0].nbytes: expression 'N_q % 0' divides by zero"),
    ("body not a list", lambda d: op_path(d, 1).update(body={}), f"{OPS}[1].body: must be a list"),
    ("param not int", lambda d: d["params"].update(N_q="4k"), "params.N_q: '4k' must be an integer"),
    ("spill covers not a list", lambda d: d["launches"][0].update(spill_reload_covers=7), "launches[0].spill_reload_covers: must be a list"),
    ("negative spill cover", lambda d: d["launches"][0].update(spill_reload_covers=[3, -1]), "launches[0].spill_reload_covers[1]: -1 must be >= 0"),
    ("issue figures", lambda d: d["launches"][0].update(issue_per_step=[100, 200]), "launches[0].issue_per_step: needs 4 figures"),
    ("issue not a number", lambda d: d["launches"][0].update(issue_per_cta=["a", 1, 2, 3]), "launches[0].issue_per_cta[0]: 'a' must be a number"),
    ("negative issue", lambda d: d["launches"][0].update(issue_per_cta=[1, -2, 3, 4]), "launches[0].issue_per_cta[1]: -2 must be a number of cycles in [0, 1e9]"),
]  # fmt: skip


@pytest.mark.parametrize("name,mutate,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file_is_rejected_naming_the_field(name, mutate, message, doc, tmp_path):
    bad = copy.deepcopy(doc)
    mutate(bad)
    path = tmp_path / "bad.trace.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(TilesimError) as err:
        load(path)
    text = str(err.value)
    assert message in text
    assert "\n" not in text


def test_the_unmodified_document_loads(doc):
    from_dict(copy.deepcopy(doc))  # so each malformed case fails for its own reason


def test_not_json_and_missing_file(tmp_path):
    path = tmp_path / "x.trace.json"
    path.write_text('{"format": "tilesim-trace",')
    with pytest.raises(TilesimError, match="not valid JSON"):
        load(path)
    with pytest.raises(TilesimError, match="no such file"):
        load(tmp_path / "missing.trace.json")
    path.write_text("[1, 2]")
    with pytest.raises(TilesimError, match="must be a JSON object"):
        load(path)


# -- saving ----------------------------------------------------------------------------


def test_save_is_atomic_and_checks_first(h100, tmp_path):
    trace = build("v2", Workload(1, 1, 256, 256, 64), h100)
    with pytest.raises(TilesimError, match=r"must end in \.trace\.json"):
        save(trace, tmp_path / "x.json")
    with pytest.raises(TilesimError, match="does not exist"):
        save(trace, tmp_path / "nodir" / "x.trace.json")
    launch = dataclasses.replace(trace.launches[0], threads=7)
    with pytest.raises(TilesimError, match="threads"):
        save(dataclasses.replace(trace, launches=(launch,)), tmp_path / "bad.trace.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, no temp left
    good = tmp_path / "good.trace.json"
    save(trace, good)
    before = good.read_bytes()
    with pytest.raises(TilesimError):
        save(dataclasses.replace(trace, launches=(launch,)), good)
    assert good.read_bytes() == before  # a failed save leaves the old file as it was
    assert [p.name for p in tmp_path.iterdir()] == ["good.trace.json"]


# -- validate(trace, gpu) -----------------------------------------------------------------


def test_validate_rejects_what_the_gpu_cannot_run(gpus):
    h100, a100 = gpus["h100"], gpus["a100"]
    # FlashAttention-3's 2 stages fit an A100's shared memory: the TMA check is what fires
    w = Workload(1, 1, 512, 512, 128)
    v3 = build("v3", w, h100, named_config("fa3", "v3", w, h100))
    wgmma_only = dataclasses.replace(a100, has_wgmma=True)
    with pytest.raises(
        TilesimError, match="tma: TMA loads need Hopper; a100_sxm4_80gb.published has no TMA"
    ):
        validate(v3, wgmma_only)
    w2 = Workload(1, 1, 512, 512, 128)
    # tiles that fit an A100's shared memory, so the wgmma check is the one that fires
    v2 = build("v2", w2, h100, default_config("v2", w2, h100).replace(block_n=64))
    with pytest.raises(TilesimError, match="mma_path: wgmma needs Hopper"):
        validate(v2, a100)
    fp8 = build("v3", Workload(1, 1, 512, 512, 128, dtype="fp8"), h100)
    no_tma = dataclasses.replace(a100, has_tma=True, has_wgmma=True)
    with pytest.raises(TilesimError, match="fp8 needs fp8 tensor cores"):
        validate(fp8, no_tma)
    big = dataclasses.replace(v2.launches[0], smem_bytes=300 * 1024)
    with pytest.raises(TilesimError) as err:
        validate(dataclasses.replace(v2, launches=(big,)), h100)
    assert "307200 bytes (300 KiB)" in str(err.value)
    assert f"{h100.smem_bytes_per_cta_max} bytes" in str(err.value)
    counters = validate(v2, h100)
    assert counters.matmul_flops == 4 * 512 * 512 * 128


def test_validate_checks_in_memory_traces_too(h100):
    trace = build("v2", Workload(1, 1, 512, 512, 64), h100, SINGLE_ROLE)
    role = trace.launches[0].program.roles[0]
    bad_op = Mma("block_m", "block_n", "d", "fp16", deps=("nothing",))
    bad_role = dataclasses.replace(role, ops=(*role.ops, bad_op))
    program = dataclasses.replace(trace.launches[0].program, roles=(bad_role,))
    bad = dataclasses.replace(
        trace, launches=(dataclasses.replace(trace.launches[0], program=program),)
    )
    with pytest.raises(
        TilesimError, match=r"launches\[0\].program.roles\[0\].ops\[\d+\].deps\[0\]"
    ):
        validate(bad, h100)


def test_config_is_only_display(h100):
    # KernelConfig round trips through the file as a plain dict
    w = Workload(1, 1, 256, 256, 64)
    trace = build("v2", w, h100)
    assert KernelConfig(**trace.config) == default_config("v2", w, h100)
