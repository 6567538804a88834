"""FlashAttention v2: parallel over Q blocks, Q on chip, rescale once at the end.

Grid (m, bh) with the Q block fastest, as Triton's ``grid = (cdiv(N, BM), B*H)``:
consecutive CTAs are the Q blocks of one head and read the same K/V tiles, which
is what lets L2 serve most of them. Each CTA loads its Q tile once, walks the
K/V blocks with the loads ``num_stages - 1`` iterations ahead and per block runs
S = Q K^T (tensor cores), the online softmax (exp on the SFU, max / rescale on
the FP32 pipe), then acc += P V. At the end it divides by l once and stores O
and the log-sum-exp.

Causal: like Triton's tutorial kernel, a CTA runs two loops — the K/V blocks its
Q block sees entirely, then the blocks on the diagonal, which pay the mask — and
never visits a block fully above the diagonal. Its trip counts follow from its
Q block m, so the late Q blocks do the most work.

Grouped-query heads: the K/V tiles are keyed by the K/V head (``bh//G``), so the
G query heads of a group find them in L2. Split-KV / packed (``num_splits > 1``
or ``pack_gqa``: tilesim's decode kernel, kernels/flash_decode.py) is
Flash-Decoding: grid (m, s, bh), each CTA walks its share ``cdiv(T_c, S)`` of the
K/V blocks for a Q block of packed (row, head) pairs and writes a float32 partial
O and log-sum-exp; a ``combine`` launch, one CTA per Q block, reads the S partials
back (the tiles it just wrote: L2 holds them) and writes O and the log-sum-exp.
"""

from __future__ import annotations

from ..hwmodels.gpu import GPU
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
from .smem import smem_bytes
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
    grid_heads,
    kv_head,
    packed,
    params,
    qkvo_tensors,
    regs_estimate,
    row_stat,
    rows,
    times,
    warpgroup_rows,
    warpgroups,
)
from .workload import KernelConfig, Workload


def build(workload: Workload, config: KernelConfig, gpu: GPU) -> Trace:
    w, c = workload, config
    if c.num_splits > 1 or packed(w, c):
        return _build_decode(w, c)
    p = params(w, c)
    threads = c.num_warps * 32
    wgs = warpgroups(c)
    if wgs > 1:
        program = CtaProgram(tuple(_warpgroup(w, c, i, wgs) for i in range(wgs)))
    else:
        program = CtaProgram((_single_role(w, c),))
    launch = Launch(
        name="flash_v2",
        grid=(("m", p["T_r"]), ("bh", w.batch * w.heads)),
        program=program,
        smem_bytes=smem_bytes("v2", w, c),
        threads=threads,
        # accumulators: O (block_m x d) and the S / P tile (block_m x block_n)
        regs_per_thread=regs_estimate(c.block_m * w.head_dim + c.block_m * c.block_n, threads),
        mma_path=c.mma_path,
    )
    return Trace(
        algo="v2",
        tensors=tuple(qkvo_tensors(w) + [row_stat("LSE", w)]),
        launches=(launch,),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )


