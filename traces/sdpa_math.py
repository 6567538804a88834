"""PyTorch SDPA's `math` backend as it runs on a CUDA GPU: the eager composition.

``_scaled_dot_product_attention_math`` (aten/src/ATen/native/transformers/
attention.cpp, torch 2.11) keeps fp16/bf16 inputs in float32 (unless
``allow_fp16_bf16_reduction_math_sdp``, off by default), scales Q and K by
sqrt(scale) each, builds the causal mask as an (N_q, N_kv) additive float
tensor and adds it to the scores, takes ``_safe_softmax`` (softmax, then rows
that are all -inf set to zero), multiplies by V, and converts the output back;
the scores' softmax is converted to the input dtype too (its second return
value, which SDPA drops). The two matmuls are cuBLAS SGEMMs (TF32 is off by
default: FFMA on the FP32 pipe, ``sm80_xmma_gemm_f32f32_..._ffma`` kernels).

One launch per kernel the torch profiler recorded on the H200
(``experiments/2026-12-01-sdpa-kernels/``), in its order, each with the grid
and block of PyTorch's launch code:

* elementwise kernels of 128 threads: ``vectorized_elementwise_kernel`` takes
  1024 elements per CTA (2048 for a fill of bools), ``unrolled_elementwise_kernel``
  (a dtype-converting copy) 512, ``elementwise_kernel<128, 2>`` (an operand
  broadcast) 256; a tensor of more than 2^31 bytes is split into halves until each
  part indexes with 32 bits (TensorIterator), one launch per part;
* ``triu_tril_kernel`` 1024 elements per CTA; the scalar fills one CTA;
* softmax over rows of N_kv floats: up to 2048 one warp per row, 4 rows per CTA of
  128 threads (``softmax_warp_forward``); above, one CTA of 1024 threads per row,
  the row in registers (``cunn_SoftMaxForwardReg``, ceil(N/1024) < 10), in shared
  memory (``cunn_SoftMaxForwardSmem``, N < 12256 and N % 4 == 0) or read three
  times (``cunn_SoftMaxForward``);
* the row reduction of ``all`` (``reduce_kernel<512, 1>``): 16 rows per CTA of 512
  threads, each row read in steps of 512 bytes (32 threads x 16 bytes);
* the SGEMMs as tiled loops of k-steps of 8 (3 stages) over a tile of
  ``GEMM_TILES``; cuBLAS's own choice of tile is closed source, see ``gemm_tile``.

cuBLAS kernels are not in the compiled-kernel profile: every launch is estimated.
"""

from __future__ import annotations

from typing import NamedTuple

from ..hwmodels.gpu import GPU
from .ir import CtaProgram, Launch, Load, Loop, Role, Store, TensorSpec, Trace, Vector
from .workload import Workload

THREADS = 128  # PyTorch's elementwise kernels: num_threads() = 4 warps
INDEX_BYTES = (1 << 31) - 1  # TensorIterator splits an operand larger than this
ELEMENTWISE_REGS = 32  # the profiled elementwise kernels: 16-32 registers per thread

