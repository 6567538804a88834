"""FlashAttention v3 (Hopper): TMA producer, ping-pong consumers, overlapped softmax.

The grid is v2's, (m, bh). With ``warp_specialize`` (the default) a CTA is three
warpgroups run as separate roles:

* ``producer`` (one warpgroup, few registers): issues TMA loads of the Q tile
  and of K_j, V_j into a ``num_stages``-deep ring of shared-memory buffers. It
  waits until every consumer has released the buffer it is about to overwrite:
  K_j's buffer held K_{j-S} (released when its S = Q K^T finished), V_j's held
  V_{j-S} (released when its P V finished).
* ``consumer0``, ``consumer1`` (``num_warps / 4`` warpgroups of block_m / 2 rows
  each; wgmma takes 64 rows per warpgroup). Within a consumer, the GEMMs are
  asynchronous: iteration j issues S_j = Q K_j^T and P_{j-1} V_{j-1}, then runs
  the softmax of S_j while P_{j-1} V_{j-1} is still on the tensor cores (the
  paper's intra-warpgroup pipelining; the first iteration's P V is empty, the
  last block's P V runs after the loop). With ``pingpong`` the consumers take
  turns to issue their GEMMs (consumer c waits for consumer c-1's issue of the
  same iteration, consumer 0 for the last consumer's of the previous one), so
  one warpgroup's softmax runs while the other's GEMMs occupy the tensor cores.

With ``warp_specialize`` this is what tilesim's Gluon kernel runs
(kernels/gluon/; ``traces.config.default_config`` at d <= 128: no
ping-pong, 3 stages). Without it the CTA is tilesim's Triton v3 kernel (d = 256):
one role that issues its own TMA loads
``num_stages - 1`` iterations ahead and runs S = Q K^T, the softmax and P V in
order, as v2 does — the kernel's code asks for no overlap of the softmax with
the GEMMs, and the intra-warpgroup pipelining above needs the two GEMMs issued
asynchronously around it. ``persistent`` launches SMs x CTAs-per-SM CTAs that
loop over the (m, bh) work items.

FP8 (e4m3 Q, K, V): both GEMMs run in fp8 (P is quantised to fp8 too), every
input byte count halves, O is written in fp16. Hopper's fp8 wgmma wants V
K-major (transposed): FlashAttention-3 transposes it in the kernel; tilesim's
kernels (Gluon and Triton alike) run a ``transpose_v`` launch first that writes
Vᵀ [B, H, d, N_kv padded to 16] to HBM, grid (cdiv(N_kv16, 64), B·H), 64 rows of
V per CTA, and so does this trace.

Causal: one loop over the K/V blocks the Q block sees (the diagonal blocks
pay the mask); blocks fully above the diagonal are never visited.
"""

from __future__ import annotations

import dataclasses

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from .config import smem_bytes
from .flash_v2 import warpgroup_role
from .ir import (
    Arrive,
    CtaProgram,
    Launch,
    Load,
    Loop,
    Mma,
    Op,
    Role,
    Store,
    TensorSpec,
    Trace,
    Vector,
    Wait,
)
from .occupancy import occupancy
from .tiles import (
    FLASH_FP32_PER_MASKED_SCORE,
    FLASH_FP32_PER_O_FINAL,
    FLASH_FP32_PER_O_STEP,
    FLASH_FP32_PER_ROW_FINAL,
    FLASH_FP32_PER_ROW_STEP,
    FLASH_FP32_PER_SCORE,
    FP32_BYTES,
    causal_full_blocks,
    causal_kv_blocks,
    cols,
    kv_head,
    params,
    qkvo_tensors,
    regs_estimate,
    row_stat,
    rows,
    times,
    warpgroups,
)
from .workload import KernelConfig, Workload

