"""What-if sweeps: the product, the 1x baseline, error rows, the cache, the runners agreeing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tilesim.runner as runner_mod
from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.runner import Cache, Job, cache_key, run_jobs
from tilesim.simulator import simulate
from tilesim.traces import Workload, build
from tilesim.whatif import default_batch_heads, parse_vary, run_sweep, shapes, variant

VARY = ["hbm_bandwidth_Bps=0.5x,1x,2x"]
ALGOS = ["standard", "v2"]


@pytest.fixture(scope="module")
def gpu():
    return load_gpu("h100")


@pytest.fixture(scope="module")
def small():
    return shapes([256], [64], batch=1, heads=2)


class Counting:
    """Counts the simulations a serial sweep runs in this process."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = runner_mod.simulate

        def counted(*a, **k):
            self.calls += 1
            return real(*a, **k)

        monkeypatch.setattr(runner_mod, "simulate", counted)


def test_rows_are_the_product_in_order(gpu, small):
    varies = parse_vary(VARY + ["sm_count=66,132"], gpu)
    res = run_sweep(gpu, varies, ALGOS, small)
    assert len(res.rows) == 2 * 3 * 2
    got = [
        (r["algo"], r["settings"]["hbm_bandwidth_Bps"], r["settings"]["sm_count"]) for r in res.rows
    ]
    assert got == [(a, h, s) for a in ALGOS for h in ("0.5x", "1x", "2x") for s in ("66", "132")]
    for r in res.rows:
        w = Workload(1, 2, 256, 256, 64)
        hw = gpu.with_overrides(r["settings"])
        changed = "".join(
            f"+{k}={v}" for k, v in sorted(r["settings"].items()) if v not in ("1x", "132")
        )
        assert r["gpu"] == gpu.name + changed  # the 1x point is the preset itself
        assert r["time_s"] == simulate(build(r["algo"], w, hw), hw).time_s
        base = simulate(build(r["algo"], w, gpu), gpu).time_s
        assert r["speedup"] == base / r["time_s"]
        assert r["factors"]["hbm_bandwidth_Bps"] == pytest.approx(
            {"0.5x": 0.5, "1x": 1.0, "2x": 2.0}[r["settings"]["hbm_bandwidth_Bps"]]
        )
        assert r["values"] == {"hbm_bandwidth_Bps": hw.hbm_bandwidth_Bps, "sm_count": hw.sm_count}
    one = [r for r in res.rows if r["settings"] == {"hbm_bandwidth_Bps": "1x", "sm_count": "132"}]
    assert all(r["speedup"] == 1.0 for r in one)
    # HBM-bound standard attention follows the bandwidth
    std = {
        r["settings"]["hbm_bandwidth_Bps"]: r["speedup"]
        for r in res.rows
        if r["algo"] == "standard" and r["settings"]["sm_count"] == "132"
    }
    assert std["0.5x"] < 1 < std["2x"]


def test_baseline_without_1x_in_the_list(gpu, small):
    res = run_sweep(gpu, parse_vary(["hbm_bandwidth_Bps=2x"], gpu), ["standard"], small)
    base = simulate(build("standard", small[0], gpu), gpu).time_s
    assert res.rows[0]["speedup"] == base / res.rows[0]["time_s"]


def test_a_field_that_is_zero_on_the_preset_has_values_but_no_factors(small):
    a100 = load_gpu("a100")  # no wgmma: its wgmma rate is 0
    assert a100.tensor_fp16_wgmma_flop_per_clk_per_sm == 0
    res = run_sweep(
        a100, parse_vary(["tensor_fp16_wgmma_flop_per_clk_per_sm=0,1000"], a100), ["v2"], small
    )
    key = "tensor_fp16_wgmma_flop_per_clk_per_sm"
    assert [(r["factors"][key], r["values"][key]) for r in res.rows] == [
        (None, 0.0),
        (None, 1000.0),
    ]
    assert all(r["error"] is None for r in res.rows)


def test_default_shapes():
    assert default_batch_heads(4096, 128) == (4, 16)
    assert default_batch_heads(32768, 256) == (1, 8)
    ws = shapes([1024, 2048], [64, 128])
    assert [(w.seqlen_q, w.head_dim, w.batch, w.heads) for w in ws] == [
        (1024, 64, 16, 32),
        (1024, 128, 16, 16),
        (2048, 64, 8, 32),
        (2048, 128, 8, 16),
    ]


