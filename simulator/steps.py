"""How a loop of T iterations is cut into simulation steps, per fidelity.

``detailed``: one step per iteration.

``fast``: the first ``HEAD`` and last ``TAIL`` iterations stay exact (the
pipeline fills and drains there: prologue loads, the last partial tile), and the
steady middle is cut into about ``MACRO`` macro-steps of nearly equal size,
reached through a ramp of steps that grow by ``RAMP`` (2, 3, 4, 5, 6, 7, 8, 10,
12, 15, ... iterations). A step's loads are prefetched during the step before
it, so a step r times longer than the one before asks the memory system for r
times the kernel's real rate for one step: a sudden jump from one iteration to
many asks for a burst the kernel never makes, and so does a steep ramp when the
loop runs near a bandwidth limit. A ramp of 2x stalled every ramp step of v2's
backward dQ pass (K and V from a warm L2, 60-80% of the L2 bandwidth: twice that
rate does not exist), 4-12% slower than ``detailed``; 1.25x (and six steady
steps instead of four, which also keeps v3's producer/consumer loops closer)
keeps it within 2% up to about 80% utilisation, for about ten more steps per
long loop. At saturation no ramp helps: the step's loads are issued whole, one
step early, and must all arrive before its first iteration, so each growing
step stalls by its growth, about one steady step in all (tests/simulator's
fidelity test marks that case); the cure is in the engine (start a macro-step
when its first iteration's tiles are in, or issue its loads at the kernel's
rate).
A macro-step of c iterations does the work of all c: its loads move the bytes
of all c tiles (each tile looked up in L2 on its own), its Mma and Vector ops
occupy the pipes for the sum of the c iterations' service times. So a loop
costs O(HEAD + TAIL + MACRO) events whatever its length; only the L2 lookups
(one per tile) still grow with it. A loop that holds another loop is coalesced
too, but its macro-steps run the inner loop once, for their middle iteration,
with the work scaled (see sm.py).

Latency. A macro-step's loads arrive together, after one latency, where the c
iterations it stands for each wait for their own tile. A tile issued ``lead``
iterations before its first use, with latency L and transfer time X, lets the
kernel run an iteration every max(T_iter, (L + X) / lead) at best; so c real
iterations need c (L + X) / lead of load time, against D + L for the step
(D = c X, its measured transfer). A macro-step's loads are ready after the
longer of the two, and since they are issued one step early, steady state
matches both where latency is hidden and where it binds (lead 1: every
iteration pays L).

Exposed loops. A loop whose loads are used in the iteration that issues them
(no prefetch) pays the full latency every iteration, and identical CTAs run it
in lockstep, all loading then all computing. A macro-step's one long transfer
per CTA gets a larger share of a bandwidth that the real bursts contend for,
about 20% too fast on v1 with a thrashing L2, so such loops run exactly (one
step per iteration); v1's outer loop still coalesces, so its cost stays about
4 inner loops per CTA.

The table depends only on T (and on whether the loop is nested), so a producer
and a consumer role looping over the same trip count step in lockstep, and deps
``x@-k`` map to steps through it: a step waits for the step holding iteration
``first - k``. Between roles (a producer refilling a ring buffer, ping-pong
consumers) a macro-step waits for the step before that one: the real consumer
releases a slot every iteration and the producer refills it at once, which a
lumped step can only express as "released at the end of the step"; waiting for
that would phase-lock producer and consumers (a bubble as long as the step),
while waiting one step earlier keeps the producer as far ahead as its ring
allows, which is what the kernel does in steady state.
"""

from __future__ import annotations

from bisect import bisect_right

FIDELITIES = ("fast", "detailed")

HEAD = 2  # exact iterations at the start of a coalesced loop (>= num_stages - 1 = 2)
TAIL = 1  # exact iterations at the end
MACRO = 6  # macro-steps in between
RAMP = 1.25  # growth of the ramp's steps (each at least one iteration longer)
# A loop holding another loop: its macro-steps scale the inner loop's work instead
# of replaying it, so few steps suffice (and each of its steps costs a whole inner
# loop): one exact iteration at each end, two macro-steps, no ramp.
OUTER_HEAD, OUTER_TAIL, OUTER_MACRO = 1, 1, 2


class StepTable:
    __slots__ = ("starts", "counts", "exact")

    def __init__(self, starts: list, counts: list) -> None:
        self.starts = starts
        self.counts = counts
        self.exact = all(c == 1 for c in counts)

    def step_of(self, iteration: int) -> int:
        """The step that holds ``iteration`` (>= 0)."""
        if self.exact:
            return iteration
        return bisect_right(self.starts, iteration) - 1

    def __len__(self) -> int:
        return len(self.starts)


class StepTables:
    """Step tables of one fidelity, cached by trip count."""

    def __init__(self, fidelity: str, head: int = HEAD, tail: int = TAIL, macro: int = MACRO):
        if fidelity not in FIDELITIES:
            from ..errors import TilesimError

            raise TilesimError(
                f"unknown fidelity {fidelity!r} (choose from {', '.join(FIDELITIES)})"
            )
        self.fidelity = fidelity
        self.head, self.tail, self.macro = head, tail, macro
        self._cache: dict = {}
        self.coalesced = False  # some loop ran in macro-steps (a timeline shows them lumped)

    def table(self, trips: int, nested: bool = False, exposed: bool = False) -> StepTable:
        key = (trips, nested, exposed)
        table = self._cache.get(key)
        if table is None:
            if exposed and not nested:
                cut = (list(range(trips)), [1] * trips)
            else:
                cut = self._cut(trips, nested)
            table = self._cache[key] = StepTable(*cut)
            if not table.exact:
                self.coalesced = True
        return table

    def _cut(self, trips: int, nested: bool) -> tuple[list, list]:
        if nested:
            head, tail, macro, ramp = OUTER_HEAD, OUTER_TAIL, OUTER_MACRO, False
        else:
            head, tail, macro, ramp = self.head, self.tail, self.macro, True
        if self.fidelity == "detailed" or trips < head + tail + 2 * macro:
            return list(range(trips)), [1] * trips
        middle = trips - head - tail
        steady = -(-middle // macro)
        sizes = []
        # Ramp up by RAMP: a macro-step's loads are prefetched during the step before
        # it, so a step RAMP times the one before asks the memory system for RAMP
        # times the kernel's real rate (see the module docstring).
        size = 2
        while ramp and size < steady and middle - sum(sizes) > size + steady:
            sizes.append(size)
            size = max(size + 1, int(size * RAMP))
        rest = middle - sum(sizes)
        k = -(-rest // steady)
        q, r = divmod(rest, k)
        sizes += [q + 1 if i < r else q for i in range(k)]
        starts = list(range(head))
        counts = [1] * head
        at = head
        for size in sizes:
            starts.append(at)
            counts.append(size)
            at += size
        for i in range(tail):
            starts.append(at + i)
            counts.append(1)
        return starts, counts
