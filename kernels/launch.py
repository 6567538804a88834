"""Repeat launches of one compiled Triton or Gluon kernel, without the JIT's per-call work.

``kernel[grid](*args, **meta)`` binds and specialises every argument, hashes a cache key
and checks the kernel's globals on every call: tens of µs of host time, more than the
kernel itself at small shapes. A :class:`Launch` fixes what a call's signature fixes
(the grid and the constexprs), launches through ``kernel[grid]`` once, keeps the compiled
kernel that returns, and from then on hands the arguments straight to its launcher.

Triton specialises pointer arguments on 16-byte alignment: a tensor that had it when the
kernel was compiled must keep it, so every call checks (one ``data_ptr()`` each) and an
argument that lost it takes the JIT's own path, as does a call under a launch hook (a
profiler), on another device, or under the interpreter (which compiles nothing).
"""

from __future__ import annotations

import torch

try:  # the runtime pieces the JIT itself launches through (Triton 3.4 on)
    from triton import knobs
    from triton.runtime.driver import driver
except ImportError:  # pragma: no cover - an older or a reorganised Triton: JIT path only
    knobs = driver = None


def _hooks_idle() -> bool:
    """True when no launch hook is set (Triton keeps them as chains of callables)."""
    runtime = knobs.runtime
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", None) != []:
            return False
    return True


class Launch:
    """``fn[grid](*args, **meta)`` for a fixed grid and meta, called as ``launch(*args)``.

    ``args`` are the kernel's leading parameters, in order; ``meta`` names every later
    parameter (the constexprs) and the launch options (``num_warps``, ``num_stages``).
    """

    __slots__ = ("fn", "grid", "meta", "tail", "compiled", "function", "packed", "device", "checks")

    def __init__(self, fn, grid: tuple[int, ...], meta: dict):
        self.fn = fn
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.meta = meta
        self.tail = None  # the values of the parameters after ``args``, in order
        self.compiled = self.function = self.packed = self.device = self.checks = None

    def __call__(self, *args) -> None:
        run = self.compiled
        if run is not None and _hooks_idle() and self._aligned(args):
            device = driver.active.get_current_device()
            if device == self.device:
                try:
                    run(
                        *self.grid,
                        driver.active.get_current_stream(device),
                        self.function,
                        self.packed,
                        None,  # launch metadata: read by launch hooks only
                        None,
                        None,
                        *args,
                        *self.tail,
                    )
                    return
                except (TypeError, ValueError):  # a launcher that calls differently
                    self.compiled = None
        kernel = self.fn[self.grid](*args, **self.meta)
        if self.checks is None:
            self._keep(kernel, args)

    def _aligned(self, args) -> bool:
        for i, through_base in self.checks:
            t = args[i].base if through_base else args[i]
            if t.data_ptr() & 15:
                return False
        return True

    def _keep(self, kernel, args) -> None:
        """After the first launch: the compiled kernel and what later calls must check."""
        self.checks = ()
        names = getattr(self.fn, "arg_names", None)
        if driver is None or names is None or getattr(kernel, "function", None) is None:
            return  # the interpreter, a compile-only run, or a kernel this class does not know
        if any(n not in self.meta for n in names[len(args) :]):
            return  # a parameter left to its default: the JIT fills it in
        checks = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if a.data_ptr() % 16 == 0:  # compiled assuming 16-byte alignment
                    checks.append((i, False))
            elif hasattr(a, "block_shape") and hasattr(a, "base"):  # a TMA descriptor
                checks.append((i, True))
        self.checks = tuple(checks)
        self.tail = tuple(self.meta[n] for n in names[len(args) :])
        self.device = driver.active.get_current_device()
        self.function = kernel.function
        self.packed = kernel.packed_metadata
        self.compiled = kernel.run


def rebase(template, base):
    """A copy of TMA descriptor ``template`` over another tensor of the same shape.

    The descriptor's checks ran when ``template`` was built; the launcher reads only
    ``base.data_ptr()`` of the copy (and its shape, strides and block shape).
    """
    desc = object.__new__(template.__class__)
    desc.__dict__.update(template.__dict__)
    desc.base = base
    return desc
