"""`tilesim hw list | show`: the GPU presets, their sources, and what-if variants."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from ..hwmodels import (
    ALIASES,
    FIELDS,
    GPU,
    PRESETS_DIR,
    SETTABLE_FIELDS,
    UNITS,
    derived_figures,
    format_number,
    list_presets,
    load_gpu,
)
from ..hwmodels.provenance import confidence, preset_class, source_kind
from .common import DEFAULT_GPU, JsonOpt, SetOpt, console, gpu_from_options, print_json

hw_app = typer.Typer(
    help="GPU presets: list them, or show one with each value's source (and what-if --set).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(hw_app, name="hw")


def _features(gpu: GPU) -> list[str]:
    return [
        flag.removeprefix("has_")
        for flag in ("has_tma", "has_wgmma", "has_fp8")
        if getattr(gpu, flag)
    ]


def _summary(gpu: GPU) -> dict[str, Any]:
    """One row of `hw list`: the headline figures, in display units."""
    return {
        "name": gpu.name,
        "display_name": gpu.display_name,
        "arch": gpu.arch,
        "aliases": sorted(alias for alias, target in ALIASES.items() if target == gpu.name),
        "class": preset_class(gpu.name),
        "confidence": confidence(gpu.name, PRESETS_DIR),
        "sm_count": gpu.sm_count,
        "sm_clock_GHz": gpu.sm_clock_hz / 1e9,
        "tensor_fp16_TFLOPS": gpu.peak_tensor_flops("fp16") / 1e12,
        "tensor_fp8_TFLOPS": gpu.peak_tensor_flops("fp8") / 1e12 if gpu.has_fp8 else None,
        "hbm_TBps": gpu.hbm_bandwidth_Bps / 1e12,
        "l2_MiB": gpu.l2_bytes / 2**20,
        "smem_KiB_per_sm": gpu.smem_bytes_per_sm / 1024,
        "features": _features(gpu),
    }


@hw_app.command("list")
def hw_list(as_json: JsonOpt = False) -> None:
    """List the GPU presets with their headline figures."""
    rows = [_summary(load_gpu(name)) for name in list_presets()]
    if as_json:
        print_json(rows)
        return
    table = Table(
        title="GPU presets (dense tensor TFLOPS, default instruction path)",
        caption="by: C = calibrated (measured on it), X = transferred (measured on a sibling "
        "die), P = published studies, D = datasheet. TW8: TMA, wgmma, fp8 (- absent)",
        box=box.SIMPLE_HEAD,
        padding=0,  # the box's one-space column separator is enough: fits 80 columns
        pad_edge=False,
    )
    # a preset's name is what the user types next: never truncate it
    table.add_column("name", no_wrap=True, min_width=max(len(r["name"]) for r in rows))
    table.add_column("alias", no_wrap=True)  # the shortest; --json lists them all
    table.add_column("by", no_wrap=True)
    for column in (
        "SMs",
        "GHz",
        "fp16",
        "fp8",
        "HBM\nTB/s",
        "L2\nMiB",
        "smem\nKiB",
    ):
        width = 3 if column == "SMs" else 4  # the widest value: never squeezed
        table.add_column(column, justify="right", no_wrap=True, min_width=width)
    table.add_column("TW8", no_wrap=True, min_width=3)
    for row in rows:
        fp8 = row["tensor_fp8_TFLOPS"]
        table.add_row(
            row["name"],
            min(row["aliases"], key=len, default="-"),
            CLASS_CODES[row["class"]],
            str(row["sm_count"]),
            f"{row['sm_clock_GHz']:.2f}",
            f"{row['tensor_fp16_TFLOPS']:.0f}",
            "-" if fp8 is None else f"{fp8:.0f}",
            f"{row['hbm_TBps']:.2f}",
            f"{row['l2_MiB']:.0f}",
            f"{row['smem_KiB_per_sm']:.0f}",
            _flags(row["features"]),
        )
    console.print(table)


CLASS_CODES = {"calibrated": "C", "transferred": "X", "published": "P", "datasheet": "D"}


def _flags(features: list[str]) -> str:
    """The three feature flags as a compact column: T(MA), W(gmma), 8 (fp8), or -."""
    flags = zip("TW8", ("tma", "wgmma", "fp8"), strict=True)
    return "".join(c if f in features else "-" for c, f in flags)


def _round(value: float) -> str:
    """A derived figure to the digits a datasheet quotes (3,350 GB/s; 989.4; 0.938)."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def _describe(gpu: GPU) -> dict[str, Any]:
    fields = {
        key: {
            "value": getattr(gpu, key),
            "unit": UNITS[key],
            "source": gpu.sources.get(key, ""),
            "kind": source_kind(gpu.sources.get(key, "")) if key in gpu.sources else "",
            "settable": key in SETTABLE_FIELDS,
        }
        for key in FIELDS
    }
    return {
        "name": gpu.name,
        "class": preset_class(gpu.name),
        "confidence": confidence(gpu.name, PRESETS_DIR),
        "fields": fields,
        "derived": derived_figures(gpu),
    }


@hw_app.command("show")
def hw_show(
    gpu: Annotated[
        str,
        typer.Argument(help="Preset name or alias (a100, h100, h200, ...) or a .toml path."),
    ] = DEFAULT_GPU,
    sets: SetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show every field of a GPU with its unit and source, and the peaks derived from them."""
    hw = gpu_from_options(gpu, sets)
    info = _describe(hw)
    if as_json:
        print_json(info)
        return
    console.print(f"[bold]{hw.display_name}[/bold]  ({hw.name}, {hw.arch}, {info['class']})")
    console.print(f"confidence: {info['confidence']}")
    table = Table(
        title="fields (--set KEY=VALUE changes the numbers and flags); each source opens "
        "with its kind",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("field", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("source", overflow="fold", ratio=1)
    for key, field in info["fields"].items():
        if key in ("name", "display_name", "arch"):
            continue  # in the heading above
        value = field["value"]
        text = value if isinstance(value, str) else format_number(value)
        table.add_row(key, f"{text} {field['unit']}".rstrip(), field["source"])
    console.print(table)

    derived = Table(title="derived figures (peaks at sm_clock_hz)", box=box.SIMPLE_HEAD)
    derived.add_column("figure", no_wrap=True)
    derived.add_column("value", justify="right", no_wrap=True)
    derived.add_column("how", overflow="fold", ratio=1)
    for key, figure in info["derived"].items():
        derived.add_row(key, f"{_round(figure['value'])} {figure['unit']}", figure["how"])
    console.print(derived)