def test_failed_point_is_a_row(gpu, small):
    varies = parse_vary(["smem_bytes_per_sm=0.25x,1x"], gpu)
    res = run_sweep(gpu, varies, ["standard"], small)
    bad, good = res.rows
    assert bad["error"] and "shared memory" in bad["error"] and "\n" not in bad["error"]
    assert bad["time_s"] is None and bad["speedup"] is None
    assert good["error"] is None and good["speedup"] == 1.0
    # shrinking the SM's shared memory also lowers the per-CTA limit with it
    hw = variant(gpu, {"smem_bytes_per_sm": "0.25x"})
    assert hw.smem_bytes_per_cta_max == hw.smem_bytes_per_sm == round(gpu.smem_bytes_per_sm / 4)
    assert hw.name == gpu.name + "+smem_bytes_per_sm=0.25x"


@pytest.mark.parametrize(
    "items, words",
    [
        (["hbm_bandwith_Bps=2x"], "unknown hardware key 'hbm_bandwith_Bps'"),
        (["hbm_bandwidth_Bps"], "KEY=V1,V2"),
        (["hbm_bandwidth_Bps=2x,,3x"], "KEY=V1,V2"),
        (["hbm_bandwidth_Bps=2x", "hbm_bandwidth_Bps=3x"], "given twice"),
        (["hbm_bandwidth_Bps=2x,2x"], "twice"),
        (["hbm_bandwidth_Bps=-1x"], "hbm_bandwidth_Bps=-1x"),
        (["sm_count=lots"], "sm_count=lots"),
    ],
)
def test_bad_vary(gpu, items, words):
    with pytest.raises(TilesimError, match=None) as exc:
        parse_vary(items, gpu)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_repeat_hits_the_cache(gpu, small, tmp_path, monkeypatch):
    count = Counting(monkeypatch)
    varies = parse_vary(VARY, gpu)
    first = run_sweep(gpu, varies, ALGOS, small, cache_dir=tmp_path)
    n = count.calls
    assert n == first.stats.simulated == 2 * 3  # the 1x point is the baseline: one run
    second = run_sweep(gpu, varies, ALGOS, small, cache_dir=tmp_path)
    assert count.calls == n  # no simulation the second time
    assert second.stats.simulated == 0 and second.stats.cached == second.stats.jobs
    assert second.to_dict() == first.to_dict()
    assert len(list(tmp_path.glob("*/*.json"))) == n


def test_interrupted_sweep_resumes(gpu, small, tmp_path, monkeypatch):
    count = Counting(monkeypatch)
    varies = parse_vary(["hbm_bandwidth_Bps=0.5x,2x,4x"], gpu)

    class Stop(Exception):
        pass

    seen = []

    def stop_after_three(i, outcome):
        seen.append(i)
        if len(seen) == 3:
            raise Stop

    with pytest.raises(Stop):
        run_sweep(gpu, varies, ALGOS, small, cache_dir=tmp_path, on_result=stop_after_three)
    assert count.calls == 3
    resumed = run_sweep(gpu, varies, ALGOS, small, cache_dir=tmp_path)
    assert resumed.stats.cached == 3 and resumed.stats.simulated == 8 - 3
    assert count.calls == 8
    assert resumed.to_dict() == run_sweep(gpu, varies, ALGOS, small).to_dict()


def test_cache_entries_are_checked_and_atomic(gpu, tmp_path):
    w = Workload(1, 1, 256, 256, 64)
    key = cache_key(gpu, build("v2", w, gpu), "fast")
    assert key == cache_key(gpu, build("v2", w, gpu), "fast")  # stable
    assert key != cache_key(gpu, build("v2", w, gpu), "detailed")
    assert key != cache_key(gpu.with_overrides({"sm_count": 131}), build("v2", w, gpu), "fast")
    cache = Cache(tmp_path)
    cache.path(key).parent.mkdir(parents=True)
    cache.path(key).write_text('{"format": "tilesim-prediction-cache", "key": "')  # torn write
    assert cache.get(key) is None
    outs, stats = run_jobs([Job(gpu, "v2", w)], cache_dir=tmp_path)
    assert stats.simulated == 1 and outs[0].ok
    assert json.loads(cache.path(key).read_text())["key"] == key  # rewritten whole
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_runners_agree(gpu, small):
    """Serial, a local process pool and a Dask LocalCluster give the same rows, in order."""
    distributed = pytest.importorskip("distributed")
    varies = parse_vary(VARY, gpu)
    serial = run_sweep(gpu, varies, ALGOS, small, workers=1)
    pool = run_sweep(gpu, varies, ALGOS, small, workers=2)
    assert pool.stats.simulated == serial.stats.simulated
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        dask = run_sweep(gpu, varies, ALGOS, small, scheduler=client)
    assert serial.to_dict() == pool.to_dict() == dask.to_dict()
    assert json.dumps(serial.to_dict(), sort_keys=True) == json.dumps(
        dask.to_dict(), sort_keys=True
    )