WGMMA_ROWS = 64  # rows of one warpgroup's wgmma
PRODUCER_WARPS = 4  # one warpgroup
# FlashAttention-3 rebalances registers with setmaxnreg: 24 per producer thread,
# 240 per consumer thread (two consumer warpgroups); Launch takes the average.
PRODUCER_REGS = 24
CONSUMER_REGS = 240


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    w, c = workload, config
    p = params(w, c)
    if c.num_warps % 4:
        raise TilesimError(
            f"v3 needs whole warpgroups: num_warps={c.num_warps} is not a multiple of 4"
        )
    consumers = c.num_warps // 4 if c.warp_specialize else 1
    if c.pingpong and not (c.warp_specialize and consumers >= 2):
        raise TilesimError(
            "v3 pingpong needs warp_specialize and at least two consumer warpgroups "
            f"(num_warps >= 8), got warp_specialize={c.warp_specialize} num_warps={c.num_warps}"
        )
    if c.warp_specialize and (c.block_m % consumers or (c.block_m // consumers) % WGMMA_ROWS):
        raise TilesimError(
            f"v3 block_m={c.block_m} does not split into {consumers} consumer warpgroups of a "
            f"multiple of {WGMMA_ROWS} rows"
        )

    shift = w.causal_shift
    trips = causal_kv_blocks("m", shift) if w.causal else "T_c"
    if not c.warp_specialize and (w.causal or w.seqlen_kv % c.block_n):
        # tilesim's kernel: one loop, so with a causal mask or a partial last K/V block
        # every block takes the mask (kernels/flash_v3.py)
        mask = " + " + times("{r}*{n}", FLASH_FP32_PER_MASKED_SCORE)
    elif w.causal:  # FlashAttention-3: only the blocks on the diagonal
        diagonal = f"min(1, max(0, j + 1 - {causal_full_blocks('m', shift)}))"
        mask = " + " + times(diagonal, FLASH_FP32_PER_MASKED_SCORE) + "*{r}*{n}"
    else:
        mask = ""

    if c.warp_specialize:
        roles = [_producer(w, c, consumers, trips)]
        for i in range(consumers):
            roles.append(_consumer(w, c, i, consumers, trips, mask))
        threads = (c.num_warps + PRODUCER_WARPS) * 32
        regs = (PRODUCER_WARPS * PRODUCER_REGS + c.num_warps * CONSUMER_REGS) * 32 // threads
        regs = -(-regs // 8) * 8
    elif warpgroups(c) > 1:  # tilesim's Triton kernel: two warpgroups, as v2's (flash_v2.py)
        wgs = warpgroups(c)
        loop = ("j", trips, "j", (lambda r, n: mask.format(r=r, n=n)) if mask else None, "")
        roles = [warpgroup_role(w, c, i, wgs, [loop], tma=True) for i in range(wgs)]
        threads = c.num_warps * 32
        regs = regs_estimate(c.block_m * w.head_dim + c.block_m * c.block_n, threads)
    else:
        roles = [_consumer(w, c, 0, 1, trips, mask)]
        threads = c.num_warps * 32
        regs = regs_estimate(c.block_m * w.head_dim + c.block_m * c.block_n, threads)

    launch = Launch(
        name="flash_v3",
        grid=(("m", p["T_r"]), ("bh", w.batch * w.heads)),
        program=CtaProgram(tuple(roles)),
        smem_bytes=smem_bytes("v3", w, c),
        threads=threads,
        regs_per_thread=regs,
        mma_path=c.mma_path,
    )
    if c.persistent:
        per_sm = occupancy(launch, gpu).ctas_per_sm
        launch = dataclasses.replace(launch, persistent_ctas=gpu.sm_count * max(per_sm, 1))
    tensors = qkvo_tensors(w) + [row_stat("LSE", w)]
    launches = (launch,)
    if w.dtype == "fp8":
        n_pad = -(-w.seqlen_kv // 16) * 16
        vt = TensorSpec("VT", (w.batch, w.num_kv_heads, w.head_dim, n_pad), "fp8")
        tensors.append(vt)
        launches = (_transpose_v(w), launch)
    return Trace(
        algo="v3",
        tensors=tuple(tensors),
        launches=launches,
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )


TRANSPOSE_ROWS = 64  # rows of V per CTA of the fp8 V transpose (kernels/flash_v3.py)


def _transpose_v(w: Workload) -> Launch:
    """fp8 Vᵀ for the kernel's P V: a 64 x d tile of V in, the same bytes transposed out."""
    n_pad = -(-w.seqlen_kv // 16) * 16
    rows_in = f"min({TRANSPOSE_ROWS}, N_kv - {TRANSPOSE_ROWS}*t)"
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    Load("v", "V", ("bh", "t"), f"max(0, {rows_in})*d*e"),
                    Store(
                        "VT",
                        ("bh", "t"),
                        f"min({TRANSPOSE_ROWS}, {n_pad} - {TRANSPOSE_ROWS}*t)*d*e",
                        deps=("v",),
                    ),
                ),
                4,
            ),
        )
    )
    return Launch(
        name="transpose_v",
        grid=(("t", -(-n_pad // TRANSPOSE_ROWS)), ("bh", w.batch * w.num_kv_heads)),
        program=program,
        smem_bytes=TRANSPOSE_ROWS * w.head_dim * w.elem_bytes,  # the transpose goes through smem
        threads=128,
        regs_per_thread=32,
    )


def _producer(w: Workload, c: KernelConfig, consumers: int, trips: str) -> Role:
    s = c.num_stages
    kvh = kv_head(w, c)
    kfree = tuple(f"kfree{i}@-{s}" for i in range(consumers))
    # vfree<i> of consumer iteration j releases V_{j-1}, so V_{j-s} is vfree@-(s-1)
    vfree = tuple(f"vfree{i}" + (f"@-{s - 1}" if s > 1 else "") for i in range(consumers))
    n = cols("j")
    return Role(
        "producer",
        (
            Load("q", "Q", ("bh", "m"), f"{rows('m')}*d*e", tma=True),
            Loop(
                "j",
                trips,
                (
                    Wait(kfree),
                    Load("k", "K", (kvh, "j"), f"{n}*d*e", tma=True),
                    Wait(vfree),
                    Load("v", "V", (kvh, "j"), f"{n}*d*e", tma=True),
                ),
            ),
        ),
        PRODUCER_WARPS,
    )


def _consumer(w: Workload, c: KernelConfig, i: int, consumers: int, trips: str, mask: str) -> Role:
    """Consumer warpgroup ``i`` of ``consumers`` (or the only role, unspecialised)."""
    specialised = c.warp_specialize
    # rows of this warpgroup: its share of the CTA's Q block, fewer (or none) in the last block
    if consumers == 1:
        r = rows("m")
    else:
        share = c.block_m // consumers
        # the first warpgroup always has rows (m < T_r); a later one may have none
        r = (
            f"min({share}, N_q - block_m*m)"
            if i == 0
            else (f"max(0, min({share}, N_q - block_m*m - {share * i}))")
        )
    n = cols("j")
    kvh = kv_head(w, c)
    n_prev = f"min({cols('j - 1')}, block_n*j)"  # block j-1's columns; none at j = 0
    n_last = cols(f"{trips} - 1")
    dt = w.dtype
    pingpong = c.pingpong

    softmax = Vector(
        exp=f"{r}*{n}",
        fp32=f"{r}*{n}*{FLASH_FP32_PER_SCORE}"
        + mask.format(r=r, n=n)
        + f" + {r}*{FLASH_FP32_PER_ROW_STEP}",
        id="softmax",
    )
    rescale = Vector(fp32=times(f"{r}*d", FLASH_FP32_PER_O_STEP))  # acc *= alpha
    epilogue = Vector(
        fp32=f"{times(r + '*d', FLASH_FP32_PER_O_FINAL)} + {times(r, FLASH_FP32_PER_ROW_FINAL)}"
    )
    tile = ("bh", "m") if consumers == 1 else ("bh", "m", i)
    stores = (Store("O", tile, f"{r}*d*e_o"), Store("LSE", tile, f"{r}*{FP32_BYTES}"))
    if not specialised:
        # -- the Triton kernel's loop: TMA loads ahead, then GEMM, softmax, GEMM in order
        body = (
            Load("k", "K", (kvh, "j"), f"{n}*d*e", tma=True),
            Load("v", "V", (kvh, "j"), f"{n}*d*e", tma=True),
            Mma(r, n, "d", dt, deps=("q", "k")),
            softmax,
            rescale,
            Mma(r, "d", n, dt, deps=("v",)),
        )
        ops = (
            Load("q", "Q", ("bh", "m"), f"{rows('m')}*d*e", tma=True),
            Loop("j", trips, body, prefetch=c.num_stages - 1),
            epilogue,
            *stores,
        )
        return Role("main", ops, c.num_warps)

    body: list[Op] = []
    if pingpong:  # wait for my turn to issue GEMMs
        prev = f"gemm{i - 1}" if i else f"gemm{consumers - 1}@-1"
        body.append(Wait((prev,)))
    body += [
        # -- issue S_j = Q K_j^T and P_{j-1} V_{j-1} on the tensor cores ---------
        Mma(r, n, "d", dt, deps=("q", "k"), id="s", async_=True),
        Mma(r, "d", n_prev, dt, deps=("v@-1",), id="pv", async_=True),
    ]
    if pingpong:
        body.append(Arrive(f"gemm{i}"))
    body += [
        Wait(("s",)),
        Arrive(f"kfree{i}"),  # K_j's buffer may be refilled
        softmax,  # -- softmax of S_j while P_{j-1} V_{j-1} runs
        Wait(("pv",)),
        Arrive(f"vfree{i}"),  # V_{j-1}'s buffer may be refilled
        rescale,
    ]

    tail: list[Op] = []
    if pingpong:
        tail.append(Wait((f"gemm_last{i - 1}" if i else f"gemm{consumers - 1}",)))
    tail.append(Mma(r, "d", n_last, dt, deps=("v",), id="pv_last"))
    if pingpong:
        tail.append(Arrive(f"gemm_last{i}"))
    tail += [epilogue, *stores]  # O = acc / l, lse = m + log(l)
    ops = (Loop("j", trips, tuple(body)), *tail)
    return Role(f"consumer{i}", ops, c.num_warps // consumers)
