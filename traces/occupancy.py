"""How many CTAs of a launch fit on one SM at once, and which resource says so.

The four limits are the ones the CUDA occupancy calculator applies: resident
blocks, shared memory, registers and warps per SM. The v3 generator sizes its
persistent grid with it (SMs x CTAs per SM) and ``tilesim trace show`` prints
the inputs. Register allocation granularity is ignored (registers are counted
as regs_per_thread x threads), which is exact for the multiples of 8 registers
the generators emit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hwmodels.gpu import GPU
from .ir import Launch


@dataclass(frozen=True)
class Occupancy:
    ctas_per_sm: int  # min of the four limits below
    by_ctas: int  # max_ctas_per_sm
    by_smem: int  # smem_bytes_per_sm // smem_bytes
    by_regs: int  # regs_per_sm // (regs_per_thread * threads)
    by_warps: int  # max_warps_per_sm // warps
    limiter: str  # which of ctas | smem | regs | warps is the smallest (first on ties)

    def to_dict(self) -> dict:
        return {
            "ctas_per_sm": self.ctas_per_sm,
            "by_ctas": self.by_ctas,
            "by_smem": self.by_smem,
            "by_regs": self.by_regs,
            "by_warps": self.by_warps,
            "limiter": self.limiter,
        }


def occupancy(launch: Launch, gpu: GPU) -> Occupancy:
    """Resident CTAs of ``launch`` per SM of ``gpu`` (0 when one CTA does not fit)."""
    warps = -(-launch.threads // 32)
    limits = {
        "ctas": gpu.max_ctas_per_sm,
        "smem": gpu.smem_bytes_per_sm // launch.smem_bytes if launch.smem_bytes else 10**9,
        "regs": gpu.regs_per_sm // (launch.regs_per_thread * launch.threads),
        "warps": gpu.max_warps_per_sm // warps,
    }
    limiter = min(limits, key=lambda k: limits[k])  # dict order breaks ties
    return Occupancy(
        ctas_per_sm=limits[limiter],
        by_ctas=limits["ctas"],
        by_smem=min(limits["smem"], gpu.max_ctas_per_sm),
        by_regs=limits["regs"],
        by_warps=limits["warps"],
        limiter=limiter,
    )
