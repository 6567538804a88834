"""Registers per thread of every kernel the validation grid runs, as compiled here,
and the SASS instructions of each of its loops.

Occupancy needs the compiled register count, which only the compiler knows
(the kernel profile, ``profiles/``). Nsight Compute reads it for its few cases
(``validate/gpu/ncu.py``); this reads it for every kernel variant of the grid, from
Triton's compiled kernel (``n_regs``, and ``n_spills``: the local memory per
thread, where registers spill), without timing anything, with the instructions per
thread of each loop body of its SASS (``validate/sass.py``: the issue work an
iteration costs). On the GPU machine::

    python3 -m tilesim.validate.gpu.registers --out results/raw/<date>-<gpu>-registers.json

One case per distinct kernel variant (``traces.compiled.variant_of``): the
first grid point that compiles it. Each case lists its launches' kernels in the
trace's launch order, as an ncu case does; a backward case's forward (run once
inside ``backward_launches``) is not among them. ``local_bytes_per_thread`` is
Triton's ``n_spills``: the local memory in 4-byte words. The kernel profile,
compiled on the CPU (``validate/profile.py``), must agree with these files
(``tests/traces/test_tr_profile.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SCHEMA_VERSION = 1


class KernelLog:
    """Records the compiled kernel of every Triton launch while active."""

    def __init__(self) -> None:
        self.kernels: list = []

    def __enter__(self):
        from triton.runtime.jit import JITFunction

        self._orig = JITFunction.run
        log = self.kernels

        def run(fn, *args, **kwargs):
            kernel = self._orig(fn, *args, **kwargs)
            log.append((fn.fn.__name__, kernel))
            return kernel

        JITFunction.run = run
        return self

    def __exit__(self, *exc) -> None:
        from triton.runtime.jit import JITFunction

        JITFunction.run = self._orig


def _launches(point, seed: int = 0):
    """The point's launches [(name, run)], inputs made and checked (forward run once
    first for a backward point, inside ``backward_launches``)."""
    from ...kernels import backward_launches, launches
    from . import timing

    w = point.workload
    q, k, v, scales = timing.make_inputs(w, seed)
    if w.pass_ == "bwd":
        do = timing.make_grad_output(w, seed)
        _, runs = backward_launches(
            q, k, v, do, causal=w.causal, algo=point.algo, config=point.config
        )
        return runs
    _, runs = launches(q, k, v, causal=w.causal, algo=point.algo, config=point.config, **scales)
    return runs


def collect(log=print) -> list[dict]:
    """One case per distinct kernel variant of the validation grid (GPU)."""
    import torch

    from ...hwmodels import load_gpu
    from ...traces import build
    from ...traces.compiled import variant_of
    from .. import sass
    from ..grid import validate_grid

    gpu = load_gpu("h200_sxm_141gb")
    seen: set = set()
    cases = []
    for p in validate_grid(gpu, passes=("fwd", "bwd")):
        keys = [
            variant_of(p.algo, p.workload, p.config, launch.name)
            for launch in build(p.algo, p.workload, gpu, p.config, profile=None).launches
        ]
        if all(k in seen for k in keys):
            continue
        runs = _launches(p)
        torch.cuda.synchronize()
        kernels = []
        for name, run in runs:
            with KernelLog() as got:
                run()
            torch.cuda.synchronize()
            if len(got.kernels) != 1:
                raise RuntimeError(
                    f"{p.label}: launch {name} ran {len(got.kernels)} Triton kernels"
                )
            fn, kernel = got.kernels[0]
            kernels.append(
                {
                    "launch": name,
                    "kernel": fn,
                    "registers_per_thread": int(kernel.n_regs),
                    "local_bytes_per_thread": int(kernel.n_spills),
                    "sass_loops": sass.loops(sass.disassemble(kernel.asm["cubin"])),
                }
            )
        if len(kernels) != len(keys):
            raise RuntimeError(f"{p.label}: {len(kernels)} launches, the trace has {len(keys)}")
        seen.update(keys)
        cases.append(
            {
                "algo": p.algo,
                "workload": p.workload.to_dict(),
                "config": p.config.to_dict(),
                "kernels": kernels,
            }
        )
        regs = ", ".join(f"{x['kernel']} {x['registers_per_thread']}" for x in kernels)
        log(f"{p.label}: {regs}")
    return cases


def main(argv: list[str] | None = None) -> None:
    from ...errors import TilesimError
    from . import metadata
    from .timing import require_cuda

    ap = argparse.ArgumentParser(prog="python3 -m tilesim.validate.gpu.registers")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        require_cuda("validate.gpu.registers")
    except TilesimError as exc:
        raise SystemExit(f"error: {exc}") from None
    meta = metadata.collect(
        {"tool": "Triton's compiled kernels (n_regs, n_spills; SASS by nvdisasm -c -hex)"}
    )
    cases = collect()
    doc = {
        "kind": "registers",
        "schema_version": SCHEMA_VERSION,
        "metadata": metadata.finish(meta),
        "cases": cases,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