WARP_SOFTMAX_MAX = 2048  # softmax_warp_forward up to this row length
SOFTMAX_THREADS = 1024  # the block softmax kernels: 1024 threads per row
SOFTMAX_REG_MAX = 9 * SOFTMAX_THREADS  # cunn_SoftMaxForwardReg: ceil(N / 1024) < 10
SOFTMAX_SMEM_LIMIT = (48 * 1024 - 4 * SOFTMAX_THREADS // 32) // 4  # elements, 48 KiB per block
SOFTMAX_FP32_PER_SCORE = 5  # max, x - max, exp's scale, sum, times 1/sum

REDUCE_THREADS = 512  # reduce_kernel<512, 1>: block (32, 16)
REDUCE_ROWS = 16  # rows per CTA (block.y)
REDUCE_STEP_BYTES = 32 * 16  # one row's bytes in flight per step: 32 threads x 16 bytes

GEMM_BK = 8  # every profiled SGEMM: tilesize ...x8, 3 stages
GEMM_STAGES = 3


class GemmTile(NamedTuple):
    """A cuBLAS SIMT SGEMM kernel (sm80_xmma_gemm_f32f32_..._ffma) as the profiler saw it."""

    block_m: int
    block_n: int
    threads: int
    regs: int  # registers per thread
    smem: int  # bytes per CTA
    thread_m: int  # each thread's accumulator tile, rows x columns
    thread_n: int


# The tiles cuBLAS 13 ran for these shapes on the H200, largest first (tilesize, warps,
# registers and shared memory from the profiler's kernel records)
GEMM_TILES = (
    GemmTile(128, 128, 128, 255, 33792, 8, 16),
    GemmTile(128, 64, 128, 224, 18816, 8, 8),
    GemmTile(64, 64, 128, 121, 12672, 8, 4),
    GemmTile(32, 32, 64, 80, 6912, 4, 4),
)
# The square 8192^3 SGEMM (cuBLAS's 256x128x8 kernel, 8 warps, 8 x 16 per thread), timed
# on its own on the H200: 51.3 TFLOPS at 1980 MHz, 0.804 of the FMA rate `tilesim
# calibrate` measured (122 lane-ops per clock per SM); experiments/2026-12-01-sdpa-kernels
SGEMM_FMA_SHARE = 0.804
SGEMM_REFERENCE = GemmTile(256, 128, 256, 254, 0, 8, 16)


def issue_share(t: GemmTile) -> float:
    """FFMA's share of a tile's issued instructions (the estimate that scales SGEMM_FMA_SHARE
    from the reference tile to this one).

    Per k and thread: thread_m x thread_n FFMA and (thread_m + thread_n) / 4 LDS.128 of
    its A and B fragments; per k-step of 8: the global loads and shared stores of the
    next step's A and B tiles (16 bytes each) and about 12 barrier, address and loop
    instructions.
    """
    fma = t.thread_m * t.thread_n
    per_step = 12 + 2 * (t.block_m + t.block_n) * GEMM_BK / (t.threads * 4)
    return fma * GEMM_BK / ((fma + (t.thread_m + t.thread_n) / 4) * GEMM_BK + per_step)


def fma_share(t: GemmTile) -> float:
    """FFMA lane-ops per clock of tile ``t`` over the FP32 pipe's rate."""
    return SGEMM_FMA_SHARE * issue_share(t) / issue_share(SGEMM_REFERENCE)


def ctas_per_sm(t: GemmTile, gpu: GPU) -> int:
    regs = -(-t.regs // 8) * 8 * t.threads
    return max(1, min(gpu.regs_per_sm // regs, gpu.smem_bytes_per_sm // max(t.smem, 1)))


def gemm_tile(m: int, n: int, batch: int, gpu: GPU) -> GemmTile:
    """The tile of cuBLAS's SGEMM for an (m x n) output, ``batch`` of them.

    cuBLAS's heuristic is closed source. Its choices on the profiled shapes follow the
    tile whose grid finishes first when each wave takes its tile's FFMA work at its
    issue share: full waves of ``ctas_per_sm`` CTAs per SM, a last partial wave at
    the CTAs it puts on the busiest SM (10 of the 14 profiled GEMMs; the other four
    were near ties).
    """

    def cost(t: GemmTile) -> float:
        ctas = -(-m // t.block_m) * -(-n // t.block_n) * batch
        per_sm = ctas_per_sm(t, gpu)
        slots = gpu.sm_count * per_sm
        full, part = divmod(ctas, slots)
        resident = full * per_sm + -(-part // gpu.sm_count)
        return resident * t.block_m * t.block_n / issue_share(t)

    return min(GEMM_TILES, key=lambda t: (cost(t), -t.block_m * t.block_n))


def index_parts(n: int, elem_bytes: int) -> int:
    """Launches TensorIterator makes of ``n`` elements whose widest operand has
    ``elem_bytes`` each: halves until every part's elements and byte offsets fit int32."""
    parts = 1
    while (-(-n // parts) - 1) * elem_bytes + 1 > INDEX_BYTES or -(-n // parts) > INDEX_BYTES:
        parts *= 2
    return parts


def build(workload: Workload, gpu: GPU) -> Trace:
    w = workload
    bh, nq, nk, d = w.batch * w.heads, w.seqlen_q, w.seqlen_kv, w.head_dim
    e = w.elem_bytes
    f32 = 4
    scores = bh * nq * nk
    launches: list[Launch] = []

    def stream(name, n, kernel, reads, writes, fp32=1):
        launches.extend(_stream(name, n, kernel, reads, writes, fp32))

    # -- fp16/bf16 -> fp32 copies, then q * sqrt(scale) ----------------------------
    for x in ("Q", "K", "V"):
        rows = nq if x == "Q" else nk
        stream(f"to_fp32_{x.lower()}", bh * rows * d, CAST_COPY, [(x, e)], [(f"{x}32", f32)])
    stream("scale_q", bh * nq * d, VECTORIZED, [("Q32", f32)], [("Qs", f32)])
    if w.causal:
        # -- the mask: ones((N_q, N_kv), bool).tril(), then where(mask, 0, -inf) --------
        mask = nq * nk
        stream("mask_ones", mask, VECTORIZED_BYTES, [], [("Mb", 1)], fp32=0)
        stream("mask_tril", mask, TRIU, [("Mb", 1)], [("Mt", 1)])
        for i in range(2):
            stream(f"mask_scalar{i}", 1, SCALAR, [], [("C", f32)], fp32=0)
        stream("mask_where", mask, STRIDED, [("Mt", 1)], [("M", f32)])
    stream("scale_k", bh * nk * d, VECTORIZED, [("K32", f32)], [("Ks", f32)])
    # -- S = (Q s) (K s)^T: cuBLAS SGEMM, batched over B*H ----------------------------
    launches.append(_sgemm("qk", "Qs", "Ks", "S", nq, nk, d, bh, gpu))
    if w.causal:
        # S += mask, the (N_q, N_kv) mask broadcast over every head
        per_head = -(-nq * nk // (STRIDED.per_thread * THREADS))
        stream("add_mask", scores, STRIDED, [("S", f32), ("M", f32, per_head)], [("S", f32)])
    # -- _safe_softmax: softmax, isneginf, all over the row, where ---------------------
    launches.append(_softmax(bh * nq, nk))
    stream("isneginf", scores, VECTORIZED, [("S", f32)], [("NI", 1)])
    launches.append(_row_all(bh * nq, nk))
    stream("zero_scalar", 1, SCALAR, [], [("C", f32)], fp32=0)
    stream("where", scores, STRIDED, [("P", f32)], [("P2", f32)])
    stream("attn_to_input", scores, VECTORIZED, [("P2", f32)], [("Ph", e)])
    # -- O = P V, converted back ---------------------------------------------------------
    launches.append(_sgemm("pv", "P2", "V32", "O32", nq, d, nk, bh, gpu, b_rows_major=True))
    stream("out_to_input", bh * nq * d, VECTORIZED, [("O32", f32)], [("O", e)])

    t = w.dtype
    tensors = [
        TensorSpec("Q", (w.batch, w.heads, nq, d), t),
        TensorSpec("K", (w.batch, w.heads, nk, d), t),
        TensorSpec("V", (w.batch, w.heads, nk, d), t),
        TensorSpec("O", (w.batch, w.heads, nq, d), t),
        TensorSpec("Q32", (bh, nq, d), "fp32"),
        TensorSpec("K32", (bh, nk, d), "fp32"),
        TensorSpec("V32", (bh, nk, d), "fp32"),
        TensorSpec("Qs", (bh, nq, d), "fp32"),
        TensorSpec("Ks", (bh, nk, d), "fp32"),
        TensorSpec("S", (bh, nq, nk), "fp32"),
        TensorSpec("P", (bh, nq, nk), "fp32"),
        TensorSpec("NI", (bh, nq, nk), "bool"),
        TensorSpec("R", (bh, nq), "bool"),
        TensorSpec("P2", (bh, nq, nk), "fp32"),
        TensorSpec("Ph", (bh, nq, nk), t),
        TensorSpec("O32", (bh, nq, d), "fp32"),
        TensorSpec("C", (1,), "fp32"),
    ]
    if w.causal:
        tensors += [
            TensorSpec("Mb", (nq, nk), "bool"),
            TensorSpec("Mt", (nq, nk), "bool"),
            TensorSpec("M", (nq, nk), "fp32"),
        ]
    return Trace(
        algo="sdpa-math",
        tensors=tuple(tensors),
        launches=tuple(launches),
        params={"B": w.batch, "H": w.heads, "N_q": nq, "N_kv": nk, "d": d},
        workload=w.to_dict(),
        config={},
    )


class Kernel(NamedTuple):
    """How an ATen elementwise kernel walks its elements: ``per_thread`` each, in
    ``steps`` groups one after another (a group's loads wait for the previous group),
    each group stored before the next (``store_each``) or all stored at the end."""

    per_thread: int
    steps: int
    store_each: bool


# vectorized_elementwise_kernel: every load of a thread in flight at once
VECTORIZED = Kernel(8, 1, False)
VECTORIZED_BYTES = Kernel(16, 1, False)  # every operand 1 byte
# unrolled_elementwise_kernel (a copy that casts): each element's load feeds its
# cast in the same branch of the dtype switch (fetch_and_cast), so loads go one by one
CAST_COPY = Kernel(4, 4, False)
# elementwise_kernel<128, 2> (an operand broadcast, legacy loop): element i is loaded,
# computed and stored before element i + 128 (the output may alias an input)
STRIDED = Kernel(2, 2, True)
TRIU = Kernel(8, 8, True)  # triu_tril_kernel<..., 8>: the same per-element loop
SCALAR = Kernel(1, 1, False)  # a fill of a 0-dim tensor: one thread's work


def _stream(name, n, kernel, reads, writes, fp32) -> list[Launch]:
    """An elementwise kernel of 128-thread CTAs over ``n`` elements: each CTA loads its
    elements of every tensor in ``reads`` ((tensor, bytes per element[, tiles per
    broadcast period])), computes and stores them to every tensor of ``writes``."""
    widest = max(b for _, b, *_ in reads + writes)
    parts = index_parts(n, widest)
    part_n = -(-n // parts)
    per_cta = kernel.per_thread * THREADS if n > 1 else 1
    group = per_cta // kernel.steps
    out = []
    for p in range(parts):
        count = min(part_n, n - p * part_n)
        first = p * -(-part_n // per_cta)  # this part's first CTA in the whole tensor
        # every CTA moves a whole share (the last one's partial share counted whole): sizes
        # that do not vary over the grid let fast fidelity sample its waves
        if kernel.steps == 1:
            elems, tile = min(per_cta, count), ("c", p)
        else:
            elems, tile = min(group, count), ("c", "j", p)
        loads = []
        for i, (tensor, nbytes, *period) in enumerate(reads):
            at = (f"(c + {first}) % {period[0]}", *tile[1:-1]) if period else tile
            loads.append(Load(f"x{i}", tensor, at, f"{elems}*{nbytes}"))
        body = [
            *loads,
            Vector(fp32=f"{elems}*{fp32}" if fp32 else 0, deps=tuple(x.id for x in loads)),
        ]
        stores = [Store(tensor, tile, f"{elems}*{nbytes}") for tensor, nbytes in writes]
        if kernel.steps == 1:
            ops = (*body, *stores)
        elif kernel.store_each:
            ops = (Loop("j", kernel.steps, (*body, *stores)),)
        else:
            whole = min(per_cta, count)
            ops = (
                Loop("j", kernel.steps, tuple(body)),
                *(Store(t, ("c", p), f"{whole}*{b}") for t, b in writes),
            )
        out.append(
            Launch(
                name=name if parts == 1 else f"{name}_{p}",
                grid=(("c", -(-count // per_cta)),),
                program=CtaProgram((Role("main", ops, THREADS // 32),)),
                smem_bytes=0,
                threads=THREADS,
                regs_per_thread=ELEMENTWISE_REGS,
                estimated="an ATen elementwise kernel: no kernel profile covers it",
            )
        )
    return out


def _softmax(rows: int, n: int) -> Launch:
    """softmax over ``rows`` rows of ``n`` floats (host_softmax's kernel choice)."""
    f32 = 4
    if n <= WARP_SOFTMAX_MAX:
        width = 1 << max(0, n - 1).bit_length()  # the warp kernel's compiled row length
        per_cta = 8 if width <= 128 else 4  # 4 warps, WARP_BATCH rows each
        r = min(per_cta, rows)  # the last CTA's rows counted whole, as in _stream
        ops = (
            Load("s", "S", ("c",), f"{r}*{n}*{f32}"),
            Vector(exp=f"{r}*{width}", fp32=f"{r}*{width}*{SOFTMAX_FP32_PER_SCORE}", deps=("s",)),
            Store("P", ("c",), f"{r}*{n}*{f32}"),
        )
        return _row_launch("softmax_warp", -(-rows // per_cta), ops, THREADS, 0)
    passes = 1
    smem = 4 * SOFTMAX_THREADS // 32
    if n > SOFTMAX_REG_MAX:
        if n < SOFTMAX_SMEM_LIMIT and n % 4 == 0:
            smem += n * f32
        else:
            passes = 3  # cunn_SoftMaxForward: max, sum of exp, then the epilogue
    loads = tuple(Load(f"s{i}", "S", ("r",), n * f32) for i in range(passes))
    ops = (
        *loads,
        Vector(
            exp=n * min(passes, 2),
            fp32=n * SOFTMAX_FP32_PER_SCORE,
            deps=tuple(x.id for x in loads),
        ),
        Store("P", ("r",), n * f32),
    )
    kind = "reg" if n <= SOFTMAX_REG_MAX else ("smem" if passes == 1 else "global")
    return _row_launch(f"softmax_{kind}", rows, ops, SOFTMAX_THREADS, smem, grid_name="r")


def _row_all(rows: int, n: int) -> Launch:
    """``all(isneginf(S), -1)``: each CTA reduces ``REDUCE_ROWS`` rows of ``n`` bools."""
    r = min(REDUCE_ROWS, rows)
    step = REDUCE_STEP_BYTES
    loop = Loop(
        "j",
        -(-n // step),
        (
            Load("x", "NI", ("c", "j"), f"{r}*min({step}, {n} - {step}*j)"),
            Vector(fp32=f"{r}*min({step}, {n} - {step}*j)", deps=("x",)),
        ),
    )
    ops = (loop, Store("R", ("c",), r))
    return _row_launch("all_rows", -(-rows // REDUCE_ROWS), ops, REDUCE_THREADS, 4 * 16)


def _row_launch(name, ctas, ops, threads, smem, grid_name="c") -> Launch:
    return Launch(
        name=name,
        grid=((grid_name, ctas),),
        program=CtaProgram((Role("main", tuple(ops), threads // 32),)),
        smem_bytes=smem,
        threads=threads,
        regs_per_thread=ELEMENTWISE_REGS,
        estimated="an ATen softmax/reduction kernel: no kernel profile covers it",
    )


def _sgemm(name, a, b, c, m, n, k, batch, gpu, b_rows_major=False) -> Launch:
    """C[bh] = A[bh] B[bh] (m x n, k deep) in float32 FFMA, tiled as cuBLAS's kernel."""
    t = gemm_tile(m, n, batch, gpu)
    # a size that does not vary over the grid where the tiles divide it (fast fidelity
    # then samples the heads' waves)
    rows = t.block_m if m % t.block_m == 0 else f"min({t.block_m}, {m} - {t.block_m}*mt)"
    cols = t.block_n if n % t.block_n == 0 else f"min({t.block_n}, {n} - {t.block_n}*nt)"
    depth = f"min({GEMM_BK}, {k} - {GEMM_BK}*j)"
    b_tile = ("bh", "j", "nt") if b_rows_major else ("bh", "nt", "j")
    share = fma_share(t)
    loop = Loop(
        "j",
        -(-k // GEMM_BK),
        (
            Load("a", a, ("bh", "mt", "j"), f"{rows}*{depth}*4"),
            Load("b", b, b_tile, f"{cols}*{depth}*4"),
            # FFMA lane-ops at the tile's share of the FP32 pipe's rate
            Vector(fp32=f"{rows}*{cols}*{depth}*{1000}//{round(1000 * share)}", deps=("a", "b")),
        ),
        prefetch=GEMM_STAGES - 1,
    )
    store = Store(c, ("bh", "mt", "nt"), f"{rows}*{cols}*4")
    return Launch(
        name=name,
        grid=(("mt", -(-m // t.block_m)), ("nt", -(-n // t.block_n)), ("bh", batch)),
        program=CtaProgram((Role("main", (loop, store), t.threads // 32),)),
        smem_bytes=t.smem,
        threads=t.threads,
        regs_per_thread=t.regs,
        estimated=f"cuBLAS SGEMM {t.block_m}x{t.block_n}x{GEMM_BK}: not in the kernel profile",
    )


def fma_count(workload: Workload) -> int:
    """FFMA of the two SGEMMs: B*H*N_q*N_kv*d each (what 4*B*H*N_q*N_kv*d FLOPs are)."""
    w = workload
    return 2 * w.batch * w.heads * w.seqlen_q * w.seqlen_kv * w.head_dim
