"""SASS instructions per loop of a compiled kernel (``nvdisasm -c`` text).

A loop is a backward branch: a ``BRA`` to a label earlier in the text. Its body
is everything from that label to the branch, so a nested loop's body holds its
inner loop's once. The count is per thread and per iteration, which is what
Nsight Compute's ``sm__inst_executed`` gives per warp and step (v1's forward at
d = 64: 1220 in the body, 1188-1227 counted per warp and step).
"""

from __future__ import annotations

import collections
import re

_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\s+(?:`\()?(\.L_x_\d+)")
# an instruction line: /*addr*/ [predicate] OPCODE...
_OPCODE = re.compile(r"/\*[0-9a-f]+\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)")


def loops(sass: str) -> list[dict]:
    """Each backward branch's loop body: ``{"instructions": n, "ops": {opcode: n}}``,
    in the order the branches appear (not the one-instruction spin that ends a kernel)."""
    labels: dict[str, int] = {}
    lines = sass.splitlines()
    found = []
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = i
        m = _BRANCH.search(line)
        if m and m.group(1) in labels:
            ops = collections.Counter(
                op.group(1) for op in map(_OPCODE.search, lines[labels[m.group(1)] : i + 1]) if op
            )
            if sum(ops.values()) > 1:
                found.append({"instructions": sum(ops.values()), "ops": dict(ops.most_common())})
    return found


def disassemble(cubin: bytes) -> str:
    """``nvdisasm -c`` of ``cubin``: Triton's own copy of nvdisasm, else the PATH's."""
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
            [tool, "-c", f.name], capture_output=True, text=True, check=True
        ).stdout
