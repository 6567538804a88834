"""How a loop of T iterations is cut into simulation steps, per fidelity.

``detailed``: one step per iteration.

``fast``: the first ``HEAD`` and last ``TAIL`` iterations stay exact (the
pipeline fills and drains there: prologue loads, the last partial tile), and the
steady middle is cut into at most ``MACRO`` macro-steps of nearly equal size.
A macro-step of c iterations does the work of all c: its loads move the bytes
of all c tiles (each tile looked up in L2 on its own), its Mma and Vector ops
occupy the pipes for the sum of the c iterations' service times. So a loop
costs O(HEAD + TAIL + MACRO) events whatever its length; only the L2 lookups
(one per tile) still grow with it. A loop that holds another loop is coalesced
too, but its macro-steps run the inner loop once, for their middle iteration,
with the work scaled (see sm.py).

The table depends only on T (and on whether the loop is nested), so a producer
and a consumer role looping over the same trip count step in lockstep, and deps
``x@-k`` map to steps through it: a step waits for the step holding iteration
``first - k``.
"""

from __future__ import annotations

from bisect import bisect_right

FIDELITIES = ("fast", "detailed")

HEAD = 2  # exact iterations at the start of a coalesced loop (>= num_stages - 1 = 2)
TAIL = 1  # exact iterations at the end
MACRO = 4  # macro-steps in between


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

    def table(self, trips: int, nested: bool = False) -> StepTable:
        key = (trips, nested)
        table = self._cache.get(key)
        if table is None:
            table = self._cache[key] = StepTable(*self._cut(trips))
        return table

    def _cut(self, trips: int) -> tuple[list, list]:
        head, tail, macro = self.head, self.tail, self.macro
        if self.fidelity == "detailed" or trips <= head + tail + macro:
            return list(range(trips)), [1] * trips
        middle = trips - head - tail
        q, r = divmod(middle, macro)
        starts = list(range(head))
        counts = [1] * head
        at = head
        for i in range(macro):
            size = q + (1 if i < r else 0)
            starts.append(at)
            counts.append(size)
            at += size
        for i in range(tail):
            starts.append(at + i)
            counts.append(1)
        return starts, counts
