"""The figures read at the site's column width (issue 76, item 4): every committed figure a docs page shows is
between MIN_WIDTH and MAX_WIDTH pixels wide (the content column is about 780 px at a 1280 px window; figures are
saved at about 1.5 pixels per displayed pixel), and every kind of figure puts its legend outside the axes with
handles long enough to tell line styles apart (drawn here on tiny made-up data). Screenshots of the pages in
headless Chromium: ``python scripts/screenshot_docs.py --out /tmp/shots``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from paths import REPO, SCRIPTS, load_script
from PIL import Image

MIN_WIDTH, MAX_WIDTH = 600, 1600
FIGURE_LINK = re.compile(r"experiments/[\w./-]+?\.png")


def linked_figures() -> list[Path]:
    """The committed PNGs under experiments/ that a page of the site (or the README) shows."""
    pages = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    return sorted({REPO / m for page in pages for m in FIGURE_LINK.findall(page.read_text())})


def width_problems(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        with Image.open(path) as image:
            width = image.size[0]
        if not MIN_WIDTH <= width <= MAX_WIDTH:
            out.append(f"{path.relative_to(path.parents[2]) if len(path.parents) > 2 else path}: {width} px wide")
    return out


def test_every_linked_figure_exists_and_fits_the_column() -> None:
    figures = linked_figures()
    assert len(figures) > 50, "the docs pages show the experiments' figures"
    assert [p for p in figures if not p.is_file()] == []
    assert width_problems(figures) == []


def test_the_width_rule_fails_on_a_figure_too_small_or_too_wide(tmp_path: Path) -> None:
    Image.new("RGB", (500, 370), "white").save(tmp_path / "small.png")  # wikiqa's old figure
    Image.new("RGB", (1800, 700), "white").save(tmp_path / "wide.png")
    Image.new("RGB", (1200, 700), "white").save(tmp_path / "right.png")
    assert [p.split(":")[0].rpartition("/")[2] for p in
            width_problems(sorted(tmp_path.glob("*.png")))] == ["small.png", "wide.png"]


# --- legends outside the data, on every kind of figure ---------------------------------------------------------


def legend_problems(fig: Any) -> list[str]:
    """Legends over an axes' data area, with short handles, and a figure too narrow or too wide at its DPI."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from hire.figures import DPI

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    legends = [*fig.legends, *[ax.get_legend() for ax in fig.axes if ax.get_legend()]]
    out = [] if legends else ["no legend"]
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if legend.handlelength < 3:
            out.append(f"handle length {legend.handlelength}")
        for ax in fig.axes:
            if ax.has_data() and box.overlaps(ax.get_window_extent(renderer)):
                out.append(f"legend over the axes {ax.get_title()!r}")
    if not MIN_WIDTH <= fig.get_figwidth() * DPI <= MAX_WIDTH:
        out.append(f"{fig.get_figwidth() * DPI:.0f} px wide")
    return out


def caught(monkeypatch: pytest.MonkeyPatch, module: Any, name: str = "save_png") -> list[Any]:
    """The figures ``module`` would save, kept instead of written."""
    figures: list[Any] = []
    monkeypatch.setattr(module, name, lambda fig, *args: figures.append(fig))
    return figures


def test_the_legend_rule_fails_on_a_legend_over_the_data() -> None:
    from hire.figures import new_axes

    fig, ax = new_axes()
    for i in range(4):
        ax.plot(range(7), [i] * 7, label=f"line {i}")
    ax.legend(loc="center")
    assert {p.split(" ")[0] for p in legend_problems(fig)} == {"handle", "legend"}


def probe_task(labels: list[str]) -> dict[str, Any]:
    rows = [{"row": str(j), "pooling": p, "splits": {"test": {"score": 0.5 + 0.01 * j + 0.1 * i}}}
            for i, _ in enumerate(labels) for j in range(4) for p in ("cls", "sep", "mean", "max")]
    return {"headline": "test", "metrics": ["accuracy"],
            "results": {label: {"num_hidden_states": 4, "rows": rows} for label in labels}}


def test_probe_figure_names_each_colour_and_line_style_once_below_the_axes() -> None:
    from hire.probing.tables import layers_figure

    labels = ["pre-trained", "untrained", "fine-tuned-CoLA", "runs/ft/x/SST-2__hire__head_lr=None__seed1"]
    fig = layers_figure("ud-tense", probe_task(labels), labels)
    assert legend_problems(fig) == []
    texts = [t.get_text() for t in fig.legends[0].get_texts() if t.get_text()]
    assert sorted(texts) == sorted(["cls pooling", "sep pooling", "mean pooling", "max pooling", "pre-trained",
                                    "untrained", "fine-tuned-CoLA", "fine-tuned on SST-2: hire, seed 1"])
    styles = {(h.get_linestyle(), h.get_marker()) for h in fig.legends[0].legend_handles
              if h.get_marker() not in (None, "", "None")}
    assert len(styles) >= 4, "every encoder has its own line style and marker"


