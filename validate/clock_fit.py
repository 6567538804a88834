"""The preset's clock model from the ``power`` step's rows (simulator/clock.py).

``clock_max_hz`` is the median counted clock of the launches without MMAs (FMA, exp2,
HBM and L2 streams). The budget shares solve, by least squares over the tl.dot loops
with random operands whose counted clock is below the MMA ceiling
(``tensor_clock_ratio x clock_max_hz``),

    f x per_GHz + k_dtype x FLOP/s + k_l2 x L2 B/s + k_hbm x HBM B/s + k_fp32 x ops/s = 1

(each rate in the preset's unit). Pure arithmetic on the rows; no attention timing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SHARES = (
    ("clock_power_per_GHz", None, 1e9),
    ("clock_power_fp16_per_PFLOPs", "fp16", 1e15),
    ("clock_power_bf16_per_PFLOPs", "bf16", 1e15),
    ("clock_power_fp8_per_PFLOPs", "fp8", 1e15),
    ("clock_power_l2_per_10TBps", "l2_hit_bytes_per_s", 1e13),
    ("clock_power_hbm_per_10TBps", "hbm_bytes_per_s", 1e13),
    ("clock_power_fp32_per_10Tops", "fp32_ops_per_s", 1e13),
)
CEILING_MARGIN = 0.997  # a row this close to the MMA ceiling is held by it, not by power


def _features(row: dict) -> list[float]:
    out = []
    for _, key, unit in SHARES:
        if key is None:
            out.append(row["value"] / unit)
        elif key in ("fp16", "bf16", "fp8"):
            out.append(row.get("tensor_flop_per_s", 0.0) / unit if row["dtype"] == key else 0.0)
        else:
            out.append(row.get(key, 0.0) / unit)
    return out


def derive(rows: Sequence[dict], tensor_clock_ratio: float) -> tuple[dict, str, str] | None:
    """({field: value}, source of clock_max_hz, source of the shares), or None without
    enough rows (the preset keeps no clock model)."""
    plain = sorted(r["value"] for r in rows if r["name"].startswith("clock_") and not r["mma"])
    if not plain:
        return None
    top = float(np.median(plain))
    ceiling = tensor_clock_ratio * top * CEILING_MARGIN
    loops = [
        r
        for r in rows
        if r["name"].startswith("clock_dot_") and r.get("data") == "random" and r["value"] < ceiling
    ]
    a = np.array([_features(r) for r in loops]) if loops else np.zeros((0, len(SHARES)))
    if len(loops) < 2 * len(SHARES) or np.linalg.matrix_rank(a) < len(SHARES):
        return None
    k, *_ = np.linalg.lstsq(a, np.ones(len(loops)), rcond=None)
    fields = {name: float(f"{v:.4g}") for (name, _, _), v in zip(SHARES, k, strict=True)}
    fields["clock_max_hz"] = float(f"{top:.4g}")
    resid = []
    for r, row_k in zip(loops, a, strict=True):
        rest = float(np.dot(k[1:], row_k[1:]))
        resid.append(abs((1 - rest) / k[0] * 1e9 / r["value"] - 1))
    top_src = (
        f"median counted SM clock of {len(plain)} launches without MMAs (FMA, exp2, HBM "
        f"and L2 streams), {plain[0] / 1e6:.0f}-{plain[-1] / 1e6:.0f} MHz"
    )
    share_src = (
        f"least squares of f x per_GHz + sum of k x rate = 1 over {len(loops)} tl.dot loops "
        f"below the MMA ceiling (fp16/bf16/fp8 wgmma and fp16 mma.sync; operands in "
        f"registers, from the L2 or HBM; 0-256 FMAs a step), counted clocks; the clock "
        f"they give is {100 * float(np.mean(resid)):.1f}% off the counted one on average, "
        f"at most {100 * max(resid):.1f}%"
    )
    return fields, top_src, share_src
