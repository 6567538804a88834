"""`tilesim.predict`: one call from a shape to a `Prediction`.

>>> import tilesim
>>> p = tilesim.predict(gpu="h100", algo="v2", batch=4, heads=16, seqlen=4096, head_dim=128)
>>> p.time_s, p.tflops, p.bound                                      # doctest: +SKIP

It loads the GPU preset (applying what-if ``overrides``), builds the algorithm's
trace with its default kernel configuration (or ``config``) and simulates it.
"""

from __future__ import annotations

import dataclasses

from .errors import TilesimError
from .hwmodels import GPU, load_gpu
from .runner import Job
from .runner import predict as run_one
from .simulator import Prediction
from .traces import default_config, named_config
from .traces.workload import KernelConfig, Workload, default_seqlen_kv


def predict(
    gpu: str | GPU = "h100",
    algo: str = "v2",
    batch: int = 4,
    heads: int = 16,
    seqlen: int = 4096,
    head_dim: int = 128,
    causal: bool = False,
    dtype: str = "fp16",
    config: KernelConfig | dict | None = None,
    fidelity: str = "fast",
    overrides: dict | None = None,
    *,
    seqlen_kv: int | None = None,
    timeline: bool = False,
    pass_: str = "fwd",
    kv_heads: int | None = None,
    seqlens_kv: tuple[int, ...] | None = None,
    page_size: int = 0,
    page_table: tuple[tuple[int, ...], ...] | None = None,
) -> Prediction:
    """Predict ``algo`` on the workload on ``gpu``.

    ``gpu``: a preset name / alias / .toml path, or a `GPU`. ``overrides``: what-if
    changes of the GPU's fields (``{"hbm_bandwidth_Bps": "2x"}``). ``config``: a
    `KernelConfig`, a named schedule (``"fa3"``, ``"fa2"``: `traces.NAMED_CONFIGS`), or a
    dict of fields to change in the algorithm's default (``{"block_n": 128}``).
    ``seqlen_kv`` defaults to ``seqlen`` (the longest of ``seqlens_kv`` when those are
    given). ``pass_``: "fwd", "bwd" or "fwd_bwd" (each pass with its own default config).
    Serving shapes: ``kv_heads`` (grouped-query heads, default ``heads``), ``seqlens_kv``
    (one KV length per sequence), ``page_size`` and ``page_table`` (a paged KV cache);
    see `Workload`. Causal masking is aligned bottom-right.
    """
    hw = gpu if isinstance(gpu, GPU) else load_gpu(gpu)
    if overrides:
        hw = hw.with_overrides(overrides)
    workload = Workload(
        batch=batch,
        heads=heads,
        seqlen_q=seqlen,
        seqlen_kv=default_seqlen_kv(seqlen, seqlen_kv, seqlens_kv),
        head_dim=head_dim,
        causal=causal,
        dtype=dtype,
        pass_=pass_,
        kv_heads=kv_heads,
        seqlens_kv=seqlens_kv,
        page_size=page_size,
        page_table=page_table,
    )
    job = Job(hw, algo, workload, _config(algo, workload, hw, config), fidelity)
    return run_one(job, timeline=timeline)


def _config(algo: str, workload: Workload, gpu: GPU, config) -> KernelConfig | None:
    if config is None or isinstance(config, KernelConfig):
        return config
    if isinstance(config, str):
        return named_config(config, algo, workload, gpu)
    if not isinstance(config, dict):
        raise TilesimError(
            f"config must be a KernelConfig, a dict or a config name, got {type(config).__name__}"
        )
    fields = {f.name for f in dataclasses.fields(KernelConfig)}
    unknown = sorted(set(config) - fields)
    if unknown:
        raise TilesimError(
            f"unknown config field(s) {', '.join(unknown)} (valid: {', '.join(sorted(fields))})"
        )
    return default_config(algo, workload, gpu).replace(**config)
