"""`simulate(trace, gpu) -> Prediction`: the engine's one entry point.

The trace is checked first (`traces.files.validate`: a malformed trace or one
this GPU cannot run is a one-line error before any simulation). Then one SimPy
environment runs the launches one after another, each preceded by the GPU's
launch overhead; the L2 keeps its contents from one launch to the next (a
tile written by one kernel can hit in the next), and starts cold. Where the GPU
has a clock model (`clock.py`) that runs twice: at each launch's ceiling clock,
to read its work, then at the clock that work gives it. Time is SM cycles
throughout; seconds only in the `Prediction`.
"""

from __future__ import annotations

import time

from simpy.events import Timeout

from ..errors import TilesimError
from ..hwmodels.gpu import GPU
from ..traces.files import validate
from ..traces.ir import Trace
from . import clock
from .environment import Environment, gc_paused
from .memory import (
    C_EXP,
    C_FLOPS,
    C_FP32,
    C_FP32_PIPE,
    C_HBM_BUSY,
    C_HBM_READ,
    C_HBM_WRITE,
    C_L2_HIT,
    C_L2_XFER,
    C_LOAD,
    C_SFU,
    C_SMEM,
    C_TENSOR,
    N_COUNTERS,
    Memory,
)
from .prediction import RESOURCES, LaunchPrediction, Prediction, bound_of
from .program import compile_launch, single_load_tensors
from .scheduler import LaunchRun, mma_dtype
from .sm import SM
from .steps import StepTables
from .timeline import DEFAULT_BIN_S, DEFAULT_MAX_SMS, Timeline

# Simulated time stays below this many SM cycles (about 10 hours of GPU time at
# 2 GHz): float time then resolves 1/64 cycle, so every step still advances it.
MAX_CYCLES = float(1 << 46)


def simulate(
    trace: Trace,
    gpu: GPU,
    fidelity: str = "fast",
    timeline: bool = False,
    *,
    timeline_sms: int = DEFAULT_MAX_SMS,
    timeline_window_s: tuple[float, float] | None = None,
    timeline_bin_s: float = DEFAULT_BIN_S,
) -> Prediction:
    """Predict how long ``trace`` runs on ``gpu`` (see the package docstring)."""
    with gc_paused():  # until the run's structures are freed (environment.py)
        return _simulate(
            trace, gpu, fidelity, timeline, timeline_sms, timeline_window_s, timeline_bin_s
        )


def _simulate(
    trace, gpu, fidelity, timeline, timeline_sms, timeline_window_s, timeline_bin_s
) -> Prediction:
    wall = time.perf_counter()
    steps = StepTables(fidelity)  # checks the fidelity name
    analytic = validate(trace, gpu)
    _check_duration(trace, gpu, analytic)
    compiled = _compile(trace)  # every launch planned before any simulation: errors first
    tl_args = (timeline_sms, timeline_window_s, timeline_bin_s) if timeline else None
    twice = clock.modelled(gpu)  # the first run only reads the launches' work: no timeline
    runs, events, tl = _run(trace, gpu, compiled, steps, fidelity, None if twice else tl_args, None)
    speeds = _modelled_speeds(gpu, runs)
    if twice and timeline and speeds is None:  # nothing slowed: the timeline at the ceilings
        speeds = [run.speed for run in runs]
    if speeds is not None:  # the clock model slowed a launch: all again, each at its clock
        _release(runs, compiled)
        compiled = _compile(trace)
        steps = StepTables(fidelity)
        runs, more, tl = _run(trace, gpu, compiled, steps, fidelity, tl_args, speeds)
        events += more
    overhead = gpu.s_to_cycles(gpu.launch_overhead_s)
    pred = _prediction(
        trace, gpu, fidelity, runs, overhead, analytic, events, time.perf_counter() - wall, tl
    )
    _release(runs, compiled)
    return pred


def _compile(trace: Trace) -> list:
    tensor_index = {t.name: i for i, t in enumerate(trace.tensors)}
    single = single_load_tensors(trace.launches)
    return [
        compile_launch(launch, trace.params, tensor_index, f"launches[{i}]", single)
        for i, launch in enumerate(trace.launches)
    ]


