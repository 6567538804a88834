"""Each launch's compiled facts, from the GPU's kernel profile; the estimate where it has none.

A trace generator estimates a launch's registers from the accumulators it holds
(`tiles.regs_estimate`) and its issue work from its Vector ops; the compiler
decides the real ones. The kernel profile (``profiles/``, compiled per
architecture and toolchain) holds them for every kernel variant the CLI selects:
registers per thread, the waits on spill reloads in the MMA loop, and the SASS
issue cycles. `apply` looks each launch up by its `Variant` and sets them; a
launch the profile does not cover keeps the estimate and says why
(``Launch.estimated``), which the Prediction lists.

The Gluon v3 (warp-specialised) sets its partitions' registers itself
(``setmaxnreg``): its launch keeps the generator's per-partition figure and takes
the profile's issue cycles only.
"""

from __future__ import annotations

import dataclasses

from ..hwmodels.gpu import GPU
from ..profiles import DEFAULT_PROFILES, Profile, Variant, for_arch
from .ir import Trace
from .standard import softmax_fwd_plan, softmax_plan
from .workload import KernelConfig, Workload

NO_PROFILE = "no kernel profile for {arch} GPUs"
UNUSED = "predicted without the kernel profile"
NOT_COVERED = "no profile entry for this variant"
FAILED = "its kernel did not compile for the profile"
# `build(..., profile=DEFAULT)`: the profile of the GPU's architecture
DEFAULT = "default"


TRITON_DIVISIBILITY = 16  # Triton marks integer arguments divisible by this


def alignment(n: int, block: int) -> int:
    """The largest of ``block``, 16 and 1 that divides ``n``: which code the kernels
    compile for a sequence of ``n`` (whole tiles need no bounds checks)."""
    return next(a for a in (block, TRITON_DIVISIBILITY, 1) if n % a == 0)


def variant_of(algo: str, workload: Workload, config: KernelConfig, launch: str) -> Variant:
    """The kernel variant that runs ``launch`` of ``algo`` on ``workload`` with ``config``."""
    w, c = workload, config
    row = {}
    # the row-softmax kernels compile per row plan, which follows N
    if launch == "softmax":
        plan = softmax_fwd_plan(w.seqlen_kv, w.causal)
        row = dict(
            row_block=plan.block,
            row_passes=plan.passes,
            row_warps=plan.num_warps,
            row_tiers=plan.tiers,
        )
    elif launch == "bwd_softmax":
        block, passes, warps = softmax_plan(w.seqlen_kv)
        row = dict(row_block=block, row_passes=passes, row_warps=warps)
    return Variant(
        algo=algo,
        pass_=w.pass_,
        launch=launch,
        head_dim=w.head_dim,
        causal=w.causal,
        dtype=w.dtype,
        block_m=c.block_m,
        block_n=c.block_n,
        num_warps=c.num_warps,
        num_stages=c.num_stages,
        mma_path=c.mma_path,
        seqlen_q_align=alignment(w.seqlen_q, c.block_m),
        seqlen_kv_align=alignment(w.seqlen_kv, c.block_n),
        single_head=w.heads == 1,
        warp_specialize=c.warp_specialize,
        pingpong=c.pingpong,
        persistent=c.persistent,
        # v1's splits are grid columns of one compiled program; v2's decode splits are not
        num_splits=1 if algo == "v1" else c.num_splits,
        pack_gqa=c.pack_gqa,
        v1_kernel=c.v1_kernel if algo == "v1" else "",
        **row,
    )


def resolve(profile, gpu: GPU) -> Profile | None:
    """``profile`` as given (a Profile or None), or the GPU's default for ``DEFAULT``."""
    return for_arch(gpu.arch) if profile == DEFAULT else profile


def apply(
    algo: str,
    workload: Workload,
    config: KernelConfig,
    trace: Trace,
    gpu: GPU,
    profile: Profile | None,
) -> Trace:
    """``trace`` with each launch's registers, spill reloads and issue cycles from
    ``profile``; a launch it does not cover keeps the estimate, marked with why."""
    launches = []
    for launch in trace.launches:
        variant = variant_of(algo, workload, config, launch.name)
        facts = profile.get(variant) if profile else None
        if facts is None:
            if profile is None:
                why = (
                    NO_PROFILE.format(arch=gpu.arch) if gpu.arch not in DEFAULT_PROFILES else UNUSED
                )
            else:
                failed = profile.failure(variant)
                why = f"{FAILED}: {failed}" if failed else NOT_COVERED
            launches.append(dataclasses.replace(launch, estimated=why))
            continue
        changes = dict(
            issue_per_step=facts.issue_per_step_cycles, issue_per_cta=facts.issue_per_cta_cycles
        )
        if not config.warp_specialize:
            changes.update(
                regs_per_thread=facts.registers_per_thread,
                spill_reload_covers=facts.spill_reload_covers,
            )
        launches.append(dataclasses.replace(launch, estimated="", **changes))
    return dataclasses.replace(trace, launches=tuple(launches))
