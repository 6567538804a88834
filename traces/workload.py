"""The two software inputs: what attention to compute, and how the kernel tiles it.

`Workload` is the problem (shapes, causal, dtype, pass; the serving shapes too:
grouped-query heads, a KV cache longer than the queries, per-sequence KV lengths,
a paged cache). `KernelConfig` is the launch configuration shared by the trace
generators and the Triton kernels, so that a prediction and a measurement always
describe the same grid and tiles.

Causal masking is aligned bottom-right, as FlashAttention >= 2.1 does (and
PyTorch's ``causal_lower_right``): query row i of N_q sees key columns
j <= i + (N_kv - N_q), so the queries are the last N_q positions of the sequence
(decode, chunked prefill). With N_q = N_kv that is the usual lower triangle.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import TilesimError, shown

ALGOS = ("standard", "v1", "v2", "v3")
DTYPES = ("fp16", "bf16", "fp8")
PASSES = ("fwd", "bwd", "fwd_bwd")  # forward, backward, or both in one trace
V1_KERNELS = ("algorithm1", "released")  # KernelConfig.v1_kernel
# Head dims the kernels and the trace generators support.
HEAD_DIMS = (64, 128, 256)
# Largest sizes a simulation finishes in minutes: a longer sequence is refused, not
# left running for hours (a grid's CTA count has its own limit, traces/check.py).
MAX_SEQLEN = 1 << 16
# A KV cache may be longer than that when the queries are few: the work is N_q x N_kv.
MAX_SEQLEN_KV = 1 << 20
MAX_SCORES = MAX_SEQLEN * MAX_SEQLEN  # N_q x N_kv per head
MAX_BATCH_HEADS = (1 << 31) - 1  # CUDA's grid limit
MAX_SPLITS = 128  # KV splits per Q block (FlashAttention's limit)
MAX_TABLE = 1 << 24  # entries of a page table (all sequences together)
# Matmul FLOPs of a pass by the shared convention, in forwards: the backward is
# 2.5x the forward (the five products S, dV, dP, dQ, dK), whatever a kernel
# recomputes, so TFLOPS compare implementations of the same work.
PASS_FLOPS = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}
# The FlashAttention papers' benchmark shapes: 16k tokens per batch and a model width
# H·d of 2048, so batch = tokens // N and heads = hidden // d (`paper_batch_heads`).
PAPER_TOKENS = 16384
PAPER_HIDDEN = 2048


def paper_batch_heads(
    seqlen: int, head_dim: int, tokens: int = PAPER_TOKENS, hidden: int = PAPER_HIDDEN
) -> tuple[int, int]:
    """(batch, heads) of the paper shape at ``seqlen`` and ``head_dim``: tokens // N and
    hidden // d, 0 where N > tokens or d > hidden (each caller checks its own way)."""
    return tokens // seqlen, hidden // head_dim


