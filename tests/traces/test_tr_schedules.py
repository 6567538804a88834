"""The generators' schedules: grids, tiles, loop structure, causal skipping, and the
v3 producer/consumer protocol run through a zero-time dataflow interpreter that
follows the dep rules of traces/ir.py."""

from __future__ import annotations

import pytest

from tilesim.traces import KernelConfig, Workload, build, default_config
from tilesim.traces.config import named_config
from tilesim.traces.expand import expand
from tilesim.traces.expr import cdiv
from tilesim.traces.ir import Arrive, Load, Loop, Mma, Store, Vector, Wait
from tilesim.traces.occupancy import occupancy
from tilesim.traces.tiles import FLASH_FP32_PER_MASKED_SCORE, FLASH_FP32_PER_SCORE


def visible(bm, bn, n_q, m, j, shift=0):
    """Does Q block m see any score of K block j (causal, the diagonal shifted right by
    ``shift`` = N_kv - N_q: bottom-right)?"""
    return bn * j <= min(bm * (m + 1), n_q) - 1 + shift


# -- a dataflow interpreter of ir.py's dep rules ------------------------------------------


def _def_depths(ops, depth=0, out=None):
    out = {} if out is None else out
    for op in ops:
        name = op.name if isinstance(op, Arrive) else getattr(op, "id", None)
        if isinstance(op, Loop):
            _def_depths(op.body, depth + 1, out)
        elif name:
            out[name] = depth
    return out


class Deadlock(Exception):
    pass


def run_dataflow(trace, launch_index, cta, priority):
    """Run a CTA's roles as zero-time processes, each as far as its deps allow, in
    ``priority`` order; returns the log [(role, op, iteration indices)].

    Executing an op only adds events, so if this greedy run gets stuck, every
    schedule does: that is a deadlock.
    """
    program = trace.launches[launch_index].program
    depths = {r.name: _def_depths(r.ops) for r in program.roles}
    queues = {r.name: [] for r in program.roles}
    defined: dict = {}
    for f in expand(trace, launch_index, cta):
        queues[f.role].append(f)
        name = f.op.name if isinstance(f.op, Arrive) else getattr(f.op, "id", None)
        if name:
            defined.setdefault((f.role, name), set()).add(tuple(v for _, v in f.iters))
    done: dict = {key: set() for key in defined}

    def owner(role, name):
        if name in depths[role]:
            return role
        (other,) = [r for r in depths if r != role and name in depths[r]]
        return other

    def ready(role, dep, iters):
        name, _, back = dep.partition("@-")
        k = int(back) if back else 0
        who = owner(role, name)
        depth = depths[who][name]
        shared = list(iters[: min(depth, len(iters))])
        if shared and k:
            shared[-1] -= k
        if any(i < 0 for i in shared):
            return True
        later = [key for key in defined.get((who, name), ()) if key[: len(shared)] == tuple(shared)]
        if not later:  # zero trips: nothing to wait for
            return True
        key = max(later) if depth > len(shared) else tuple(shared)
        return key in done[(who, name)]

    log, pos = [], {r: 0 for r in queues}
    while any(pos[r] < len(queues[r]) for r in queues):
        progress = False
        for role in priority:
            while pos[role] < len(queues[role]):
                f = queues[role][pos[role]]
                iters = tuple(v for _, v in f.iters)
                if not all(ready(role, d, iters) for d in getattr(f.op, "deps", ())):
                    break
                name = f.op.name if isinstance(f.op, Arrive) else getattr(f.op, "id", None)
                if name:
                    done[(role, name)].add(iters)
                log.append((role, f.op, iters))
                pos[role] += 1
                progress = True
        if not progress:
            stuck = {r: queues[r][pos[r]].op for r in queues if pos[r] < len(queues[r])}
            raise Deadlock(stuck)
    return log


# -- standard ----------------------------------------------------------------------------


