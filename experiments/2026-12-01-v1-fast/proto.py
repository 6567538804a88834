"""Prototype released-structure v1 forward kernels, compiled for sm_90a on the CPU."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def fwd_a(
    Q,
    K,
    V,
    Out,
    Otmp,
    Lse,
    sm_scale,
    n_heads,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
):
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    base = off_bh.to(tl.int64) * n_q * HEAD_DIM
    kbase = off_bh.to(tl.int64) * n_kv * HEAD_DIM
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * LOG2E
    n_steps = tl.cdiv(n_q, BLOCK_M)
    for start_n in range(0, n_kv, BLOCK_N):
        cols = start_n + offs_n0
        kt = tl.load(K + kbase + cols[None, :] * HEAD_DIM + offs_d[:, None])
        v = tl.load(V + kbase + cols[:, None] * HEAD_DIM + offs_d[None, :])
        first = start_n == 0
        last = start_n + BLOCK_N >= n_kv
        for step in tl.range(split, n_steps, n_split, num_stages=STAGES):
            rows = step * BLOCK_M + offs_m0
            q = tl.load(Q + base + rows[:, None] * HEAD_DIM + offs_d[None, :])
            s = tl.dot(q, kt)
            m = tl.max(s, 1) * qk_scale
            p = tl.math.exp2(s * qk_scale - m[:, None])
            ell = tl.sum(p, 1)
            pv = tl.dot(p.to(v.dtype), v)
            lse_blk = m + tl.math.log2(ell)
            if first:
                lse_new = lse_blk
                o = pv / ell[:, None]
            else:
                lse_old = tl.load(Lse + off_bh * n_q + rows)
                o_old = tl.load(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :])
                mx = tl.maximum(lse_old, lse_blk)
                lse_new = mx + tl.math.log2(tl.math.exp2(lse_old - mx) + tl.math.exp2(lse_blk - mx))
                o = (
                    o_old * tl.math.exp2(lse_old - lse_new)[:, None]
                    + pv * (tl.math.exp2(m - lse_new))[:, None]
                )
            if last:
                tl.store(
                    Out + base + rows[:, None] * HEAD_DIM + offs_d[None, :],
                    o.to(Out.dtype.element_ty),
                )
            else:
                tl.store(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :], o)
            tl.store(Lse + off_bh * n_q + rows, lse_new)


@triton.jit
def fwd_b(
    Q,
    K,
    V,
    Out,
    Otmp,
    Lse,
    sm_scale,
    n_heads,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
):
    """fwd_a with the QK^T dot in two branches (masked / not), to give the K fragments' load
    two users (which ReorderInstructions would not sink): each branch got its own load."""
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    base = off_bh.to(tl.int64) * n_q * HEAD_DIM
    kbase = off_bh.to(tl.int64) * n_kv * HEAD_DIM
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * LOG2E
    n_steps = tl.cdiv(n_q, BLOCK_M)
    for start_n in range(0, n_kv, BLOCK_N):
        cols = start_n + offs_n0
        kt = tl.load(K + kbase + cols[None, :] * HEAD_DIM + offs_d[:, None])
        v = tl.load(V + kbase + cols[:, None] * HEAD_DIM + offs_d[None, :])
        first = start_n == 0
        last = start_n + BLOCK_N >= n_kv
        for step in tl.range(split, n_steps, n_split, num_stages=STAGES):
            rows = step * BLOCK_M + offs_m0
            q = tl.load(Q + base + rows[:, None] * HEAD_DIM + offs_d[None, :])
            if start_n + BLOCK_N > step * BLOCK_M:
                s = tl.dot(q, kt)
                s = tl.where(cols[None, :] <= rows[:, None], s, -1.0e6)
            else:
                s = tl.dot(q, kt)
            m = tl.max(s, 1) * qk_scale
            p = tl.math.exp2(s * qk_scale - m[:, None])
            ell = tl.sum(p, 1)
            pv = tl.dot(p.to(v.dtype), v)
            lse_blk = m + tl.math.log2(ell)
            if first:
                lse_new = lse_blk
                o = pv / ell[:, None]
            else:
                lse_old = tl.load(Lse + off_bh * n_q + rows)
                o_old = tl.load(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :])
                mx = tl.maximum(lse_old, lse_blk)
                lse_new = mx + tl.math.log2(tl.math.exp2(lse_old - mx) + tl.math.exp2(lse_blk - mx))
                o = (
                    o_old * tl.math.exp2(lse_old - lse_new)[:, None]
                    + pv * (tl.math.exp2(m - lse_new))[:, None]
                )
            if last:
                tl.store(
                    Out + base + rows[:, None] * HEAD_DIM + offs_d[None, :],
                    o.to(Out.dtype.element_ty),
                )
            else:
                tl.store(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :], o)
            tl.store(Lse + off_bh * n_q + rows, lse_new)


@triton.jit
def fwd_w(
    Q,
    K,
    V,
    Out,
    Otmp,
    Lse,
    sm_scale,
    n_heads,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
):
    """fwd_a with the Q-step loop a while loop (probe: is the K fragments' load kept
    outside it?)."""
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    base = off_bh.to(tl.int64) * n_q * HEAD_DIM
    kbase = off_bh.to(tl.int64) * n_kv * HEAD_DIM
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * LOG2E
    n_steps = tl.cdiv(n_q, BLOCK_M)
    for start_n in range(0, n_kv, BLOCK_N):
        cols = start_n + offs_n0
        kt = tl.load(K + kbase + cols[None, :] * HEAD_DIM + offs_d[:, None])
        v = tl.load(V + kbase + cols[:, None] * HEAD_DIM + offs_d[None, :])
        first = start_n == 0
        last = start_n + BLOCK_N >= n_kv
        step = split
        while step < n_steps:
            rows = step * BLOCK_M + offs_m0
            q = tl.load(Q + base + rows[:, None] * HEAD_DIM + offs_d[None, :])
            s = tl.dot(q, kt)
            m = tl.max(s, 1) * qk_scale
            p = tl.math.exp2(s * qk_scale - m[:, None])
            ell = tl.sum(p, 1)
            pv = tl.dot(p.to(v.dtype), v)
            lse_blk = m + tl.math.log2(ell)
            if first:
                lse_new = lse_blk
                o = pv / ell[:, None]
            else:
                lse_old = tl.load(Lse + off_bh * n_q + rows)
                o_old = tl.load(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :])
                mx = tl.maximum(lse_old, lse_blk)
                lse_new = mx + tl.math.log2(tl.math.exp2(lse_old - mx) + tl.math.exp2(lse_blk - mx))
                o = (
                    o_old * tl.math.exp2(lse_old - lse_new)[:, None]
                    + pv * (tl.math.exp2(m - lse_new))[:, None]
                )
            if last:
                tl.store(
                    Out + base + rows[:, None] * HEAD_DIM + offs_d[None, :],
                    o.to(Out.dtype.element_ty),
                )
            else:
                tl.store(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :], o)
            tl.store(Lse + off_bh * n_q + rows, lse_new)
            step += n_split


@triton.jit
def fwd_c(
    Q,
    K,
    V,
    Out,
    Otmp,
    Lse,
    sm_scale,
    n_heads,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
):
    """fwd_w with the next step's Q, O and LSE loaded during this one (carried)."""
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    base = off_bh.to(tl.int64) * n_q * HEAD_DIM
    kbase = off_bh.to(tl.int64) * n_kv * HEAD_DIM
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * LOG2E
    n_steps = tl.cdiv(n_q, BLOCK_M)
    for start_n in range(0, n_kv, BLOCK_N):
        cols = start_n + offs_n0
        kt = tl.load(K + kbase + cols[None, :] * HEAD_DIM + offs_d[:, None])
        v = tl.load(V + kbase + cols[:, None] * HEAD_DIM + offs_d[None, :])
        first = start_n == 0
        last = start_n + BLOCK_N >= n_kv
        step = split
        rows = step * BLOCK_M + offs_m0
        q = tl.load(Q + base + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None] < n_q)
        lse_old = tl.load(Lse + off_bh * n_q + rows, mask=(rows < n_q) & (not first))
        o_old = tl.load(
            Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :],
            mask=(rows[:, None] < n_q) & (not first),
        )
        while step < n_steps:
            rows = step * BLOCK_M + offs_m0
            nrows = rows + n_split * BLOCK_M
            q_n = tl.load(
                Q + base + nrows[:, None] * HEAD_DIM + offs_d[None, :], mask=nrows[:, None] < n_q
            )
            lse_n = tl.load(Lse + off_bh * n_q + nrows, mask=(nrows < n_q) & (not first))
            o_n = tl.load(
                Otmp + base + nrows[:, None] * HEAD_DIM + offs_d[None, :],
                mask=(nrows[:, None] < n_q) & (not first),
            )
            s = tl.dot(q, kt)
            m = tl.max(s, 1) * qk_scale
            p = tl.math.exp2(s * qk_scale - m[:, None])
            ell = tl.sum(p, 1)
            pv = tl.dot(p.to(v.dtype), v)
            lse_blk = m + tl.math.log2(ell)
            if first:
                lse_new = lse_blk
                o = pv / ell[:, None]
            else:
                mx = tl.maximum(lse_old, lse_blk)
                lse_new = mx + tl.math.log2(tl.math.exp2(lse_old - mx) + tl.math.exp2(lse_blk - mx))
                o = (
                    o_old * tl.math.exp2(lse_old - lse_new)[:, None]
                    + pv * (tl.math.exp2(m - lse_new))[:, None]
                )
            if last:
                tl.store(
                    Out + base + rows[:, None] * HEAD_DIM + offs_d[None, :],
                    o.to(Out.dtype.element_ty),
                )
            else:
                tl.store(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :], o)
                tl.store(Lse + off_bh * n_q + rows, lse_new)
            q = q_n
            lse_old = lse_n
            o_old = o_n
            step += n_split


