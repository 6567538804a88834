"""`tilesim trace show | export`: look at an algorithm's tile schedule, or save it.

``trace_app`` is the ``trace`` sub-app; other command modules add to it
(``trace replay`` lives with the engine's commands).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..errors import TilesimError
from ..hwmodels import GPU
from ..runner import Job
from ..traces.config import config_names, named_config
from ..traces.expand import expand
from ..traces.files import SUFFIX, load, save, to_dict
from ..traces.ir import Arrive, Launch, Load, Loop, Mma, Op, Store, Trace, Vector, Wait
from ..traces.occupancy import occupancy
from ..traces.workload import ALGOS, KernelConfig, Workload
from ..units import fmt_bytes
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
    check_output,
    console,
    gpu_from_options,
    print_json,
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

trace_app = typer.Typer(
    help="Tile schedules (traces): show one, export it as a .trace.json file.",
    no_args_is_help=True,
)

AlgoOpt = Annotated[str, typer.Option("--algo", "-a", help=f"Algorithm: {', '.join(ALGOS)}.")]
_NO_DEFAULT = {"show_default": False}
BlockMOpt = Annotated[
    int | None,
    typer.Option("--block-m", help="Q rows per tile [default: per algo].", **_NO_DEFAULT),
]
BlockNOpt = Annotated[
    int | None, typer.Option("--block-n", help="K/V rows per tile.", **_NO_DEFAULT)
]
WarpsOpt = Annotated[int | None, typer.Option("--num-warps", help="Warps per CTA.", **_NO_DEFAULT)]
StagesOpt = Annotated[
    int | None, typer.Option("--num-stages", help="K/V pipeline depth.", **_NO_DEFAULT)
]
PathOpt = Annotated[
    str | None, typer.Option("--mma-path", help="wgmma or mma_sync.", **_NO_DEFAULT)
]
PersistentOpt = Annotated[
    bool | None,
    typer.Option("--persistent/--no-persistent", help="v3: persistent grid.", **_NO_DEFAULT),
]
PingpongOpt = Annotated[
    bool | None,
    typer.Option("--pingpong/--no-pingpong", help="v3: ping-pong consumers.", **_NO_DEFAULT),
]
SpecializeOpt = Annotated[
    bool | None,
    typer.Option(
        "--warp-specialize/--no-warp-specialize",
        help="v3: a TMA producer warpgroup.",
        **_NO_DEFAULT,
    ),
]
SplitsOpt = Annotated[
    int | None,
    typer.Option(
        "--num-splits", help="v2: split the KV sequence over this many CTAs.", **_NO_DEFAULT
    ),
]
PackGqaOpt = Annotated[
    bool | None,
    typer.Option(
        "--pack-gqa/--no-pack-gqa",
        help="v2: one CTA takes the query heads of a K/V head together.",
        **_NO_DEFAULT,
    ),
]
ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        help="A named schedule: "
        + ", ".join(config_names())
        + " (fa3: FlashAttention-3's ping-pong; fa2 = sdpa-flash: FlashAttention-2's CUDA "
        "tiles; fa1-algorithm1: the paper's Algorithm 1) [default: what tilesim's kernels "
        "run]; the tile options change it further.",
        show_default=False,
    ),
]
CtaOpt = Annotated[
    int | None,
    typer.Option("--cta", help="Also unroll this CTA (grid index) of --launch.", **_NO_DEFAULT),
]
LaunchOpt = Annotated[int, typer.Option("--launch", help="Launch index for --cta.")]


V3_FLAGS = ("persistent", "pingpong", "warp_specialize")  # only v3's schedules have them


def register(app: typer.Typer) -> None:
    app.add_typer(trace_app, name="trace")


def config_from_options(
    algo: str, workload: Workload, gpu: GPU, name: str | None = None, **overrides
) -> KernelConfig | None:
    """The config called ``name`` (None: the default) with the options the user gave.

    fwd_bwd without a name or options: None, so that `build` runs each pass with its
    own default.
    """
    changes = {k: v for k, v in overrides.items() if v is not None}
    for flag in V3_FLAGS:
        if changes.get(flag) and algo != "v3":
            option = "--" + flag.replace("_", "-")
            raise TilesimError(f"{option} is a v3 schedule (algo {algo} does not have it)")
    if name is None and not changes and workload.pass_ == "fwd_bwd":
        return None
    config = named_config(name or "default", algo, workload, gpu)
    return config.replace(**changes) if changes else config


def _build(
    gpu, sets, algo, batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype, pass_, name,
    serving, **cfg,
):  # fmt: skip
    hw = gpu_from_options(gpu, sets)
    workload = workload_from_options(
        batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype, pass_, **serving
    )
    config = config_from_options(algo, workload, hw, name, **cfg)
    return hw, Job(hw, algo, workload, config).trace()


@trace_app.command("show")
def trace_show(
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
    cta: CtaOpt = None,
    launch_index: LaunchOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Show a trace: launches, grid, CTAs, shared memory, occupancy, the CTA program, counters."""
    hw, trace = _build(
        gpu, sets, algo, batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype, pass_,
        config_name, serving_options(kv_heads, seqlens_kv, page_size), block_m=block_m,
        block_n=block_n, num_warps=num_warps, num_stages=num_stages, mma_path=mma_path,
        persistent=persistent, pingpong=pingpong, warp_specialize=warp_specialize,
        num_splits=num_splits, pack_gqa=pack_gqa,
    )  # fmt: skip
    from ..traces.counters import counters  # numpy: not for the rest of the CLI

    flat = expand(trace, launch_index, cta) if cta is not None else None
    c = counters(trace)
    if as_json:
        out = {
            "gpu": hw.name,
            "algo": trace.algo,
            "workload": trace.workload,
            "config": trace.config,
            "launches": [_launch_summary(launch, hw) for launch in trace.launches],
            "counters": c.to_dict(),
            "trace": to_dict(trace),
        }
        if flat is not None:
            out["expanded"] = [
                {"role": f.role, "iters": dict(f.iters), "op": _op_text(f.op)} for f in flat
            ]
        print_json(out)
        return
    _print_header(trace, hw)
    _print_launches(trace, hw)
    for launch in trace.launches:
        console.print(_program_tree(launch))
    _print_counters(c)
    if flat is not None:
        name = trace.launches[launch_index].name
        console.print(Text(f"CTA {cta} of launch {name}, unrolled ({len(flat)} ops):", "bold"))
        for f in flat:
            it = " ".join(f"{k}={v}" for k, v in f.iters)
            console.print(Text(f"  {f.role:<10} {it:<14} {_op_text(f.op)}"), soft_wrap=True)


