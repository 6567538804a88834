"""Do exponentials (MUFU) delay a wgmma on the same SM? Two CTAs of 4 warps per SM: one
runs a dependent chain of dots (calibrate's `mma_latency` chain, one or two a step, the
second's A in registers), the other a stream of independent exp2 (MUFU) or, as a
control, of FMAs (FP32 pipe, not MIO). Each CTA records its SM, cycles and ns.

    python3 experiments/2026-12-03-mio/probe.py OUT.jsonl

Per pairing: the dot chain's SM cycles a step with nothing beside it, with exp2 beside
it and with FMA beside it; and the exp2/FMA stream's cycles per trip alone and beside
the chain (each side's figure from a run where the other side outlasts it). Nothing here
is an attention kernel. Only reads the GPU's clock (nvidia-smi).
"""

import json
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

from tilesim.validate.gpu import metadata
from tilesim.validate.gpu.microbench import _clock64, _globaltimer


@triton.jit
def _smid():
    return tl.inline_asm_elementwise(
        "mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _mix(
    b_ptr,  # [BK, BK] identity
    x_ptr,  # [BM, BK] chain start
    out_ptr,  # [n_mma, BM, BK]
    e_ptr,  # [EBLOCK] fp32 in [0, 1)
    eout_ptr,  # [grid, EBLOCK]
    stamps_ptr,  # [grid, 5] int64: cycles, ns at start and end, smid
    n_mma,  # CTAs 0 .. n_mma-1 run the chain, the rest the stream
    iters,  # chain steps
    eiters,  # stream trips
    BM: tl.constexpr,
    BK: tl.constexpr,
    PAIR: tl.constexpr,
    OTHER: tl.constexpr,  # 1: exp2 stream, 2: FMA stream
    EBLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    base = stamps_ptr + pid.to(tl.int64) * 5
    if pid < n_mma:
        rm = tl.arange(0, BM)
        rk = tl.arange(0, BK)
        b = tl.load(b_ptr + rk[:, None] * BK + rk[None, :])
        x = tl.load(x_ptr + rm[:, None] * BK + rk[None, :])
        tl.store(base, _clock64())
        tl.store(base + 1, _globaltimer())
        for _ in range(iters):
            x = tl.dot(x, b).to(tl.float16)
            if PAIR:
                x = tl.dot(x, b).to(tl.float16)
        tl.store(base + 2, _clock64())
        tl.store(base + 3, _globaltimer())
        tl.store(out_ptr + pid.to(tl.int64) * BM * BK + rm[:, None] * BK + rk[None, :], x)
    else:
        offs = tl.arange(0, EBLOCK)
        e = tl.load(e_ptr + offs)
        tl.store(base, _clock64())
        tl.store(base + 1, _globaltimer())
        for _ in range(eiters):
            if OTHER == 1:
                e = tl.math.exp2(-e)
            else:
                e = e * 0.999 + 0.001
                e = e * 0.999 + 0.001
        tl.store(base + 2, _clock64())
        tl.store(base + 3, _globaltimer())
        tl.store(eout_ptr + pid.to(tl.int64) * EBLOCK + offs, e)
    tl.store(base + 4, _smid().to(tl.int64))


def run(sms, bm, bk, pair, other, n_mma, n_other, iters, eiters, eblock=4096):
    b = torch.eye(bk, device="cuda", dtype=torch.float16)
    x = (torch.rand(bm, bk, device="cuda") - 0.5).half()
    out = torch.empty(max(n_mma, 1), bm, bk, device="cuda", dtype=torch.float16)
    e = torch.rand(eblock, device="cuda")
    grid = (n_mma + n_other,)
    eout = torch.empty(grid[0], eblock, device="cuda")
    st = torch.zeros(grid[0], 5, dtype=torch.int64, device="cuda")

    def launch():
        _mix[grid](
            b,
            x,
            out,
            e,
            eout,
            st,
            n_mma,
            iters,
            eiters,
            BM=bm,
            BK=bk,
            PAIR=pair,
            OTHER=other,
            EBLOCK=eblock,
            num_warps=4,
        )

    launch()
    torch.cuda.synchronize()
    if n_mma and not (torch.equal(out[0], x) and torch.equal(out[n_mma - 1], x)):
        raise SystemExit(f"chain {bm}x{bk} pair={pair}: wrong result")
    if n_other:
        want = e.double()
        for _ in range(eiters):
            want = torch.exp2(-want) if other == 1 else (want * 0.999 + 0.001) * 0.999 + 0.001
        got = eout[n_mma].double()
        if not torch.allclose(got, want, rtol=1e-3, atol=1e-4):
            raise SystemExit(f"stream other={other}: wrong result")
    times = []
    for _ in range(5):
        launch()
        torch.cuda.synchronize()
        s = st.cpu().double()
        times.append(s.clone())
    s = times[-1]
    cyc = (s[:, 2] - s[:, 0]).tolist()
    ns = (s[:, 3] - s[:, 1]).tolist()
    smid = s[:, 4].long().tolist()
    mma_sms = set(smid[:n_mma])
    paired = [i for i in range(n_mma, grid[0]) if smid[i] in mma_sms]
    med = statistics.median
    row = dict(
        bm=bm,
        bk=bk,
        pair=pair,
        other=other,
        n_mma=n_mma,
        n_other=n_other,
        iters=iters,
        eiters=eiters,
        eblock=eblock,
        mma_sms=len(mma_sms),
        other_on_mma_sms=len(paired),
        mma_cycles_per_step=med(cyc[:n_mma]) / iters if n_mma else None,
        other_cycles_per_trip=med([cyc[i] for i in paired] or cyc[n_mma:]) / eiters
        if n_other
        else None,
        clock_MHz=(sum(cyc) / sum(ns) * 1e3) if sum(ns) else None,
        repeat_spread=[
            med(((t[:n_mma, 2] - t[:n_mma, 0]) / max(iters, 1)).tolist()) if n_mma else None
            for t in times
        ],
    )
    return row


def main(path):
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    with metadata.ClockSampler(interval_ms=100) as sampler, open(path, "w") as f:
        for bm, bk, pair in ((64, 64, True), (64, 64, False), (128, 64, True), (64, 32, True)):
            iters = 4001
            # each side alone
            alone = run(sms, bm, bk, pair, 1, sms, 0, iters, 0)
            chain_cycles = alone["mma_cycles_per_step"] * iters
            for other in (1, 2):
                solo = run(sms, bm, bk, pair, other, 0, sms, 0, 3001)
                trip = solo["other_cycles_per_trip"]
                # the stream outlasts the chain (1.5x), then the chain outlasts the stream
                long_e = int(1.5 * chain_cycles / trip) | 1
                short_e = int(0.5 * chain_cycles / trip) | 1
                beside_chain = run(sms, bm, bk, pair, other, sms, sms, iters, long_e)
                beside_stream = run(sms, bm, bk, pair, other, sms, sms, iters, short_e)
                for tag, r in (
                    ("chain_alone", alone),
                    ("stream_alone", solo),
                    ("chain_with_stream", beside_chain),
                    ("stream_with_chain", beside_stream),
                ):
                    r = dict(r, tag=tag, other=other)
                    f.write(json.dumps(r) + "\n")
                    f.flush()
                    print(
                        tag,
                        bm,
                        bk,
                        pair,
                        other,
                        r["mma_cycles_per_step"],
                        r["other_cycles_per_trip"],
                        r["other_on_mma_sms"],
                        r["clock_MHz"],
                    )
        f.write(
            json.dumps({"tag": "clocks", "smi_MHz": sampler.between(0, time.perf_counter())}) + "\n"
        )


if __name__ == "__main__":
    main(sys.argv[1])
