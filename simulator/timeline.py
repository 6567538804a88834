"""Timelines: what each SM pipe did when, and HBM / L2 throughput, for Perfetto.

`simulate(..., timeline=True)` records the busy intervals of every pipe of the
first ``max_sms`` SMs and the byte rate of the HBM and L2 servers (integrated
into bins of ``bin_s`` seconds so a long run stays small). `Timeline.write`
saves Chrome / Perfetto trace JSON — open it at https://ui.perfetto.dev:

* one process per SM (``pid`` = SM index + 1, named "SM <i>"), one thread per
  pipe (tensor, sfu, fp32, smem); complete ("X") events in microseconds, named
  after the CTA (launch and work item) that used the pipe;
* process 0, "memory": counter ("C") events ``HBM`` (read / write GB/s) and
  ``L2`` (hit GB/s), and the launches as spans on a thread of their own.

In ``fast`` fidelity the engine skips the steady middle of big grids and
coalesces loop iterations: the timeline shows what was simulated (the span of
each launch gets ``skipped_us`` in its args). Such a timeline says so: ``sampled``
(what was left out, in words) in the file's ``otherData`` and as an instant
event "sampled: ..." at its start, and the CLI repeats it on stderr; use
``detailed`` for a complete picture of every iteration.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..atomic import write_atomic
from ..errors import TilesimError

PIPE_NAMES = ("tensor", "sfu", "fp32", "smem")
DEFAULT_MAX_SMS = 4
DEFAULT_BIN_S = 0.5e-6
# Busy intervals a timeline holds, all SMs together (each costs ~1 KB until it is written):
# a detailed run of a large grid on every SM would otherwise fill the memory.
MAX_INTERVALS = 1_000_000


def parse_window(text: str | None, option: str = "--window") -> tuple[float, float] | None:
    """``"10:25"`` (µs) -> (10.0, 25.0); None or ``"auto"`` -> None. Finite, 0 <= START <
    END, or one line naming ``option``."""
    if text is None or text.strip().lower() == "auto":
        return None
    a, sep, b = text.partition(":")
    try:
        lo, hi = float(a.strip().removesuffix("us")), float(b.strip().removesuffix("us"))
    except ValueError:
        lo = hi = float("nan")
    if not sep or not (math.isfinite(lo) and math.isfinite(hi)) or not 0 <= lo < hi:
        raise TilesimError(f"{option} expects START:END in µs with 0 <= START < END, got {text!r}")
    return lo, hi


class Recorder:
    """Byte rates of the bandwidth servers, integrated into fixed-width bins."""

    def __init__(self, bin_cycles: float) -> None:
        self.bin = bin_cycles
        self.state: dict = {}  # server -> (time of last change, rates)
        self.bins: dict = {}  # server -> {bin index: [bytes per class]}

    def rate(self, name: str, now: float, rates: tuple) -> None:
        last = self.state.get(name)
        if last is not None:
            self._integrate(name, last[0], now, last[1])
        self.state[name] = (now, rates)

    def _integrate(self, name: str, t0: float, t1: float, rates: tuple) -> None:
        bins = self.bins.setdefault(name, {})
        if t1 <= t0 or not any(rates):
            return
        width = self.bin
        b = int(t0 // width)
        while t0 < t1:
            edge = min(t1, (b + 1) * width)
            acc = bins.setdefault(b, [0.0] * len(rates))
            for i, r in enumerate(rates):
                acc[i] += r * (edge - t0)
            t0 = edge
            b += 1


class _Log(list):
    """One SM's busy intervals: appended while the timeline's budget lasts, and only
    those that reach into its window."""

    __slots__ = ("timeline",)

    def __init__(self, timeline: Timeline) -> None:
        super().__init__()
        self.timeline = timeline

    def append(self, interval) -> None:
        tl = self.timeline
        if interval[2] < tl.lo or interval[1] > tl.hi:
            return
        if tl.left:
            tl.left -= 1
            super().append(interval)
        else:
            tl.dropped += 1


class Timeline:
    def __init__(
        self,
        clock_hz: float,
        max_sms: int = DEFAULT_MAX_SMS,
        window_s: tuple[float, float] | None = None,
        bin_s: float = DEFAULT_BIN_S,
    ):
        if max_sms < 0:
            raise TilesimError(f"timeline max_sms must be >= 0, got {max_sms}")
        if bin_s <= 0:
            raise TilesimError(f"timeline bin must be > 0 s, got {bin_s}")
        if window_s is not None and not window_s[0] < window_s[1]:
            raise TilesimError(f"timeline window {window_s} must be (start, end) with start < end")
        self.clock = clock_hz
        self.max_sms = max_sms
        self.window = window_s
        self.recorder = Recorder(bin_s * clock_hz)
        self.sm_logs: dict[int, list] = {}  # SM index -> [(pipe, start, end, label)] in cycles
        self.launches: list = []  # (name, start, end, skipped cycles)
        self.sampled = ""  # what fast fidelity left out, in words ("": complete)
        # the window in cycles (what an interval must reach into to be kept), the budget
        lo, hi = window_s if window_s is not None else (0.0, float("inf"))
        self.lo, self.hi = lo * clock_hz, hi * clock_hz
        self.left, self.dropped = MAX_INTERVALS, 0

    @property
    def truncated(self) -> str:
        """What the interval budget left out, in words ("": nothing)."""
        if not self.dropped:
            return ""
        return f"the first {MAX_INTERVALS:,} busy intervals of {MAX_INTERVALS + self.dropped:,}"

    def log_for(self, sm: int) -> list | None:
        if sm >= self.max_sms:
            return None
        return self.sm_logs.setdefault(sm, _Log(self))

    def finish(self, now: float) -> None:
        for name, (t, rates) in list(self.recorder.state.items()):
            self.recorder._integrate(name, t, now, rates)
            self.recorder.state[name] = (now, rates)

    # -- export ------------------------------------------------------------------------

    def _us(self, cycles: float) -> float:
        return cycles / self.clock * 1e6

    def _in_window(self, start: float, end: float) -> tuple[float, float] | None:
        """The part of [start, end] cycles inside the window, in µs (None: outside)."""
        s, e = self._us(start), self._us(end)
        if self.window is None:
            return s, e
        lo, hi = self.window[0] * 1e6, self.window[1] * 1e6
        if e < lo or s > hi:
            return None
        return max(s, lo), min(e, hi)

    def to_perfetto(self) -> dict:
        events: list[dict] = [
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "memory"}},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "launches"}},
        ]
        if self.sampled:
            events.append(
                {
                    "ph": "i",
                    "s": "g",
                    "name": f"sampled: {self.sampled}",
                    "pid": 0,
                    "tid": 0,
                    "ts": 0.0 if self.window is None else self.window[0] * 1e6,
                }
            )
        for name, start, end, skipped in self.launches:
            span = self._in_window(start, end)
            if span is not None:
                events.append(
                    {
                        "ph": "X",
                        "name": name,
                        "cat": "launch",
                        "pid": 0,
                        "tid": 0,
                        "ts": span[0],
                        "dur": span[1] - span[0],
                        "args": {"skipped_us": self._us(skipped)},
                    }
                )
        for sm in sorted(self.sm_logs):
            pid = sm + 1
            events.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": f"SM {sm}"},
                }
            )
            events.append(
                {
                    "ph": "M",
                    "name": "process_sort_index",
                    "pid": pid,
                    "tid": 0,
                    "args": {"sort_index": pid},
                }
            )
            for tid, pipe in enumerate(PIPE_NAMES):
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": pid,
                        "tid": tid,
                        "args": {"name": pipe},
                    }
                )
            for pipe, start, end, label in self.sm_logs[sm]:
                span = self._in_window(start, end)
                if span is None:
                    continue
                events.append(
                    {
                        "ph": "X",
                        "name": label or PIPE_NAMES[pipe],
                        "cat": PIPE_NAMES[pipe],
                        "pid": pid,
                        "tid": pipe,
                        "ts": span[0],
                        "dur": span[1] - span[0],
                    }
                )
        width_s = self.recorder.bin / self.clock
        series = (("hbm", "HBM", ("read_GBps", "write_GBps")), ("l2", "L2", ("hit_GBps",)))
        for server, label, keys in series:
            bins = self.recorder.bins.get(server, {})
            # a first sample at the start: every counter track exists, busy or not
            start_us = 0.0 if self.window is None else self.window[0] * 1e6
            events.append(
                {
                    "ph": "C",
                    "name": label,
                    "pid": 0,
                    "tid": 0,
                    "ts": start_us,
                    "args": dict.fromkeys(keys, 0.0),
                }
            )
            for b in sorted(bins):
                ts = self._in_window(b * self.recorder.bin, b * self.recorder.bin)
                if ts is None:
                    continue
                args = {k: bins[b][i] / width_s / 1e9 for i, k in enumerate(keys)}
                events.append(
                    {"ph": "C", "name": label, "pid": 0, "tid": 0, "ts": ts[0], "args": args}
                )
                # back to zero at the end of the bin unless the next bin continues
                if b + 1 not in bins:
                    events.append(
                        {
                            "ph": "C",
                            "name": label,
                            "pid": 0,
                            "tid": 0,
                            "ts": self._us((b + 1) * self.recorder.bin),
                            "args": dict.fromkeys(keys, 0.0),
                        }
                    )
        other = {"sampled": self.sampled} if self.sampled else {"sampled": False}
        if self.truncated:
            other["truncated"] = self.truncated
        return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}

    def write(self, path: str | os.PathLike) -> Path:
        """Write the Perfetto JSON atomically (a temp file renamed into place)."""
        text = json.dumps(self.to_perfetto(), separators=(",", ":"), allow_nan=False)
        return write_atomic(path, text)
