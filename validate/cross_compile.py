"""Compile tilesim's kernels for a GPU target on a machine without one.

Triton compiles for the target its active driver names and launches through the
same driver. `cross_compiling` puts in a driver that names the target (sm_90 by
default, which Triton builds as ``sm_90a``) and launches nothing, and makes every
kernel launch compile only. The kernel wrappers then run as they do on the GPU,
on tensors without storage, and each launch yields the kernel the GPU
would run: the same Triton path (argument specialisation, constexprs, options)
for the plain Triton and the Gluon kernels alike. `compiled_launches` runs one
(algorithm, workload, config) that way.

``resource_usage`` reads a cubin's registers and local (spill) memory per thread
with Triton's own cuobjdump: what the CUDA driver reports once it loads the kernel
(Triton's ``n_regs``, and ``n_spills`` x 4 bytes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import tempfile
import types

TARGET_CAPABILITY = 90
SM_COUNT = 132  # the H200's and H100 SXM's (persistent grids only: compiled code ignores it)


class _TargetDriver:
    """A Triton driver that names a target and has no device behind it."""

    def __init__(self, capability: int) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", capability, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_current_target(self):
        return self.target

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")


@contextlib.contextmanager
def cross_compiling(capability: int = TARGET_CAPABILITY, sm_count: int = SM_COUNT):
    """Within: Triton compiles for ``capability`` and launches nothing; yields the list
    that each launch appends its (function name, CompiledKernel) to."""
    import torch
    from triton.runtime.driver import driver
    from triton.runtime.jit import JITFunction

    from ..kernels import flash_v2
    from ..kernels._common import interpreting

    if interpreting():
        raise RuntimeError("TRITON_INTERPRET is set: the kernels are interpreted, not compiled")
    compiled: list = []
    run, use_desc, props = (
        JITFunction.run,
        flash_v2.use_descriptors,
        torch.cuda.get_device_properties,
    )

    def compile_only(fn, *args, grid, warmup, **kwargs):
        kernel = run(fn, *args, grid=grid, warmup=True, **kwargs)
        compiled.append((fn.fn.__name__, kernel))
        return kernel

    hopper = capability // 10 == 9
    active = driver._active  # None on a machine without a GPU: reading driver.active fails
    driver.set_active(_TargetDriver(capability))
    JITFunction.run = compile_only
    # the wrappers ask the tensors' device what it is: answer for the target
    flash_v2.use_descriptors = lambda q: hopper and flash_v2.TensorDescriptor is not None
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        multi_processor_count=sm_count
    )
    try:
        yield compiled
    finally:
        JITFunction.run = run
        flash_v2.use_descriptors = use_desc
        torch.cuda.get_device_properties = props
        driver._active = active


def _inputs(workload):
    """Tensors of the workload's shapes and dtype without storage (``meta``: nothing
    reads them, and their address 0 is aligned as a GPU allocation is)."""
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
    w = workload
    shape = (w.batch, w.heads, w.seqlen_q, w.head_dim)
    q = torch.empty(shape, dtype=dtype[w.dtype], device="meta")
    shape_kv = (w.batch, w.num_kv_heads, w.seqlen_kv, w.head_dim)
    k = torch.empty(shape_kv, dtype=dtype[w.dtype], device="meta")
    return q, k, torch.empty_like(k)


def _runs(algo: str, workload, config, gpu) -> list:
    """The launches [(name, run)] of ``algo`` on ``workload`` (the backward's, after its
    forward has compiled), as the kernels' API builds them."""
    import torch

    from ..kernels.autograd import backward_runs, empty_grads
    from ..kernels.flash_v3 import check_config
    from ..kernels.plans import ALGORITHMS, ForwardPlan
    from ..kernels.reference import default_scale
    from ..traces.config import default_config

    q, k, v = _inputs(workload)
    scale = default_scale(workload.head_dim)
    if workload.pass_ == "bwd":
        fwd_config = default_config(algo, dataclasses.replace(workload, pass_="fwd"), gpu)
        plan = ForwardPlan(algo, workload.causal, scale, fwd_config, {}, q, k, v)
        out, state = plan(q, k, v)
        grads = empty_grads(q, k)
        return backward_runs(
            q, k, v, torch.empty_like(q), out, state, workload.causal, scale, algo, config, *grads
        )
    if algo == "v3":
        problem = check_config(config)
        if problem:
            raise ValueError(problem)
    out_dtype = torch.float16 if workload.dtype == "fp8" else q.dtype
    out = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    return ALGORITHMS[algo].launches(q, k, v, workload.causal, scale, config, out)


def compiled_launches(algo: str, workload, config, gpu, only=None) -> tuple[list, int]:
    """([(index, launch name, kernel name, CompiledKernel)], number of launches): each
    launch compiled, in order (only those whose index is in ``only``, where given); a
    launch that did not compile has its exception for the kernel."""
    with cross_compiling() as log:
        runs = _runs(algo, workload, config, gpu)
        out = []
        for i, (name, run) in enumerate(runs):
            if only is not None and i not in only:
                continue
            del log[:]
            try:
                run()
            except Exception as exc:  # this launch's kernel did not compile
                out.append((i, name, "", exc))
                continue
            if len(log) != 1:
                raise RuntimeError(f"launch {name} compiled {len(log)} Triton kernels")
            out.append((i, name, *log[0]))
    return out, len(runs)


def _tool(name: str) -> str:
    import triton.backends.nvidia as nvidia

    path = os.path.join(os.path.dirname(nvidia.__file__), "bin", name)
    return path if os.path.exists(path) else name


_USAGE = re.compile(r"\bREG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)")


def resource_usage(cubin: bytes) -> tuple[int, int]:
    """(registers, local-memory bytes) per thread of the one kernel in ``cubin``: its stack
    frame (where registers spill) and local arrays, which the driver reports as its local
    size (Triton's ``n_spills`` is that in 4-byte words)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run(
            [_tool("cuobjdump"), "--dump-resource-usage", f.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    found = _USAGE.findall(text)
    if len(found) != 1:
        raise RuntimeError(f"cuobjdump: expected one function, got {text!r}")
    regs, stack, local = map(int, found[0])
    return regs, stack + local


def toolchain() -> dict:
    """Versions of what compiled: triton, ptxas."""
    import triton

    ptxas = subprocess.run([_tool("ptxas"), "--version"], capture_output=True, text=True).stdout
    release = re.search(r"release ([\d.]+), (V[\d.]+)", ptxas)
    return {"triton": triton.__version__, "ptxas": release.group(2) if release else "unknown"}
