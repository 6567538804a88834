"""What the engine predicts: a frozen record with a stable JSON schema.

Times are seconds here (the engine counts SM cycles; ``cycles`` keeps that
figure). Utilisation is the busy fraction of each resource over the whole run:
HBM and L2 are busy while at least one transfer moves (processor sharing keeps
them at full rate then), an SM pipe while it serves; the SM pipes are averaged
over all SMs. ``slot_fill`` is the share of the CTA slots (SMs x resident CTAs
per SM) that hold a CTA, averaged over the kernels' time (launch overhead
excluded; waves that fast fidelity skipped count as full). ``bound`` names what
limits the run, one of `BOUNDS` (`bound_of` decides).

``estimated_launches`` names the launches whose registers, spills and issue
cycles are the trace generator's estimate rather than the compiled kernel's (the
kernel profile had no entry for them), each with why.

``sim_wall_s`` is how long the simulation took on this computer; it is the one
field that differs between two runs of the same input, so it is left out of
equality (``==``) and of `fingerprint`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

# 2: slot_fill, l2_bytes, smem_bytes; latency split into launch, grid, chain
# 3: each launch's clock_hz (the SM clock it ran at: simulator/clock.py)
SCHEMA_VERSION = 3
RESOURCES = ("hbm", "l2", "tensor", "sfu", "fp32", "smem")
BUSY_BOUND_ABOVE = 0.5  # a resource busy this share of the time or more bounds the run
LAUNCH_BOUND_ABOVE = 0.5  # launch overhead above this share of the time: launch-bound

# What each value of ``bound`` means: the one definition, shown by the CLI's --help
# and copied in the README (a test keeps them equal).
BOUNDS = {
    "hbm": "HBM bandwidth: the busiest resource, busy at least half the time",
    "l2": "L2 hit bandwidth: the busiest resource, busy at least half the time",
    "tensor": "tensor cores: the busiest resource, busy at least half the time",
    "sfu": "special-function unit (exponentials): the busiest resource, busy at least "
    "half the time",
    "fp32": "FP32 pipe (softmax arithmetic): the busiest resource, busy at least half the time",
    "smem": "shared-memory port (tile fills, layout conversions): the busiest resource, "
    "busy at least half the time",
    "launch": "kernel-launch overhead: half the time or more, or, when no resource is half "
    "busy, the largest part of the idle time; fewer launches (fusion, CUDA graphs) help",
    "grid": "no resource is half busy, and the largest part of the idle time is CTA slots "
    "left empty: too few CTAs for the SMs (SMs x CTAs per SM) or a partial last wave; "
    "more, smaller CTAs, a split KV sequence or a persistent grid help",
    "dispatch": "no resource is half busy, and the largest part of the idle time is CTAs "
    "waiting for the GPU's front end to start them (one every cta_dispatch_cycles, GPU-wide): "
    "a grid of many short CTAs; fewer, larger CTAs (more rows each) help",
    "chain": "no resource is half busy, and the largest part of the idle time passes while "
    "the CTA slots hold CTAs: each waits on a chain of dependencies (memory latency, or "
    "instruction issue and SFU/FP32 work run one after another with its tensor work); "
    "more overlap (pipeline stages, resident CTAs, ping-pong, warp specialisation) helps",
}


def bound_of(
    utilisation: dict, launch_share: float, slot_fill: float, dispatch_share: float = 0.0
) -> str:
    """The `BOUNDS` label of a run.

    A resource at least `BUSY_BOUND_ABOVE` busy is the bound (the busiest). Below
    that, the busiest resource's idle time splits into launch overhead, CTA slots
    left empty (``dispatch_share`` of the kernels' time of it waiting for the front end
    to start CTAs, the rest grid), and time the slots held CTAs that still left it
    idle; the largest part names the bound (launch, dispatch, grid, chain).
    """
    if launch_share >= LAUNCH_BOUND_ABOVE:
        return "launch"
    best = max(RESOURCES, key=lambda r: utilisation[r])  # ties: the first in RESOURCES
    busy = utilisation[best]
    if busy >= BUSY_BOUND_ABOVE:
        return best
    kernel = 1.0 - launch_share
    idle = {
        "launch": launch_share,
        "dispatch": kernel * dispatch_share,
        "grid": kernel * max(0.0, 1.0 - slot_fill - dispatch_share),
        "chain": kernel * slot_fill - busy,
    }
    return max(idle, key=idle.__getitem__)  # ties: launch, then dispatch, then grid


def describe_bound(bound: str, slot_fill: float) -> str:
    """``bound`` with the share of CTA slots held where the label rests on it (grid, chain)."""
    if bound in ("grid", "chain"):
        return f"{bound}, {slot_fill:.0%} of the CTA slots held"
    return bound


@dataclass(frozen=True)
class LaunchPrediction:
    name: str
    time_s: float
    cycles: float
    ctas: int  # CTAs of the grid (work items of a persistent launch)
    ctas_per_sm: int  # resident CTAs per SM (occupancy)
    occupancy_limiter: str  # ctas | smem | regs | warps
    waves: int  # ceil(ctas / (SMs x ctas_per_sm)); persistent: rounds of work items
    persistent_ctas: int
    hbm_read_bytes: float
    hbm_write_bytes: float
    matmul_flops: float
    utilisation: dict
    bound: str
    simulated_ctas: int  # work items the engine ran (fewer than ctas when waves were sampled)
    slot_fill: float  # CTA slots (SMs x ctas_per_sm) holding a CTA, averaged over the launch
    clock_hz: float  # the SM clock it ran at (simulator/clock.py)

    def bound_text(self) -> str:
        """`bound` for a sentence (`describe_bound`)."""
        return describe_bound(self.bound, self.slot_fill)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Prediction:
    gpu: str
    algo: str
    workload: dict
    config: dict
    fidelity: str
    time_s: float
    cycles: float
    tflops: float  # matmul FLOPs / time
    matmul_flops: float
    exp_count: float
    fp32_ops: float
    hbm_read_bytes: float
    hbm_write_bytes: float
    compulsory_hbm_bytes: int  # the trace's analytic floor: each tensor read / written once
    l2_hit_rate: float  # load bytes served by L2 / load bytes
    l2_bytes: float  # bytes between the SMs and the L2: every load and store
    smem_bytes: float  # bytes through the SMs' shared-memory ports (loads, layout conversions)
    utilisation: dict  # resource -> busy fraction
    bound: str  # one of BOUNDS
    slot_fill: float  # CTA slots holding a CTA, averaged over the kernels' time
    waves: int  # of the longest launch
    ctas_per_sm: int  # of the longest launch
    launches: tuple  # LaunchPrediction per launch, in order
    sim_events: int
    sim_wall_s: float = field(compare=False)
    schema_version: int = SCHEMA_VERSION
    # launches whose registers, spills and issue cycles are the trace generator's
    # estimate, not the kernel profile's: {"launch": name, "why": reason}, in order
    estimated_launches: tuple = ()
    timeline: object = field(default=None, compare=False, repr=False)  # Timeline or None

    @property
    def sampled(self) -> bool:
        """Whether ``fast`` fidelity extrapolated waves of a launch (some CTAs not
        simulated: ``LaunchPrediction.simulated_ctas`` < ``ctas``)."""
        return any(lp.simulated_ctas < lp.ctas for lp in self.launches)

    def bound_text(self) -> str:
        """`bound` for a sentence (`describe_bound`)."""
        return describe_bound(self.bound, self.slot_fill)

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_read_bytes + self.hbm_write_bytes

    def to_dict(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            if f.name == "timeline":
                continue
            value = getattr(self, f.name)
            if f.name == "launches":
                value = [lp.to_dict() for lp in value]
            elif f.name == "estimated_launches":
                value = [dict(x) for x in value]
            out[f.name] = value
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """The prediction as JSON text (sorted keys: stable across runs)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    def fingerprint(self) -> str:
        """JSON of every field that must be bit-identical for the same input."""
        d = self.to_dict()
        d.pop("sim_wall_s")
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> Prediction:
        d = dict(d)
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            from ..errors import TilesimError

            raise TilesimError(f"prediction schema_version {version!r} is not {SCHEMA_VERSION}")
        d["launches"] = tuple(LaunchPrediction(**lp) for lp in d["launches"])
        d["estimated_launches"] = tuple(dict(x) for x in d.get("estimated_launches", ()))
        return cls(**d)
