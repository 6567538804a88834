"""`tilesim calibrate`: micro-benchmark the GPU at hand and write a calibrated preset, or
re-derive one from results files on the CPU (``--from-results``, ``--transfer-to``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import TilesimError
from ..hwmodels.presets import base_preset_for, calibrated_name
from ..validate.calibrate import STEPS as CALIBRATION_STEPS
from .common import (
    JsonOpt,
    check_output,
    console,
    print_json,
)
from .gpu_options import (
    OutOpt,
    check_out_json,
    default_out,
    log,
)


def calibrate(
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Datasheet preset to calibrate [default: the one of the GPU at hand].",
            show_default=False,
        ),
    ] = None,
    preset_out: Annotated[
        Path | None,
        typer.Option(
            "--preset-out",
            help="Calibrated preset to write [default: hwmodels/presets/<base>.calibrated.toml].",
            show_default=False,
        ),
    ] = None,
    out: OutOpt = None,
    quick: Annotated[bool, typer.Option("--quick", help="Shorter runs (a smoke test).")] = False,
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help=f"Comma-separated steps: {', '.join(CALIBRATION_STEPS)} "
            "[default: all]; fields of steps not run keep the datasheet value.",
            show_default=False,
        ),
    ] = None,
    from_results: Annotated[
        list[Path] | None,
        typer.Option(
            "--from-results",
            help="Derive the preset from the raw figures of earlier calibrate results files "
            "instead of measuring (no GPU needed; repeat it to combine runs, a later "
            "file's figure replacing an earlier one of the same name).",
            show_default=False,
        ),
    ] = None,
    transfer_to: Annotated[
        str | None,
        typer.Option(
            "--transfer-to",
            help="With --from-results: write the preset of a sibling product of the measured "
            "die instead (h100: the H200's calibration carried to the H100 SXM; default "
            "output hwmodels/presets/<target>.transferred.toml).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Micro-benchmark this GPU and write a calibrated preset (never looks at attention)."""
    from ..validate.calibrate import check_steps
    from ..validate.gpu.timing import require_cuda

    steps = check_steps([s.strip() for s in only.split(",")] if only else None)
    check_out_json(out)
    check_output(preset_out, "--preset-out", (".toml",))
    if transfer_to is not None and from_results is None:
        raise TilesimError("--transfer-to needs --from-results (the sibling's raw figures)")
    if from_results is not None:
        _derive_from(from_results, base, preset_out, json_out, transfer_to)
        return
    if base:
        from ..hwmodels import load_gpu

        load_gpu(base)  # a bad name fails before the GPU is looked for
    require_cuda("calibrate")
    import torch

    from ..hwmodels import preset_path, write_preset
    from ..validate import calibrate as cal
    from ..validate import schema
    from ..validate.gpu import metadata
    from ..validate.gpu.calibrate import run_calibration

    device = torch.cuda.get_device_name(0)
    base_gpu, base_name = _base_for(device, base)
    meta = metadata.collect(
        {"command": "calibrate", "base_preset": base_name, "quick": quick, "steps": list(steps)}
    )
    t0 = time.perf_counter()
    log(f"calibrating {device} against {base_name} ...")
    rows = run_calibration(quick=quick, log=log, only=steps)
    gpu, fields, notes = cal.derive_preset(rows, base_gpu, meta["date"])
    metadata.finish(meta)
    meta["derived"] = {
        f: {
            "datasheet": getattr(base_gpu, f),
            "calibrated": getattr(gpu, f),
            "source": gpu.sources.get(f, ""),
        }
        for f in fields
    }
    meta["notes"] = notes
    meta["wall_s"] = round(time.perf_counter() - t0, 1)
    doc = schema.new_results("calibrate", meta)
    doc["measurements"] = rows
    results = out or default_out("-calibrate")
    schema.save_results(doc, results)
    target = preset_out or preset_path(calibrated_name(base_gpu.name))
    header = (
        f"{gpu.display_name}: measured by `tilesim calibrate` on {meta['date']} "
        f"({device}, {len(rows)} micro-benchmarks; raw figures in {results.name}).\n"
        "Only the fields below differ from the datasheet preset named by `base`;\n"
        "each comment says how its value was measured. No attention timing was used."
    )
    if base_name is None:  # a GPU with no preset: every field, the unmeasured ones named
        from ..validate.device import unmeasured

        missing = unmeasured(gpu)
        notes.append(f"not measured (still assumed): {', '.join(missing) or 'none'}")
        header = (
            f"{gpu.display_name}: built by `tilesim calibrate` on {meta['date']} from the "
            f"device's properties and {len(rows)} micro-benchmarks (raw figures in "
            f"{results.name}).\nFields marked assumed were not measured: {len(missing)} of "
            "them. No attention timing was used."
        )
        write_preset(gpu, target, header)
    else:
        write_preset(gpu, target, header, base=base_name, only=fields)
    if json_out:
        print_json({"preset": str(target), "results": str(results), "derived": meta["derived"]})
        return
    _print_derived(base_gpu, gpu, fields, notes, f"wrote {target} and {results}")


