"""The memory system: HBM and L2 bandwidth servers, and the L2 as an LRU of tiles.

Bandwidth is processor-shared (a virtual-time heap: O(log n) per transfer); a load is
ready after both its transfer and its loaded latency, interpolated on the GPU's
measured loaded-latency curve; the L2 is an LRU of ``(tensor, tile)`` keys whose misses
join fills in flight; stores leave each SM through one port and complete on the L2's
acknowledgement. The model and its calibration steps: docs/engine.md, "The memory
system".
"""

from __future__ import annotations

import math
from collections import OrderedDict
from heapq import heappop, heappush

from simpy.core import NORMAL
from simpy.events import Event


def compile_curve(curve) -> tuple:
    """``curve`` ((x, y), ... ascending) as `lerp` reads it: its segments precomputed."""
    segments = tuple(
        (x1, x0, y0, y1 - y0, x1 - x0) for (x0, y0), (x1, y1) in zip(curve, curve[1:], strict=False)
    )
    return curve[0][0], curve[0][1], segments, curve[-1][1]


def lerp(compiled, x: float) -> float:
    """`hwmodels.gpu.interpolate` on a `compile_curve` result: the same floats, faster."""
    x_first, y_first, segments, y_last = compiled
    if x <= x_first:
        return y_first
    for x1, x0, y0, dy, dx in segments:
        if x <= x1:
            return y0 + dy * (x - x0) / dx
    return y_last


# Counter slots of a work item (see engine.py), kept as plain list indices: the
# event loop adds to them on every op.
C_FLOPS, C_EXP, C_FP32 = 0, 1, 2
C_HBM_READ, C_HBM_WRITE = 3, 4  # bytes
C_LOAD, C_L2_HIT = 5, 6  # bytes asked for by loads; bytes served by L2 (hits + joined fills)
C_L2_XFER = 7  # bytes moved through the L2 hit server
C_TENSOR, C_SFU, C_FP32_PIPE, C_SMEM = 8, 9, 10, 11  # busy cycles of the SM pipes
C_HBM_BUSY = 12  # cycles of HBM work at full rate (its bytes at the mix's cost)
N_COUNTERS = 13


