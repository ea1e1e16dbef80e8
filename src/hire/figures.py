"""What the lab's reports share: figures on matplotlib's Agg canvas (no pyplot state) saved as PNGs that the same
results make byte for byte, text files written into folders made for them, and how a score and a name read in
tables and file names. Used by the probes (:mod:`hire.probing`), the ranking study (:mod:`hire.ranking`) and the
layer analyses (:mod:`hire.layers`); the core never imports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def slug(text: str) -> str:
    """``text`` as a file name: letters, digits, ``-``, ``_`` and ``.`` kept, anything else ``-``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-") or "encoder"


def pct(value: float) -> str:
    """A fraction as points with two decimals: ``0.3234`` -> ``32.34``."""
    return f"{100 * value:.2f}"


# Sized for the documentation site's content column (about 780 px wide at a 1280 px window): figures are
# FIGURE_WIDTH inches wide, saved at DPI (about 1.5 device pixels per displayed pixel, crisp on high-density
# screens), with legends outside the axes (LEGEND) whose handles are long enough to tell line styles apart.
FIGURE_WIDTH = 8.0
DPI = 150
LEGEND = {"fontsize": 9, "handlelength": 3.5, "frameon": False}
MARKERS = ("o", "s", "^", "D", "v", "P")  # with a line style or a colour: lines told apart where they cross


def new_axes(figsize: tuple[float, float] = (FIGURE_WIDTH, 4.6)) -> tuple[Any, Any]:
    """A figure on matplotlib's Agg canvas (no pyplot state, constrained layout, so that a legend placed
    ``outside`` gets its own room) and its one set of axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def rows_first(items: list[Any], ncol: int) -> list[Any]:
    """``items`` reordered so that a legend of ``ncol`` columns (which matplotlib fills column by column) reads
    them row by row."""
    nrows = -(-len(items) // ncol)
    grid = [items[r * ncol:(r + 1) * ncol] for r in range(nrows)]
    return [row[c] for c in range(ncol) for row in grid if c < len(row)]


def legend_below(fig: Any, groups: list[tuple[list[Any], list[str]]], ncol: int) -> Any:
    """One legend under the axes (never over the data), read row by row, each group of entries (colours, then
    line styles) starting on a row of its own; long handles and markers tell the line styles apart."""
    from matplotlib.lines import Line2D

    ncol = max(1, min(ncol, max(len(h) for h, _ in groups)))
    handles: list[Any] = []
    labels: list[str] = []
    for group_handles, group_labels in groups:
        blank = -len(group_handles) % ncol
        handles += [*group_handles, *[Line2D([], [], linestyle="none") for _ in range(blank)]]
        labels += [*group_labels, *[""] * blank]
    return fig.legend(rows_first(handles, ncol), rows_first(labels, ncol), loc="outside lower center", ncol=ncol,
                      **LEGEND)


def save_png(fig: Any, path: Path) -> None:
    """``fig`` laid out (its legends inside the picture) and written to ``path`` (its folder made) as a PNG with
    no software version or time stamp in it, so that the same results give the same bytes."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.08, metadata={"Software": None})


def write_text(path: Path, text: str) -> None:
    """``text`` written to ``path``, its folder made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
