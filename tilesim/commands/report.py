"""`tilesim report`: accuracy of the model against committed GPU measurements (CPU)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import TilesimError
from .common import (
    BOUND_HELP,
    FIGURE_SUFFIXES,
    JsonOpt,
    check_output,
    console,
    err_console,
    print_json,
    workers_of,
)

FIDELITIES = ("fast", "detailed")


def register(app: typer.Typer) -> None:
    app.command("report", epilog=BOUND_HELP)(report)


def report(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Results files (validate and bench JSON; others are passed over with a note) "
            "[default: every validate and bench file in results/raw/].",
            show_default=False,
        ),
    ] = None,
    gpu_preset: Annotated[
        str | None,
        typer.Option(
            "--gpu-preset",
            help="Preset to predict with, e.g. h200 or h200-cal [default: the calibrated preset "
            "of the GPU the files were measured on, or its datasheet one].",
            show_default=False,
        ),
    ] = None,
    png: Annotated[
        Path | None, typer.Option("--png", help="Write predicted-vs-measured plot here.")
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Write a markdown report here.")
    ] = None,
    fidelity: Annotated[str, typer.Option("--fidelity", help="fast or detailed.")] = "fast",
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            help="Worker processes predicting [default: all cores].",
            show_default=False,
        ),
    ] = None,
    stored: Annotated[
        bool,
        typer.Option(
            "--stored",
            help="Use the predictions stored in the files (the model of the day) instead of "
            "recomputing them.",
        ),
    ] = False,
    preset_clock: Annotated[
        bool,
        typer.Option(
            "--preset-clock",
            help="Predict at the preset's clock (its clock model where it has one: what "
            "predict uses) instead of the clock read while each point was timed.",
        ),
    ] = False,
    update_baseline: Annotated[
        bool,
        typer.Option(
            "--update-baseline",
            help="Record this MAPE in results/derived/accuracy.json, the figure the accuracy "
            "test holds the model to.",
        ),
    ] = False,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="Where --update-baseline writes [default: results/derived/accuracy.json].",
            show_default=False,
        ),
    ] = None,
    timing: Annotated[
        str,
        typer.Option(
            "--timing",
            help="eager (do_bench of the launches as Python issues them) or graph (their "
            "CUDA-graph replay: the GPU's time without the host's launch cost).",
        ),
    ] = "eager",
    json_out: JsonOpt = False,
) -> None:
    """Accuracy of the model against measured kernel times (predictions recomputed, on CPU)."""
    from ..validate import report as rep

    if fidelity not in FIDELITIES:
        raise TilesimError(f"unknown fidelity {fidelity!r} (choose fast or detailed)")
    jobs = workers_of(jobs)
    check_output(png, "--png", FIGURE_SUFFIXES)
    check_output(markdown, "--markdown")
    check_output(baseline, "--baseline", (".json",))
    with _progress() as tick:
        result = rep.build_report(
            files,
            gpu_preset,
            fidelity,
            jobs,
            stored,
            measured_clock=not preset_clock,
            progress=tick,
            timing=timing,
        )
    for note in result.skipped:
        err_console.print(f"note: passed over {note}: no kernel measurement", soft_wrap=True)
    summary = result.summary()
    if markdown is not None:
        from ..validate.schema import save_text

        save_text(rep.to_markdown(result), markdown)
    if png is not None:
        rep.write_png(result, png)
    if update_baseline:
        summary["baseline"] = rep.write_baseline(result, baseline)
    if json_out:
        summary["points_detail"] = [p.to_dict() for p in result.points + result.external]
        print_json(summary)
        return
    _print(summary, rep)
    for label, path in (("markdown", markdown), ("plot", png)):
        if path is not None:
            console.print(f"wrote {label} to {path}")
    if update_baseline:
        console.print(
            f"baseline: MAPE {summary['baseline']['mape_pct']:.2f}% written to "
            f"{baseline or rep.baseline_path()}"
        )


def _print(summary: dict, rep) -> None:
    head = Table(title=f"tilesim accuracy ({summary['preset']}, {summary['fidelity']})")
    head.add_column("figure")
    head.add_column("value")
    for k, v in rep.summary_rows(summary):
        head.add_row(k, v)
    console.print(head)
    groups = Table(title="error by group (+: predicted slower than measured)")
    for col in ("by", "group", "n", "MAPE", "signed mean", "max |err|"):
        groups.add_column(col, justify="right" if col not in ("by", "group") else "left")
    for row in rep.group_rows(summary):
        groups.add_row(*map(str, row))
    console.print(groups)


@contextlib.contextmanager
def _progress():
    """A progress bar of the predictions on stderr; yields the ``progress(done, total)``
    callback. A log file (stderr not a terminal) gets no bar, nor the blank line it leaves."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    if not err_console.is_terminal:
        yield lambda done, total: None
        return
    with Progress(
        "predicting",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("predict", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield tick
