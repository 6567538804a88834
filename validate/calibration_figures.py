"""One figure from one calibration step's rows: the point of a curve, the slope of a
chain, the ratio of a step to its parts. `derive_preset` (validate/calibrate.py) turns
these into preset fields; each function says which rows it reads and returns None where
they are too few to say."""

from __future__ import annotations

from collections.abc import Sequence

from ..units import KiB
from .stats import median


def clock_of(row: dict, fallback_hz: float) -> float:
    """The SM clock ``row`` ran at: the kernel's own cycle counter over its ns timer
    when it has them, else nvidia-smi's reading, else ``fallback_hz``."""
    mhz = row.get("clock_effective_MHz") or row.get("clock_MHz")
    return mhz * 1e6 if mhz else fallback_hz


def pick_l2_bandwidth(curve: Sequence[dict], l2_bytes: int) -> dict | None:
    """The L2 read-bandwidth point the preset takes from the measured curve.

    The largest working set of at most half the L2: below it every size hits
    (the curve is flat), above it the curve falls toward HBM as lines spill (on
    the H100/H200, whose L2 is two partitions, well before the nominal size). The
    half-L2 point is the largest set still served from L2 — the regime of
    attention's hot K/V tiles, a few heads' worth (8 MiB per head at N=16k, d=128).
    """
    fitting = [row for row in curve if row["size_bytes"] <= l2_bytes // 2]
    if not fitting:
        return None
    return max(fitting, key=lambda row: row["size_bytes"])


def vector_step_ratio(row: dict, sfu_per_clk: float, fp32_per_clk: float, hz: float) -> float:
    """Measured cycles of one `vector_step_*` step over what the model's vector pipe takes
    for it (SFU time + FP32 time): exps and FP32 ops counted as the flash traces count
    a softmax step."""
    from ..traces.tiles import FLASH_FP32_PER_ROW_STEP, FLASH_FP32_PER_SCORE

    rows, cols = row["rows"], row["cols"]
    exp = rows * cols + rows  # p, and alpha per row
    fp32 = rows * cols * FLASH_FP32_PER_SCORE + rows * FLASH_FP32_PER_ROW_STEP
    pipe_cycles = row["ctas_per_sm"] * (exp / sfu_per_clk + fp32 / fp32_per_clk)  # simulator/sm.py
    return row["value"] * hz / pipe_cycles


SATURATED = 0.99  # a stream this close to the highest bandwidth measured: memory saturated


def loaded_latency_curve(rows: Sequence[dict]) -> list[tuple[float, float]]:
    """((busy fraction, latency s), ...) from `*_latency_loaded@k` rows, idle first.

    The busy fraction of a point is its stream's bandwidth over the highest one
    measured. The curve stops before the first saturated point (>= ``SATURATED``):
    there the chase waits behind a queue that only grows with more streamers,
    and that wait is what the engine's bandwidth servers already charge (a
    transfer's share of a saturated server), so it must not count twice.
    """
    if not rows:
        return []
    top = max(r.get("stream_Bps", 0.0) for r in rows)
    curve = []
    for r in sorted(rows, key=lambda r: r.get("stream_Bps", 0.0)):
        u = r.get("stream_Bps", 0.0) / top if top > 0 else 0.0
        if u >= SATURATED:
            break
        curve.append((u, float(r["value"])))
    return curve if curve and curve[0][0] == 0.0 else []


def row_bytes(row: dict) -> int:
    return int(row["size_bytes"])


def tensor_rows(rows: Sequence[dict]) -> dict[tuple[str, str], dict]:
    """The best tensor-core row per (dtype class, path); bf16 counts as fp16."""
    best: dict[tuple[str, str], dict] = {}
    for row in rows:
        if not row["name"].startswith("tensor_"):
            continue
        dtype = "fp16" if row["dtype"] in ("fp16", "bf16") else row["dtype"]
        key = (dtype, row["path"])
        if key not in best or row["value"] > best[key]["value"]:
            best[key] = row
    return best


def tile_extra_latency(rows: Sequence[dict], chase: dict | None) -> tuple[float, str] | None:
    """(seconds, description) a tile from HBM takes beyond one load's latency: for each
    CTA size, the line through its two tile sizes' seconds per tile, at zero bytes (the
    bytes' own time out; what is left also holds the few instructions that add the tile
    in), less the pointer chase's seconds per hop; the median over CTA sizes."""
    if not chase:
        return None
    by_warps: dict[int, list] = {}
    for r in rows:
        if r["name"].startswith("hbm_tile_") and not r["name"].startswith(CHASE_TILE):
            by_warps.setdefault(int(r["warps"]), []).append((r["tile_bytes"], r["value"]))
    fits = {}
    for w, points in sorted(by_warps.items()):
        (b0, t0), (b1, t1) = sorted(points)[0], sorted(points)[-1]
        if b1 > b0:
            fits[w] = t0 - (t1 - t0) * b0 / (b1 - b0) - chase["value"]
    if not fits:
        return None
    seen = ", ".join(f"{w} warps {s * 1e9:.0f} ns" for w, s in fits.items())
    return median(list(fits.values())), seen


CHASE_TILE = "hbm_tile_chase_"
SMALL_LOAD_FIELDS = (
    (2 * KiB, "hbm_tile_extra_2KiB_cycles"),
    (8 * KiB, "hbm_tile_extra_8KiB_cycles"),
)


def small_load_extra(rows: Sequence[dict], nbytes: int) -> tuple[float, str, str] | None:
    """(seconds, description, date of its rows or "") a load of ``nbytes`` per CTA from
    HBM takes beyond one of 256 B (a row's statistics: one request per warp, no slowest
    of many to wait for), from the chained-tile walks: per CTA size, the difference of
    their seconds per tile (the walk's own reduction and address arithmetic cancel
    out); the median over CTA sizes."""
    by_warps: dict[int, dict] = {}
    when = ""
    for r in rows:
        if r["name"].startswith(CHASE_TILE):
            by_warps.setdefault(int(r["warps"]), {})[int(r["tile_bytes"])] = r["value"]
            when = r.get("date", when)
    diffs = {w: t[nbytes] - t[256] for w, t in sorted(by_warps.items()) if nbytes in t and 256 in t}
    if not diffs:
        return None
    seen = ", ".join(f"{w} warps {s * 1e9:.0f} ns" for w, s in diffs.items())
    return median(list(diffs.values())), seen, when


MMA_CHAIN = "mma_chain_wgmma@"
MMA_CHAIN2 = "mma_chain2_wgmma@"


def wgmma_latency(rows: Sequence[dict], flop_per_clk: float) -> tuple[float, str, str] | None:
    """(SM cycles, description, date of its rows or "") a wgmma's result comes after its
    pipe time, from the dependent chains (`steps.tensor.mma_latency`): per shape, a
    step of two dots less a step of one is the second dot, whose A operand is the first's
    result in registers (the store of x to shared memory, its fence and barrier cancel
    out); less its pipe time (2 m k k / ``flop_per_clk``), what is left is its latency
    and the conversion of A to fp16, which grows with A's elements: the least-squares
    line through (elements, cycles) at zero elements."""
    one, two, when = {}, {}, ""
    for r in rows:
        for prefix, into in ((MMA_CHAIN, one), (MMA_CHAIN2, two)):
            if r["name"].startswith(prefix):
                into[tuple(r["tile"])] = r["value"]
                when = r.get("date", when)
    points = []
    for (m, n, k), cycles in sorted(two.items()):
        if (m, n, k) in one and flop_per_clk > 0:
            points.append((m * k, cycles - one[(m, n, k)] - 2 * m * n * k / flop_per_clk, m, k))
    if len(points) < 2 or len({e for e, *_ in points}) < 2:
        return None
    xs, ys = [e for e, *_ in points], [y for _, y, *_ in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    seen = ", ".join(f"{m}x{k} {y:.0f}" for _, y, m, k in points)
    return my - slope * mx, f"{seen}; {slope:.4f} cycles an element", when


STORE_CHAIN = "hbm_store_chain_"


def store_port_rate(rows: Sequence[dict]) -> tuple[float, str, str] | None:
    """(bytes per SM clock, description, date of its rows or "") an SM's stores leave it
    at, from the store chains (`steps.tile.store_latency`): per CTA size, the
    bytes between its two largest tiles over the seconds between them (the fence, the
    barrier and the acknowledgement's latency cancel out), at the SM clock of the run;
    the median over CTA sizes."""
    by_warps: dict[int, list] = {}
    when = ""
    for r in rows:
        if r["name"].startswith(STORE_CHAIN):
            by_warps.setdefault(int(r["warps"]), []).append(r)
            when = r.get("date", when)
    rates, seen = [], []
    for w, rs in sorted(by_warps.items()):
        if len(rs) < 2:
            continue
        a, b = sorted(rs, key=lambda r: r["tile_bytes"])[-2:]
        dt = b["value"] - a["value"]
        hz = clock_of(b, clock_of(a, 0.0))  # a short run may have no nvidia-smi sample
        if dt <= 0 or not hz:
            continue
        bps = (b["tile_bytes"] - a["tile_bytes"]) / dt
        rates.append(bps / hz)
        seen.append(f"{w} warps {bps / 1e9:.1f} GB/s at {hz / 1e6:.0f} MHz")
    if not rates:
        return None
    return median(rates), ", ".join(seen), when