class PSServer:
    """A processor-sharing server whose work unit is one cycle at full rate."""

    __slots__ = (
        "env",
        "name",
        "V",
        "n",
        "last",
        "heap",
        "seq",
        "gen",
        "wake_t",
        "recorder",
        "classes",
        "costs",
        "rates",
        "busy",
        "busy_t",
        "window",
    )

    def __init__(
        self, env, name: str, costs: tuple = (1.0,), recorder=None, window: float = 1.0
    ) -> None:
        self.env = env
        self.name = name
        self.V = 0.0  # virtual time
        self.n = 0  # active transfers
        self.last = 0.0  # real time of the last update
        self.heap: list = []  # (finish V, seq, class, copies, callback, arg)
        self.seq = 0
        self.gen = 0
        self.wake_t = -1.0  # time of the pending wake-up; -1: none
        self.recorder = recorder  # timeline throughput counters, or None
        self.classes = [0] * len(costs)  # active transfers per class (read / write)
        self.costs = costs  # cycles per byte of each class (a transfer's unless it says)
        self.rates = [0.0] * len(costs)  # sum over active transfers of bytes per work cycle
        self.busy = 0.0  # busy fraction, exponentially averaged over `window` cycles
        self.busy_t = 0.0  # time it was last brought up to date
        self.window = window
        if recorder is not None:
            self._record(0.0)  # every server has a counter track, busy or not

    def add(self, work: float, cls: int, callback, arg, copies: int = 1, cost: float = 0.0) -> None:
        """Start a transfer of ``work`` cycles; ``callback(arg, now)`` when it ends.
        ``copies``: it stands for that many identical transfers (one SM's for all the
        SMs of a symmetric launch, scheduler.py), each taking its share. ``cost``: its
        cycles per byte, if not its class's (the recorder's byte rates)."""
        now = self.env._now
        self.busy = self.busy_at(now)
        self.busy_t = now
        if self.n:
            self.V += (now - self.last) / self.n
        self.last = now
        # bytes per work cycle, for the recorder only
        rate = copies / (cost or self.costs[cls]) if self.recorder is not None else 0.0
        heappush(self.heap, (self.V + work, self.seq, cls, copies, callback, arg, rate))
        self.seq += 1
        self.n += copies
        self.classes[cls] += copies
        if self.recorder is not None:
            self.rates[cls] += rate
            self._record(now)
        self._schedule(now)

    def _schedule(self, now: float) -> None:
        finish = now + (self.heap[0][0] - self.V) * self.n
        if 0.0 <= self.wake_t <= finish:
            return  # an earlier wake-up is pending; it reschedules when it fires
        self.gen += 1
        ev = Event(self.env)
        ev._ok = True
        ev._value = self.gen
        ev.callbacks.append(self._wake)
        self.env.schedule(ev, NORMAL, max(finish - now, 0.0))
        self.wake_t = finish

    def _wake(self, event) -> None:
        if event._value != self.gen:
            return  # superseded by an earlier wake-up
        self.wake_t = -1.0
        now = self.env._now
        self.busy = self.busy_at(now)
        self.busy_t = now
        if self.n:
            self.V += (now - self.last) / self.n
        self.last = now
        heap = self.heap
        limit = self.V + 1e-9 * (1.0 + abs(self.V))  # float slack on the finishing V
        done = []
        # ... or so close to done that its wake-up would come at `now` again (float time
        # at `now` cannot advance by it): a zero-delay reschedule would repeat forever
        while heap and (heap[0][0] <= limit or now + (heap[0][0] - self.V) * self.n == now):
            item = heappop(heap)
            self.n -= item[3]
            self.classes[item[2]] -= item[3]
            done.append(item)
        if self.recorder is not None and done:
            for item in done:
                cls = item[2]
                # (none left: exactly 0, no float residue of the sum)
                self.rates[cls] = self.rates[cls] - item[6] if self.classes[cls] else 0.0
            self._record(now)
        if heap:
            self._schedule(now)
        for item in done:  # after the state is consistent: callbacks may add transfers
            item[4](item[5], now)

    def busy_at(self, now: float) -> float:
        """Busy fraction at ``now``: the average, decayed since the last change of n."""
        dt = now - self.busy_t
        if dt <= 0.0:
            return self.busy
        keep = math.exp(-dt / self.window)
        return self.busy * keep + (1.0 - keep if self.n else 0.0)

    def _record(self, now: float) -> None:
        # byte rate of each class: each transfer does 1/n of a work cycle per cycle
        n = self.n
        rates = tuple(
            r / n if n and c else 0.0 for r, c in zip(self.rates, self.classes, strict=True)
        )
        self.recorder.rate(self.name, now, rates)


class L2Cache:
    """LRU over tile keys with a byte capacity."""

    __slots__ = ("capacity", "entries", "used", "inflight")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: OrderedDict = OrderedDict()  # key -> bytes, least recent first
        self.used = 0
        self.inflight: dict = {}  # key -> list of waiting load jobs

    def insert(self, key, nbytes: int) -> None:
        entries = self.entries
        old = entries.get(key)
        if old is not None:
            entries.move_to_end(key)
            if old != nbytes:
                entries[key] = nbytes
                self.used += nbytes - old
            return
        entries[key] = nbytes
        self.used += nbytes
        while self.used > self.capacity and len(entries) > 1:
            _, size = entries.popitem(last=False)
            self.used -= size