def run_tilesim(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "tilesim", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_cli_json_plot_and_cache(tmp_path):
    args = [
        "whatif",
        "--gpu",
        "h100",
        "--vary",
        "hbm_bandwidth_Bps=0.5x,1x,2x",
        "--algos",
        "standard,v2",
        "-n",
        "256",
        "-d",
        "64",
        "-b",
        "1",
        "-H",
        "2",
        "--jobs",
        "1",
    ]
    r = run_tilesim(*args, "--json", "--plot", "w.png", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [row["algo"] for row in doc["rows"]] == ["standard"] * 3 + ["v2"] * 3
    assert "6 simulated, 0 from the cache" in r.stderr
    assert (tmp_path / "w.png").stat().st_size > 10_000
    assert list((tmp_path / ".tilesim-cache").glob("*/*.json"))
    again = run_tilesim(*args, "--json", cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout) == doc
    assert "0 simulated, 8 from the cache" in again.stderr
    table = run_tilesim(*args, "--no-cache", cwd=tmp_path)
    assert table.returncode == 0 and "speed-up" in table.stdout and "1.00x" in table.stdout


def test_cli_sweeps_serving_shapes(tmp_path):
    """Decode against two cache lengths, grouped heads: "what if HBM were 2x faster?"."""
    r = run_tilesim(
        "whatif", "--gpu", "h100", "--vary", "hbm_bandwidth_Bps=1x,2x", "--algos", "v2",
        "-n", "1", "--seqlens-kv", "16384,65536", "--kv-heads", "8", "-b", "8", "-H", "32",
        "-d", "128", "--jobs", "1", "--no-cache", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [(x["seqlen"], x["seqlen_kv"]) for x in rows] == [(1, 16384)] * 2 + [(1, 65536)] * 2
    assert all(x["kv_heads"] == 8 for x in rows)
    # a long decode reads the cache once: twice the bandwidth, nearly twice the speed
    fast = [x for x in rows if x["settings"]["hbm_bandwidth_Bps"] == "2x"]
    assert all(1.5 < x["speedup"] <= 2.0 for x in fast), fast


def test_serving_shapes_default_batch_fills_16k_tokens_of_cache():
    ws = shapes([1], [128], seqlens_kv=[4096, 32768], kv_heads=4)
    assert [(w.batch, w.heads, w.seqlen_q, w.seqlen_kv, w.num_kv_heads) for w in ws] == [
        (4, 16, 1, 4096, 4),
        (1, 16, 1, 32768, 4),
    ]


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--vary", "hbm_bandwidth_Bps=2x", "--kv-heads", "3"], "multiple of kv_heads (3)"),
        (["--vary", "hbm_bandwidth_Bps=2x", "--seqlens-kv", "x"], "--seqlens-kv"),
        (["--vary", "hbm_bandwith_Bps=2x"], "unknown hardware key"),
        (["--vary", "hbm_bandwidth_Bps=2x", "--algos", "v9"], "unknown algorithm 'v9'"),
        (["--vary", "hbm_bandwidth_Bps=2x", "--seqlens", "1k"], "--seqlens"),
        (["--vary", "hbm_bandwidth_Bps=2x", "--scheduler", "http://x"], "Dask address"),
        (["--vary", "hbm_bandwidth_Bps=2x", "--jobs", "0"], "--jobs"),
        (["--vary", "hbm_bandwidth_Bps=2x", "--plot", "no/dir/w.png"], "does not exist"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path, extra, words):
    r = run_tilesim("whatif", "-n", "256", "-b", "1", "-H", "1", "-d", "64", *extra, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], r.stderr


def test_without_dask_one_clear_line(gpu, small, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if absent
    with pytest.raises(TilesimError, match=r"pip install tilesim\[cluster\]"):
        run_sweep(gpu, parse_vary(VARY, gpu), ["v2"], small, scheduler="local-dask")