@triton.jit
def fwd_k(
    Q,
    K,
    V,
    Out,
    Otmp,
    Lse,
    sm_scale,
    n_heads,
    n_q,
    n_kv,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
):
    """fwd_c with P V split-K over the warps (a 3-D dot, the partials summed)."""
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    base = off_bh.to(tl.int64) * n_q * HEAD_DIM
    kbase = off_bh.to(tl.int64) * n_kv * HEAD_DIM
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * LOG2E
    n_steps = tl.cdiv(n_q, BLOCK_M)
    for start_n in range(0, n_kv, BLOCK_N):
        cols = start_n + offs_n0
        kt = tl.load(K + kbase + cols[None, :] * HEAD_DIM + offs_d[:, None])
        v = tl.load(V + kbase + cols[:, None] * HEAD_DIM + offs_d[None, :])
        v3 = tl.reshape(v, (4, BLOCK_N // 4, HEAD_DIM))
        first = start_n == 0
        last = start_n + BLOCK_N >= n_kv
        step = split
        rows = step * BLOCK_M + offs_m0
        q = tl.load(Q + base + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None] < n_q)
        lse_old = tl.load(Lse + off_bh * n_q + rows, mask=(rows < n_q) & (not first))
        o_old = tl.load(
            Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :],
            mask=(rows[:, None] < n_q) & (not first),
        )
        while step < n_steps:
            rows = step * BLOCK_M + offs_m0
            nrows = rows + n_split * BLOCK_M
            q_n = tl.load(
                Q + base + nrows[:, None] * HEAD_DIM + offs_d[None, :], mask=nrows[:, None] < n_q
            )
            lse_n = tl.load(Lse + off_bh * n_q + nrows, mask=(nrows < n_q) & (not first))
            o_n = tl.load(
                Otmp + base + nrows[:, None] * HEAD_DIM + offs_d[None, :],
                mask=(nrows[:, None] < n_q) & (not first),
            )
            s = tl.dot(q, kt)
            m = tl.max(s, 1) * qk_scale
            p = tl.math.exp2(s * qk_scale - m[:, None])
            ell = tl.sum(p, 1)
            p3 = tl.permute(tl.reshape(p.to(v.dtype), (BLOCK_M, 4, BLOCK_N // 4)), (1, 0, 2))
            pv = tl.sum(tl.dot(p3, v3), 0)
            lse_blk = m + tl.math.log2(ell)
            if first:
                lse_new = lse_blk
                o = pv / ell[:, None]
            else:
                mx = tl.maximum(lse_old, lse_blk)
                lse_new = mx + tl.math.log2(tl.math.exp2(lse_old - mx) + tl.math.exp2(lse_blk - mx))
                o = (
                    o_old * tl.math.exp2(lse_old - lse_new)[:, None]
                    + pv * (tl.math.exp2(m - lse_new))[:, None]
                )
            if last:
                tl.store(
                    Out + base + rows[:, None] * HEAD_DIM + offs_d[None, :],
                    o.to(Out.dtype.element_ty),
                )
            else:
                tl.store(Otmp + base + rows[:, None] * HEAD_DIM + offs_d[None, :], o)
                tl.store(Lse + off_bh * n_q + rows, lse_new)
            q = q_n
            lse_old = lse_n
            o_old = o_n
            step += n_split