class LoadJob:
    """One Load (or one coalesced step of Loads): parts in flight until all arrive."""

    __slots__ = (
        "pending",
        "xfer_end",
        "latency",
        "event",
        "smem_end",
        "smem_busy",
        "sm",
        "keys",
        "ctr",
        "issue",
        "reps",
        "lead",
        "extra",
        "flight",
        "tail",
    )

    def __init__(self, event, sm, ctr, issue: float, reps: float, lead: float) -> None:
        self.pending = 1  # released by `Memory.load` once every part is issued
        self.xfer_end = issue  # when the last part's transfer ended
        self.latency = 0.0  # the longest loaded latency of its parts (from issue)
        self.flight = 0.0  # the longest idle latency of its parts (after their transfer)
        self.tail = 0.0  # what its slowest request adds after both (HBM parts: `extra`)
        self.event = event
        self.smem_end = 0.0  # when the SM's shared-memory pipe has written the data
        self.smem_busy = 0.0  # how long that takes
        self.sm = sm
        self.keys = None  # miss keys (key, bytes) to insert when the HBM read ends
        self.ctr = ctr
        self.issue = issue
        self.reps = reps  # iterations a coalesced step stands for (1: exact)
        self.lead = lead  # iterations between issue and first use (>= 1)
        self.extra = 0.0  # what its slowest request adds from HBM (Memory.tile_extra)


