"""`tilesim predict`: one algorithm on one workload, a table of the `Prediction`
(``--json`` for the full record, ``--timeline t.json`` for Perfetto, ``--gantt``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..profiles import load as load_profile
from ..runner import Job
from ..traces.compiled import DEFAULT as DEFAULT_PROFILE
from ..traces.config import check_algo, describe_config
from .common import (
    BOUND_HELP,
    DEFAULT_BATCH,
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    DEFAULT_HEAD_DIM,
    DEFAULT_HEADS,
    DEFAULT_SEQLEN,
    BatchOpt,
    CausalOpt,
    DtypeOpt,
    GpuOpt,
    HeadDimOpt,
    HeadsOpt,
    JsonOpt,
    KvHeadsOpt,
    PageSizeOpt,
    PassOpt,
    SeqlenKvOpt,
    SeqlenOpt,
    SeqlensKvOpt,
    SetOpt,
    gpu_from_options,
    serving_options,
    workload_from_options,
)
from .show import (
    FidelityOpt,
    GanttOpt,
    TimelineOpt,
    TimelineSmsOpt,
    TimelineWindowOpt,
    run_and_show,
)
from .trace import (
    AlgoOpt,
    BlockMOpt,
    BlockNOpt,
    ConfigOpt,
    PackGqaOpt,
    PathOpt,
    PersistentOpt,
    PingpongOpt,
    SpecializeOpt,
    SplitsOpt,
    StagesOpt,
    WarpsOpt,
    config_from_options,
)

ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="Kernel profile (a JSON file or a packaged name; 'none': every launch estimated) "
        "[default: the GPU architecture's].",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    app.command("predict", epilog=BOUND_HELP)(predict_cmd)


# -- predict ------------------------------------------------------------------------


def predict_cmd(
    algo: AlgoOpt = "v2",
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    batch: BatchOpt = DEFAULT_BATCH,
    heads: HeadsOpt = DEFAULT_HEADS,
    seqlen: SeqlenOpt = DEFAULT_SEQLEN,
    seqlen_kv: SeqlenKvOpt = None,
    head_dim: HeadDimOpt = DEFAULT_HEAD_DIM,
    causal: CausalOpt = False,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    pass_: PassOpt = "fwd",
    kv_heads: KvHeadsOpt = None,
    seqlens_kv: SeqlensKvOpt = None,
    page_size: PageSizeOpt = 0,
    config_name: ConfigOpt = None,
    block_m: BlockMOpt = None,
    block_n: BlockNOpt = None,
    num_warps: WarpsOpt = None,
    num_stages: StagesOpt = None,
    mma_path: PathOpt = None,
    persistent: PersistentOpt = None,
    pingpong: PingpongOpt = None,
    warp_specialize: SpecializeOpt = None,
    num_splits: SplitsOpt = None,
    pack_gqa: PackGqaOpt = None,
    profile: ProfileOpt = None,
    fidelity: FidelityOpt = "fast",
    as_json: JsonOpt = False,
    timeline: TimelineOpt = None,
    timeline_sms: TimelineSmsOpt = None,
    timeline_window: TimelineWindowOpt = None,
    gantt: GanttOpt = None,
) -> None:
    """Predict the time, traffic and bottleneck (bound, below) of one attention kernel."""
    hw = gpu_from_options(gpu, sets)
    workload = workload_from_options(
        batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype, pass_,
        **serving_options(kv_heads, seqlens_kv, page_size),
    )  # fmt: skip
    check_algo(algo, workload, hw)
    config = config_from_options(
        algo,
        workload,
        hw,
        config_name,
        block_m=block_m,
        block_n=block_n,
        num_warps=num_warps,
        num_stages=num_stages,
        mma_path=mma_path,
        persistent=persistent,
        pingpong=pingpong,
        warp_specialize=warp_specialize,
        num_splits=num_splits,
        pack_gqa=pack_gqa,
    )
    trace = Job(hw, algo, workload, config, profile=_profile(profile)).trace()
    schedule = describe_config(algo, workload, hw, config)
    run_and_show(
        trace, hw, fidelity, as_json, timeline, timeline_sms, timeline_window, gantt, schedule
    )


def _profile(name: str | None):
    """``--profile``: the default (None), no profile ("none"), or the one named."""
    if name is None:
        return DEFAULT_PROFILE
    return None if name == "none" else load_profile(name)