@dataclass(frozen=True)
class Workload:
    batch: int
    heads: int
    seqlen_q: int
    seqlen_kv: int
    head_dim: int
    causal: bool = False
    dtype: str = "fp16"  # element type of Q, K, V and O ("fp8": e4m3 inputs, fp16 output)
    pass_: str = "fwd"  # "fwd", "bwd" (gradients from dO) or "fwd_bwd" (both)
    # -- serving shapes (the defaults: one K/V head per query head, one KV length, no pages)
    # K/V heads (GQA; 1: MQA), heads a multiple of it; None: heads (kept None when equal, so
    # that dataclasses.replace(w, heads=...) of a multi-head workload stays multi-head)
    kv_heads: int | None = None
    seqlens_kv: tuple[int, ...] | None = None  # varlen: each sequence's KV length (<= seqlen_kv)
    page_size: int = 0  # rows of K/V per page of a paged cache; 0: one contiguous cache
    # paged: row b lists the physical pages of sequence b in order; None: its own pages
    # b*P, ..., b*P + P-1 with P = cdiv(seqlen_kv, page_size)
    page_table: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        for name in ("batch", "heads", "seqlen_q", "seqlen_kv"):
            value = getattr(self, name)
            _positive(name, value)
            limit = {"seqlen_q": MAX_SEQLEN, "seqlen_kv": MAX_SEQLEN_KV}.get(name, MAX_BATCH_HEADS)
            _at_most(name, value, limit)
        if self.seqlen_q * self.seqlen_kv > MAX_SCORES:
            raise TilesimError(
                f"seqlen_q x seqlen_kv must be at most {MAX_SCORES} (65536^2), got "
                f"{self.seqlen_q} x {self.seqlen_kv}"
            )
        if self.batch * self.heads > MAX_BATCH_HEADS:
            raise TilesimError(
                f"batch x heads must be at most {MAX_BATCH_HEADS} (CUDA's grid limit), "
                f"got {self.batch * self.heads}"
            )
        if isinstance(self.head_dim, bool) or not isinstance(self.head_dim, int):
            raise TilesimError(f"head_dim must be an integer, got {self.head_dim!r}")
        if not isinstance(self.causal, bool):
            raise TilesimError(f"causal must be true or false, got {self.causal!r}")
        for name in ("dtype", "pass_"):
            if not isinstance(getattr(self, name), str):
                raise TilesimError(f"{name} must be a string, got {getattr(self, name)!r}")
        if self.head_dim not in HEAD_DIMS:
            raise TilesimError(
                f"head_dim {self.head_dim} is not supported (supported: "
                f"{', '.join(map(str, HEAD_DIMS))})"
            )
        if self.dtype not in DTYPES:
            raise TilesimError(f"unknown dtype {self.dtype!r} (choose from {', '.join(DTYPES)})")
        if self.pass_ not in PASSES:
            raise TilesimError(f"unknown pass {self.pass_!r} (choose from {', '.join(PASSES)})")
        self._check_serving()

    def _check_serving(self) -> None:
        if self.kv_heads is not None:
            _positive("kv_heads", self.kv_heads)
            if self.kv_heads == self.heads:  # as the default: equal workloads compare equal
                object.__setattr__(self, "kv_heads", None)
        if self.heads % self.num_kv_heads:
            raise TilesimError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.num_kv_heads}): "
                "each K/V head serves the same number of query heads"
            )
        if self.causal and self.seqlen_q > self.seqlen_kv:
            raise TilesimError(
                f"causal with seqlen_q {self.seqlen_q} > seqlen_kv {self.seqlen_kv}: aligned "
                f"bottom-right, the first {self.seqlen_q - self.seqlen_kv} query rows would "
                "see no key"
            )
        if self.seqlens_kv is not None:
            lens = self.seqlens_kv
            if isinstance(lens, list):
                lens = tuple(lens)
                object.__setattr__(self, "seqlens_kv", lens)
            if not isinstance(lens, tuple) or len(lens) != self.batch:
                got = len(lens) if isinstance(lens, tuple) else repr(lens)[:40]
                raise TilesimError(
                    f"seqlens_kv must list one KV length per sequence ({self.batch}), got {got}"
                )
            for b, n in enumerate(lens):
                _positive(f"seqlens_kv[{b}]", n)
                if n > self.seqlen_kv:
                    raise TilesimError(
                        f"seqlens_kv[{b}] = {n} is longer than seqlen_kv {self.seqlen_kv} "
                        "(the cache's length)"
                    )
                if self.causal and n < self.seqlen_q:
                    raise TilesimError(
                        f"causal with seqlens_kv[{b}] = {n} < seqlen_q {self.seqlen_q}: aligned "
                        "bottom-right, its first query rows would see no key"
                    )
        if isinstance(self.page_size, bool) or not isinstance(self.page_size, int):
            raise TilesimError(f"page_size must be an integer, got {self.page_size!r}")
        if self.page_size < 0 or self.page_size & (self.page_size - 1):
            raise TilesimError(
                f"page_size must be 0 (no pages) or a power of two, got {self.page_size}"
            )
        _at_most("page_size", self.page_size, MAX_SEQLEN)
        if self.page_table is not None:
            self._check_page_table()

    def _check_page_table(self) -> None:
        if not self.page_size:
            raise TilesimError("page_table needs a page_size (the rows of K/V per page)")
        table = self.page_table
        if isinstance(table, list):
            table = tuple(tuple(r) if isinstance(r, list) else r for r in table)
            object.__setattr__(self, "page_table", table)
        if not isinstance(table, tuple) or len(table) != self.batch:
            got = len(table) if isinstance(table, tuple) else repr(table)[:40]
            raise TilesimError(
                f"page_table must have one row of pages per sequence ({self.batch}), got {got}"
            )
        total = 0
        for b, row in enumerate(table):
            if not isinstance(row, tuple):
                raise TilesimError(f"page_table[{b}] must be a list of page numbers")
            need = -(-self.kv_len(b) // self.page_size)
            if len(row) < need:
                raise TilesimError(
                    f"page table too short: sequence {b} needs {need} pages of "
                    f"{self.page_size} rows for its {self.kv_len(b)} keys, its row has {len(row)}"
                )
            total += len(row)
            if total > MAX_TABLE:
                raise TilesimError(f"page_table has more than {MAX_TABLE} entries")
            for p, page in enumerate(row):
                if isinstance(page, bool) or not isinstance(page, int) or page < 0:
                    raise TilesimError(
                        f"page_table[{b}][{p}] must be a page number >= 0, got {page!r}"
                    )
                _at_most(f"page_table[{b}][{p}]", page, MAX_TABLE)

    # -- derived sizes ------------------------------------------------------------------

    @property
    def elem_bytes(self) -> int:
        return 1 if self.dtype == "fp8" else 2

    @property
    def num_kv_heads(self) -> int:
        """K/V heads: ``kv_heads``, or ``heads`` for multi-head attention."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def group(self) -> int:
        """Query heads per K/V head (1: multi-head attention)."""
        return self.heads // self.num_kv_heads

    @property
    def causal_shift(self) -> int:
        """Columns the bottom-right causal diagonal is shifted right by: N_kv - N_q."""
        return self.seqlen_kv - self.seqlen_q

    @property
    def varlen(self) -> bool:
        return self.seqlens_kv is not None

    def kv_len(self, b: int) -> int:
        """KV length of sequence ``b``."""
        return self.seqlen_kv if self.seqlens_kv is None else self.seqlens_kv[b]

    @property
    def pages_per_seq(self) -> int:
        """Page-table entries per sequence: the longest row (0 without pages)."""
        if not self.page_size:
            return 0
        if self.page_table is not None:
            return max(len(r) for r in self.page_table)
        return -(-self.seqlen_kv // self.page_size)

    def scores(self) -> float:
        """Scores computed per head and sequence, summed: N_q x N_kv, less the masked
        triangle N_q^2/2 when causal (the shared convention: half of a square)."""
        tri = self.seqlen_q * self.seqlen_q / 2 if self.causal else 0.0
        if self.seqlens_kv is None:
            return self.batch * (self.seqlen_q * self.seqlen_kv - tri)
        return float(sum(self.seqlen_q * n - tri for n in self.seqlens_kv))

    def flops(self) -> float:
        """Matmul FLOPs of the forward by the shared convention: 4·H·d per score (two
        products of 2·d each), summed over the sequences; 2.5x for a backward."""
        return 4.0 * self.heads * self.head_dim * self.scores() * PASS_FLOPS[self.pass_]

    def dense_flops(self) -> int:
        """The same convention over the whole N_q x N_kv product, masked scores too and
        one forward: 4·B·H·N_q·N_kv·d (exact; `flops` takes the causal half off)."""
        return 4 * self.batch * self.heads * self.seqlen_q * self.seqlen_kv * self.head_dim

    def kv_bytes(self) -> int:
        """Bytes of K and V the forward must read once: 2·H_kv·d·e per key of every sequence."""
        keys = self.batch * self.seqlen_kv if self.seqlens_kv is None else sum(self.seqlens_kv)
        return 2 * self.num_kv_heads * self.head_dim * self.elem_bytes * keys

    def to_dict(self) -> dict:
        """Every field; the serving fields only when they differ from their defaults, so the
        files of a multi-head, one-length workload are as they always were."""
        d = dataclasses.asdict(self)
        for name, default in (
            ("kv_heads", None),
            ("seqlens_kv", None),
            ("page_size", 0),
            ("page_table", None),
        ):
            if d[name] == default:
                del d[name]
        for name in ("seqlens_kv", "page_table"):
            if name in d:
                d[name] = [list(r) if isinstance(r, tuple) else r for r in d[name]]
        return d


def default_seqlen_kv(seqlen_q: int, seqlen_kv: int | None, seqlens_kv=None) -> int:
    """``seqlen_kv`` as given, else the longest of ``seqlens_kv``, else ``seqlen_q``."""
    if seqlen_kv is not None:
        return seqlen_kv
    if (
        isinstance(seqlens_kv, tuple | list)
        and seqlens_kv
        and all(isinstance(n, int) for n in seqlens_kv)
    ):
        return max(seqlens_kv)
    return seqlen_q


def _positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TilesimError(f"{name} must be a positive integer, got {value!r}")


def _at_most(name: str, value: int, limit: int) -> None:
    if value > limit:
        raise TilesimError(f"{name} must be at most {limit}, got {shown(value)}")


@dataclass(frozen=True)
class KernelConfig:
    block_m: int  # rows of Q per tile
    block_n: int  # rows of K/V per tile
    num_warps: int  # warps per CTA
    num_stages: int  # software-pipelining depth of the K/V loads
    mma_path: str = "mma_sync"  # "wgmma" (Hopper) or "mma_sync" (Ampere-style)
    # v3 only: producer/consumer warp specialisation, ping-pong of two consumer
    # warpgroups, persistent grid.
    warp_specialize: bool = False
    pingpong: bool = False
    persistent: bool = False
    # v1 only: which program runs ("algorithm1": the FlashAttention paper's Algorithm 1;
    # "released": the released FlashAttention-1 kernel, block_m-row Q steps against a
    # block_n-key K/V block held on chip, its keys split across the num_warps warps),
    # and the released kernel's CTAs per (batch, head).
    v1_kernel: str = "algorithm1"
    # CTAs per (batch, head) sharing its work: v1 released, the Q steps (forward) or K/V
    # blocks (backward); v2/v3 serving, the KV sequence, then a combine launch
    # (Flash-Decoding). pack_gqa: the G query heads of a K/V head in one Q block
    # (FlashAttention-3's PackGQA).
    num_splits: int = 1
    pack_gqa: bool = False

    def __post_init__(self) -> None:
        if (
            isinstance(self.num_splits, bool)
            or not isinstance(self.num_splits, int)
            or not 1 <= self.num_splits <= MAX_SPLITS
        ):
            raise TilesimError(
                f"num_splits must be an integer from 1 to {MAX_SPLITS}, got {self.num_splits!r}"
            )
        if not isinstance(self.pack_gqa, bool):
            raise TilesimError(f"pack_gqa must be true or false, got {self.pack_gqa!r}")
        for name in ("block_m", "block_n", "num_warps", "num_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise TilesimError(f"{name} must be a positive integer, got {value!r}")
            # tile sizes and warp counts are powers of two (tl.arange, warpgroups);
            # a pipeline depth is any count (Triton's usual num_stages is 3)
            if name not in ("num_stages", "num_splits") and value & (value - 1):
                raise TilesimError(f"{name} must be a power of two, got {value}")
        if self.mma_path not in ("wgmma", "mma_sync"):
            raise TilesimError(f"unknown mma_path {self.mma_path!r} (choose wgmma or mma_sync)")
        for name in ("warp_specialize", "pingpong", "persistent"):
            if not isinstance(getattr(self, name), bool):
                raise TilesimError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.v1_kernel not in V1_KERNELS:
            raise TilesimError(
                f"unknown v1_kernel {self.v1_kernel!r} (choose {' or '.join(V1_KERNELS)})"
            )
        if self.v1_kernel == "released" and self.block_n < 16 * self.num_warps:
            raise TilesimError(
                f"block_n={self.block_n} must give each of the {self.num_warps} warps "
                "at least 16 keys (a tensor-core tile)"
            )

    def replace(self, **changes) -> KernelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Every field; the serving fields only when set (older files stay as they were)."""
        d = dataclasses.asdict(self)
        if d["num_splits"] == 1:
            del d["num_splits"]
        if not d["pack_gqa"]:
            del d["pack_gqa"]
        return d