def _run(trace, gpu, compiled, steps, fidelity, tl_args, speeds):
    """One SimPy run of every launch (``speeds``: each one's SM clock over
    ``sm_clock_hz``, None for their ceilings): (runs, events, timeline or None)."""
    env = Environment()
    tl = Timeline(gpu.sm_clock_hz, *tl_args) if tl_args is not None else None
    memory = Memory(env, gpu, tl.recorder if tl else None)
    sms = [SM(i, tl.log_for(i) if tl else None) for i in range(gpu.sm_count)]
    runs: list[LaunchRun] = []
    overhead = gpu.s_to_cycles(gpu.launch_overhead_s)

    def driver():
        for i, c in enumerate(compiled):
            if overhead > 0:
                yield Timeout(env, overhead)
            speed = speeds[i] if speeds is not None else None
            run = LaunchRun(env, gpu, memory, sms, c, steps, fidelity, speed)
            runs.append(run)
            run.start()
            yield run.done
            if tl is not None:
                tl.launches.append((c.launch.name, run.t0, run.t1, run.totals()[2]))

    env.process(driver())
    env.run()
    if len(runs) < len(compiled) or not runs[-1].done.processed:
        raise TilesimError(_deadlock(runs[-1] if runs else None))
    if tl is not None:
        tl.finish(env.end)
        tl.sampled = _sampling(runs, steps)
    return runs, next(env._eid), tl


def _modelled_speeds(gpu: GPU, runs) -> list[float] | None:
    """Each launch's speed at the clock its work gives it (`clock.launch_clock_hz`), from
    a run at the ceilings; None when no launch is slowed (or the preset has no model)."""
    if not clock.modelled(gpu):
        return None
    speeds, slowed = [], False
    for run in runs:
        lc, ctr, _ = run.totals()
        at_hz = run.speed * gpu.sm_clock_hz
        hz = clock.launch_clock_hz(
            gpu,
            mma_dtype(run.launch),
            lc / gpu.sm_clock_hz,
            ctr[C_FLOPS],
            ctr[C_L2_XFER],
            ctr[C_HBM_READ] + ctr[C_HBM_WRITE],
            ctr[C_FP32],
            at_hz,
        )
        slowed = slowed or hz < at_hz * (1 - 1e-9)
        speeds.append(hz / gpu.sm_clock_hz)
    return speeds if slowed else None


def _release(runs, compiled) -> None:
    """Break the run's reference cycles, so that its caches are freed as it returns
    rather than walked by the garbage collector first."""
    for run in runs:
        run.executor.resident = None  # a closure over the run
    for c in compiled:
        for _, nodes in c.roles:
            _ungroup(nodes)


def _ungroup(nodes) -> None:
    for node in nodes:
        node.group = ()  # a Load / Store node is the first of its own group
        _ungroup(node.body)


def _check_duration(trace: Trace, gpu: GPU, analytic) -> None:
    """Refuse, before the event loop, a run whose time is surely beyond MAX_CYCLES."""
    sms = gpu.sm_count
    tensor = max(
        gpu.tensor_fp16_mma_sync_flop_per_clk_per_sm,
        gpu.tensor_fp16_wgmma_flop_per_clk_per_sm,
        gpu.tensor_fp8_wgmma_flop_per_clk_per_sm,
    )
    hbm_per_clk = gpu.hbm_bandwidth_Bps / gpu.sm_clock_hz
    top = clock.ceiling_hz(gpu, True) / gpu.sm_clock_hz  # the fastest MMA launch's speed
    floors = {
        "tensor cores": analytic.matmul_flops / (tensor * top * sms),
        "SFU": analytic.exp_count / (gpu.sfu_ops_per_clk_per_sm * sms),
        "HBM": analytic.compulsory_hbm_bytes / hbm_per_clk,
        "issue": max((max(x.issue_per_cta, default=0) for x in trace.launches), default=0),
    }
    what, cycles = max(floors.items(), key=lambda kv: kv[1])
    if cycles > MAX_CYCLES:
        raise TilesimError(
            f"this run would take at least {cycles:.3g} SM cycles ({what}: "
            f"{cycles / gpu.sm_clock_hz:.3g} s of GPU time); tilesim simulates at most "
            f"{MAX_CYCLES:.3g} cycles"
        )


def _deadlock(run) -> str:
    where = "the trace"
    if run is not None:
        where = f"launch {run.launch.name!r}"
        for st in run.executor.active.values():
            roles = run.compiled.roles
            return (
                f"deadlock in {where}: work item {st.cta.item} role {roles[st.role][0]!r} "
                f"waits for {st.waiting!r}, which never happens"
            )
    return f"deadlock in {where}: nothing left to run but the launch did not finish"


def _sampling(runs, steps: StepTables) -> str:
    """What ``fast`` fidelity left out of the run, in words ("" if nothing)."""
    parts = [
        f"{run.launch.name}: {run.simulated_items} of {run.compiled.num_items} CTAs simulated"
        for run in runs
        if run.simulated_items < run.compiled.num_items
    ]
    if steps.coalesced:
        parts.append("loop iterations coalesced into macro-steps")
    return "; ".join(parts)