class Memory:
    """HBM + L2 of one GPU; ``load`` / ``store`` are called by the CTA processes."""

    def __init__(self, env, gpu, recorder=None) -> None:
        self.env = env
        clock = gpu.sm_clock_hz
        self.read_cost = clock / gpu.hbm_read_Bps  # cycles per byte at full rate
        self.write_cost = clock / gpu.hbm_write_Bps
        self.l2_cost = clock / gpu.l2_bandwidth_Bps
        self.hbm_latency = float(gpu.hbm_latency_cycles)  # idle
        self.extra_curve = gpu.tile_extra_curve()  # a load's slowest request, by its size
        self.l2_latency = float(gpu.l2_hit_latency_cycles)
        self.hbm_curve = gpu.latency_curve("hbm")
        self.l2_curve = gpu.latency_curve("l2")
        self.hbm_lerp = compile_curve(self.hbm_curve)
        self.l2_lerp = compile_curve(self.l2_curve)
        self.extra_lerp = compile_curve(self.extra_curve)
        self.extra_memo: dict = {}  # tile_extra by load size (few distinct sizes)
        self.smem_rate = gpu.smem_bandwidth_B_per_clk_per_sm
        self.smem_cost = 1.0 / self.smem_rate
        self.store_rate = gpu.store_bandwidth_B_per_clk_per_sm  # 0: no store port
        self.store_cost = 1.0 / self.store_rate if self.store_rate else 0.0
        window = self.hbm_latency
        self.hbm = PSServer(env, "hbm", (self.read_cost, self.write_cost), recorder, window)
        # A mix of reads and writes: every byte at the time per byte of the recent mix
        # (GPU.hbm_mix_curve); None without measured mix points (each at its own cost).
        mix = gpu.hbm_mix_curve()
        peak = gpu.hbm_bandwidth_Bps
        self.mix_lerp = (
            compile_curve(tuple((w, clock / (peak * eff)) for w, eff in mix))
            if len(mix) > 2
            else None
        )
        self.mix_read = self.mix_write = 0.0  # bytes, decayed over `window` cycles
        self.mix_t = 0.0
        self.mix_window = window
        self.l2srv = PSServer(env, "l2", (self.l2_cost,), recorder, window)
        self.l2 = L2Cache(gpu.l2_bytes)

    # -- loads ---------------------------------------------------------------------

    def set_sm_speed(self, speed: float) -> None:
        """Shared memory runs on the SM clock: a launch at ``speed`` x sm_clock_hz
        (scheduler.sm_speed) moves that much less per cycle."""
        self.smem_cost = 1.0 / (self.smem_rate * speed)
        if self.store_rate:
            self.store_cost = 1.0 / (self.store_rate * speed)

    def load(self, sm, items, extra_hit, extra_rule, rule_hits, event, ctr, reps=1.0, lead=1.0):
        """Bring ``items`` ((key, bytes), ...) into ``sm``'s shared memory; trigger ``event``.

        Coalesced steps access tiles more than once. ``extra_hit`` bytes are
        back-to-back repeats inside one step: L2 hits. A coalesced outer loop
        replays its inner tiles ``extra_rule`` more times: those accesses hit when
        ``rule_hits`` (their reuse distance fits in L2) and read HBM again if not.
        Returns the bytes accessed.

        ``reps`` / ``lead``: the step stands for ``reps`` iterations and its tiles
        are issued ``lead`` iterations before their first use. The c = reps real
        iterations each wait for their own tile: L + X after its issue (latency,
        transfer, or the shared-memory write if slower), issued ``lead``
        iterations early, so they need c (L + X) / lead; the step's tiles all
        arrive D + L after issue (D = c X, measured). The step is ready after
        the longer of the two (see steps.py).
        """
        l2 = self.l2
        entries = l2.entries
        inflight = l2.inflight
        total = 0
        hit = 0
        miss = 0
        misses = None
        job = LoadJob(event, sm, ctr, self.env._now, reps, lead)
        for key, nb in items:
            total += nb
            if key in entries:
                entries.move_to_end(key)
                hit += nb
                continue
            waiters = inflight.get(key)
            if waiters is not None:
                waiters.append(job)  # join the fill in flight (MSHR)
                job.pending += 1
                ctr[C_L2_HIT] += nb
                ctr[C_L2_XFER] += nb  # counted, not queued: see the module docstring
                continue
            if misses is None:
                misses = []
            misses.append((key, nb))
            inflight[key] = []
            miss += nb
        if extra_hit:
            total += extra_hit
            hit += extra_hit
        job.extra = self.tile_extra(total / reps)
        if extra_rule > 0.0:
            more = total * extra_rule
            total += more
            if rule_hits:
                hit += more
            else:
                miss += more
        ctr[C_LOAD] += total
        # Shared memory: the data streams into it as it arrives, at most
        # smem_bandwidth bytes per clock per SM; the SM's pipe is reserved now (in
        # issue order), from the moment the first bytes can arrive.
        now = self.env._now
        if total > 0:  # (an empty load completes at once: traces/ir.py)
            first = now + (self.hbm_latency if (miss or job.pending > 1) else self.l2_latency)
            start = first if first > sm.smem_free else sm.smem_free
            busy = total * self.smem_cost
            job.smem_end = sm.smem_free = start + busy
            job.smem_busy = busy
            ctr[C_SMEM] += busy
            if sm.log is not None:
                sm.log.append((3, start, start + busy, ""))
        if miss:
            ctr[C_HBM_READ] += miss
            job.keys = misses
            job.pending += 1
            self._hbm_add(miss, False, ctr, self._hbm_read_done, job)
        elif misses:  # zero-byte misses
            job.keys = misses
            self._insert_fills(job, self.env._now)
        if hit:
            ctr[C_L2_HIT] += hit
            ctr[C_L2_XFER] += hit
            job.pending += 1
            self.l2srv.add(hit * self.l2_cost, 0, self._l2_done, job)
        self._part_done(job, self.env._now, 0.0, 0.0, 0.0)
        return total

    def load_copies(self, sm, items, twins, copies, extra_hit, event, ctr, reps, lead):
        """`load` for a CTA that stands for ``copies`` CTAs in lock step on as many SMs
        (scheduler.py): ``items`` its tiles, ``twins`` those of the others. Every tile
        goes through the L2 as in the full run; the CTA's load is the copies' average,
        ``copies`` transfers on each server, and its counters the average too.
        (No coalesced outer loop: such a launch's loops hold no loop.)"""
        l2 = self.l2
        entries = l2.entries
        inflight = l2.inflight
        total = hit = miss = joined = 0
        misses = None
        job = LoadJob(event, sm, ctr, self.env._now, reps, lead)
        for key, nb in (*items, *twins):
            total += nb
            if key in entries:
                entries.move_to_end(key)
                hit += nb
                continue
            waiters = inflight.get(key)
            if waiters is not None:
                waiters.append(job)
                job.pending += 1
                joined += nb
                continue
            if misses is None:
                misses = []
            misses.append((key, nb))
            inflight[key] = []
            miss += nb
        total = total / copies + extra_hit
        hit = hit / copies + extra_hit
        miss /= copies
        ctr[C_L2_HIT] += joined / copies
        ctr[C_L2_XFER] += joined / copies
        job.extra = self.tile_extra(total / reps)
        ctr[C_LOAD] += total
        now = self.env._now
        if total > 0:
            first = now + (self.hbm_latency if (miss or job.pending > 1) else self.l2_latency)
            start = first if first > sm.smem_free else sm.smem_free
            busy = total * self.smem_cost
            job.smem_end = sm.smem_free = start + busy
            job.smem_busy = busy
            ctr[C_SMEM] += busy
        if miss:
            ctr[C_HBM_READ] += miss
            job.keys = misses
            job.pending += 1
            self._hbm_add(miss, False, ctr, self._hbm_read_done, job, copies)
        elif misses:
            job.keys = misses
            self._insert_fills(job, now)
        if hit:
            ctr[C_L2_HIT] += hit
            ctr[C_L2_XFER] += hit
            job.pending += 1
            self.l2srv.add(hit * self.l2_cost, 0, self._l2_done, job, copies)
        self._part_done(job, now, 0.0, 0.0, 0.0)
        return total

    def _hbm_add(self, nbytes, write: bool, ctr, callback, arg, copies: int = 1) -> None:
        """Put ``nbytes`` (for each of ``copies``) on the HBM server, counted in ``ctr``.
        Each byte at its direction's cost or, with a mix curve, at the time per byte of
        the write share of the bytes lately asked for, these included (an exponential
        average over one idle HBM latency)."""
        if self.mix_lerp is None:
            cost = self.write_cost if write else self.read_cost
        else:
            now = self.env._now
            keep = math.exp((self.mix_t - now) / self.mix_window) if now > self.mix_t else 1.0
            self.mix_t = now
            self.mix_read *= keep
            self.mix_write *= keep
            if write:
                self.mix_write += nbytes * copies
            else:
                self.mix_read += nbytes * copies
            cost = lerp(self.mix_lerp, self.mix_write / (self.mix_read + self.mix_write))
        work = nbytes * cost
        ctr[C_HBM_BUSY] += work
        self.hbm.add(work, 1 if write else 0, callback, arg, copies, cost)

    def tile_extra(self, nbytes: float) -> float:
        """What the slowest of the requests of a CTA's load of ``nbytes`` (one iteration's,
        its tiles together) adds to one load's latency from HBM (``GPU.tile_extra_curve``:
        nothing for a row's statistics, the most from a 16 KiB tile)."""
        extra = self.extra_memo.get(nbytes)
        if extra is None:
            x = math.log2(nbytes) if nbytes > 1.0 else 0.0
            extra = self.extra_memo[nbytes] = lerp(self.extra_lerp, x)
        return extra

    def _hbm_read_done(self, job: LoadJob, now: float) -> None:
        loaded = self._insert_fills(job, now)
        self._part_done(job, now, loaded, self.hbm_latency, job.extra)

    def _insert_fills(self, job: LoadJob, now: float) -> float:
        """Insert ``job``'s missed tiles in L2 and release the loads that joined their
        fills: each part is in from HBM, one load's latency at the HBM's present load
        (returned), the idle one after the transfer, and what the slowest of its own
        requests adds (`tile_extra`)."""
        l2 = self.l2
        loaded = lerp(self.hbm_lerp, self.hbm.busy_at(now))
        for key, nb in job.keys or ():
            # a coalesced outer step's streaming tiles: one iteration's share (sm.py)
            l2.insert(key, key[2] if len(key) == 3 and key[0].__class__ is tuple else nb)
            for waiter in l2.inflight.pop(key, ()):
                self._part_done(waiter, now, loaded, self.hbm_latency, waiter.extra)
        return loaded

    def _l2_done(self, job: LoadJob, now: float) -> None:
        loaded = lerp(self.l2_lerp, self.l2srv.busy_at(now))
        self._part_done(job, now, loaded, self.l2_latency, 0.0)

    def _part_done(
        self, job: LoadJob, now: float, loaded: float, flight: float, tail: float
    ) -> None:
        """Part of ``job`` is in at ``now`` (its transfer ended): ``loaded`` latency from
        the job's issue, ``flight`` after the transfer, ``tail`` after both."""
        if now > job.xfer_end:
            job.xfer_end = now
        if loaded > job.latency:
            job.latency = loaded
        if flight > job.flight:
            job.flight = flight
        if tail > job.tail:
            job.tail = tail
        job.pending -= 1
        if job.pending:
            return
        # the queue its requests wait in and its bandwidth share overlap (module doc)
        lat, flight, tail = job.latency, job.flight, job.tail
        ready = job.xfer_end + flight
        if job.issue + lat > ready:
            ready = job.issue + lat
        ready += tail
        if job.reps > 1.0:
            # c = reps iterations, each waiting max(X + flight, lat) + tail for its own
            # tiles (X = d / c), issued lead iterations early
            d = job.xfer_end - job.issue
            if job.smem_busy > d:
                d = job.smem_busy  # each tile streams in no faster than smem takes it
            c = job.reps
            own = d + c * flight if d + c * flight > c * lat else c * lat
            spread = job.issue + (own + c * tail) / job.lead
            if spread > ready:
                ready = spread
        # Every part is here, and written into shared memory.
        end = job.smem_end if job.smem_end > ready else ready
        ev = job.event
        ev._ok = True
        ev._value = None
        self.env.schedule(ev, NORMAL, end - now)

    # -- stores --------------------------------------------------------------------

    def store(self, sm, items, extra_rep, extra_rule, rule_hits: bool, callback, arg, ctr):
        """Write ``items`` from ``sm`` to HBM (and allocate them in L2); ``callback(arg,
        now)`` once acknowledged.

        ``extra_rep`` bytes / ``extra_rule`` times more writes of the same tiles,
        as in `load`. Returns the bytes of lines it allocates.
        """
        total = extra_rep
        entries = self.l2.entries
        touched = 0.0  # bytes of lines it allocates (returned: reuse distances, sm.py)
        for key, nb in items:
            total += nb
            if key not in entries:
                touched += nb
        if extra_rule > 0.0:
            more = total * extra_rule
            total += more
            if not rule_hits:
                touched += more
        ctr[C_HBM_WRITE] += total
        if total <= 0:  # nothing written: nothing to acknowledge
            for key, nb in items:
                self.l2.insert(key, nb)
            callback(arg, self.env._now)
        else:
            port = 0.0  # when the SM's store port has sent it (0: no port)
            if self.store_rate:
                now = self.env._now
                start = now if now > sm.store_free else sm.store_free
                port = sm.store_free = start + total * self.store_cost
            self._hbm_add(total, True, ctr, self._store_done, (items, callback, arg, port))
        return touched

    def store_copies(self, sm, items, twins, copies, extra_rep, callback, arg, ctr):
        """`store` for a CTA that stands for ``copies`` (as `load_copies`)."""
        entries = self.l2.entries
        total = 0.0
        touched = 0.0
        for key, nb in (*items, *twins):
            total += nb
            if key not in entries:
                touched += nb
        total = total / copies + extra_rep
        touched /= copies
        ctr[C_HBM_WRITE] += total
        every = (*items, *twins)
        if total <= 0:
            for key, nb in every:
                self.l2.insert(key, nb)
            callback(arg, self.env._now)
        else:
            port = 0.0
            if self.store_rate:
                now = self.env._now
                start = now if now > sm.store_free else sm.store_free
                port = sm.store_free = start + total * self.store_cost
            state = (every, callback, arg, port)
            self._hbm_add(total, True, ctr, self._store_done, state, copies)
        return touched

    def _store_done(self, state, now: float) -> None:
        items, callback, arg, port = state
        if port > now:  # the HBM took it faster than the SM's port could send it
            ev = Event(self.env)
            ev._ok = True
            ev._value = None
            ev.callbacks.append(lambda _ev: self._store_done((items, callback, arg, 0.0), port))
            self.env.schedule(ev, NORMAL, port - now)
            return
        l2 = self.l2
        for key, nb in items:
            l2.insert(key, nb)
        # The write is acknowledged an L2 latency after its data has gone: until then
        # the storing warps cannot retire (Nsight Compute's "drain" stall).
        ev = Event(self.env)
        ev._ok = True
        ev._value = None
        ev.callbacks.append(lambda _ev: callback(arg, self.env._now))
        self.env.schedule(ev, NORMAL, lerp(self.l2_lerp, self.l2srv.busy_at(now)))
