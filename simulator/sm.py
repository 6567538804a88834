"""Streaming multiprocessors: their pipes, and the processes that run CTA roles.

Each SM has a tensor pipe, a vector pipe (SFU and FP32 work back to back) and a
shared-memory pipe, each serving in arrival order with a known service time; a role
of a CTA is one SimPy process walking its compiled ops in steps (`simulator.steps`).
Where the compiled kernel's SASS is known, its issue cycles share the SM's warp
schedulers; spilled-register reloads end each step with L2 round trips. How each of
these is modelled, and the measurements behind it: docs/engine.md, "Streaming
multiprocessors".
"""

from __future__ import annotations

from heapq import heappush

from simpy.core import NORMAL
from simpy.events import PENDING as _PENDING

from .environment import Ready, Signal
from .memory import (
    C_EXP,
    C_FLOPS,
    C_FP32,
    C_FP32_PIPE,
    C_SFU,
    C_SMEM,
    C_TENSOR,
    lerp,
)
from .program import OP_ARRIVE, OP_LOAD, OP_LOOP, OP_MMA, OP_STORE, OP_VECTOR, OP_WAIT

PIPES = ("tensor", "sfu", "fp32", "smem")
_ONCE = (0,)  # the steps of a block that is not a loop body run by _block itself
P_TENSOR, P_SFU, P_FP32, P_SMEM = range(4)


class SM:
    __slots__ = (
        "index",
        "tensor_free",
        "vector_free",
        "smem_free",
        "store_free",
        "issue_free",
        "log",
    )

    def __init__(self, index: int, log: list | None = None) -> None:
        self.index = index
        self.tensor_free = 0.0
        self.vector_free = 0.0  # SFU and FP32 work share one timeline
        self.smem_free = 0.0
        self.store_free = 0.0  # its store port (Memory.store)
        self.issue_free = 0.0  # the warp schedulers (set_issue)
        self.log = log  # timeline: (pipe, start, end, label) busy intervals, or None


class Done:
    """An event that has already happened (waiting on it costs nothing)."""

    callbacks = None
    _ok = True
    _value = None


DONE = Done()


class Cta:
    """One work item in flight on an SM: its coordinates, event registry, counters."""

    __slots__ = (
        "sm",
        "G",
        "reg",
        "ctr",
        "stores",
        "drain",
        "item",
        "label",
        "touched",
        "twins",
        "copies",
    )

    def __init__(self, sm: SM) -> None:
        self.sm = sm
        self.G = ()
        # a CTA standing for others in lock step on the other SMs (scheduler.py):
        # their coordinates, and how many it stands for (itself included)
        self.twins: tuple = ()
        self.copies = 1
        self.reg: dict = {}
        self.ctr: list = []
        self.stores = 0  # stores in flight
        self.drain = None  # event the CTA waits on for its stores
        self.item = 0
        self.label = ""
        self.touched = 0.0  # L2 bytes its loads accessed and its stores allocated


class RoleState:
    """Loop bookkeeping of one role process."""

    __slots__ = ("role", "L", "path", "tables", "mult", "rule", "bctx", "rv", "waiting", "cta")

    def __init__(self, role: int, depth: int) -> None:
        self.role = role
        self.L = [0] * depth  # loop variable values (the representative in a macro-step)
        self.path = [()] * (depth + 1)  # path[d]: step indices of the d outermost loops
        self.tables = [None] * depth  # step table of the loop at each depth
        self.mult = 1.0  # work multiplier from coalesced outer loops
        self.rule = True  # replayed tiles of a coalesced outer loop hit in L2
        self.bctx = None  # (depth, first iteration, count) of the innermost coalesced outer step
        # Per loop: L2 bytes the GPU touches per iteration, estimated as this CTA's
        # footprint per iteration times the CTAs resident (the reuse distance of a
        # tile the next iteration touches again; the rule of coalesced outer steps).
        self.rv = [0.0] * depth
        self.waiting = ""  # the dep it last waited on (for deadlock reports)
        self.cta = None


def _at_warps(cycles: tuple, k: float) -> float:
    """``cycles`` (at 1..4 warps per scheduler) at k warps: linear between, scaled beyond."""
    if not cycles:
        return 0.0
    if k >= 4:
        return cycles[3] * k / 4
    if k <= 1:
        return cycles[0]
    i = int(k)
    return cycles[i - 1] + (cycles[i] - cycles[i - 1]) * (k - i)