def test_standard_is_three_launches_with_full_s_and_p(h100):
    w = Workload(2, 3, 700, 1000, 64, causal=True)
    trace = build("standard", w, h100)
    qk, softmax, pv = trace.launches
    cfg = trace.config
    tr, tc = cdiv(700, cfg["block_m"]), cdiv(1000, cfg["block_n"])
    assert [launch.name for launch in trace.launches] == ["qk", "softmax", "pv"]
    assert qk.grid == (("m", tr), ("n", tc), ("bh", 6))  # as the Triton kernel's grid
    assert softmax.grid == (("r", 700), ("bh", 6))
    assert pv.grid == (("m", tr), ("bh", 6))
    tensors = {t.name: t for t in trace.tensors}
    # causal: still full; rows padded to 16 columns
    assert tensors["S"].shape == tensors["P"].shape == (2, 3, 700, 1008)
    # the last S tile of a row of tiles is 700 - 128*5 = 60 rows by 1008 - 128*7 = 112 columns
    last = expand(trace, 0, qk.num_ctas - 1)
    (store,) = [f.op for f in last if isinstance(f.op, Store)]
    assert (
        store.nbytes == (700 - cfg["block_m"] * (tr - 1)) * (1008 - cfg["block_n"] * (tc - 1)) * 2
    )
    # P V: a k-loop over the K/V blocks, P and V tiles prefetched num_stages - 1 ahead
    (loop,) = [op for op in pv.program.roles[0].ops if isinstance(op, Loop)]
    assert loop.prefetch == cfg["num_stages"] - 1
    flat = expand(trace, 2, 0)
    assert [f.op.k for f in flat if isinstance(f.op, Mma)] == [cfg["block_n"]] * (tc - 1) + [
        1000 - cfg["block_n"] * (tc - 1)
    ]
    # the softmax of row r sees r + 1 + 300 scores (bottom-right), rounded up to 8 to load
    row = expand(trace, 1, 9)  # row 9 of the first head
    (load,) = [f.op for f in row if isinstance(f.op, Load)]
    assert load.nbytes == cdiv(9 + 1 + 300, 8) * 8 * 2


