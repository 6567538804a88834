"""What the engine predicts: a frozen record with a stable JSON schema.

Times are seconds here (the engine counts SM cycles; ``cycles`` keeps that
figure). Utilisation is the busy fraction of each resource over the whole run:
HBM and L2 are busy while at least one transfer moves (processor sharing keeps
them at full rate then), an SM pipe while it serves; the SM pipes are averaged
over all SMs. ``bound`` names the resource that limits the run: ``launch``
when kernel-launch overhead is most of the time, ``latency`` when no resource
is busy even half of the time (the run waits on dependencies and latencies,
not on a throughput), else the most utilised resource.

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

SCHEMA_VERSION = 1
RESOURCES = ("hbm", "l2", "tensor", "sfu", "fp32", "smem")
LATENCY_BOUND_BELOW = 0.5  # no resource busier than this: latency-bound
LAUNCH_BOUND_ABOVE = 0.5  # launch overhead above this share of the time: launch-bound


def bound_of(utilisation: dict, launch_share: float) -> str:
    if launch_share >= LAUNCH_BOUND_ABOVE:
        return "launch"
    best = max(RESOURCES, key=lambda r: utilisation[r])  # ties: the first in RESOURCES
    return best if utilisation[best] >= LATENCY_BOUND_BELOW else "latency"


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
    utilisation: dict  # resource -> busy fraction
    bound: str
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