def _base_for(device: str, base: str | None):
    """(GPU, preset name) to calibrate against: ``--base``, the datasheet preset of a GPU
    tilesim knows, or, for one it does not, a preset from its device properties (name
    None: it has no file to overlay)."""
    from ..hwmodels import load_gpu

    if base:
        gpu = load_gpu(base)
        return gpu, gpu.name
    try:
        gpu = load_gpu(base_preset_for(device))
        return gpu, gpu.name
    except TilesimError:
        import torch

        from ..validate.device import preset_from_properties

        log(f"no preset for {device}: starting from its device properties")
        return preset_from_properties(torch.cuda.get_device_properties(0)), None


def _print_derived(base_gpu, gpu, fields, notes, done: str) -> None:
    table = Table(title=f"calibrated {gpu.name}")
    for col in ("field", "datasheet", "calibrated", "ratio"):
        table.add_column(col, justify="left" if col == "field" else "right")
    for f in fields:
        a, b = getattr(base_gpu, f), getattr(gpu, f)
        ratio = f"{b / a:.3f}" if isinstance(a, int | float) and a else ""
        table.add_row(f, f"{a:.4g}", f"{b:.4g}", ratio)
    console.print(table)
    for note in notes:
        console.print(f"note: {note}")
    console.print(done)


def _derive_from(
    files: list[Path],
    base: str | None,
    preset_out: Path | None,
    json_out: bool,
    transfer_to: str | None = None,
):
    """`calibrate --from-results`: the preset from results files' raw rows (CPU); with
    ``transfer_to``, that of the sibling product it is carried to."""
    from ..hwmodels import load_gpu, preset_path, write_preset
    from ..validate import calibrate as cal
    from ..validate import schema

    by_name: dict = {}
    meta: dict = {}
    first = files[0]
    for path in files:
        doc = schema.load_results(path)
        if doc.get("kind") != "calibrate":
            raise TilesimError(f"{path}: not a calibrate results file ({doc.get('kind')!r})")
        meta = meta or doc.get("metadata", {})
        when = doc.get("metadata", {}).get("date", "")
        # each row keeps the date of its run (a field derived from a later run says so)
        by_name.update({row["name"]: {"date": when, **row} for row in doc["measurements"]})
    rows = list(by_name.values())
    if not rows:
        names = ", ".join(map(str, files))
        raise TilesimError(f"{names}: no micro-benchmark figure to derive from")
    device = (meta.get("device") or {}).get("name", "")
    if base:
        base_gpu = load_gpu(base)
    else:
        recorded = meta.get("base_preset")
        if recorded is not None and not isinstance(recorded, str):
            raise TilesimError(f"{first}: metadata.base_preset must be a preset name")
        try:
            base_gpu = load_gpu(recorded or base_preset_for(device))
        except TilesimError as exc:
            raise TilesimError(f"{first}: metadata.base_preset: {exc}") from None
    gpu, fields, notes = cal.derive_preset(rows, base_gpu, meta.get("date", ""))
    names = ", ".join(p.name for p in files)
    if transfer_to is not None:
        _write_transferred(gpu, transfer_to, meta.get("date", ""), names, preset_out, json_out)
        return
    target = preset_out or preset_path(calibrated_name(base_gpu.name))
    header = (
        f"{gpu.display_name}: measured by `tilesim calibrate` on {meta.get('date', '?')} "
        f"({device or '?'}, {len(rows)} micro-benchmarks; raw figures in {names}).\n"
        "Only the fields below differ from the datasheet preset named by `base`;\n"
        "each comment says how its value was measured. No attention timing was used."
    )
    write_preset(gpu, target, header, base=base_gpu.name, only=fields)
    if json_out:
        print_json({"preset": str(target), "results": [str(p) for p in files], "fields": fields})
        return
    _print_derived(base_gpu, gpu, fields, notes, f"wrote {target} from {names}")


def _write_transferred(measured, transfer_to, date, names, preset_out, json_out) -> None:
    from ..hwmodels import FIELDS, preset_path, write_preset
    from ..validate import transfer as tr

    sibling = tr.sibling_of(transfer_to)
    if measured.name.removesuffix(".calibrated") != sibling.measured:
        raise TilesimError(
            f"--transfer-to {transfer_to}: the results are of {measured.name}, not of "
            f"{sibling.measured} (the die it transfers from)"
        )
    gpu = tr.transfer_preset(measured, sibling, date)
    target = preset_out or preset_path(tr.transferred_name(sibling.target))
    write_preset(
        gpu, target, tr.header(gpu, measured, sibling, names), base=sibling.target, only=FIELDS
    )
    if json_out:
        print_json({"preset": str(target), "from": measured.name, "transferred": tr.SM_SIDE})
        return
    console.print(f"wrote {target}: {gpu.display_name}")


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