# -- v1 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_v1_released_walks_16_row_steps_over_its_splits(causal, h100):
    """The released kernel: grid (bh, z); CTA z takes the steps z, z+S, ... of every K/V
    block (causal: from the first step that reaches it), each step a Q, Acc and lse load
    (none of Acc, lse on the first block) and O instead of Acc on the last block a step sees."""
    w = Workload(1, 2, 512, 512, 64, causal=causal)
    cfg = default_config("v1", w, h100).replace(num_splits=3)
    trace = build("v1", w, h100, cfg)
    (main,) = trace.launches
    assert main.grid == (("bh", 2), ("z", 3))
    tc, steps = 512 // cfg.block_n, 512 // cfg.block_m
    for z in range(3):
        flat = expand(trace, 0, 2 * z)  # CTA (bh 0, z)
        q_loads, acc_loads, o_stores, block = {}, {}, {}, None
        for f in flat:
            op = f.op
            if isinstance(op, Load) and op.tensor == "K":
                block = op.tile[1]
            elif isinstance(op, Load) and op.tensor == "Q":
                q_loads.setdefault(block, []).append(op.tile[1])
            elif isinstance(op, Load) and op.tensor == "Acc":
                acc_loads.setdefault(block, set()).add(op.nbytes)
            elif isinstance(op, Store) and op.tensor == "O" and op.nbytes:
                o_stores[op.tile[1]] = block
        assert sorted(q_loads) == list(range(tc))
        for j in range(tc):
            first = cfg.block_n * j // cfg.block_m if causal else 0
            assert q_loads[j] == [q for q in range(first, steps) if q % 3 == z]
        # the first block reads no Acc (no load at all); the others a 16 x d fp32 tile
        assert 0 not in acc_loads and all(acc_loads[j] == {16 * 64 * 4} for j in range(1, tc))
        assert sorted(o_stores) == [q for q in range(steps) if q % 3 == z]
        last = {q: min(16 * q + 15, 511) // cfg.block_n if causal else tc - 1 for q in o_stores}
        assert o_stores == last


def test_v1_grid_is_batch_times_heads_and_reads_o_every_step(h100):
    """The paper's Algorithm 1 (`fa1-algorithm1`)."""
    w = Workload(2, 3, 512, 512, 64)
    trace = build("v1", w, h100, named_config("fa1-algorithm1", "v1", w, h100))
    (main,) = trace.launches  # the CTA initialises Acc, l, m itself (line 2)
    assert main.grid == (("bh", 6),)
    flat = expand(trace, 0, 4)
    tr, tc = 512 // trace.config["block_m"], 512 // trace.config["block_n"]
    kinds = [(type(f.op).__name__, getattr(f.op, "tensor", None)) for f in flat]
    assert kinds.count(("Load", "K")) == tc
    assert kinds.count(("Load", "Q")) == kinds.count(("Load", "Acc")) == tr * tc
    # Acc, l, m: tr initial stores + one per inner step
    assert kinds.count(("Store", "Acc")) == kinds.count(("Store", "L")) == tr + tr * tc
    # O is written once per Q block, on the last K/V block
    o_stores = [f for f in flat if isinstance(f.op, Store) and f.op.tensor == "O" and f.op.nbytes]
    assert sorted(f.op.tile[1] for f in o_stores) == list(range(tr))
    assert {dict(f.iters)["j"] for f in o_stores} == {tc - 1}
    # outer loop over K/V blocks, inner over Q blocks: K_j loaded before its Q blocks
    first_k1 = next(
        i
        for i, f in enumerate(flat)
        if isinstance(f.op, Load) and f.op.tensor == "K" and f.op.tile == (4, 1)
    )
    q_before = [f for f in flat[:first_k1] if isinstance(f.op, Load) and f.op.tensor == "Q"]
    assert len(q_before) == tr


@pytest.mark.parametrize("shape", [(512, 512, 64, 64), (640, 640, 64, 128), (448, 448, 128, 64)])
def test_v1_causal_skips_blocks_above_the_diagonal(shape, h100):
    n_q, n_kv, bm, bn = shape
    w = Workload(1, 1, n_q, n_kv, 64, causal=True)
    trace = build("v1", w, h100, KernelConfig(bm, bn, 4, 1))
    flat = expand(trace, 0, 0)
    pairs = [
        (f.op.tile[1], dict(f.iters)["j"])
        for f in flat
        if isinstance(f.op, Load) and f.op.tensor == "Q"
    ]
    expected = [
        (i, j)
        for j in range(cdiv(n_kv, bn))
        for i in range(cdiv(n_q, bm))
        if visible(bm, bn, n_q, i, j)
    ]
    assert pairs == expected
    k_blocks = [f.op.tile[1] for f in flat if isinstance(f.op, Load) and f.op.tensor == "K"]
    assert k_blocks == sorted({j for _, j in expected})


# -- v2 ----------------------------------------------------------------------------------


def test_v2_grid_q_block_fastest_q_loaded_once_and_prefetch(h100):
    w = Workload(2, 3, 1024, 1024, 128)
    trace = build("v2", w, h100)
    (launch,) = trace.launches
    cfg = trace.config
    assert launch.grid == (("m", 1024 // cfg["block_m"]), ("bh", 6))
    flat = expand(trace, 0, 9)
    loads = [f for f in flat if isinstance(f.op, Load)]
    assert [f.op.tile for f in loads if f.op.tensor == "Q"] == [(1, 9 % (1024 // cfg["block_m"]))]
    # issue order: the K loads of iterations 0..p are issued before the first S = Q K^T
    first_mma = next(i for i, f in enumerate(flat) if isinstance(f.op, Mma))
    k_early = [f for f in flat[:first_mma] if isinstance(f.op, Load) and f.op.tensor == "K"]
    assert [dict(f.iters)["j"] for f in k_early] == list(range(cfg["num_stages"]))
    # two warpgroups (8 warps, wgmma): each stores its half of O and LSE
    stores = [(f.op.tensor, f.op.tile[-1]) for f in flat if isinstance(f.op, Store)]
    assert stores == [("O", 0), ("LSE", 0), ("O", 1), ("LSE", 1)]
    assert [r.warps for r in launch.program.roles] == [4, 4]


@pytest.mark.parametrize(
    "shape",
    [(1024, 1024, 128, 64), (1000, 1000, 128, 128), (512, 1024, 64, 64), (300, 1000, 64, 128)],
)
def test_v2_causal_trip_counts_and_diagonal_masks(shape, h100):
    n_q, n_kv, bm, bn = shape
    w = Workload(1, 1, n_q, n_kv, 64, causal=True)
    trace = build("v2", w, h100, KernelConfig(bm, bn, 4, 2))
    plain = build("v2", Workload(1, 1, n_q, n_kv, 64), h100, KernelConfig(bm, bn, 4, 2))
    shift = n_kv - n_q
    for m in range(cdiv(n_q, bm)):
        flat = expand(trace, 0, m)
        blocks = [f.op.tile[1] for f in flat if isinstance(f.op, Load) and f.op.tensor == "K"]
        seen = [j for j in range(cdiv(n_kv, bn)) if visible(bm, bn, n_q, m, j, shift)]
        assert sorted(blocks) == seen
        # the masked work is paid on the blocks that straddle the diagonal, and only there
        rows = min(bm, n_q - bm * m)
        base = {
            j: vec.fp32 - (FLASH_FP32_PER_MASKED_SCORE * rows * (n_kv - bn * j) if bounds else 0)
            for j, vec, bounds in _score_steps(plain, m)
        }
        vectors = [f.op for f in flat if isinstance(f.op, Vector) and f.op.exp]
        for j, vec in zip(sorted(blocks), vectors, strict=True):
            straddles = bn * (j + 1) - 1 > bm * m + shift
            extra = FLASH_FP32_PER_MASKED_SCORE * rows * min(bn, n_kv - bn * j) if straddles else 0
            assert vec.fp32 == base[j] + extra


def _score_steps(trace, m):
    """(K/V block, softmax Vector, in the masked loop?) of each step of Q block ``m``."""
    flat = expand(trace, 0, m)
    blocks = [f.op.tile[1] for f in flat if isinstance(f.op, Load) and f.op.tensor == "K"]
    vectors = [f for f in flat if isinstance(f.op, Vector) and f.op.exp]
    return [(j, f.op, "jd" in dict(f.iters)) for j, f in zip(blocks, vectors, strict=True)]


@pytest.mark.parametrize("n_kv", [1024, 1000, 1040, 129])
def test_v2_full_runs_a_partial_last_block_in_its_own_masked_loop(n_kv, h100):
    """As kernels/flash_v2.py: blocks [0, N // BN) unmasked, then the rest (a partial
    last block) in a second, masked loop; at N a multiple of BN one loop."""
    cfg = KernelConfig(128, 128, 8, 3)
    trace = build("v2", Workload(1, 2, 256, n_kv, 64), h100, cfg)
    (launch,) = trace.launches
    for role in launch.program.roles:
        loops = [op for op in role.ops if isinstance(op, Loop)]
        assert len(loops) == (1 if n_kv % 128 == 0 else 2)
    steps = _score_steps(trace, 0)
    assert [j for j, _, _ in steps] == list(range(cdiv(n_kv, 128)))
    masked = {j for j, _, in_masked in steps if in_masked}
    assert masked == (set() if n_kv % 128 == 0 else {n_kv // 128})
    fp32 = {j: vec.fp32 for j, vec, _ in steps}
    for j in masked:  # the bounds mask on its n columns, beside the unmasked step's work
        rows, n = 128, n_kv - 128 * j  # the Q block's rows; the K/V block's columns
        plain = fp32[0] - rows * (128 - n) * FLASH_FP32_PER_SCORE
        assert fp32[j] == pytest.approx(plain + FLASH_FP32_PER_MASKED_SCORE * rows * n)


# -- v3 ----------------------------------------------------------------------------------


def test_v3_roles_tma_and_threads(h100):
    w = Workload(1, 2, 1024, 1024, 128)
    trace = build("v3", w, h100)
    (launch,) = trace.launches
    roles = {r.name: r for r in launch.program.roles}
    assert list(roles) == ["producer", "consumer0", "consumer1"]
    assert launch.threads == 32 * sum(r.warps for r in roles.values()) == 384
    assert launch.mma_path == "wgmma"
    flat = expand(trace, 0, 3)
    loads = [f for f in flat if isinstance(f.op, Load)]
    assert loads and all(f.op.tma and f.role == "producer" for f in loads)
    # each consumer owns half of the block's rows
    m_sizes = {f.role: f.op.m for f in flat if isinstance(f.op, Mma)}
    assert m_sizes == {"consumer0": 64, "consumer1": 64}


def test_v3_consumer_overlaps_softmax_with_the_previous_pv(h100):
    trace = build("v3", Workload(1, 1, 512, 512, 128), h100)
    flat = [f for f in expand(trace, 0, 0) if f.role == "consumer0" and dict(f.iters).get("j") == 2]
    ops = [f.op for f in flat]
    s = next(i for i, op in enumerate(ops) if isinstance(op, Mma) and op.id == "s")
    pv = next(i for i, op in enumerate(ops) if isinstance(op, Mma) and op.id == "pv")
    softmax = next(i for i, op in enumerate(ops) if isinstance(op, Vector) and op.exp)
    wait_pv = next(i for i, op in enumerate(ops) if isinstance(op, Wait) and op.deps == ("pv",))
    assert ops[s].async_ and ops[pv].async_
    assert s < pv < softmax < wait_pv  # S_j and P_{j-1} V_{j-1} issued, softmax of j meanwhile
    assert ops[pv].deps == ("v@-1",)


def test_v3_persistent_grid_is_sms_times_ctas_per_sm(h100, gpus):
    for gpu in (h100, gpus["h200"]):
        w = Workload(4, 16, 4096, 4096, 128)
        config = default_config("v3", w, gpu).replace(persistent=True)
        (launch,) = build("v3", w, gpu, config).launches
        assert launch.persistent_ctas == gpu.sm_count * occupancy(launch, gpu).ctas_per_sm
        assert launch.persistent_ctas >= gpu.sm_count
        assert launch.num_ctas == 32 * 64  # the work items stay the (m, bh) tiles


def test_v3_fp8_inputs_fp16_output(h100):
    trace = build("v3", Workload(1, 2, 512, 512, 128, dtype="fp8"), h100)
    tensors = {t.name: t.dtype for t in trace.tensors}
    # V^T: the fp8 V transposed (K-major) by the kernels' transpose launch
    assert tensors == {"Q": "fp8", "K": "fp8", "V": "fp8", "VT": "fp8", "O": "fp16", "LSE": "fp32"}
    assert [launch.name for launch in trace.launches] == ["transpose_v", "flash_v3"]
    mmas = [f.op for f in expand(trace, 1, 0) if isinstance(f.op, Mma)]  # the attention launch
    assert mmas and {op.dtype for op in mmas} == {"fp8"}


V3_CONFIGS = [
    dict(num_stages=1, pingpong=True),
    dict(num_stages=2, pingpong=True),
    dict(num_stages=3, pingpong=True),
    dict(num_stages=2, pingpong=False),
    dict(num_stages=4, pingpong=False),
    dict(num_stages=2, pingpong=False, warp_specialize=False),
    dict(num_stages=3, pingpong=False, warp_specialize=False, num_warps=4),
]


@pytest.mark.parametrize("changes", V3_CONFIGS)
@pytest.mark.parametrize(
    "shape", [(640, 640, False), (640, 640, True), (100, 100, False), (200, 900, True)]
)
def test_v3_protocol_never_deadlocks_and_bounds_the_ring(changes, shape, h100):
    n_q, n_kv, causal = shape
    w = Workload(1, 1, n_q, n_kv, 128, causal=causal)
    config = default_config("v3", w, h100).replace(block_n=64, **changes)
    trace = build("v3", w, h100, config)
    roles = [r.name for r in trace.launches[0].program.roles]
    stages = config.num_stages
    for cta in range(trace.launches[0].num_ctas):
        for priority in (roles, roles[::-1]):
            log = run_dataflow(trace, 0, cta, priority)
            if not config.warp_specialize:
                continue
            # the producer never holds more than num_stages K (or V) tiles the consumers still use
            consumers = [r for r in roles if r != "producer"]
            k_in = v_in = 0
            kfree = dict.fromkeys(consumers, 0)
            vfree = dict.fromkeys(consumers, 0)
            for role, op, _ in log:
                if isinstance(op, Load) and op.tensor == "K":
                    k_in += 1
                elif isinstance(op, Load) and op.tensor == "V":
                    v_in += 1
                elif isinstance(op, Arrive) and op.name.startswith("kfree"):
                    kfree[role] += 1
                elif isinstance(op, Arrive) and op.name.startswith("vfree"):
                    vfree[role] += 1  # at iteration j it releases V_{j-1}
                assert k_in - min(kfree.values()) <= stages
                assert v_in - max(0, min(vfree.values()) - 1) <= stages


def test_v3_pingpong_alternates_the_consumers_gemms(h100):
    w = Workload(1, 1, 512, 512, 128)
    for pingpong in (True, False):
        config = default_config("v3", w, h100).replace(pingpong=pingpong)
        trace = build("v3", w, h100, config)
        # let consumer1 run first whenever it can
        log = run_dataflow(trace, 0, 0, ["producer", "consumer1", "consumer0"])
        order = [(role, it[0]) for role, op, it in log if isinstance(op, Mma) and op.id == "s"]
        alternating = [(f"consumer{i % 2}", i // 2) for i in range(len(order))]
        assert (order == alternating) == pingpong


def test_dataflow_interpreter_detects_a_deadlock(h100):
    # a consumer that waits for an event of a later iteration can never run
    import dataclasses

    trace = build("v3", Workload(1, 1, 256, 256, 128), h100)
    launch = trace.launches[0]
    producer, c0, c1 = launch.program.roles
    loop = c0.ops[0]
    bad_loop = dataclasses.replace(loop, body=(Wait(("kfree1",)), *loop.body))
    bad_c1_loop = dataclasses.replace(c1.ops[0], body=(Wait(("kfree0",)), *c1.ops[0].body))
    bad = dataclasses.replace(
        trace,
        launches=(
            dataclasses.replace(
                launch,
                program=dataclasses.replace(
                    launch.program,
                    roles=(
                        producer,
                        dataclasses.replace(c0, ops=(bad_loop, *c0.ops[1:])),
                        dataclasses.replace(c1, ops=(bad_c1_loop, *c1.ops[1:])),
                    ),
                ),
            ),
        ),
    )
    with pytest.raises(Deadlock):
        run_dataflow(bad, 0, 0, ["producer", "consumer0", "consumer1"])
