"""Compiled-kernel facts as data: one profile file per architecture and toolchain.

``for_arch("hopper")`` is the profile a GPU of that architecture reads (None where
there is none: every launch is then estimated); ``load(path)`` reads any file.
The trace builder looks each launch up by its `Variant` (``traces/compiled.py``).
"""

from .profile import (
    DEFAULT_PROFILES,
    TARGETS,
    KernelFacts,
    Profile,
    Provenance,
    Variant,
    for_arch,
    from_dict,
    load,
    write,
)

__all__ = [
    "DEFAULT_PROFILES",
    "TARGETS",
    "KernelFacts",
    "Profile",
    "Provenance",
    "Variant",
    "for_arch",
    "from_dict",
    "load",
    "write",
]
