"""How a loop of T iterations is cut into simulation steps, per fidelity.

``detailed``: one step per iteration. ``fast``: exact head and tail iterations, the
steady middle in about ``MACRO`` macro-steps reached through a gentle ramp, each doing
the work of the iterations it stands for, with the latency their loads would have had.
The table depends only on T, so roles looping over one trip count stay in lockstep.
Why the ramp is this shape and how deps map to steps: docs/engine.md, "Loop steps".
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