@trace_app.command("export")
def trace_export(
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write (*.trace.json).")],
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
) -> None:
    """Write a trace to a .trace.json file (replay it with `tilesim trace replay`)."""
    check_output(output, "--output", (SUFFIX,))
    _, trace = _build(
        gpu, sets, algo, batch, heads, seqlen, seqlen_kv, head_dim, causal, dtype, pass_,
        config_name, serving_options(kv_heads, seqlens_kv, page_size), block_m=block_m,
        block_n=block_n, num_warps=num_warps, num_stages=num_stages, mma_path=mma_path,
        persistent=persistent, pingpong=pingpong, warp_specialize=warp_specialize,
        num_splits=num_splits, pack_gqa=pack_gqa,
    )  # fmt: skip
    path = save(trace, output)
    ctas = sum(launch.num_ctas for launch in trace.launches)
    console.print(
        Text(f"wrote {path} ({trace.algo}, {len(trace.launches)} launch(es), {ctas} CTAs)"),
        soft_wrap=True,  # a path must stay whole to be copied
    )


# -- rendering ---------------------------------------------------------------------


def _launch_summary(launch: Launch, gpu: GPU) -> dict:
    return {
        "name": launch.name,
        "grid": {name: size for name, size in launch.grid},
        "ctas": launch.num_ctas,
        "smem_bytes": launch.smem_bytes,
        "threads": launch.threads,
        "regs_per_thread": launch.regs_per_thread,
        "mma_path": launch.mma_path,
        "persistent_ctas": launch.persistent_ctas,
        "occupancy": occupancy(launch, gpu).to_dict(),
    }


def _print_header(trace: Trace, gpu: GPU) -> None:
    w, c = trace.workload, trace.config
    shape = (
        f"B={w['batch']} H={w['heads']} N_q={w['seqlen_q']} N_kv={w['seqlen_kv']} "
        f"d={w['head_dim']} {w['dtype']} {'causal' if w['causal'] else 'non-causal'}"
        f" {w.get('pass_', 'fwd')}"
    )
    console.print(Text(f"{trace.algo} on {gpu.display_name} ({gpu.name}): {shape}", "bold"))
    console.print(Text("config: " + " ".join(f"{k}={v}" for k, v in c.items())))
    console.print(Text("params: " + " ".join(f"{k}={v}" for k, v in trace.params.items())))


