"""SimPy's `Environment` with a tight `run`, lean processes, and deferred events.

SimPy pops ``(time, priority, id, event)`` entries off one heap: the key orders
every event, ties included. Three things here keep that order and do less per
event, so the engine's predictions do not change:

* `Environment.run` to the end is one inlined loop (the heap pop, the
  callbacks, the failure check), and it remembers the entry it is running.
* A `Signal` that is triggered while nobody waits for it is *deferred*: it
  takes its key (and its id) as if scheduled, but stays off the heap. Whoever
  asks for it later finds it already happened (its key is below the running
  one) or puts it on the heap under its own key, where it pops exactly when it
  would have. Many of the engine's events (an async MMA's end, a prefetched
  tile's arrival: a third of v2's) are never waited for, and never touch the heap.
* `Proc` runs a generator as `simpy.Process` does (started by an urgent event,
  triggered when it returns), without the interrupt and failure machinery the
  engine does not use.

The run also pauses Python's cyclic garbage collector. Every CTA leaves cycles
behind (its processes, their events and callbacks), so collections come every
few hundred events, and each older-generation one walks the run's growing
caches and L2 entries again: a third of the time of a long run, two thirds of a
standard-attention backward. Paused, the cycles are collected once, after the
run; what they hold meanwhile is tens of MB.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from heapq import heappop, heappush

import simpy
from simpy.core import NORMAL, URGENT
from simpy.events import Event

BEFORE_ANY = (-1.0,)  # a key below every event's: the running entry before `run`


class Signal(Event):
    """A `simpy.Event` that may be deferred (`Environment.schedule`)."""

    _key = None  # the heap entry of a deferred signal, until someone asks for it


class Ready(Signal):
    """A signal already triggered (value None), to be scheduled: a timeout
    without `simpy.Timeout`'s checks."""

    _ok = True
    _value = None

    def __init__(self) -> None:
        self.callbacks = []


class Proc(Signal):
    """A process: ``generator`` yields signals and resumes when each has happened;
    the process is a signal that happens when it returns."""

    def __init__(self, env: Environment, generator) -> None:
        self.env = env
        self.callbacks = []
        self._send = generator.send
        start = Ready()
        start.callbacks.append(self._resume)
        heappush(env._queue, (env._now, URGENT, next(env._eid), start))

    def _resume(self, _event) -> None:
        env = self.env
        send = self._send
        try:
            ev = send(None)
            while True:
                callbacks = ev.callbacks
                if callbacks is not None:
                    key = ev._key
                    if key is None:
                        break
                    ev._key = None
                    if key >= env._cur:
                        heappush(env._queue, (*key, ev))
                        break
                    ev.callbacks = None  # it happened while nobody waited
                ev = send(None)
        except StopIteration:
            self._ok = True
            self._value = None
            env.schedule(self)
            return
        callbacks.append(self._resume)


DEFERRABLE = frozenset((Signal, Ready, Proc))


class Environment(simpy.Environment):
    """`simpy.Environment` whose `run()` without ``until`` is one loop."""

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self._cur = BEFORE_ANY  # the heap entry being run
        self.horizon = 0.0  # the latest time of a deferred signal

    def run(self, until=None):
        if until is not None:
            return super().run(until)
        queue = self._queue
        with gc_paused():
            while queue:
                self._now, _, _, event = self._cur = heappop(queue)
                callbacks, event.callbacks = event.callbacks, None
                for callback in callbacks:
                    callback(event)
                if not event._ok and not hasattr(event, "_defused"):
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    raise exc
        return None

    @property
    def end(self) -> float:
        """The time of the last event, deferred ones included."""
        return self._now if self._now > self.horizon else self.horizon

    def schedule(self, event, priority=NORMAL, delay=0) -> None:
        """`simpy.Environment.schedule`; a `Signal` nobody waits for yet is deferred."""
        at = self._now + delay
        if event.callbacks or event.__class__ not in DEFERRABLE:
            heappush(self._queue, (at, priority, next(self._eid), event))
        else:
            event._key = (at, priority, next(self._eid))  # without the event: no cycle
            if at > self.horizon:
                self.horizon = at

    def pending(self, ev) -> bool:
        """Whether ``ev`` is still to happen (a deferred one then goes on the heap)."""
        if ev.callbacks is None:
            return False
        key = ev._key
        if key is not None:
            ev._key = None
            if key < self._cur:
                ev.callbacks = None
                return False
            heappush(self._queue, (*key, ev))
        return True


_paused = 0  # runs in progress (threads) that paused the collector
_was_enabled = False
_lock = threading.Lock()


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector (see the module docstring); the last of
    overlapping pauses restores it as the first found it."""
    global _paused, _was_enabled
    with _lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()