def _utilisation(ctr: list, cycles: float, gpu: GPU, l2_cost: float) -> dict:
    if cycles <= 0:
        return dict.fromkeys(RESOURCES, 0.0)
    sms = gpu.sm_count
    return {
        "hbm": ctr[C_HBM_BUSY] / cycles,
        "l2": ctr[C_L2_XFER] * l2_cost / cycles,
        "tensor": ctr[C_TENSOR] / (sms * cycles),
        "sfu": ctr[C_SFU] / (sms * cycles),
        "fp32": ctr[C_FP32_PIPE] / (sms * cycles),
        "smem": ctr[C_SMEM] / (sms * cycles),
    }


def _prediction(trace, gpu, fidelity, runs, overhead, analytic, events, wall, tl) -> Prediction:
    clock = gpu.sm_clock_hz
    l2_cost = clock / gpu.l2_bandwidth_Bps
    total = [0.0] * N_COUNTERS
    cycles = 0.0
    held = room = 0.0  # slot-cycles held, slot-cycles the launches had
    paced = 0.0  # slot-cycles the front end's CTA pace added (`LaunchRun.paced`)
    smem_bytes = 0.0
    launches = []
    longest = None
    for run in runs:
        lc, ctr, _ = run.totals()
        for k in range(N_COUNTERS):
            total[k] += ctr[k]
        cycles += overhead + lc
        util = _utilisation(ctr, lc + overhead, gpu, l2_cost)
        share = overhead / (lc + overhead) if lc + overhead > 0 else 1.0
        fill = run.slot_fill(lc)
        # the port's busy cycles at this launch's clock back to bytes
        smem_bytes += ctr[C_SMEM] * gpu.smem_bandwidth_B_per_clk_per_sm * run.speed
        held += fill * run.capacity * lc
        room += run.capacity * lc
        paced += run.paced * run.capacity
        dispatch = run.paced / lc if lc > 0 else 0.0
        n = run.compiled.num_items
        waves = -(-n // run.slots)
        lp = LaunchPrediction(
            name=run.launch.name,
            time_s=(lc + overhead) / clock,
            cycles=lc + overhead,
            ctas=n,
            ctas_per_sm=run.per_sm,
            occupancy_limiter=run.occ.limiter,
            waves=waves,
            persistent_ctas=run.persistent,
            hbm_read_bytes=ctr[C_HBM_READ],
            hbm_write_bytes=ctr[C_HBM_WRITE],
            matmul_flops=ctr[C_FLOPS],
            utilisation=util,
            bound=bound_of(util, share, fill, dispatch),
            simulated_ctas=run.simulated_items,
            slot_fill=fill,
            clock_hz=run.speed * clock,
        )
        launches.append(lp)
        if longest is None or lp.cycles > longest.cycles:
            longest = lp
    util = _utilisation(total, cycles, gpu, l2_cost)
    share = overhead * len(runs) / cycles if cycles > 0 else 1.0
    fill = held / room if room > 0 else 0.0
    dispatch = paced / room if room > 0 else 0.0
    time_s = cycles / clock
    loaded = total[C_LOAD]
    return Prediction(
        gpu=gpu.name,
        algo=trace.algo,
        workload=dict(trace.workload),
        config=dict(trace.config),
        fidelity=fidelity,
        time_s=time_s,
        cycles=cycles,
        tflops=total[C_FLOPS] / time_s / 1e12 if time_s > 0 else 0.0,
        matmul_flops=total[C_FLOPS],
        exp_count=total[C_EXP],
        fp32_ops=total[C_FP32],
        hbm_read_bytes=total[C_HBM_READ],
        hbm_write_bytes=total[C_HBM_WRITE],
        compulsory_hbm_bytes=analytic.compulsory_hbm_bytes,
        l2_hit_rate=total[C_L2_HIT] / loaded if loaded > 0 else 0.0,
        l2_bytes=loaded + total[C_HBM_WRITE],  # stores pass through the L2 on their way
        smem_bytes=smem_bytes,
        utilisation=util,
        bound=bound_of(util, share, fill, dispatch),
        slot_fill=fill,
        waves=longest.waves if longest else 0,
        ctas_per_sm=longest.ctas_per_sm if longest else 0,
        launches=tuple(launches),
        sim_events=events,
        sim_wall_s=wall,
        estimated_launches=tuple(
            {"launch": x.name, "why": x.estimated} for x in trace.launches if x.estimated
        ),
        timeline=tl,
    )
