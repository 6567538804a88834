"""The serving validation set: decode against long KV caches and grouped-query prefill.

Decode: one query row (H = 32 query heads, d = 128) against a cache of 1k-128k keys,
batch 1-256, GQA group 1, 4 and 8 (32, 8 and 4 K/V heads) — every combination whose
K and V fit ``MAX_KV_BYTES``; then shapes drawn by a seed (batch, cache length, group,
d, a few query rows as speculative decoding has, heads) the same way on every machine.
Prefill: v2 and v3 with groups 1, 4, 8 at equal query heads, full and causal, and a
chunk of queries against a longer cache (causal aligned bottom-right). Every point
runs tilesim's default config for its shape: the decode kernel (split KV, packed
heads) for decode, v2's / v3's kernels with K/V heads shared for prefill.

`serving_bench_shapes` gives the same workloads to `tilesim bench`, for the peers
timed beside tilesim's kernels (PyTorch SDPA's backends, ``enable_gqa``).
"""

from __future__ import annotations

import math
import random

from ..hwmodels.gpu import GPU
from ..traces.config import default_config
from ..traces.workload import Workload
from .grid import BenchShape, GridPoint, runnable

HEADS, HEAD_DIM = 32, 128  # the decode grid's query heads and head dim (Llama-style)
DECODE_KV = (1024, 8192, 32768, 131072)
DECODE_BATCH = (1, 16, 64, 256)
GROUPS = (1, 4, 8)  # query heads per K/V head
MAX_KV_BYTES = 8 << 30  # K and V of one point (the H200 holds 141 GB: room for peers)
# the random draws
RANDOM_KV = (1024, 131072)  # log-uniform
RANDOM_BATCH = (1, 256)  # log-uniform
RANDOM_HEADS = (8, 16, 32, 64)
RANDOM_GROUPS = (1, 2, 4, 8)
RANDOM_QUERIES = (1, 1, 1, 2, 4)  # mostly decode; a few rows as speculative decoding has
RANDOM_HEAD_DIMS = (64, 128)
# prefill: equal query heads, 16k tokens per batch
PREFILL = (4, 32, 4096, 128)  # batch, heads, N, d
CHUNK = (2, 32, 1024, 8192, 128)  # batch, heads, N_q, N_kv, d: a chunk against its cache
PEERS = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient")


def _fits(w: Workload) -> bool:
    return w.kv_bytes() <= MAX_KV_BYTES


def decode_workloads() -> list[Workload]:
    """The decode grid: cache length x batch x group, those that fit."""
    out = []
    for kv in DECODE_KV:
        for batch in DECODE_BATCH:
            for g in GROUPS:
                w = Workload(batch, HEADS, 1, kv, HEAD_DIM, kv_heads=HEADS // g)
                if _fits(w):
                    out.append(w)
    return out


def random_decode_workloads(seed: int, count: int) -> list[Workload]:
    """``count`` decode shapes drawn by ``seed`` (each fitting ``MAX_KV_BYTES``)."""
    rng = random.Random(seed)
    out: list[Workload] = []
    while len(out) < count:
        kv = round(math.exp(rng.uniform(*map(math.log, RANDOM_KV))))
        batch = round(math.exp(rng.uniform(*map(math.log, RANDOM_BATCH))))
        heads, g = rng.choice(RANDOM_HEADS), rng.choice(RANDOM_GROUPS)
        d, n_q = rng.choice(RANDOM_HEAD_DIMS), rng.choice(RANDOM_QUERIES)
        w = Workload(batch, heads, n_q, kv, d, causal=n_q > 1, kv_heads=heads // g)
        if _fits(w):
            out.append(w)
    return out


def prefill_workloads() -> list[Workload]:
    """Grouped-query prefill at equal query heads, full and causal; a causal chunk."""
    b, h, n, d = PREFILL
    out = [
        Workload(b, h, n, n, d, causal=c, kv_heads=h // g) for c in (False, True) for g in GROUPS
    ]
    b, h, n_q, n_kv, d = CHUNK
    out += [Workload(b, h, n_q, n_kv, d, causal=True, kv_heads=h // g) for g in (1, 8)]
    return out


def serving_points(gpu: GPU, seed: int = 0, count: int = 12) -> list[GridPoint]:
    """The points of `tilesim validate --grid serving`, in run order: decode grid,
    random decode shapes, then prefill (v2, then v3 where the GPU has it)."""
    points = [
        GridPoint("v2", w, default_config("v2", w, gpu), "decode") for w in decode_workloads()
    ]
    points += [
        GridPoint("v2", w, default_config("v2", w, gpu), "decode-random")
        for w in random_decode_workloads(seed, count)
    ]
    for algo in ("v2", "v3"):
        for w in prefill_workloads():
            if runnable(algo, w, gpu):
                points.append(GridPoint(algo, w, default_config(algo, w, gpu), "gqa-prefill"))
    return points


def serving_bench_shapes(seed: int = 0, count: int = 12) -> list[BenchShape]:
    """The same workloads for `tilesim bench --grid serving`: the peers on each."""
    every = decode_workloads() + random_decode_workloads(seed, count) + prefill_workloads()
    return [BenchShape(w, PEERS) for w in every]