def test_token_probe_figure_has_its_legend_below() -> None:
    from hire.probing.tokens import HEADLINE, tasks_figure

    labels = ["all-MiniLM-L6-v2", "random:all-MiniLM-L6-v2"]
    layers = [{"layer": j, "task": {HEADLINE: {"accuracy": 0.8 + 0.01 * j}}} for j in range(4)]
    results = {"tasks": {t: {"results": {label: {"layers": layers} for label in labels}}
                         for t in ("ud-upos", "conll-ner", "conll-pos")}}
    assert legend_problems(tasks_figure(results, labels)) == []


def rank_record() -> dict[str, Any]:
    def block(scorer: str, loss: str) -> dict[str, Any]:
        return {"scorer": scorer, "loss": loss, "rows": [{"row": str(j), "pooling": p, "test": {"map": 0.5 + j / 20}}
                                                         for j in range(4) for p in ("cls", "sep", "mean", "max")]}

    return {"num_hidden_states": 4, "blocks": {"cosine/none": block("cosine", "none"),
                                               "mlp/pointwise": block("mlp", "pointwise")}}


def test_ranking_figures_have_their_legends_below(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hire.ranking import tables

    figures = caught(monkeypatch, tables)
    tables.plot_pooling(tmp_path / "x.png", "all-MiniLM-L6-v2", rank_record(), "mean", "test", 0.58)
    results = {"results": {"all-MiniLM-L6-v2": rank_record(), "WikiQA bi-encoder seed 2": rank_record()},
               "best": {"scorer": "mlp", "loss": "pointwise"}, "bm25": {"test": {"map": 0.58}}}
    tables.plot_encoders(tmp_path / "y.png", results, "mean", "test")
    assert len(figures) == 2 and [legend_problems(f) for f in figures] == [[], []]


def test_reconstruction_figure_has_its_legend_below(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hire.layers import tables

    figures = caught(monkeypatch, tables)
    encoders = [{"label": "MiniLM (2 layers)", "decoder": "tied", "num_layers": 2, "accuracy": [1.0, 0.9, 0.7]},
                {"label": "dup all (4)", "decoder": "tied", "num_layers": 4, "accuracy": [1.0, 0.9, 0.8, 0.6, 0.4],
                 "deepen": {"duplicate": [False, True, False, True]}}]
    tables.plot({"x_axis": "relative", "encoders": encoders, "data": {"name": "CoLA dev"}}, tmp_path / "r.png")
    assert len(figures) == 1 and legend_problems(figures[0]) == []


def seeds_table(tasks: list[str], labels: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    rows = [{"label": label, "options": options,
             "tasks": {t: {"scores": {"1": 80.0 + i, "2": 81.0 + i}, "median": 80.5 + i, "n": 2} for t in tasks}}
            for i, (label, options) in enumerate(labels)]
    return {"title": "WikiQA dev MAP, median of seeds", "tasks": tasks, "rows": rows}


@pytest.mark.parametrize("tasks", [["wikiqa"], ["CoLA", "SST-2", "MRPC", "STS-B", "RTE"]])
def test_seed_figures_have_readable_row_names_and_their_legend_below(monkeypatch: pytest.MonkeyPatch,
                                                                      tasks: list[str]) -> None:
    from hire.experiments import figures

    drawn = caught(monkeypatch, figures, "png_bytes")
    rows = [(f"{head} ranker=cross rank_loss={loss}", {"model.head": head, "model.ranker": "cross",
                                                      "train.rank_loss": loss})
            for head in ("last-layer", "hire", "hire-lite", "scalar-mix", "concat-last-4")
            for loss in ("pointwise", "pairwise")]
    figures.seeds_png(seeds_table(tasks, rows))
    assert len(drawn) == 1 and legend_problems(drawn[0]) == []
    names = [t.get_text() for t in drawn[0].axes[0].get_yticklabels()]
    assert names[:3] == ["last-layer (cross, pointwise)", "last-layer (cross, pairwise)", "hire (cross, pointwise)"]
    assert all(t.get_rotation() == 0 for t in drawn[0].axes[0].get_yticklabels()), "row names read horizontally"


def test_figure_labels_follow_the_head_naming_rule() -> None:
    from hire.experiments.figures import figure_label

    assert figure_label({"label": "hire", "options": {"model.head": "hire"}}) == "hire"
    assert figure_label({"label": "last-layer lr=5e-05", "options": {"model.head": "last-layer",
                                                                     "train.lr": 5e-05}}) == "last-layer (lr 5e-05)"
    assert figure_label({"label": "hire fusion_layers=0", "options": {
        "model.head": "hire", "model.head_options": {"fusion_layers": 0}}}) == "hire (fusion layers 0)"
    assert figure_label({"label": "hire (frozen)", "options": {"model.head": "hire"}}) == "hire (frozen)"


def test_table7_figure_has_its_legend_below(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import hire.figures

    table7 = load_script(SCRIPTS / "table7.py")
    figures = caught(monkeypatch, hire.figures)
    seeds = {1: {"dev": 88.0}, 2: {"dev": 88.5}}
    table7.figure(tmp_path / "t.png", {"last": seeds, "sum-last-4": seeds}, {"last-layer": seeds, "hire": seeds})
    assert len(figures) == 1 and legend_problems(figures[0]) == []
