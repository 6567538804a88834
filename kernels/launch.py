"""Repeat launches of one compiled Triton or Gluon kernel, without the JIT's per-call work.

``kernel[grid](*args, **meta)`` binds and specialises every argument, hashes a cache key
and checks the kernel's globals on every call, and Triton's launcher then walks every
argument again to expand TMA descriptors: tens of µs of host time, more than the kernel
itself at small shapes. A :class:`Launch` fixes what a call's signature fixes (the grid,
the constexprs, which arguments are descriptors), launches through ``kernel[grid]`` once,
keeps the compiled kernel that returns, and from then on hands the arguments to the
launcher's compiled C function itself, expanding only the descriptors (one
``cuTensorMapEncodeTiled`` each, as Triton does). Where the launcher is not the one this
module knows (another Triton), it calls the launcher object instead.

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
try:  # how Triton's CUDA launcher expands a host TMA descriptor
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST, make_tensordesc_arg
except ImportError:  # pragma: no cover
    make_tensordesc_arg = None

_current_device = getattr(torch._C, "_cuda_getDevice", None)


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
    A TMA descriptor argument keeps its shape, strides and layout from call to call (a
    :func:`rebase` of one template); only its base tensor moves.
    """

    __slots__ = (
        "fn", "grid", "meta", "tail", "checks", "device", "direct", "launcher", "raw",
        "descs", "head", "stream",
    )  # fmt: skip

    def __init__(self, fn, grid: tuple[int, ...], meta: dict):
        self.fn = fn
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.meta = meta
        self.checks = None  # set after the first launch: which arguments to check
        self.direct = None  # the fast path, once the compiled kernel is known

    def __call__(self, *args) -> None:
        direct = self.direct
        if direct is not None and _hooks_idle() and self._aligned(args):
            device = _current_device()
            if device == self.device:
                try:
                    direct(args, self.stream(device))
                    return
                except (TypeError, ValueError):  # a launcher that takes its arguments otherwise
                    self.direct = None
        kernel = self.fn[self.grid](*args, **self.meta)
        if self.checks is None:
            self._keep(kernel, args)

    def _aligned(self, args) -> bool:
        for i in self.checks:  # noqa: SIM110 - a loop costs less per call than a generator
            if args[i].data_ptr() & 15:
                return False
        return True

    def _raw(self, args, stream) -> None:
        """The launcher's C function, descriptors expanded as Triton's launcher does."""
        expanded = []
        start = 0
        for i, fill, rest, after in self.descs:
            expanded += args[start:i]
            if fill is None:  # ``rest`` is the descriptor's metadata
                expanded += make_tensordesc_arg(args[i], rest)
            else:  # make_tensordesc_arg with what only the base changes computed once
                expanded.append(fill(args[i].base.data_ptr(), *rest))
                expanded += after
            start = i + 1
        expanded += args[start:]
        self.raw(*self.grid, stream, *self.head, *expanded, *self.tail)

    def _launcher(self, args, stream) -> None:
        """The launcher object, as the JIT calls it (no launch metadata, no hooks)."""
        function, packed = self.head[0], self.head[5]
        self.launcher(*self.grid, stream, function, packed, None, None, None, *args, *self.tail)

    def _keep(self, kernel, args) -> None:
        """After the first launch: the compiled kernel and what later calls must check."""
        self.checks = ()
        names = getattr(self.fn, "arg_names", None)
        if driver is None or _current_device is None or names is None:
            return  # a Triton or torch this module does not know: the JIT path
        if getattr(kernel, "function", None) is None:
            return  # the interpreter, or a compile-only run
        if any(n not in self.meta for n in names[len(args) :]):
            return  # a parameter left to its default: the JIT fills it in
        self.checks = tuple(
            i
            for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and a.data_ptr() % 16 == 0  # compiled aligned
        )
        self.tail = tuple(self.meta[n] for n in names[len(args) :])
        self.device = _current_device()
        self.stream = driver.active.get_current_stream
        self.launcher = kernel.run
        descs = [i for i, a in enumerate(args) if hasattr(a, "block_shape") and hasattr(a, "base")]
        raw = _raw_launch(self.launcher, descs)
        # after the stream: function, cooperative grid, PDL, global and profile scratch,
        # packed metadata, launch metadata and the two hooks (none of the last three)
        coop = getattr(self.launcher, "launch_cooperative_grid", False)
        pdl = getattr(self.launcher, "launch_pdl", False)
        self.head = (
            kernel.function,
            coop,
            pdl,
            None,
            None,
            kernel.packed_metadata,
            None,
            None,
            None,
        )
        if raw is not None:
            self.raw = raw[0]
            self.descs = tuple(_expansion(i, args[i], meta) for i, meta in raw[1])
            self.direct = self._raw
        else:
            self.direct = self._launcher


def _raw_launch(launcher, descs: list[int]):
    """(the C launch function, ((index, descriptor metadata), ...)) behind a Triton CUDA
    launcher, or None where it is not the launcher this module knows or it allocates
    scratch memory per launch."""
    if make_tensordesc_arg is None:
        return None
    if getattr(launcher, "global_scratch_size", 1) or getattr(launcher, "profile_scratch_size", 1):
        return None
    launch = getattr(launcher, "launch", None)
    code = getattr(launch, "__code__", None)
    if code is None:  # the compiled module's function itself: no descriptor arguments
        return (launch, ()) if launch is not None and not descs else None
    closure = launch.__closure__ or ()
    if len(closure) != len(code.co_freevars):
        return None
    cells = {n: c.cell_contents for n, c in zip(code.co_freevars, closure, strict=True)}
    if {"launcher", "tensordesc_indices", "tensordesc_meta"} - cells.keys():
        return None
    if sorted(cells["tensordesc_indices"]) != descs:
        return None
    return cells["launcher"], tuple(zip(descs, cells["tensordesc_meta"], strict=True))


def _expansion(i: int, desc, meta) -> tuple:
    """(index, fill, the fill's arguments after the pointer, what follows the tensor map)
    of a descriptor argument, as ``make_tensordesc_arg`` builds them; (index, None, meta,
    None) where that function should build them itself (no TMA metadata, fp4 padding)."""
    if meta is None or meta.get("fp4_padded"):
        return i, None, meta, None
    rest = (
        meta["swizzle"],
        meta["elem_size"],
        TMA_DTYPE_DEVICE_TO_HOST[meta["elem_type"]],
        meta["block_size"],
        desc.shape,
        desc.strides,
        1 if desc.padding == "nan" else 0,
    )
    return i, driver.active.utils.fill_tma_descriptor, rest, (*desc.shape, *desc.strides)


def rebase(template, base):
    """A copy of TMA descriptor ``template`` over another tensor of the same shape.

    The descriptor's checks ran when ``template`` was built; the launcher reads only
    ``base.data_ptr()`` of the copy (and its shape, strides and block shape).
    """
    desc = object.__new__(template.__class__)
    desc.__dict__.update(template.__dict__)
    desc.base = base
    return desc
