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


def new_axes(figsize: tuple[float, float] = (7, 4.2)) -> tuple[Any, Any]:
    """A figure on matplotlib's Agg canvas (no pyplot state) and its one set of axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def save_png(fig: Any, path: Path) -> None:
    """``fig`` laid out tight and written to ``path`` (its folder made) as a PNG with no software version or time
    stamp in it, so that the same results give the same bytes."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})


def write_text(path: Path, text: str) -> None:
    """``text`` written to ``path``, its folder made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