def _loops(w: Workload, c: KernelConfig) -> list[tuple[str, str, str, bool, str]]:
    """(var, trips, block, masked, suffix) of the K/V loops, as the kernel runs them: the
    blocks without a mask, then those with it (causal: the diagonal's; full: a partial
    last block), each its own software-pipelined loop.

    With ``num_splits`` S > 1, split s walks blocks [s·P, min(T_c, (s+1)·P)) of its
    Q block's, P = cdiv(T_c, S) (FlashAttention's n_blocks_per_split).
    """
    pack = w.group if packed(w, c) else 1
    if c.num_splits == 1:
        if w.causal:
            full = causal_full_blocks("m", w.causal_shift, pack)
            seen = causal_kv_blocks("m", w.causal_shift, pack)
            return [
                ("j", full, "j", False, ""),
                ("jd", f"{seen} - {full}", f"{full} + jd", True, "d"),
            ]
        if pack == 1 and w.seqlen_kv % c.block_n:  # kernels/flash_v2.py: split = n_kv // BN
            return [("j", "T_c - 1", "j", False, ""), ("jd", "1", "T_c - 1 + jd", True, "d")]
        return [("j", "T_c", "j", False, "")]
    t_c = -(-w.seqlen_kv // c.block_n)
    per = -(-t_c // c.num_splits)  # K/V blocks per split
    lo, hi = f"s*{per}", f"min(T_c, (s + 1)*{per})"
    if not w.causal:
        return [("j", f"max(0, {hi} - {lo})", f"{lo} + j", False, "")]
    full = causal_full_blocks("m", w.causal_shift, pack)
    seen = causal_kv_blocks("m", w.causal_shift, pack)
    first_masked = f"max({lo}, {full})"
    return [
        ("j", f"max(0, min({hi}, {full}) - {lo})", f"{lo} + j", False, ""),
        ("jd", f"max(0, min({hi}, {seen}) - {first_masked})", f"{first_masked} + jd", True, "d"),
    ]


def _single_role(w: Workload, c: KernelConfig) -> Role:
    """All warps in one role: GEMM, softmax, GEMM in order (Ampere's mma.sync path)."""
    r = rows("m")
    loops = [
        kv_loop(var, trips, block, w, c, masked=m, suffix=sfx)
        for var, trips, block, m, sfx in _loops(w, c)
    ]
    return Role(
        "main",
        (
            Load("q", "Q", ("bh", "m"), f"{r}*d*e"),
            *loops,
            # -- epilogue: O = acc / l, lse = m + log(l) -----------------------
            Vector(
                fp32=f"{times(r + '*d', FLASH_FP32_PER_O_FINAL)}"
                f" + {times(r, FLASH_FP32_PER_ROW_FINAL)}"
            ),
            Store("O", ("bh", "m"), f"{r}*d*e_o"),
            Store("LSE", ("bh", "m"), f"{r}*{FP32_BYTES}"),
        ),
        c.num_warps,
    )


# The combine launch of the split-KV schedule (kernels/flash_decode.py's _combine).
COMBINE_WARPS = 4
COMBINE_STAGES = 3  # its loop over the splits, software-pipelined
COMBINE_REGS = 64  # an estimate: BLOCK_M x d float32 accumulator over 128 threads
# per row per split: the weight exp(lse_s - lse) (the exp) and the max / sum around it
COMBINE_FP32_PER_ROW_SPLIT = 3
COMBINE_FP32_PER_ELEM_SPLIT = 2  # acc += weight * O_s, one FMA per element per split


def _build_decode(w: Workload, c: KernelConfig) -> Trace:
    """The split-KV, head-packed schedule (Flash-Decoding with FlashAttention-3's PackGQA)."""
    p = params(w, c)
    pack = w.group if packed(w, c) else 1
    r = rows("m", pack)
    split = c.num_splits > 1
    loops = [
        kv_loop(var, trips, block, w, c, masked=m, suffix=sfx, pack=pack)
        for var, trips, block, m, sfx in _loops(w, c)
    ]
    if split:
        out = (
            Store("O_acc", ("s", "bh", "m"), f"{r}*d*{FP32_BYTES}"),
            Store("LSE_acc", ("s", "bh", "m"), f"{r}*{FP32_BYTES}"),
        )
    else:
        out = (
            Store("O", ("bh", "m"), f"{r}*d*e_o"),
            Store("LSE", ("bh", "m"), f"{r}*{FP32_BYTES}"),
        )
    main = Role(
        "main",
        (
            Load("q", "Q", ("bh", "m"), f"{r}*d*e"),
            *loops,
            Vector(
                fp32=f"{times(r + '*d', FLASH_FP32_PER_O_FINAL)}"
                f" + {times(r, FLASH_FP32_PER_ROW_FINAL)}"
            ),
            *out,
        ),
        c.num_warps,
    )
    grid: tuple = (("m", p["T_r"]),)
    if split:
        grid += (("s", c.num_splits),)
    grid += (("bh", grid_heads(w, c)),)
    threads = c.num_warps * 32
    launches = [
        Launch(
            name="flash_decode",
            grid=grid,
            program=CtaProgram((main,)),
            smem_bytes=smem_bytes("v2", w, c),
            threads=threads,
            regs_per_thread=regs_estimate(c.block_m * w.head_dim + c.block_m * c.block_n, threads),
            mma_path=c.mma_path,
        )
    ]
    tensors = qkvo_tensors(w) + [row_stat("LSE", w)]
    if split:
        launches.append(_combine(w, c, p, r))
        tensors += [
            TensorSpec("O_acc", (c.num_splits, w.batch, w.heads, w.seqlen_q, w.head_dim), "fp32"),
            TensorSpec("LSE_acc", (c.num_splits, w.batch, w.heads, w.seqlen_q), "fp32"),
        ]
    return Trace(
        algo="v2",
        tensors=tuple(tensors),
        launches=tuple(launches),
        params=p,
        workload=w.to_dict(),
        config=c.to_dict(),
    )


def _combine(w: Workload, c: KernelConfig, p: dict, r: str) -> Launch:
    """One CTA per Q block (kernels/flash_decode.py's ``_combine``): the S partial
    log-sum-exps and the sum of their weights, then per split its weight and partial O,
    summed; O and the log-sum-exp stored. It reads the tiles the split launch wrote."""
    lse = f"{r}*{FP32_BYTES}"
    program = CtaProgram(
        (
            Role(
                "main",
                (
                    Loop("s", "S", (Load("lse", "LSE_acc", ("s", "bh", "m"), lse),)),
                    Vector(exp=f"S*{r}", fp32=f"S*{r}*{COMBINE_FP32_PER_ROW_SPLIT}", deps=("lse",)),
                    Loop(
                        "s",
                        "S",
                        (
                            Load("w", "LSE_acc", ("s", "bh", "m"), lse),
                            Load("o", "O_acc", ("s", "bh", "m"), f"{r}*d*{FP32_BYTES}"),
                            Vector(
                                exp=r,
                                fp32=f"{r}*d*{COMBINE_FP32_PER_ELEM_SPLIT}",
                                deps=("w", "o"),
                            ),
                        ),
                        prefetch=COMBINE_STAGES - 1,
                    ),
                    Store("O", ("bh", "m"), f"{r}*d*e_o"),
                    Store("LSE", ("bh", "m"), lse),
                ),
                COMBINE_WARPS,
            ),
        )
    )
    return Launch(
        name="combine",
        grid=(("m", p["T_r"]), ("bh", grid_heads(w, c))),
        program=program,
        smem_bytes=0,
        threads=COMBINE_WARPS * 32,
        regs_per_thread=COMBINE_REGS,
    )


def _warpgroup(w: Workload, c: KernelConfig, i: int, wgs: int) -> Role:
    loops = []
    for var, trips, block, masked, sfx in _loops(w, c):
        mask = (
            (lambda r, n: f" + {times(f'{r}*{n}', FLASH_FP32_PER_MASKED_SCORE)}")
            if masked
            else None
        )
        loops.append((var, trips, block, mask, sfx))
    return warpgroup_role(w, c, i, wgs, loops, tma=False)


def warpgroup_role(w: Workload, c: KernelConfig, i: int, wgs: int, loops, tma: bool) -> Role:
    """Warpgroup ``i`` of ``wgs``: its share of the Q block's rows, as the compiled kernel.

    Triton lays the 128-row tile over the 8 warps as ``warpsPerCTA = [8, 1]``: each
    warpgroup issues its own wgmma on its 64 rows and waits only for its own, so
    while one runs its softmax the other's GEMM can hold the tensor cores. The
    kernel's code (TTGIR and SASS of v2 and v3, Triton 3.6 on the H200): load Q and
    wait for it, then issue the K/V loads ahead; per K/V block wait for K_j, issue
    S = Q K_j^T, wait for every wgmma of this warpgroup (P_{j-1} V_{j-1} too),
    softmax, issue acc += P V_j without waiting, then one CTA barrier (``bar.sync
    0``) before the next TMA loads go out; after the loop, wait for the last P V.
    Warpgroup 0 stands for the thread that issues the loads; both wait on them.
    ``loops``: (var, trips, block, mask(r, n) -> " + fp32 ops" or None, suffix).
    """
    r = warpgroup_rows(c, i, wgs)
    kvh = kv_head(w, c)
    body_loops: list[Op] = []
    for var, trips, block, mask, sfx in loops:
        n = cols(block)
        k, v, pv = f"k{sfx}", f"v{sfx}", f"pv{sfx}"
        extra = mask(r, n) if mask else ""
        loads = (
            (
                Load(k, "K", (kvh, block), f"{n}*d*e", tma=tma),
                Load(v, "V", (kvh, block), f"{n}*d*e", tma=tma),
            )
            if i == 0
            else ()
        )
        body = (
            *loads,
            Mma(r, n, "d", w.dtype, deps=("q", k, f"{pv}@-1")),
            Vector(
                exp=f"{r}*{n}",
                fp32=(
                    f"{r}*{n}*{FLASH_FP32_PER_SCORE}{extra} + {r}*{FLASH_FP32_PER_ROW_STEP}"
                    f" + {times(r + '*d', FLASH_FP32_PER_O_STEP)}"
                ),
            ),
            Mma(r, "d", n, w.dtype, deps=(v,), id=pv, async_=True),
            Arrive(f"bar{i}{sfx}"),
            Wait(tuple(f"bar{o}{sfx}" for o in range(wgs) if o != i)),
        )
        body_loops.append(Loop(var, trips, body, prefetch=c.num_stages - 1 if i == 0 else 0))
        body_loops.append(Wait((pv,)))  # the loop's last P V, before what follows
    q = (Load("q", "Q", ("bh", "m"), f"{rows('m')}*d*e", tma=tma), Wait(("q",))) if i == 0 else ()
    return Role(
        f"wg{i}",
        (
            *q,
            *body_loops,
            Vector(
                fp32=f"{times(r + '*d', FLASH_FP32_PER_O_FINAL)}"
                f" + {times(r, FLASH_FP32_PER_ROW_FINAL)}"
            ),
            Store("O", ("bh", "m", i), f"{r}*d*e_o"),
            Store("LSE", ("bh", "m", i), f"{r}*{FP32_BYTES}"),
        ),
        c.num_warps // wgs,
    )


def kv_loop(
    var: str,
    trips: str,
    block: str,
    w: Workload,
    c: KernelConfig,
    *,
    masked: bool,
    suffix: str = "",
    pack: int = 1,
) -> Op:
    """The loop over K/V blocks ``block`` (an expression of ``var``)."""
    r, n = rows("m", pack), cols(block)
    k, v = f"k{suffix}", f"v{suffix}"
    kvh = kv_head(w, c)
    mask = f" + {times(f'{r}*{n}', FLASH_FP32_PER_MASKED_SCORE)}" if masked else ""
    return Loop(
        var,
        trips,
        (
            Load(k, "K", (kvh, block), f"{n}*d*e"),
            Load(v, "V", (kvh, block), f"{n}*d*e"),
            # -- S = Q K^T -------------------------------------------------------
            Mma(r, n, "d", w.dtype, deps=("q", k)),
            # -- online softmax: m_new, P = exp2(S*scale - m_new), l, acc *= alpha --
            Vector(
                exp=f"{r}*{n}",
                fp32=(
                    f"{r}*{n}*{FLASH_FP32_PER_SCORE}{mask} + {r}*{FLASH_FP32_PER_ROW_STEP}"
                    f" + {times(r + '*d', FLASH_FP32_PER_O_STEP)}"
                ),
            ),
            # -- acc += P V ------------------------------------------------------
            Mma(r, "d", n, w.dtype, deps=(v,)),
        ),
        prefetch=c.num_stages - 1,
    )
