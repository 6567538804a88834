"""SASS instructions per loop of a compiled kernel (``nvdisasm -c`` text).

A loop is a backward branch: a ``BRA`` to a label earlier in the text. Its body
is everything from that label to the branch, so a nested loop's body holds its
inner loop's once. The count is per thread and per iteration, which is what
Nsight Compute's ``sm__inst_executed`` gives per warp and step (v1's forward at
d = 64: 1220 in the body, 1188-1227 counted per warp and step).

With the instruction encodings (``nvdisasm -hex``) a body also gets
``spill_reload_waits``: one entry per time an iteration's warp stops for register
spills reloaded from local memory (``LDL``), the issue cycles (stall counts) since
the reloads it waits for went out, which cover that much of their round trip.
Each instruction's control bits say which scoreboards it waits on and which one
its result releases (bits 41-62 of the high word: stall count 0-3, yield 4, write
barrier 5-7, read barrier 8-10, wait mask 11-16; 7 = no barrier). A wait on a
scoreboard an ``LDL`` set since the last such wait is one more round trip to
wherever the spilled line is; reloads issued together and waited on together
count once. The body is walked twice, counting the second pass, so a reload
issued near the end of an iteration and used at the start of the next one is
counted.

A loop that loads nothing through L1 (no ``LDG`` in its body: its tiles come by
``cp.async.cg``, ``LDGSTS.E.BYPASS``, which caches in L2 only, or by TMA, which
writes shared memory directly) leaves its spilled lines in L1, so its reloads are
L1 hits: their latency is the issue replay's (``validate/issue.py``, 24 cycles), and
the loop has no waits here. v1's backward streams its tiles through L1 with ``LDG``
and Nsight Compute finds 90% of its reloads missing L1
(``results/2026-11-30-h200-spill-ncu.json``); v2's backward, compiled for an N
that is not a multiple of its tiles, spills 80-136 bytes a thread and loads only
by ``LDGSTS`` (experiments/2026-12-02-v2-bwd).
"""

from __future__ import annotations

import collections
import re

_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\s+(?:`\()?(\.L_x_\d+)")
# an instruction line: /*addr*/ [predicate] OPCODE...
_OPCODE = re.compile(r"/\*[0-9a-f]+\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)")
# the second line of an instruction under -hex: its high 64 bits
_HIGH = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
_NO_BARRIER = 7


def loops(sass: str) -> list[dict]:
    """Each backward branch's loop body: ``{"instructions": n, "ops": {opcode: n}}``,
    in the order the branches appear (not the one-instruction spin that ends a kernel),
    with ``"spill_reload_waits"`` where the text has the encodings (module docstring)."""
    labels: dict[str, int] = {}
    lines = sass.splitlines()
    found = []
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = i
        m = _BRANCH.search(line)
        if m and m.group(1) in labels:
            body = lines[labels[m.group(1)] : i + 1]
            ops = collections.Counter(op.group(1) for op in map(_OPCODE.search, body) if op)
            if sum(ops.values()) > 1:
                loop = {"instructions": sum(ops.values()), "ops": dict(ops.most_common())}
                waits = spill_reload_waits(lines[labels[m.group(1)] : i + 2])
                if waits and "LDG" not in ops:  # reloads hit L1 (module docstring)
                    waits = []
                if waits is not None:
                    loop["spill_reload_waits"] = waits
                found.append(loop)
    return found


def _controls(lines: list[str]) -> list[tuple[str, int, int, int]] | None:
    """(opcode, stall count, write barrier, wait mask) of each instruction, or None
    without encodings."""
    out = []
    for i, line in enumerate(lines):
        op = _OPCODE.search(line)
        if not op:
            continue
        high = _HIGH.match(lines[i + 1]) if i + 1 < len(lines) else None
        if high is None:
            return None
        ctrl = int(high.group(1), 16) >> 41
        out.append((op.group(1), ctrl & 15, (ctrl >> 5) & 7, (ctrl >> 11) & 63))
    return out


def spill_reload_waits(lines: list[str]) -> list[int] | None:
    """For each wait per iteration on ``LDL`` reloads, the cycles the warp issued for
    after its last reload went out: how much of the reload's latency it covers
    (module docstring)."""
    instrs = _controls(lines)
    if instrs is None or not instrs:
        return None
    pending = 0  # scoreboards set by reloads not yet waited on
    since = 0  # stall cycles issued since the last reload
    covers = []
    for lap in (0, 1):
        for op, stall, wbar, wait in instrs:
            if wait & pending:
                if lap:
                    covers.append(since)
                pending = 0
            if op == "LDL" and wbar != _NO_BARRIER:
                pending |= 1 << wbar
                since = 0
            since += max(stall, 1)
    return covers


def disassemble(cubin: bytes) -> str:
    """``nvdisasm -c -hex`` of ``cubin``: Triton's own copy of nvdisasm, else the PATH's."""
    import os
    import shutil
    import subprocess
    import tempfile

    import triton.backends.nvidia as nvidia

    tool = os.path.join(os.path.dirname(nvidia.__file__), "bin", "nvdisasm")
    if not os.path.exists(tool):
        tool = shutil.which("nvdisasm") or "nvdisasm"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run(
            [tool, "-c", "-hex", f.name], capture_output=True, text=True, check=True
        ).stdout
