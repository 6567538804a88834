"""Shared test setup: the Triton interpreter where there is no GPU, and the ``gpu`` marker.

Where torch is installed but CUDA is not available, ``TRITON_INTERPRET=1`` is set
here, before any test imports triton, so the kernels run (slowly) on the CPU.
Tests marked ``gpu`` are skipped without CUDA. The accuracy guard's tests run first.
"""

from __future__ import annotations

import importlib.util
import os

import pytest


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


HAS_CUDA = _cuda_available()
if not HAS_CUDA and importlib.util.find_spec("torch") is not None:
    os.environ["TRITON_INTERPRET"] = "1"


# Minutes each (they re-predict the committed grid): run first, so that pytest-xdist's
# workers take them on while the many short tests fill the other worker, instead of
# ending the run with them.
FIRST = ("tests/validate/test_accuracy.py",)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))  # stable
    if HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
