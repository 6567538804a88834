"""The GPU description the engine runs on: a frozen dataclass of numbers with units.

A `GPU` knows nothing of attention. Every field carries its unit in its name; the
TOML presets beside this module give each value with a source comment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# Matrix-instruction paths: Hopper's asynchronous warpgroup MMA, and the
# Latencies in SM cycles: their time in ns is what the memory system fixes.
LATENCY_FIELDS = (
    "l2_hit_latency_cycles",
    "l2_hit_latency_50_cycles",
    "l2_hit_latency_75_cycles",
    "l2_hit_latency_95_cycles",
    "hbm_latency_cycles",
    "hbm_latency_50_cycles",
    "hbm_latency_75_cycles",
    "hbm_latency_95_cycles",
    "hbm_tile_extra_cycles",
    "hbm_tile_extra_2KiB_cycles",
    "hbm_tile_extra_8KiB_cycles",
)
# Busy fractions at which the loaded latencies are given.
LOADED_LATENCY_POINTS = (0.5, 0.75, 0.95)
# Write shares of a stream's bytes at which the HBM's mixed bandwidth is measured.
HBM_MIX_POINTS = (0.25, 0.5, 0.75, 0.9)


def interpolate(curve, x: float) -> float:
    """Piecewise-linear y(x) through ``curve`` ((x, y), ... ascending); flat outside it."""
    if x <= curve[0][0]:
        return curve[0][1]
    for (x0, y0), (x1, y1) in zip(curve, curve[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return curve[-1][1]


# Ampere-style warp-level mma.sync that also runs (slower) on Hopper.
MMA_PATHS = ("wgmma", "mma_sync")
# Element types the tensor cores take, and their sizes.
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1, "fp32": 4, "bool": 1}


@dataclass(frozen=True)
class GPU:
    name: str  # preset name, e.g. "h100_sxm5_80gb"; what-if variants get "h100_sxm5_80gb+hbm2x"
    display_name: str  # e.g. "NVIDIA H100 SXM5 80GB"
    arch: str  # "ampere" | "hopper"

    # -- streaming multiprocessors ------------------------------------------
    sm_count: int  # SMs enabled on the product
    sm_clock_hz: float  # clock the tensor-core peak is quoted at
    # The SM clock of a kernel that uses the tensor cores over the clock reported for
    # the GPU (sm_clock_hz, nvidia-smi's): the H200's own cycle counters ran at 0.90-0.92x
    # nvidia-smi's reading in every tensor-core loop and at 1.00x in exp2/FMA loops.
    # A launch with matrix work runs at this times sm_clock_hz (simulator/scheduler.py).
    tensor_clock_ratio: float
    max_ctas_per_sm: int  # resident thread blocks per SM
    max_warps_per_sm: int  # resident warps per SM
    regs_per_sm: int  # 32-bit registers per SM
    smem_bytes_per_sm: int  # shared memory an SM can hand out to resident CTAs
    smem_bytes_per_cta_max: int  # most shared memory one CTA may opt in to
    smem_bandwidth_B_per_clk_per_sm: float  # shared-memory bytes per clock per SM
    # Bytes per clock an SM's stores leave it at (its CTAs' together): a CTA retires only
    # once its stores are acknowledged, so a tile written in its epilogue holds it this
    # long. 0: not modelled (no datasheet gives it; `tilesim calibrate` measures it).
    store_bandwidth_B_per_clk_per_sm: float
    # SM cycles from a CTA's end to the next CTA's start on its slot (retire, launch)
    cta_turnaround_cycles: float
    # SM cycles between two CTA starts anywhere on the GPU: the rate its front end
    # launches CTAs at, which bounds a grid of many short CTAs. 0: not modelled.
    cta_dispatch_cycles: float

    # -- the clock under load (simulator/clock.py) ------------------------------
    # The SMs' own cycle counters fall below the reported clock as a launch with MMAs
    # works harder. 0: not modelled (every launch at sm_clock_hz, x tensor_clock_ratio
    # with MMAs). Else a launch without MMAs runs at clock_max_hz, and one with MMAs at
    # the f where f x (per_GHz + the per-clock work terms) + the HBM term uses the whole
    # budget (1), at most tensor_clock_ratio x clock_max_hz.
    clock_max_hz: float
    clock_power_per_GHz: float  # budget share per GHz of a launch with MMAs, idle pipes
    clock_power_fp16_per_PFLOPs: float  # ... per PFLOP/s of fp16 tensor work
    clock_power_bf16_per_PFLOPs: float
    clock_power_fp8_per_PFLOPs: float
    clock_power_l2_per_10TBps: float  # ... per 10 TB/s served by the L2
    clock_power_hbm_per_10TBps: float  # ... per 10 TB/s to and from HBM
    clock_power_fp32_per_10Tops: float  # ... per 10^13 FP32 lane ops/s

    # -- execution pipes, per SM per clock ------------------------------------
    tensor_fp16_mma_sync_flop_per_clk_per_sm: float  # dense fp16/bf16, mma.sync path
    tensor_fp16_wgmma_flop_per_clk_per_sm: float  # dense fp16/bf16, wgmma path (0: absent)
    tensor_fp8_wgmma_flop_per_clk_per_sm: float  # dense fp8, wgmma path (0: absent)
    # SM cycles from a wgmma's last pipe cycle to its result in registers: what a warp
    # that waits on it loses when nothing else covers the wait. 0: not modelled (no
    # datasheet gives it; `tilesim calibrate` measures it). mma.sync: not modelled.
    wgmma_latency_cycles: float
    sfu_ops_per_clk_per_sm: float  # MUFU ops (exp2, rcp) per clock per SM
    fp32_ops_per_clk_per_sm: float  # FP32 lane ops per clock per SM (an FMA counts 2 FLOPs)
    warp_schedulers_per_sm: int  # SM sub-partitions, each issuing one warp instruction a clock
    # Warps each scheduler needs for tile-level SFU/FP32 code to run at those pipes'
    # rates: with fewer, dependent instructions stall (latency not hidden) and a
    # role's vector work runs that much slower. 1 = never slower.
    vector_warps_per_scheduler: float

    # -- L2 -----------------------------------------------------------------
    l2_bytes: int  # L2 capacity
    l2_bandwidth_Bps: float  # aggregate L2 hit bandwidth
    l2_hit_latency_cycles: float  # L2 hit latency, SM cycles (an idle memory system)
    # The same latency while the L2 is busy 50 / 75 / 95% of the time (other CTAs
    # streaming): requests queue in the crossbar and the L2 slices. The engine
    # interpolates between these points (simulator/memory.py).
    l2_hit_latency_50_cycles: float
    l2_hit_latency_75_cycles: float
    l2_hit_latency_95_cycles: float

    # -- HBM ----------------------------------------------------------------
    hbm_bytes: int  # device memory capacity
    hbm_bandwidth_Bps: float  # datasheet peak
    hbm_read_efficiency: float  # achievable fraction of peak when reading
    hbm_write_efficiency: float  # achievable fraction of peak when writing
    # ... by a stream whose bytes are 25 / 50 / 75 / 90% writes: DRAM turns its bus
    # around between reads and writes, and a mix is slower than either alone. The
    # engine interpolates the time per byte between these points (simulator/memory.py).
    # 0: not measured (a mix costs what its reads and writes cost alone).
    hbm_mix_25_efficiency: float
    hbm_mix_50_efficiency: float
    hbm_mix_75_efficiency: float
    hbm_mix_90_efficiency: float
    hbm_latency_cycles: float  # load-to-use latency of a miss, SM cycles (idle HBM)
    # ... while the HBM is busy 50 / 75 / 95% of the time (DRAM queues, bank conflicts)
    hbm_latency_50_cycles: float
    hbm_latency_75_cycles: float
    hbm_latency_95_cycles: float
    # A CTA's whole tile from HBM (its plain loads in flight together) arrives this much
    # later than one load would: it waits for the slowest of its requests. SM cycles.
    hbm_tile_extra_cycles: float
    # A smaller load waits for fewer requests: the extra of a CTA's load of 2 and 8 KiB
    # (none at 256 B and below, a row's statistics; all of the above from 16 KiB).
    hbm_tile_extra_2KiB_cycles: float
    hbm_tile_extra_8KiB_cycles: float

    # -- host side ------------------------------------------------------------
    launch_overhead_s: float  # time from one kernel launch to the next, empty kernel

    # -- features -------------------------------------------------------------
    has_tma: bool  # Tensor Memory Accelerator (async bulk tensor copies)
    has_wgmma: bool  # warpgroup MMA
    has_fp8: bool  # fp8 tensor-core inputs

    # Where each value came from (field -> text); kept out of comparisons.
    sources: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    # -- derived figures ----------------------------------------------------------
    def tensor_flop_per_clk_per_sm(self, dtype: str, path: str) -> float:
        """Dense tensor-core FLOP/clk/SM for an element type and instruction path."""
        if dtype == "fp8":
            return self.tensor_fp8_wgmma_flop_per_clk_per_sm
        if path == "wgmma":
            return self.tensor_fp16_wgmma_flop_per_clk_per_sm
        return self.tensor_fp16_mma_sync_flop_per_clk_per_sm

    def peak_tensor_flops(self, dtype: str = "fp16", path: str | None = None) -> float:
        """The most a tensor-core kernel reaches: at tensor_clock_ratio x sm_clock_hz."""
        path = path or ("wgmma" if self.has_wgmma else "mma_sync")
        per_sm = self.tensor_flop_per_clk_per_sm(dtype, path) * self.tensor_clock_ratio
        return per_sm * self.sm_count * self.sm_clock_hz

    @property
    def hbm_read_Bps(self) -> float:
        return self.hbm_bandwidth_Bps * self.hbm_read_efficiency

    @property
    def hbm_write_Bps(self) -> float:
        return self.hbm_bandwidth_Bps * self.hbm_write_efficiency

    def cycles_to_s(self, cycles: float) -> float:
        return cycles / self.sm_clock_hz

    def s_to_cycles(self, seconds: float) -> float:
        return seconds * self.sm_clock_hz

    # -- more derived figures (peaks at sm_clock_hz) ----------------------------------
    @property
    def peak_fp32_flops(self) -> float:
        """Non-tensor FP32 FLOP/s: every lane retires one FMA (2 FLOPs) per clock."""
        return 2.0 * self.fp32_ops_per_clk_per_sm * self.sm_count * self.sm_clock_hz

    @property
    def peak_sfu_ops(self) -> float:
        """MUFU operations (exp2, rcp, ...) per second over all SMs."""
        return self.sfu_ops_per_clk_per_sm * self.sm_count * self.sm_clock_hz

    @property
    def smem_bandwidth_Bps(self) -> float:
        """Aggregate shared-memory bandwidth over all SMs."""
        return self.smem_bandwidth_B_per_clk_per_sm * self.sm_count * self.sm_clock_hz

    def ridge_point_flop_per_byte(self, dtype: str = "fp16", path: str | None = None) -> float:
        """Arithmetic intensity where the tensor peak meets the HBM peak (roofline knee)."""
        return self.peak_tensor_flops(dtype, path) / self.hbm_bandwidth_Bps

    # -- what-if ------------------------------------------------------------------
    def with_overrides(
        self,
        mapping: dict,
        *,
        sources: dict | None = None,
        name: str | None = None,
    ) -> GPU:
        """A copy with some fields changed: ``{"hbm_bandwidth_Bps": "2x", "has_tma": False}``.

        Values are numbers, numeric strings (``"6.7e12"``), multipliers of the
        current value (``"2x"``, ``"0.5x"``) or, for the feature flags, true/false.
        Unknown keys and non-positive values raise `TilesimError` listing the
        settable keys. The copy is named ``<name>+key=value...`` (keys sorted) unless
        ``name`` is given; ``sources`` replaces the "what-if" source text of the
        changed fields (``tilesim calibrate`` records its measurements that way).
        """
        from .overrides import apply_overrides

        out = apply_overrides(self, mapping, sources=sources, name=name)
        if out.clock_max_hz > 0 and not any(k.startswith("clock_") for k in mapping):
            out = out._clock_model_at(out.sm_clock_hz / self.sm_clock_hz)
        return out

    def _clock_model_at(self, k: float) -> GPU:
        """A what-if clock k x sm_clock_hz scales the clock model with it: the same chip
        with k x the clocks and the power budget to run them (simulator/clock.py)."""
        if k == 1:
            return self
        shares = {
            f.name: getattr(self, f.name) / k
            for f in dataclasses.fields(self)
            if f.name.startswith("clock_power_") and f.name != "clock_power_hbm_per_10TBps"
        }
        return dataclasses.replace(self, clock_max_hz=self.clock_max_hz * k, **shares)

    def at_clock(self, sm_clock_hz: float) -> GPU:
        """This GPU running its SMs at ``sm_clock_hz`` (a boost or a power-capped clock),
        with no clock model (simulator/clock.py).

        Per-clock rates (and ``tensor_clock_ratio``) stay as they are; latencies keep their
        time in ns (DRAM and the L2 do not speed up with the SM clock), so their cycle
        counts scale; bandwidths in bytes/s and the launch overhead in seconds are
        unchanged.
        """
        ratio = sm_clock_hz / self.sm_clock_hz
        return self.with_overrides(
            {
                "sm_clock_hz": sm_clock_hz,
                "clock_max_hz": 0.0,  # a clock given: no clock model
                **{f: getattr(self, f) * ratio for f in LATENCY_FIELDS},
            },
            name=f"{self.name}@{sm_clock_hz / 1e6:.0f}MHz",
        )

    def at_counted_clock(self, sm_clock_hz: float) -> GPU:
        """This GPU with every launch's SMs at ``sm_clock_hz``, a clock their own cycle
        counters measured (``%clock64`` over ``%globaltimer``): ``at_clock`` with
        ``tensor_clock_ratio`` 1, since the ratio is what nvidia-smi's reading misses."""
        return self.at_clock(sm_clock_hz).with_overrides(
            {"tensor_clock_ratio": 1.0}, name=f"{self.name}@{sm_clock_hz / 1e6:.0f}MHz-counted"
        )

    def latency_curve(self, level: str) -> tuple[tuple[float, float], ...]:
        """((busy fraction, latency cycles), ...) of ``level`` "hbm" or "l2", idle first."""
        base = "hbm_latency" if level == "hbm" else "l2_hit_latency"
        points = [(0.0, getattr(self, f"{base}_cycles"))]
        for u in LOADED_LATENCY_POINTS:
            points.append((u, getattr(self, f"{base}_{round(100 * u)}_cycles")))
        return tuple(points)

    def hbm_mix_curve(self) -> tuple[tuple[float, float], ...]:
        """((write share of the bytes, fraction of peak), ...) from all reads (0) to all
        writes (1), through the measured ``hbm_mix`` points (those at 0 are left out)."""
        points = [(0.0, self.hbm_read_efficiency)]
        for w in HBM_MIX_POINTS:
            eff = getattr(self, f"hbm_mix_{round(100 * w)}_efficiency")
            if eff > 0:
                points.append((w, eff))
        points.append((1.0, self.hbm_write_efficiency))
        return tuple(points)

    def tile_extra_curve(self) -> tuple[tuple[float, float], ...]:
        """((log2 of a CTA's load bytes, extra latency cycles), ...), smallest first: the
        ``hbm_tile_extra`` fields, 0 at 256 B (interpolate between, flat outside)."""
        return (
            (8.0, 0.0),
            (11.0, self.hbm_tile_extra_2KiB_cycles),
            (13.0, self.hbm_tile_extra_8KiB_cycles),
            (14.0, self.hbm_tile_extra_cycles),
        )

    def to_dict(self) -> dict:
        """The fields as plain JSON-able values (no sources), in field order."""
        return {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "sources"
        }