def _print_launches(trace: Trace, gpu: GPU) -> None:
    table = Table(title="launches", box=box.SIMPLE_HEAD)
    cols = ("launch", "grid", "CTAs", "smem/CTA", "threads", "regs", "CTAs/SM", "limit", "path")
    for col in cols:
        table.add_column(col, justify="left" if col in ("launch", "grid", "path") else "right")
    notes = []
    for launch in trace.launches:
        occ = occupancy(launch, gpu)
        ctas = f"{launch.num_ctas}" + (
            f" on {launch.persistent_ctas}" if launch.persistent_ctas else ""
        )
        table.add_row(
            launch.name,
            " x ".join(f"{n}={size}" for n, size in launch.grid),
            ctas,
            f"{launch.smem_bytes / 1024:.1f} KiB",
            str(launch.threads),
            str(launch.regs_per_thread),
            str(occ.ctas_per_sm),
            occ.limiter,
            launch.mma_path,
        )
        notes.append(
            f"  {launch.name}: CTAs/SM by resident blocks {occ.by_ctas}, shared memory "
            f"{occ.by_smem}, registers {occ.by_regs}, warps {occ.by_warps}"
            + (f"; {launch.persistent_ctas} persistent CTAs" if launch.persistent_ctas else "")
        )
    console.print(table)
    console.print(Text("occupancy inputs:\n" + "\n".join(notes)))


def _print_counters(c) -> None:
    table = Table(title="counters (walked from the IR)", box=box.SIMPLE_HEAD)
    table.add_column("counter")
    table.add_column("value", justify="right")
    rows = [
        ("matmul FLOPs", f"{c.matmul_flops:.4g}"),
        ("exp count", f"{c.exp_count:.4g}"),
        ("other FP32 ops", f"{c.fp32_ops:.4g}"),
        ("HBM bytes, compulsory", fmt_bytes(c.compulsory_hbm_bytes)),
        ("HBM bytes, no reuse", fmt_bytes(c.no_reuse_hbm_bytes)),
        (
            "  read / written",
            f"{fmt_bytes(c.no_reuse_read_bytes)} / {fmt_bytes(c.no_reuse_write_bytes)}",
        ),
    ]
    for tensor, nbytes in c.read_bytes_by_tensor.items():
        rows.append((f"  {tensor} loads", fmt_bytes(nbytes)))
    for tensor, nbytes in c.write_bytes_by_tensor.items():
        rows.append((f"  {tensor} stores", fmt_bytes(nbytes)))
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


def _program_tree(launch: Launch) -> Tree:
    tree = Tree(Text(f"launch {launch.name}", "bold"))
    for role in launch.program.roles:
        node = tree.add(Text(f"role {role.name} ({role.warps} warps)"))
        _add_ops(node, role.ops)
    return tree


def _add_ops(node: Tree, ops: tuple[Op, ...]) -> None:
    for op in ops:
        if isinstance(op, Loop):
            pre = f", prefetch {op.prefetch}" if op.prefetch else ""
            _add_ops(node.add(Text(f"loop {op.var} < {op.trips}{pre}")), op.body)
        else:
            node.add(Text(_op_text(op)))


def _op_text(op: Op) -> str:
    """One line per op: what it moves or computes, with its expressions as written."""
    deps = f"  after {', '.join(op.deps)}" if getattr(op, "deps", ()) else ""
    if isinstance(op, Load):
        tma = " (TMA)" if op.tma else ""
        return f"load {op.id} <- {op.tensor}[{', '.join(map(str, op.tile))}]{tma}: {op.nbytes} B"
    if isinstance(op, Store):
        return f"store -> {op.tensor}[{', '.join(map(str, op.tile))}]: {op.nbytes} B{deps}"
    if isinstance(op, Mma):
        name = f" {op.id}" if op.id else ""
        sync = " async" if op.async_ else ""
        return f"mma{name}{sync} {op.dtype}: m={op.m} n={op.n} k={op.k}{deps}"
    if isinstance(op, Vector):
        name = f" {op.id}" if op.id else ""
        smem = f" smem={op.smem}" if op.smem else ""
        return f"vector{name}: exp={op.exp} fp32={op.fp32}{smem}{deps}"
    if isinstance(op, Wait):
        return f"wait {', '.join(op.deps)}"
    if isinstance(op, Arrive):
        return f"arrive {op.name}"
    raise TypeError(op)


@trace_app.command("replay", epilog=BOUND_HELP)
def replay_cmd(
    path: Annotated[Path, typer.Argument(help="A *.trace.json file.", show_default=False)],
    gpu: GpuOpt = DEFAULT_GPU,
    sets: SetOpt = None,
    fidelity: FidelityOpt = "fast",
    as_json: JsonOpt = False,
    timeline: TimelineOpt = None,
    timeline_sms: TimelineSmsOpt = None,
    timeline_window: TimelineWindowOpt = None,
    gantt: GanttOpt = None,
) -> None:
    """Simulate a trace file (written by `tilesim trace export` or by hand)."""
    hw = gpu_from_options(gpu, sets)
    trace = load(path)
    run_and_show(trace, hw, fidelity, as_json, timeline, timeline_sms, timeline_window, gantt)
