"""The validation and bench grids: fixed tokens per batch and model width."""

import pytest

from tilesim.errors import TilesimError
from tilesim.hwmodels import load_gpu
from tilesim.traces import Workload
from tilesim.traces.config import default_config, named_config
from tilesim.traces.workload import PAPER_HIDDEN, PAPER_TOKENS
from tilesim.validate import grid


def test_batch_and_heads_follow_tokens_and_width():
    assert grid.batch_heads(512, 64) == (32, 32)
    assert grid.batch_heads(16384, 128) == (1, 16)
    assert grid.batch_heads(4096, 128, tokens=8192, hidden=1024) == (2, 8)


@pytest.mark.parametrize(
    "args",
    [(32768, 128), (3000, 128), (1024, 96), (0, 64)],
)
def test_bad_shapes_are_one_line_errors(args):
    with pytest.raises(TilesimError) as err:
        grid.batch_heads(*args)
    assert "\n" not in str(err.value)


def test_validate_grid_on_h200_covers_every_point():
    gpu = load_gpu("h200")
    points = grid.validate_grid(gpu)
    main = [p for p in points if p.group == "fp16"]
    # 4 algorithms x 2 head dims x 6 seqlens x 2 masks
    assert len(main) == 4 * 2 * 6 * 2
    assert {
        (p.algo, p.workload.head_dim, p.workload.seqlen_q, p.workload.causal) for p in main
    } == {
        (a, d, n, c)
        for a in ("standard", "v1", "v2", "v3")
        for d in (64, 128)
        for n in (512, 1024, 2048, 4096, 8192, 16384)
        for c in (False, True)
    }
    bf16 = [p for p in points if p.group == "bf16"]
    fp8 = [p for p in points if p.group == "fp8"]
    assert len(bf16) == 4 * len(grid.BF16_SEQLENS)
    assert fp8 and {p.algo for p in fp8} == {"v3"}
    for p in points:
        w = p.workload
        assert w.batch * w.seqlen_q == PAPER_TOKENS
        assert w.heads * w.head_dim == PAPER_HIDDEN
        assert w.seqlen_q == w.seqlen_kv
        assert w.dtype == p.group
        assert p.config == default_config(p.algo, w, gpu)  # what the Triton kernel runs
    labels = [p.label for p in points]
    assert len(set(labels)) == len(labels)


def test_validate_grid_leaves_out_what_the_gpu_cannot_run():
    points = grid.validate_grid(load_gpu("a100"))
    assert points and all(p.algo != "v3" for p in points)
    assert all(p.workload.dtype != "fp8" for p in points)


def test_grid_groups_each_kernel_variant_together():
    # one compile per (algo, dtype, d, mask): a variant's points are contiguous
    points = grid.validate_grid(load_gpu("h200"))
    keys = [(p.algo, p.workload.dtype, p.workload.head_dim, p.workload.causal) for p in points]
    seen = []
    for k in keys:
        if not seen or seen[-1] != k:
            assert k not in seen
            seen.append(k)


def test_unknown_algo_in_grid():
    with pytest.raises(TilesimError, match="unknown algorithm"):
        grid.validate_grid(load_gpu("h200"), algos=("v4",))


def test_bench_shapes():
    shapes = grid.bench_shapes()
    assert len(shapes) == 5 * 2 * 2
    assert shapes[0].workload.head_dim == 128
    assert all(s.workload.batch * s.workload.seqlen_q == 16384 for s in shapes)


def test_sdpa_flash_schedule_is_fa2():
    def cfg(d, **kw):
        return grid.sdpa_flash_config(Workload(4, 16, 4096, 4096, d, **kw))

    assert (cfg(128).block_m, cfg(128).block_n, cfg(128).mma_path) == (128, 64, "mma_sync")
    assert (cfg(64).block_m, cfg(64).block_n, cfg(64).mma_path) == (128, 128, "mma_sync")
    assert cfg(64).num_warps == cfg(128).num_warps == 4
    assert cfg(128, dtype="fp8") is None and cfg(128, pass_="bwd") is None
    assert cfg(128) == named_config("fa2", "v2", Workload(4, 16, 4096, 4096, 128), load_gpu("h200"))


def test_v3_runs_last():
    # a failure in the newest kernel must not cost the other algorithms' points
    algos = [p.algo for p in grid.validate_grid(load_gpu("h200"))]
    first_v3 = algos.index("v3")
    assert set(algos[first_v3:]) == {"v3"}