def _sum(ce, G, L, d: int, a: int, cnt: int):
    """Sum of a compiled expression over iterations a..a+cnt-1 of the loop at depth d."""
    if ce.fn is None:
        return ce.const * cnt
    if cnt == 1 or d not in ce.depths:
        return ce.fn(G, L) * cnt
    # A macro-step: the same sum recurs for every CTA with the same relevant grid
    # coordinates and outer loop values, so it is computed once.
    key = (tuple([G[i] for i in ce.gsel]), tuple(L[:d]), a, cnt)
    cache = ce.cache
    s = cache.get(key)
    if s is None:
        fn = ce.fn
        keep = L[d]
        s = 0
        for j in range(a, a + cnt):
            L[d] = j
            s += fn(G, L)
        L[d] = keep
        cache[key] = s
    return s


class Executor:
    """Runs the roles of CTAs of one launch; holds the per-launch constants."""

    def __init__(self, env, gpu, memory, compiled, steps, speed: float = 1.0) -> None:
        self.env = env
        self.mem = memory
        self.compiled = compiled
        self.steps = steps  # StepTables of the fidelity
        path = compiled.launch.mma_path
        # ``speed``: the launch's SM clock over gpu.sm_clock_hz (scheduler.sm_speed)
        self.tensor_rate = {
            dt: gpu.tensor_flop_per_clk_per_sm(dt, path) * speed for dt in ("fp16", "bf16", "fp8")
        }
        self.speed = speed
        # a wgmma's result comes this long after its pipe time (in cycles of sm_clock_hz)
        self.mma_latency = gpu.wgmma_latency_cycles / speed if path == "wgmma" else 0.0
        self.op_wait = True  # a role waits for its Vector ops' pipe time (not with set_issue)
        self.sfu_cost = 1.0 / (gpu.sfu_ops_per_clk_per_sm * speed)
        self.fp32_cost = 1.0 / (gpu.fp32_ops_per_clk_per_sm * speed)
        self.vector_slowdown = [
            vector_slowdown(role.warps, gpu) for role in compiled.launch.program.roles
        ]
        self.l2_capacity = gpu.l2_bytes
        self.spill_covers = compiled.launch.spill_reload_covers
        # issue cycles (set_issue), per role per step of its innermost MMA loop and once
        # per CTA: (the schedulers' time they take, the least time they take)
        self.issue_step = [(0.0, 0.0)] * len(compiled.roles)
        self.issue_cta = (0.0, 0.0)
        self.max_depth = max((_depth(nodes) for _, nodes in compiled.roles), default=0)
        self.active: dict = {}  # running role states (deadlock reports)
        self._gsel: dict = {}  # id of a loop or load group -> grid positions it reads
        self._rows: dict = {}  # _work_rows cache
        self._loads: dict = {}  # _load_steps cache
        self._groups: dict = {}  # id of a load group -> (its first use, its ids)
        self.resident = lambda: 1  # CTAs on the GPU now; set by the scheduler

    # -- events --------------------------------------------------------------------

    def _event(self, cta: Cta, key):
        reg = cta.reg
        ev = reg.get(key)
        if ev is None:
            ev = Signal(self.env)
            reg[key] = ev
        return ev

    def _mark(self, cta: Cta, key) -> None:
        """Record that ``key`` happened now."""
        ev = cta.reg.get(key)
        if ev is None:
            cta.reg[key] = DONE
        elif ev.callbacks is not None and ev._value is _PENDING:
            ev.succeed()

    def _dep_event(self, cta: Cta, st: RoleState, dep):
        s = dep.shared
        if s == 0:
            path = ()
        elif dep.offset:
            d = s - 1
            table = st.tables[d]
            sigma = st.path[d + 1][d]
            t = table.starts[sigma] - dep.offset
            if t < 0:
                return None  # before the first iteration: no wait
            target = table.step_of(t)
            if table.counts[sigma] > 1 and dep.role != st.role:
                # A ring buffer (or ping-pong) between roles, seen from a macro-step:
                # the real consumer releases a slot per iteration, progressively
                # through its step, and the producer refills it at once; a lumped
                # step can only say "released at the end". Waiting for the step
                # before keeps the producer as far ahead as the ring lets it in
                # steady state instead of phase-locking the roles (steps.py).
                target -= 1
                if target < 0:
                    return None
            path = st.path[d] + (target,)
        else:
            path = st.path[s]
        key = (dep.role, dep.name, path)
        ev = cta.reg.get(key)
        if ev is None:
            ev = Signal(self.env)
            cta.reg[key] = ev
        return ev

    # -- the role process ------------------------------------------------------------

    def run_role(self, cta: Cta, role: int, nodes):
        st = RoleState(role, self.max_depth)
        st.cta = cta
        self.active[id(st)] = st
        yield from self._block(cta, st, nodes, 0)
        del self.active[id(st)]

    def _block(
        self, cta: Cta, st: RoleState, nodes, depth: int, prefetched: bool = False, loop=None
    ):
        """Run ``nodes`` once (the current step of the enclosing loop), or, given the
        innermost ``loop`` they are the body of, once per step of that loop: one
        generator for the whole loop instead of one per step (the hot path)."""
        env = self.env
        queue = env._queue
        eid = env._eid
        G = cta.G
        L = st.L
        ctr = cta.ctr
        sm = cta.sm
        reg = cta.reg
        log = sm.log
        if loop is not None:
            d = depth - 1
            table = st.tables[d]
            starts, counts = table.starts, table.counts
            steps = range(len(starts))
            base = st.path[d]
            p = loop.prefetch
            nxt = 0
            has_mma = loop.has_mma
            spills = self.spill_covers if has_mma else ()
            issue, floor = self.issue_step[st.role] if has_mma else (0.0, 0.0)
            rows = self._work_rows(loop, G, L, d, table)
            pre = self._load_steps(loop.loads, G, L, d, table) if p else None
            if p:  # the loads of the first p iterations are issued before the loop
                while nxt < len(starts) and starts[nxt] < p:
                    self._prefetch(cta, st, loop, d, base, nxt, pre)
                    nxt += 1
        else:
            spills = ()
            issue = floor = 0.0
            if depth:
                d = depth - 1
                table = st.tables[d]
                sigma = st.path[depth][d]
                a = table.starts[sigma]
                cnt = table.counts[sigma]
            else:
                d, a, cnt = 0, 0, 1
            ptup = st.path[depth]
            steps = _ONCE
            rows = (self._block_row(nodes, G, L, d, a, cnt),)
        for sigma in steps:
            if loop is not None:
                a = starts[sigma]
                cnt = counts[sigma]
                ptup = st.path[depth] = base + (sigma,)
                if p:  # iteration j issues the loads of iteration j + p
                    end = a + cnt + p
                    while nxt < len(starts) and starts[nxt] < end:
                        self._prefetch(cta, st, loop, d, base, nxt, pre)
                        nxt += 1
                L[d] = a
            for node, work in zip(nodes, rows[sigma], strict=True):
                kind = node.kind
                if OP_MMA <= kind <= OP_WAIT:  # Mma, Vector or Wait (adjacent codes)
                    for dep in node.deps:
                        if dep.offset:
                            ev = self._dep_event(cta, st, dep)
                            if ev is None:
                                continue
                        else:  # the common case, inlined: same iteration
                            key = (dep.role, dep.name, st.path[dep.shared])
                            ev = reg.get(key)
                            if ev is None:
                                ev = reg[key] = Signal(env)
                        if ev.callbacks is not None and (ev._key is None or env.pending(ev)):
                            st.waiting = dep.name
                            yield ev
                    if kind == OP_WAIT:
                        continue
                    now = env._now
                    mult = st.mult
                    if kind == OP_MMA:
                        flops = work * mult
                        busy = flops / self.tensor_rate[node.dtype]
                        start = sm.tensor_free if sm.tensor_free > now else now
                        end = start + busy
                        sm.tensor_free = end
                        ctr[C_FLOPS] += flops
                        ctr[C_TENSOR] += busy
                        if log is not None and busy:
                            log.append((P_TENSOR, start, end, cta.label))
                        # its result, a latency later: the pipe is free for others meanwhile
                        end += self.mma_latency * cnt * mult
                    else:
                        exp_sum, fp32_sum, smem_sum = work
                        exp = exp_sum * mult
                        fp32 = fp32_sum * mult
                        sfu_busy = exp * self.sfu_cost
                        fp32_busy = fp32 * self.fp32_cost
                        end = now
                        if exp or fp32:
                            # SFU then FP32 share, back to back on the SM's one vector
                            # timeline (module docstring)
                            start = sm.vector_free if sm.vector_free > now else now
                            mid = start + sfu_busy
                            end = sm.vector_free = mid + fp32_busy
                            ctr[C_EXP] += exp
                            ctr[C_SFU] += sfu_busy
                            ctr[C_FP32] += fp32
                            ctr[C_FP32_PIPE] += fp32_busy
                            if log is not None:
                                if exp:
                                    log.append((P_SFU, start, mid, cta.label))
                                if fp32:
                                    log.append((P_FP32, mid, end, cta.label))
                            slow = self.vector_slowdown[st.role]
                            if not self.op_wait:
                                end = now  # the issue cycles hold it (set_issue)
                            elif slow > 1.0:  # too few warps to issue at the pipes' rate
                                floor = now + (sfu_busy + fp32_busy) * slow
                                if floor > end:
                                    end = floor
                        if smem_sum is not None:
                            # layout conversions: the tile goes through shared memory
                            # after the arithmetic that produced it (module docstring)
                            busy = smem_sum * mult * self.mem.smem_cost
                            start = sm.smem_free if sm.smem_free > end else end
                            sm.smem_free = start + busy
                            # (with the issue cycles too: module docstring)
                            end = start + busy
                            ctr[C_SMEM] += busy
                            if log is not None and busy:
                                log.append((P_SMEM, start, end, cta.label))
                    if node.async_:
                        if node.id is not None:
                            key = (st.role, node.id, ptup)
                            if end > now:
                                ev = reg.get(key)
                                if ev is None:
                                    ev = reg[key] = Ready()
                                else:
                                    ev._ok = True
                                    ev._value = None
                                env.schedule(ev, NORMAL, end - now)
                            else:
                                self._mark(cta, key)
                        continue
                    if end > now:
                        ev = Ready()
                        heappush(queue, (now + (end - now), NORMAL, next(eid), ev))
                        yield ev
                    if node.id is not None:
                        self._mark(cta, (st.role, node.id, ptup))
                elif kind == OP_LOAD:
                    if prefetched:
                        continue  # issued by the loop's prefetcher
                    self._issue_loads(
                        cta, st, node.group, ptup, d, a, cnt, node.ahead, loop is None
                    )
                elif kind == OP_STORE:
                    self._store(cta, st, node.group, d, a, cnt)
                elif kind == OP_ARRIVE:
                    self._mark(cta, (st.role, node.id, ptup))
                else:  # OP_LOOP
                    yield from self._loop(cta, st, node, depth)
            if issue:  # the step's issue cycles (module docstring)
                n = cnt * st.mult
                now = env._now
                ev = Ready()
                delay = self.issue(sm, now, issue * n, floor * n) - now
                heappush(queue, (now + delay, NORMAL, next(eid), ev))
                yield ev
            if spills:
                yield from self._spill_reloads(spills, cnt * st.mult)

    def set_issue(self, ctas_per_sm: int, gpu) -> None:
        """The launch's issue cycles at the warps per scheduler its resident CTAs give
        (module docstring); its Vector ops then only occupy their pipes."""
        launch = self.compiled.launch
        if not (launch.issue_per_step or launch.issue_per_cta):
            return
        resident = min(ctas_per_sm, -(-launch.num_ctas // gpu.sm_count))
        # the warps that run the replayed code: those of the roles with MMAs (a
        # warp-specialised kernel's load warp is not replayed)
        per_sched = [
            role.warps / gpu.warp_schedulers_per_sm if _has_mma(nodes) else 0.0
            for role, (_, nodes) in zip(launch.program.roles, self.compiled.roles, strict=True)
        ]
        if not any(per_sched):  # no MMA role (a hand-written trace): all its warps
            per_sched = [role.warps / gpu.warp_schedulers_per_sm for role in launch.program.roles]
        k = resident * sum(per_sched)
        speed = self.speed

        def share(cycles, mine):
            # the schedulers' time for these warps' share of a full pass of all k, and
            # their own pass alone
            return _at_warps(cycles, k) * mine / k / speed, _at_warps(cycles, mine) / speed

        self.issue_step = [share(launch.issue_per_step, m) if m else (0.0, 0.0) for m in per_sched]
        self.issue_cta = share(launch.issue_per_cta, sum(per_sched))
        self.op_wait = False

    @staticmethod
    def issue(sm: SM, now: float, busy: float, least: float) -> float:
        """When issue work asked for at ``now`` ends. The schedulers serve the warps on
        the SM in turn, so the work shares them with the work still left from earlier
        requests (``backlog``): it ends ``busy`` later, plus as much of its own length
        as the backlog overlaps it (processor sharing between the two), and takes at
        least ``least``. The schedulers' own time grows by ``busy``."""
        backlog = sm.issue_free - now
        if backlog > 0:
            sm.issue_free += busy
            end = now + busy + (backlog if backlog < busy else busy)
        else:
            sm.issue_free = now + busy
            end = now + busy
        return max(end, now + least)

    def _spill_reloads(self, covers, steps: float):
        """The waits of ``steps`` loop steps on reloaded spills (module docstring)."""
        mem = self.mem
        now = self.env._now
        trip = lerp(mem.l2_lerp, mem.l2srv.busy_at(now))
        wait = sum(trip - c for c in covers if c < trip) * steps
        if wait > 0:
            ev = Ready()
            env = self.env
            heappush(env._queue, (env._now + wait, NORMAL, next(env._eid), ev))
            yield ev

    def _loop(self, cta: Cta, st: RoleState, node, depth: int):
        G = cta.G
        L = st.L
        trips = node.trips.value(G, L)
        base = st.path[depth]
        if trips <= 0:
            for name in node.aliases:
                self._mark(cta, (st.role, name, base))
            return
        saved_mult, saved_rule, bctx = st.mult, st.rule, st.bctx
        if bctx is not None and bctx[0] == depth - 1:
            # A loop directly inside a coalesced outer step runs once, for the
            # step's middle iteration; its work is scaled to all the iterations
            # the step stands for (their trip counts may differ: causal).
            bd, ba, bcnt = bctx
            if bd in node.trips.depths:
                keep = L[bd]
                total = 0
                for j in range(ba, ba + bcnt):
                    L[bd] = j
                    total += max(node.trips.fn(G, L), 0)
                L[bd] = keep
                st.mult = saved_mult * total / trips
            else:
                st.mult = saved_mult * bcnt
            st.bctx = None
        table = self.steps.table(trips, node.nested, node.exposed)
        st.tables[depth] = table
        starts, counts = table.starts, table.counts
        nsteps = len(starts)
        p = node.prefetch
        if not node.nested:  # the common case: the body runs every step itself
            yield from self._block(cta, st, node.body, depth + 1, p > 0, node)
            nsteps = 0
        nxt = 0
        if p and nsteps:
            while nxt < nsteps and starts[nxt] < p:
                self._prefetch(cta, st, node, depth, base, nxt)
                nxt += 1
        for sigma in range(nsteps):
            a = starts[sigma]
            cnt = counts[sigma]
            st.path[depth + 1] = base + (sigma,)
            if p:
                end = a + cnt + p
                while nxt < nsteps and starts[nxt] < end:
                    self._prefetch(cta, st, node, depth, base, nxt)
                    nxt += 1
            if node.nested and cnt > 1:
                # Coalesced outer step: nested loops run once, for the middle
                # iteration, with their work scaled by the step's iteration count.
                L[depth] = a + cnt // 2
                st.bctx = (depth, a, cnt)
                st.rule = st.rv[depth] < self.l2_capacity
                touched = cta.touched
                yield from self._block(cta, st, node.body, depth + 1, p > 0)
                st.rv[depth] = (cta.touched - touched) / cnt * self.resident()
                st.bctx = None
                st.rule = saved_rule
            else:
                L[depth] = a
                touched = cta.touched
                yield from self._block(cta, st, node.body, depth + 1, p > 0)
                st.rv[depth] = (cta.touched - touched) * self.resident()
        st.mult, st.rule, st.bctx = saved_mult, saved_rule, bctx
        last = base + (len(starts) - 1,)
        for name in node.aliases:
            src = cta.reg.get((st.role, name, last))
            dst_key = (st.role, name, base)
            dst = cta.reg.get(dst_key)
            if src is None:
                src = self._event(cta, (st.role, name, last))
            if dst is None:
                cta.reg[dst_key] = src
            elif dst is not src:
                _chain(src, dst)

    # -- loads and stores -------------------------------------------------------------

    def _prefetch(
        self, cta: Cta, st: RoleState, node, depth: int, base: tuple, sigma: int, pre=None
    ):
        table = st.tables[depth]
        a, cnt = table.starts[sigma], table.counts[sigma]
        path = base + (sigma,)
        if pre is not None and not cta.twins:
            items, extra = pre[sigma]
            self._issue_items(cta, st, node.loads, path, cnt, node.prefetch, items, extra)
            return
        keep = st.L[depth]
        st.L[depth] = a
        self._issue_loads(cta, st, node.loads, path, depth, a, cnt, node.prefetch)
        st.L[depth] = keep

    def _block_row(self, nodes, G, L, d: int, a: int, cnt: int) -> list:
        """`_work_row` of a block run once, computed once per distinct (grid coordinates
        its sums read, outer loop values, step)."""
        gsel = self._gsel.get(id(nodes))
        if gsel is None:
            gsel = self._gsel[id(nodes)] = _work_gsel(nodes)
        key = (id(nodes), tuple([G[i] for i in gsel]), tuple(L[:d]), a, cnt)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = _work_row(nodes, G, L, d, a, cnt)
        return row

    def _work_rows(self, loop, G, L, d: int, table) -> list:
        """`_work_row` of each step of ``loop`` (the body's sums), computed once per
        distinct (grid coordinates the sums read, outer loop values, step table)."""
        gsel = self._gsel.get(id(loop))
        if gsel is None:
            gsel = self._gsel[id(loop)] = _work_gsel(loop.body)
        key = (id(loop), tuple([G[i] for i in gsel]), tuple(L[:d]), id(table))
        rows = self._rows.get(key)
        if rows is None:
            keep = L[d]
            rows = []
            for a, cnt in zip(table.starts, table.counts, strict=True):
                L[d] = a
                rows.append(_work_row(loop.body, G, L, d, a, cnt))
            L[d] = keep
            self._rows[key] = rows
        return rows

    def _load_steps(self, group, G, L, d: int, table):
        """`_load_items` of ``group`` at each step of the loop at depth ``d``, computed
        once per distinct (tiles' grid coordinates, outer loop values, step table);
        None for a group with streaming loads (every CTA's tiles are its own)."""
        if any(m.streaming for m in group):
            return None
        gsel = self._gsel.get(id(group))
        if gsel is None:
            gsel = self._gsel[id(group)] = tuple(sorted({i for m in group for i in m.gsel}))
        key = (id(group), tuple([G[i] for i in gsel]), tuple(L[:d]), id(table))
        steps = self._loads.get(key)
        if steps is None:
            keep = L[d]
            steps = []
            for a, cnt in zip(table.starts, table.counts, strict=True):
                L[d] = a
                steps.append(self._load_items(group, G, L, d, a, cnt))
            L[d] = keep
            self._loads[key] = steps
        return steps

    def _issue_loads(
        self, cta, st: RoleState, group, path, d: int, a: int, cnt: int, ahead: int, outer=False
    ):
        """Issue a run of loads as one transfer; one event completes all of them.
        ``outer``: the step is one of a loop that holds a loop (see `_load_items`)."""
        items, extra = self._load_items(group, cta.G, st.L, d, a, cnt, outer)
        self._issue_items(cta, st, group, path, cnt, ahead, items, extra, (d, a, outer))

    def _load_items(self, group, G, L, d: int, a: int, cnt: int, outer: bool = False) -> tuple:
        """((key, bytes), ...) of a run of loads at a step, and the bytes of back-to-back
        repeats within it (hits).

        A coalesced step of a loop that holds a loop runs its inner loop once, for
        all its iterations: the inner tiles are touched once a step, where the kernel
        touches them once an iteration with one iteration's streaming tiles between.
        So the step's streaming tiles take one iteration's share of the L2 (their
        entry's third field), not all of theirs at once, which would push the inner
        tiles out of an L2 they fit in."""
        items: list = []
        extra = 0.0  # bytes of back-to-back repeats within the step (hits)
        for node in group:
            key = node.key
            if cnt == 1:  # the common case, inlined
                nbe = node.nbytes
                items.append(
                    (
                        key.const if key.fn is None else key.fn(G, L),
                        nbe.const if nbe.fn is None else nbe.fn(G, L),
                    )
                )
                continue
            if key.fn is None or d not in key.depths:
                nb = _sum(node.nbytes, G, L, d, a, cnt)
                if cnt > 1:
                    items.append((key.value(G, L), nb / cnt))
                    extra += nb - nb / cnt
                else:
                    items.append((key.value(G, L), nb))
                continue
            if node.streaming:  # one L2 entry for the step's tiles (program._set_streaming)
                nb = _sum(node.nbytes, G, L, d, a, cnt)
                entry = (key.value(G, L), cnt, nb / cnt) if outer else (key.value(G, L), cnt)
                items.append((entry, nb))
                continue
            ckey = (tuple([G[i] for i in node.gsel]), tuple(L[:d]), a, cnt)
            tiles = node.cache.get(ckey)
            if tiles is None:
                tiles = node.cache[ckey] = self._tiles(node, G, L, d, a, cnt)
            items.extend(tiles)
        return items, extra

    def _issue_items(
        self, cta, st: RoleState, group, path, cnt: int, ahead: int, items, extra, where=None
    ):
        """Issue ``items`` of a run of loads as one transfer; one event completes them.

        A coalesced step stands for ``cnt * mult`` iterations, each of which waits
        for its own tiles' latency unless they were issued early enough: ``ahead``
        iterations (prefetch, or a ring buffer's gating wait) plus the iterations
        until their first use (see `Memory.load` and steps.py).
        """
        facts = self._groups.get(id(group))
        if facts is None:
            facts = self._groups[id(group)] = (min([m.use for m in group]), [m.id for m in group])
        lead = ahead + facts[0]
        reg = cta.reg
        role = st.role
        keys = [(role, i, path) for i in facts[1]]
        ev = None
        for k in keys:
            old = reg.get(k)
            if old is None:
                continue
            if ev is None:
                ev = old  # a waiter got here first: complete its event
            else:
                _chain(ev, old)
        if ev is None:
            ev = Signal(self.env)
        for k in keys:
            if k not in reg:
                reg[k] = ev
        if cta.twins:
            d, a, outer = where
            twins = []
            for G in cta.twins:
                twins += self._load_items(group, G, st.L, d, a, cnt, outer)[0]
            cta.touched += self.mem.load_copies(
                cta.sm, items, twins, cta.copies, extra, ev, cta.ctr, cnt, lead if lead > 1 else 1
            )
            return
        cta.touched += self.mem.load(
            cta.sm,
            items,
            extra,
            st.mult - 1.0,
            st.rule,
            ev,
            cta.ctr,
            cnt * st.mult,
            lead if lead > 1 else 1,
        )

    @staticmethod
    def _tiles(node, G, L, d: int, a: int, cnt: int) -> tuple:
        """(key, bytes) of each iteration of a macro-step."""
        kfn, nbe = node.key.fn, node.nbytes
        keep = L[d]
        out = []
        if nbe.fn is None or d not in nbe.depths:
            nb = nbe.value(G, L)
            for j in range(a, a + cnt):
                L[d] = j
                out.append((kfn(G, L), nb))
        else:
            nfn = nbe.fn
            for j in range(a, a + cnt):
                L[d] = j
                out.append((kfn(G, L), nfn(G, L)))
        L[d] = keep
        return tuple(out)

    def _store(self, cta: Cta, st: RoleState, group, d: int, a: int, cnt: int) -> None:
        """Issue a run of stores as one transfer, once all their deps have happened."""
        items, extra = self._store_items(group, cta.G, st.L, d, a, cnt)
        pending = []
        for node in group:
            for dep in node.deps:
                ev = self._dep_event(cta, st, dep)
                if ev is not None and ev.callbacks is not None and self.env.pending(ev):
                    pending.append(ev)
        cta.stores += 1
        if cta.twins:
            twins = []
            for G in cta.twins:
                twins += self._store_items(group, G, st.L, d, a, cnt)[0]
            store = self.mem.store_copies
            args = (cta.sm, items, twins, cta.copies, extra, self._store_done, cta, cta.ctr)
        else:
            store = self.mem.store
            args = (cta.sm, items, extra, st.mult - 1.0, st.rule, self._store_done, cta, cta.ctr)
        if not pending:
            cta.touched += store(*args)
            return
        state = [len(pending), store, args, cta]
        for ev in pending:
            ev.callbacks.append(lambda _ev, s=state: self._store_ready(s))

    def _store_items(self, group, G, L, d: int, a: int, cnt: int) -> tuple:
        """((key, bytes), ...) of a run of stores at a step, and the bytes of repeated
        writes of the same tiles within it."""
        items: list = []
        extra = 0.0
        for node in group:
            key = node.key
            if cnt == 1:
                nbe = node.nbytes
                items.append(
                    (
                        key.const if key.fn is None else key.fn(G, L),
                        nbe.const if nbe.fn is None else nbe.fn(G, L),
                    )
                )
            elif key.fn is None or d not in key.depths:
                nb = _sum(node.nbytes, G, L, d, a, cnt)
                items.append((key.value(G, L), nb / cnt))
                extra += nb - nb / cnt
            else:
                items.extend(self._tiles(node, G, L, d, a, cnt))
        return items, extra

    def _store_ready(self, state) -> None:
        state[0] -= 1
        if state[0] == 0:
            _, store, args, cta = state
            cta.touched += store(*args)

    def _store_done(self, cta: Cta, now: float) -> None:
        cta.stores -= 1
        if cta.stores == 0 and cta.drain is not None:
            cta.drain.succeed()


def _work_row(nodes, G, L, d: int, a: int, cnt: int) -> list:
    """Per node of a block, the sums over the step's ``cnt`` iterations from ``a`` of
    its work (before the coalesced outer loops' multiplier): an Mma's FLOPs, a
    Vector's (exp, fp32, smem bytes or None); None for the others. ``L[d] == a``."""
    row = []
    for node in nodes:
        kind = node.kind
        if kind == OP_MMA:
            row.append(_step_sum(node.flops, G, L, d, a, cnt))
        elif kind == OP_VECTOR:
            ce = node.smem
            smem = _sum(ce, G, L, d, a, cnt) if ce.fn is not None or ce.const else None
            row.append(
                (
                    _step_sum(node.exp, G, L, d, a, cnt),
                    _step_sum(node.fp32, G, L, d, a, cnt),
                    smem,
                )
            )
        else:
            row.append(None)
    return row


def _step_sum(ce, G, L, d: int, a: int, cnt: int):
    if ce.fn is None:
        return ce.const * cnt
    if cnt == 1:
        return ce.fn(G, L)
    return _sum(ce, G, L, d, a, cnt)


def _work_gsel(nodes) -> tuple:
    """Grid positions that the work expressions of ``nodes`` read."""
    out: set = set()
    for node in nodes:
        for ce in (node.flops, node.exp, node.fp32, node.smem):
            if ce is not None:
                out.update(ce.gsel)
    return tuple(sorted(out))


def vector_slowdown(warps: int, gpu) -> float:
    """How much slower than the SM's SFU/FP32 rates a role of ``warps`` warps runs
    its vector work on its own: it reaches ``min(warps, schedulers)`` of the SM's
    warp schedulers, and each of them, holding fewer than
    ``gpu.vector_warps_per_scheduler`` of its warps, stalls on dependent
    instructions in proportion. The pipes stay free for other CTAs meanwhile: this
    bounds the role's time, not the SM's throughput."""
    schedulers = gpu.warp_schedulers_per_sm
    used = min(max(warps, 1), schedulers)
    per_scheduler = max(warps, 1) / used
    return schedulers / used * max(1.0, gpu.vector_warps_per_scheduler / per_scheduler)


def _chain(src, dst) -> None:
    """Trigger ``dst`` when ``src`` has happened."""

    def fire(_ev=None) -> None:
        if dst._value is _PENDING:
            dst.succeed()

    if src.callbacks is None or not src.env.pending(src):
        fire()
    else:
        src.callbacks.append(fire)


def _has_mma(nodes) -> bool:
    return any(
        node.kind == OP_MMA or (node.kind == OP_LOOP and _has_mma(node.body)) for node in nodes
    )


def _depth(nodes) -> int:
    best = 0
    for node in nodes:
        if node.kind == OP_LOOP:
            best = max(best, 1 + _depth(node.body))
    return best
