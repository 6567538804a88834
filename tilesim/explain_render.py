"""Renderings of an `Explanation`: rich text for the terminal, and Markdown.

Both print the same sections and the same side-by-side table; the numbers are
the explanation's own (rounded for reading; ``--json`` keeps them whole).
"""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .explain.fmt import fmt_time
from .explain.story import Explanation
from .units import fmt_bytes

TABLE_COLUMNS = (
    ("algorithm", "algo"),
    ("S/P through HBM", "score_hbm_bytes"),
    ("extra memory", "extra_bytes"),
    ("CTAs (per launch)", "ctas"),
    ("waves", "waves"),
    ("hardware features", "features"),
    ("precision", "precision"),
    ("time", "time_s"),
    ("TFLOPS", "tflops"),
    ("bound", "bound"),
)


# The backward's table: the N x N traffic is P, dP and dS; the memory is what the
# forward kept for it (explain_backward).
BACKWARD_HEADERS = {"score_hbm_bytes": "N×N through HBM", "extra_bytes": "kept from forward"}


def columns(expl: Explanation) -> list[str]:
    """The table's headers (the backward's name two columns differently)."""
    backward = expl.workload.get("pass_", "fwd") != "fwd"
    return [BACKWARD_HEADERS.get(key, h) if backward else h for h, key in TABLE_COLUMNS]


def table_cells(row: dict) -> list[str]:
    """The table row as text, in TABLE_COLUMNS order."""
    if row.get("time_s") is None:
        return [_algo(row), f"not predicted: {row.get('error')}"] + [""] * (len(TABLE_COLUMNS) - 2)
    extra = fmt_bytes(row["extra_bytes"])
    if row["extra_tensors"]:
        extra += f" ({', '.join(row['extra_tensors'])})"
    return [
        _algo(row),
        fmt_bytes(row["score_hbm_bytes"]) if row["score_hbm_bytes"] else "0",
        extra,
        " + ".join(_count(n) for n in row["ctas"]),
        str(row["waves"]),
        ", ".join(row["features"]),
        row["precision"],
        fmt_time(row["time_s"]),
        f"{row['tflops']:.0f}",
        row["bound"],
    ]


def _algo(row: dict) -> str:
    return row["algo"].replace("_", " ")


def _count(n: int) -> str:
    """CTA counts, short: 4096, 131k, 1.05M."""
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1e3:.0f}k"
    return f"{n / 1e6:.3g}M"


PRECISION_NOTE = "softmax statistics and accumulators are fp32 in every algorithm"


def _title(expl: Explanation) -> str:
    w = expl.workload
    mask = ", causal" if w["causal"] else ""
    pass_ = w.get("pass_", "fwd")
    what = {"bwd": "Attention's backward", "fwd_bwd": "Attention forward + backward"}
    return (
        f"{what.get(pass_, 'Attention')} on the {expl.gpu_display}: B={w['batch']} "
        f"H={w['heads']} N={w['seqlen_q']} d={w['head_dim']} {w['dtype']}{mask}"
    )


def render_rich(expl: Explanation, console: Console) -> None:
    console.print(Text(_title(expl), style="bold"))
    for i, s in enumerate(expl.sections):
        body = Group(*(Text(p) for p in _spaced(s.paragraphs)))
        console.print(
            Panel(
                body, title=f"{i}. {s.title}", title_align="left", box=box.ROUNDED, padding=(0, 1)
            )
        )
    table = Table(title="Side by side", caption=PRECISION_NOTE, box=box.SIMPLE_HEAVY)
    for header in columns(expl):
        table.add_column(header, overflow="fold")
    for row in expl.table:
        table.add_row(*table_cells(row))
    console.print(table)


def _spaced(paragraphs: list[str]) -> list[str]:
    out = []
    for i, p in enumerate(paragraphs):
        out.append(p if i == len(paragraphs) - 1 else p + "\n")
    return out


def render_markdown(expl: Explanation) -> str:
    lines = [f"# {_title(expl)}", ""]
    for i, s in enumerate(expl.sections):
        lines += [f"## {i}. {s.title}", ""]
        for p in s.paragraphs:
            lines += [_md_escape(p), ""]
    lines += ["## Side by side", ""]
    lines.append("| " + " | ".join(columns(expl)) + " |")
    lines.append("|" + "---|" * len(TABLE_COLUMNS))
    for row in expl.table:
        lines.append("| " + " | ".join(_md_escape(c) for c in table_cells(row)) + " |")
    lines += ["", f"Precision: {PRECISION_NOTE}."]
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")
