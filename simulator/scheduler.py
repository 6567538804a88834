"""The CTA scheduler: occupancy, grid order, persistent CTAs, and wave sampling.

CTAs start in grid order on the least-loaded SM; a persistent CTA runs every P-th work
item. In ``fast`` fidelity a periodic grid is simulated at its head and tail with the
steady middle costed from a measured window, and a lock-step grid of identical CTAs
runs on one SM standing for all. Why this is exact where it is, and where it is not:
docs/engine.md, "The CTA scheduler".
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass
from functools import reduce
from itertools import repeat
from operator import add, truediv

from simpy.core import NORMAL
from simpy.events import Event

from ..errors import TilesimError
from ..traces.ir import Loop, Mma
from ..traces.occupancy import occupancy
from .clock import ceiling_hz
from .environment import Proc, Ready, Signal
from .memory import N_COUNTERS
from .sm import SM, Cta, Executor

WARM_WAVES = 1  # waves simulated before the measuring window (then grown until steady)
PERSISTENT_WARM_WAVES = 3  # persistent launches: a fixed head (items are assigned statically)
TAIL_WAVES = 1  # waves simulated at the end, besides the last partial one
STEADY_TOLERANCE = 0.0025  # steady: the rate changed by less than this over the last wave
MIN_PERIODS = 4  # fewer periods than this in a launch: a sharing-only dim may be dropped
LOCK_STEP_WAVES = 4  # fewer waves than this: every SM simulated (its cost is small)
# one SM standing for all: waves before the measuring window. After the lock-step start
# the rate takes 10-20 waves to settle (sdpa-math's `where`: 1.31 -> 1.05 cycles per
# item) and wobbles by +-5% from wave to wave, so the steadiness test can pass by chance
# before; these waves cost little here.
LOCK_STEP_WARM = 24


@dataclass(frozen=True)
class Plan:
    """Items [0, head) and [tail, n) are simulated; [head, tail) are extrapolated."""

    n: int
    head: int
    tail: int
    period: int
    window: int  # Δ: the measuring window is [head - window, head)
    slots: int  # P: items in flight per wave (or persistent CTAs)

    @property
    def skipped(self) -> int:
        return self.tail - self.head


def period(compiled, slots: int) -> int:
    """Items over which the launch's work and L2 sharing repeat (see module doc)."""
    sizes = compiled.grid_sizes
    ndim = len(sizes)
    work = set(compiled.size_grid_dims)
    share: set[int] = set()
    for tile_dims in compiled.load_tile_grid_dims:
        share |= set(range(ndim)) - set(tile_dims)
    relevant = work | share
    if not relevant:
        return 1
    top = max(relevant)
    g = _prod(sizes[: top + 1])
    n = _prod(sizes)
    while n < MIN_PERIODS * g and top >= 0 and top not in work:
        top -= 1
        g = _prod(sizes[: top + 1])
    return g


def make_plan(
    compiled,
    slots: int,
    fidelity: str,
    persistent: bool = False,
    n: int | None = None,
    warm: int | None = None,
) -> Plan | None:
    """The wave-sampling plan of a launch (of ``n`` items, by default its grid's, and
    ``warm`` waves before the measuring window, by default the module's), or None to
    simulate every item."""
    if fidelity != "fast":
        return None
    if n is None:
        n = compiled.num_items
    g = period(compiled, slots)
    window = g * -(-slots // g)  # a multiple of g, at least one wave
    if warm is None:
        warm = PERSISTENT_WARM_WAVES if persistent else WARM_WAVES
    head_min = warm * slots + window + slots
    tail = (n - TAIL_WAVES * slots) // g * g
    if tail <= head_min:
        return None
    head = head_min + (tail - head_min) % slots  # tail - head: whole waves
    if tail - head < slots:
        return None
    return Plan(n, head, tail, g, window, slots)


def lock_step(compiled, sms, now: float, slots: int, fidelity: str) -> bool:
    """Whether the launch runs the same on every SM, so that one SM can stand for all
    (``fast`` fidelity; module docstring): every CTA the same work on tiles of its
    own, none shared, no loop inside a loop, every SM idle at the start, and enough
    waves for it to matter."""
    if fidelity != "fast" or len(sms) < 2 or compiled.num_items < LOCK_STEP_WAVES * slots:
        return False
    if compiled.launch.persistent_ctas > 0 or period(compiled, slots) != 1:
        return False
    if any(_nested(nodes) for _, nodes in compiled.roles):
        return False
    for sm in sms:
        if sm.log is not None:
            return False  # a timeline draws every SM
        if max(sm.tensor_free, sm.vector_free, sm.smem_free, sm.store_free, sm.issue_free) > now:
            return False
    return True


def _nested(nodes) -> bool:
    return any(node.nested or _nested(node.body) for node in nodes)


def sm_speed(launch, gpu) -> float:
    """The SM clock ``launch`` starts at, over ``gpu.sm_clock_hz``: its ceiling
    (`clock.ceiling_hz`: ``tensor_clock_ratio`` of the top clock with matrix work). The
    engine counts time in cycles of ``sm_clock_hz``, so a slower launch gets that much
    less of each SM pipe per cycle; memory latencies and bandwidths, fixed in ns and
    bytes/s, do not change."""
    return ceiling_hz(gpu, mma_dtype(launch) is not None) / gpu.sm_clock_hz


def mma_dtype(launch) -> str | None:
    """The input type of ``launch``'s first matrix product; None if it has none."""
    for role in launch.program.roles:
        dtype = _mma_dtype(role.ops)
        if dtype is not None:
            return dtype
    return None


def _mma_dtype(ops) -> str | None:
    for op in ops:
        if isinstance(op, Mma):
            return op.dtype
        if isinstance(op, Loop):
            dtype = _mma_dtype(op.body)
            if dtype is not None:
                return dtype
    return None


class LaunchRun:
    """One launch in flight: places CTAs on SMs and gathers per-item results."""

    def __init__(
        self, env, gpu, memory, sms: list[SM], compiled, steps, fidelity: str, speed=None
    ) -> None:
        self.env = env
        self.gpu = gpu
        self.compiled = compiled
        self.launch = compiled.launch
        self.memory = memory
        # ``speed``: the clock model's (engine.py), else the launch's ceiling
        self.speed = sm_speed(self.launch, gpu) if speed is None else speed
        self.turnaround = gpu.cta_turnaround_cycles / self.speed  # SM cycles at its clock
        self.executor = Executor(env, gpu, memory, compiled, steps, self.speed)
        self.executor.resident = lambda: self.running
        self.sms = sms
        self.occ = occupancy(self.launch, gpu)
        per_sm = self.occ.ctas_per_sm
        if per_sm < 1:
            raise TilesimError(f"launch {self.launch.name!r}: no CTA fits on an SM")
        self.per_sm = per_sm
        self.executor.set_issue(per_sm, gpu)
        n = compiled.num_items
        persistent = self.launch.persistent_ctas
        self.persistent = min(persistent, n) if persistent > 0 else 0
        self.capacity = gpu.sm_count * per_sm  # CTA slots of the GPU
        slots = self.persistent or self.capacity
        self.slots = slots
        # One SM standing for all (module docstring): its CTA r is the grid's items
        # [r m, r m + m), one on each of the m SMs.
        self.copies = 1
        self.n_items = n
        self.room = self.capacity  # CTA slots simulated
        if lock_step(compiled, sms, env._now, slots, fidelity):
            self.copies = len(sms)
            self.n_items = -(-n // self.copies)
            self.room = per_sm
            self.sms = sms[:1]
            self.executor.resident = lambda: self.running * self.copies
        if self.copies > 1:
            self.plan = make_plan(compiled, per_sm, fidelity, False, self.n_items, LOCK_STEP_WARM)
        else:
            self.plan = make_plan(compiled, slots, fidelity, self.persistent > 0)
        self.starts: dict[int, float] = {}  # item -> time it started
        self.ends: dict[int, float] = {}  # first item of a CTA -> time the CTA finished
        self.ctrs: dict[int, list] = {}  # item -> counters
        self.resident = [0] * len(self.sms)
        self.free = [(0, i) for i in range(len(self.sms))]  # (resident, sm): least loaded first
        self.pending: list = []  # persistent CTAs (item lists) waiting for a slot, in order
        self.next_pending = 0
        self.next_item = 0  # non-persistent: the next grid item to place
        self.exhausted = False  # every CTA has been placed
        self.by_pos = None  # persistent: mean item duration per period position
        self.durations: dict = {}  # persistent: durations of the window's items
        self.running = 0
        self.held = 0.0  # slot-cycles: the integral of `running` over time
        self.held_since = 0.0
        self.done = Event(env)  # the driver, a simpy.Process, waits on it
        self.t0 = 0.0
        self.t1 = 0.0
        self.paced = 0.0  # set by totals()

    # -- which items run -----------------------------------------------------------

    def start(self) -> None:
        self.t0 = self.held_since = self.env._now
        self.memory.set_sm_speed(self.speed)  # launches run one after another
        n = self.compiled.num_items
        if self.persistent:
            # Persistent CTAs take their items statically (c, c+P, ...): the plan
            # is fixed in advance.
            plan = self.plan
            kept = (range(n),) if plan is None else (range(plan.head), range(plan.tail, n))
            p = self.persistent
            ctas = [[] for _ in range(p)]
            for rng in kept:
                for item in rng:
                    ctas[item % p].append(item)
            self.pending = [c for c in ctas if c]
        if n == 0:
            self.t1 = self.env._now
            self.done.succeed()
            return
        self._fill()

    def _next(self):
        """The next CTA to place (a tuple of work items), or None when all are placed."""
        if self.persistent:
            if self.next_pending >= len(self.pending):
                return None
            self.next_pending += 1
            return self.pending[self.next_pending - 1]
        i = self.next_item
        plan = self.plan
        if plan is not None and i == plan.head:
            if self._steady():
                i = plan.tail  # skip [head, tail): whole waves of a periodic grid
            elif plan.head + 2 * plan.slots <= plan.tail:
                # Not yet steady (CTAs that started in lockstep still drift apart):
                # one more wave in the head; tail - head stays whole waves.
                self.plan = dataclasses.replace(plan, head=plan.head + plan.slots)
            else:
                self.plan = None
        if i >= self.n_items:
            return None
        self.next_item = i + 1
        self.starts[i] = self.env._now
        return (i,)

    def _rate(self, end: int) -> float:
        """Cycles per item over the window ending at ``end``, from mean start times."""
        plan = self.plan
        st = self.starts
        p, w = plan.slots, plan.window
        late = sum(st[i] for i in range(end - p, end)) / p
        early = sum(st[i] for i in range(end - w - p, end - w)) / p
        return (late - early) / w

    def _steady(self) -> bool:
        plan = self.plan
        now = self._rate(plan.head)
        before = self._rate(plan.head - plan.slots)
        return abs(now - before) <= STEADY_TOLERANCE * abs(before)

    def _skipped_work(self, c: int) -> float:
        """Cycles persistent CTA ``c`` would have spent on its skipped items.

        Each skipped item costs the mean duration of the window's items at its
        position in the period.
        """
        plan = self.plan
        g = plan.period
        if self.by_pos is None:
            sums, counts = [0.0] * g, [0] * g
            for i, dur in self.durations.items():
                sums[i % g] += dur
                counts[i % g] += 1
            self.by_pos = [sums[k] / counts[k] for k in range(g)]
        first = plan.head + (c - plan.head) % self.persistent
        return sum(self.by_pos[i % g] for i in range(first, plan.tail, self.persistent))

    def _fill(self) -> None:
        free = self.free
        resident = self.resident
        cap = self.per_sm
        while free:
            count, sm = free[0]
            if count != resident[sm] or count >= cap:
                heapq.heappop(free)  # stale entry
                continue
            items = self._next()
            if items is None:
                self.exhausted = True
                return
            heapq.heapreplace(free, (count + 1, sm))
            resident[sm] = count + 1
            self._hold()
            self.running += 1
            Proc(self.env, self._cta(self.sms[sm], items))

    def _cta(self, sm: SM, items):
        env = self.env
        ex = self.executor
        roles = self.compiled.roles
        cta = Cta(sm)
        coords = self.compiled.coords
        name = self.launch.name
        plan = self.plan
        m = self.copies
        for item in items:
            if m > 1:  # items [item m, item m + m) of the grid, one on each SM
                first = item * m
                cta.G = coords(first)
                last = min(first + m, self.compiled.num_items)
                cta.twins = tuple(coords(i) for i in range(first + 1, last))
                cta.copies = last - first
            else:
                cta.G = coords(item)
            cta.reg = {}
            cta.item = item
            cta.ctr = ctr = [0.0] * N_COUNTERS
            self.ctrs[item] = ctr
            if self.persistent:
                self.starts[item] = env._now
            if sm.log is not None:
                cta.label = f"{name} #{item}"
            if ex.issue_cta[0]:  # the kernel's instructions outside its MMA loop
                busy, least = ex.issue_cta
                ev = Ready()
                delay = ex.issue(sm, env._now, busy, least) - env._now
                heapq.heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), ev))
                yield ev
            procs = [
                Proc(env, ex.run_role(cta, r, nodes)) for r, (_, nodes) in enumerate(roles) if r > 0
            ]
            yield from ex.run_role(cta, 0, roles[0][1])
            for proc in procs:
                if proc.callbacks is not None:
                    yield proc
            if self.persistent and plan is not None and plan.head - plan.window <= item < plan.head:
                self.durations[item] = env._now - self.starts[item]
        if cta.stores:
            cta.drain = Signal(env)
            yield cta.drain
        self.ends[items[0]] = env._now  # keyed by the CTA's first item
        if self.turnaround > 0 and self._more():
            # the slot takes its next CTA only after this one retires and that one launches
            ev = Ready()
            heapq.heappush(env._queue, (env._now + self.turnaround, NORMAL, next(env._eid), ev))
            yield ev
        self._finished(sm.index)

    def _more(self) -> bool:
        """Whether a CTA is still to be placed."""
        if self.persistent:
            return self.next_pending < len(self.pending)
        return not self.exhausted and self.next_item < self.n_items

    def _finished(self, sm: int) -> None:
        self.resident[sm] -= 1
        heapq.heappush(self.free, (self.resident[sm], sm))
        self._hold()
        self.running -= 1
        if not self.exhausted:
            self._fill()
        if self.exhausted and self.running == 0:
            self.t1 = self.env._now
            self.done.succeed()

    def _hold(self) -> None:
        """Add the slot-cycles held since the last change of `running`."""
        now = self.env._now
        self.held += self.running * (now - self.held_since)
        self.held_since = now

    # -- results -------------------------------------------------------------------

    def slot_fill(self, cycles: float) -> float:
        """The share of the GPU's CTA slots holding a CTA over the launch's ``cycles``
        (from `totals`); the waves that were skipped held every slot they had."""
        held = self.held
        plan = self.plan
        if plan is not None:
            if self.persistent:
                p = self.persistent
                held += sum(self._skipped_work(first % p) for first in sorted(self.ends))
            else:
                held += self._rate(plan.head) * (plan.tail - plan.head) * plan.slots
        room = self.room * cycles
        return min(1.0, held / room) if room > 0 else 0.0

    def dispatch_floor(self) -> float:
        """The fewest cycles the GPU's front end allows the launch: it starts a CTA every
        ``cta_dispatch_cycles`` (GPU-wide), so the last of n starts (n - 1) paces after
        the first and runs a CTA's time (the simulated CTAs' mean). The event loop starts
        CTAs as their slots free; this floor binds only for grids of many short CTAs
        (standard's row softmax at small N: ~1 CTA per 1.2 cycles)."""
        pace = self.gpu.cta_dispatch_cycles / self.speed
        if pace <= 0 or not self.ends:
            return 0.0
        n = len(self.pending) if self.persistent else self.compiled.num_items
        st = self.starts
        cta = sum(end - st[item] for item, end in self.ends.items()) / len(self.ends)
        return (n - 1) * pace + cta

    def totals(self) -> tuple[float, list, float]:
        """(cycles of the launch, counters, cycles stood in for by extrapolation)."""
        cycles = self.t1 - self.t0
        floor = self.dispatch_floor()
        # the cycles the front end's pace adds beyond the event loop's (the bound label)
        self.paced = 0.0
        ctrs = self.ctrs
        m = self.copies
        if m > 1:  # each simulated CTA's counters are its copies' average
            n = self.compiled.num_items
            ctrs = {i: [x * min(m, n - i * m) for x in c] for i, c in ctrs.items()}
        # a fixed order (items sorted), added one by one: bit-identical run to run
        total = _column_sums([ctrs[item] for item in sorted(ctrs)])
        plan = self.plan
        if plan is None:
            self.paced = max(0.0, floor - cycles)
            return max(cycles, floor), total, 0.0
        g, head, tail, window, _slots = plan.period, plan.head, plan.tail, plan.window, plan.slots
        if self.persistent:
            # Each persistent CTA would have finished later by its own skipped work
            # (its mix of causal trip counts is its own): the launch ends with the
            # last of them.
            end = max(
                t + self._skipped_work(first % self.persistent)
                for first, t in sorted(self.ends.items())
            )
            skipped_cycles = end - self.t1
        else:
            skipped_cycles = self._rate(head) * (tail - head)  # steady cycles per item
        # the window's average counters per position in the period
        reps = window // g
        by_pos = [[0.0] * N_COUNTERS for _ in range(g)]
        for i in range(head - window, head):
            by_pos[i % g] = list(map(add, by_pos[i % g], ctrs[i]))
        per_period = _column_sums(by_pos)
        first_full = -(-head // g) * g
        if head % g:  # the rest of the head's period, position by position
            for k, column in enumerate(zip(*by_pos[head % g :], strict=True)):
                total[k] = reduce(add, map(truediv, column, repeat(reps)), total[k])
        periods = (tail - first_full) // g
        for k in range(N_COUNTERS):
            total[k] += per_period[k] * periods / reps
        self.paced = max(0.0, floor - cycles - skipped_cycles)
        return max(cycles + skipped_cycles, floor), total, skipped_cycles

    @property
    def simulated_items(self) -> int:
        return len(self.ctrs)


def _column_sums(rows: list) -> list:
    """Per counter, the sum of ``rows`` in their order, one addition at a time from 0.0
    (as a loop of ``+=`` adds them: the same floats, at C speed)."""
    if not rows:
        return [0.0] * N_COUNTERS
    return [reduce(add, column, 0.0) for column in zip(*rows, strict=True)]


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n
