"""Make the documentation's results and benchmark pages, and the README's headline results, from the records.

    python scripts/docs_pages.py           # write docs/results/, docs/benchmarks/ and README.md's results block
    python scripts/docs_pages.py --check   # change nothing; list what differs and exit 1 if anything does

Sources, all committed: ``experiments/<name>/`` (what ``hire experiment report``, ``hire probe``, ``hire
rank-probe`` and ``hire reconstruct`` wrote: tables, figures, records, summary.json, results.json) and
``benchmarks/results/`` (the speed reports). The plain-words findings of each experiment are
``docs/findings/<name>.md``: prose with Jinja2 fields that read every number from those files
(``scripts/docs_data.py``; ``benchmark("<name>")`` gives a speed report's results.json). A generated page is
never edited by hand: edit the template or make new records, then run this again. tests/scripts/test_docs.py checks that
running it changes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import jinja2
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_data import (
    VERDICT_RULE,
    CommandReport,
    Experiment,
    Probe,
    RankBlock,
    RankProbe,
    Reconstruct,
    Table,
    answer,
    head_name,
    hire_against_last_layer,
    load,
    span,
    verdict,
)

from hire.experiments import tables as report_tables
from hire.model.sharing import markdown_table

ROOT = Path(__file__).resolve().parent.parent
README_BEGIN = "<!-- results: made by scripts/docs_pages.py from docs/findings/readme.md; do not edit -->"
README_END = "<!-- end of results -->"
HELP_PAGE = "does-hire-help"


def note(source: str, template: str | None) -> str:
    edit = f"docs/findings/{template}.md or " if template else ""
    return (f"<!-- Made by scripts/docs_pages.py from {source}; do not edit this page: change {edit}the records, "
            "then run `python scripts/docs_pages.py`. -->")


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    if text.startswith("---\n"):
        head, _, body = text[4:].partition("\n---\n")
        return yaml.safe_load(head) or {}, body
    return {}, text


class Site:
    """Every experiment and template under one root (the repository, or a copy of it in a test)."""

    def __init__(self, root: Path):
        self.root = root
        try:
            self.experiments = {d.name: load(d) for d in sorted((root / "experiments").iterdir()) if d.is_dir()}
        except ValueError as err:  # an unfinished or unknown folder: one line, as a bad template
            raise SystemExit(f"experiments/: {err}") from err
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(root / "docs" / "findings"),
                                      undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                      trim_blocks=True, lstrip_blocks=True)
        self.env.globals["span"] = span
        self.env.globals["answer"] = answer
        self.env.globals["verdict"] = verdict
        self.env.globals["head_name"] = head_name
        self.env.globals["benchmark"] = self.benchmark
        self.env.globals["hire_ranker"] = self.hire_ranker
        self.env.globals["comparisons"] = lambda: hire_against_last_layer({n: self.experiments[n]
                                                                           for n in self.order()})

    def template(self, name: str) -> tuple[dict[str, Any], str] | None:
        """A findings template's front matter and its body rendered against the records (None: no template)."""
        path = self.root / "docs" / "findings" / f"{name}.md"
        if not path.is_file():
            return None
        meta, body = split_front_matter(path.read_text())
        try:
            text = self.env.from_string(body).render(E=self.experiments.get(name), X=self.experiment)
        except Exception as err:
            raise SystemExit(f"docs/findings/{name}.md: {type(err).__name__}: {err}") from err
        return meta, text.strip() + "\n"

    def benchmark(self, name: str) -> Any:
        """A speed report's ``benchmarks/results/<name>/results.json``, for a template to quote its figures."""
        path = self.root / "benchmarks" / "results" / name / "results.json"
        if not path.is_file():
            raise KeyError(f"no speed report {name!r}: {path.relative_to(self.root)} is missing")
        return json.loads(path.read_text())

    def hire_ranker(self, name: str = "wikiqa-minilm") -> dict[str, Any]:
        """HIRE against the last layer as a cross-encoder's head, per loss, and the answer the pages state.

        The rule is the one of every page (:func:`docs_data.verdict`): each loss's dev MAP, paired by seed with the
        last layer trained with the same loss, is *ahead*, *behind* or *no difference shown* by its 95% interval;
        the answer to "does HIRE help?" is :func:`docs_data.answer` of the two (*yes* where both are ahead, *no*
        where neither is, else *not clearly*). ``rows``: (loss, the seed pairs, the table's paired cell).
        """
        exp = self.experiment(name)
        table = next(t for t in exp.tables.values() if t.tasks == ["wikiqa"])
        rows = []
        for loss in ("pointwise", "pairwise"):
            label = next(label for label, r in table.rows.items() if r["options"] == {
                "model.head": "hire", "model.ranker": "cross", "train.rank_loss": loss})
            rows.append((loss, exp.paired({"model.head": "last-layer"}, head="hire", model__ranker="cross",
                                          train__rank_loss=loss), table.cell(label, "wikiqa").vs))
        verdicts = [vs.verdict if vs else "no pair" for _, _, vs in rows]
        return {"rows": rows, "verdicts": verdicts, "verdict": answer(verdicts) if exp.finished else
                f"no verdict: {exp.progress} done", "finished": exp.finished}

    def experiment(self, name: str) -> Any:
        if name not in self.experiments:
            raise KeyError(f"no experiment {name!r} in experiments/")
        return self.experiments[name]

    def nav(self) -> list[str]:
        """The experiments in the order of mkdocs.yml's Results navigation (``results/<name>.md``)."""
        path = self.root / "mkdocs.yml"
        if not path.is_file():
            return []
        found: list[str] = []

        def walk(item: Any) -> None:
            if isinstance(item, str):
                match = re.fullmatch(r"results/([\w.-]+)\.md", item.strip())
                if match and match.group(1) in self.experiments:
                    found.append(match.group(1))
            elif isinstance(item, dict):
                for value in item.values():
                    walk(value)
            elif isinstance(item, list):
                for value in item:
                    walk(value)
        walk(yaml.safe_load(path.read_text()).get("nav", []))
        return found

    def order(self) -> list[str]:
        """Experiments in the order of the site's Results navigation; any it does not list after them, in the order
        their templates' ``order`` says (those without one last, by name)."""
        listed = self.nav()

        def key(name: str) -> tuple[float, str]:
            found = self.template(name)
            return (found[0].get("order", 1e9) if found else 1e9, name)
        return listed + sorted((n for n in self.experiments if n not in listed), key=key)


def demote(markdown: str, levels: int = 1) -> str:
    """Every heading one level deeper (a copied report's ``## Table`` under the page's ``##`` sections)."""
    return re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + levels) + " ", markdown, flags=re.M)


def indent(text: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in text.splitlines(keepends=True))


def image(exp: str, path: str, alt: str) -> str:
    return f"![{alt}](../../experiments/{exp}/{path})"


MARKERS = {"<!-- findings -->": "findings", "<!-- per-seed -->": "per-seed", "<!-- reproduce -->": "reproduce"}
TEMPORARY = re.compile(r"(?:/private)?(?:/var/folders/[^/\s]+/[^/\s]+/T|/tmp)/(?=[^\s])")
WORK_NOTE = ("`WORK/`: a scratch folder of your choice (the report's record keeps the temporary folder the command "
             "ran with).")


def parts(findings: str) -> dict[str, str]:
    """A rendered template cut at its markers: ``answer`` (before any marker: the answer in a sentence or two),
    ``findings`` (the rest of what the experiment shows, in plain words), ``per-seed`` (per-seed numbers, folded on
    the page) and ``reproduce`` (command lines, shown as a code block)."""
    found = {"answer": "", "findings": "", "per-seed": "", "reproduce": ""}
    pieces = re.split("(" + "|".join(map(re.escape, MARKERS)) + ")", findings)
    current = "answer"
    for piece in pieces:
        if piece in MARKERS:
            current = MARKERS[piece]
        else:
            found[current] += piece
    return {k: v.strip() for k, v in found.items()}


def without_temporary(text: str) -> str:
    """A command as a page shows it: a temporary folder (``/tmp/``, macOS's ``/var/folders/../T/``) becomes
    ``WORK/``, a folder the reader chooses (``--out /tmp/x`` -> ``--out WORK/x``; the record keeps the path it ran
    with)."""
    return TEMPORARY.sub("WORK/", text)


def fold(title: str, body: str | list[str], kind: str = "note") -> list[str]:
    """A pymdownx.details block, closed: ``??? note "title"`` and the body indented under it."""
    text = body if isinstance(body, str) else "\n".join(body)
    return [f'??? {kind} "{title}"', "", indent(text.strip() + "\n").rstrip("\n"), ""]


def code(lines: list[str] | str, language: str = "bash") -> list[str]:
    text = lines if isinstance(lines, str) else "\n".join(lines)
    return [f"```{language}", without_temporary(text.strip()), "```", ""]


def question(meta: dict[str, Any]) -> list[str]:
    return [f"**The question.** {meta['asks'].strip()}", ""] if meta.get("asks") else []


def answer_section(meta: dict[str, Any], part: dict[str, str], status: list[str] = ()) -> list[str]:
    """The page's opening: the question, a grid's progress where it is unfinished, and the answer."""
    return [*question(meta), *status, "## The answer", "", part["answer"], ""] if part["answer"] else \
        [*question(meta), *status]


def progress(exp: Experiment) -> list[str]:
    """Nothing for a finished grid; for an unfinished one, how many of its cells are done (its records against
    the cells its experiment file declares)."""
    if exp.finished:
        return []
    return ['!!! warning "Unfinished grid"', "",
            indent(f"{exp.progress} are done ({exp.planned - exp.done} declared cells have no record): every "
                   "number below is over the cells done, and an interval over fewer seeds than declared may move "
                   "when the rest are in.\n").rstrip("\n"), ""]


def typical(table: Table) -> int:
    counts = [c["cells"] for r in table.data["rows"] for c in r["tasks"].values()]
    return max(set(counts), key=counts.count) if counts else 0


def main_table(table: Table) -> list[str]:
    """The table that supports the answer: every row's median over seeds, and for a row paired with a baseline
    its mean paired difference with the 95% interval and what the interval shows (the one rule,
    :func:`docs_data.verdict`). Rows named by :func:`docs_data.head_name`."""
    seeds = typical(table)
    cols = table.tasks + (["Avg"] if len(table.tasks) > 1 else [])

    def median(label: str, task: str) -> str:
        cell = table.cell(label, task)
        if cell.median is None:
            return "–"
        return f"{cell.median}" + (f" (n={cell.n})" if task != "Avg" and cell.n != seeds else "")

    metrics = "; ".join(f"{t}: {report_tables.metric_text(t, m)}" for t, m in table.data["metrics"].items())
    if len(table.tasks) == 1:
        task = table.tasks[0]
        rows = []
        for label, row in table.rows.items():
            vs = table.cell(label, task).vs
            base = table.named(row["baseline"]) if row["baseline"] else ""
            rows.append([table.named(label), median(label, task),
                         f"{vs.ci} against {base}" if vs else "–", vs.verdict if vs else "–"])
        body = markdown_table(["head", f"{task}: median", "paired difference [95% interval]", "shown"], rows,
                              "lrrl")
    else:
        rows = []
        for label, row in table.rows.items():
            rows.append([table.named(label), *(median(label, t) for t in cols)])
            if row["baseline"] and any(table.cell(label, t).vs for t in cols):
                rows.append([f"*{table.named(label)} − {table.named(row['baseline'])} [95% interval]*",
                             *((table.cell(label, t).vs.ci if table.cell(label, t).vs else "–") for t in cols)])
        body = markdown_table(["head", *cols], rows, "l" + "r" * len(cols))
    avg = " Avg: the mean over the tasks." if len(cols) > 1 else ""
    return [f"**{table.title}**", "", *body, "",
            f"Median of {seeds} seeds x100 ({metrics}); a cell with fewer says so (n=k).{avg} Paired: the row minus "
            f"its baseline seed by seed (same seed, same data order), the mean with its bootstrap 95% interval; "
            f"{VERDICT_RULE}.", ""]


def seed_table(table: Table) -> list[str]:
    """Every run's score: one line per row and a column per seed (one task), or one line per row and seed."""
    if len(table.tasks) == 1:
        task = table.tasks[0]
        seeds = sorted({int(k) for r in table.data["rows"] for k in r["tasks"][task]["scores"]})
        lines = [[table.named(label), *(f"{row['tasks'][task]['scores'][str(k)]:.1f}"
                                        if str(k) in row["tasks"][task]["scores"] else "–" for k in seeds)]
                 for label, row in table.rows.items()]
        return markdown_table(["head", *(f"seed {k}" for k in seeds)], lines, "l" + "r" * len(seeds))
    rows = []
    for label, row in table.rows.items():
        seeds = sorted({int(s) for c in row["tasks"].values() for s in c["scores"]})
        for seed in seeds:
            values = []
            for task in table.tasks:
                score = row["tasks"][task]["scores"].get(str(seed))
                values.append("–" if score is None else f"{score:.1f}")
            rows.append([table.named(label), str(seed), *values])
    return markdown_table(["head", "seed", *table.tasks], rows, "lr" + "r" * len(table.tasks))


def full_tables(table: Table) -> str:
    """``hire experiment report``'s three tables (medians, mean ± sd, paired tests with Wilcoxon), rows named as on
    every page."""
    data = json.loads(json.dumps(table.data))
    for row in data["rows"]:
        row["label"], row["baseline"] = table.named(row["label"]), table.named(row["baseline"]) \
            if row["baseline"] else row["baseline"]
    return demote(report_tables.markdown(data), 2).strip()


def runs_section(exp: Experiment) -> list[str]:
    """Machines, precisions and training time, from the records and summary.json."""
    s = exp.summary
    adopted = s.get("adopted") or {}
    shared = (f" ({sum(adopted.values())} of them trained once for another experiment and adopted: "
              + ", ".join(f"{k} {v}" for k, v in adopted.items()) + ")") if adopted else ""
    out = [f"{exp.progress} recorded{shared}; {exp.hours} hours of training in all. Times are each run's training "
           "time as its record gives it; runs that shared a machine with other runs took longer than they would "
           "alone, so compare times within one machine.", ""]
    out += markdown_table(["machine", "cells", "precision", "hours", "minutes per cell (mean)"], [
        [name, str(m["cells"]), ", ".join(m["precisions"]), f"{m['train_seconds'] / 3600:.1f}",
         f"{(m['mean_train_seconds'] or 0) / 60:.1f}"] for name, m in s["machines"].items()], "lrlr")
    out += ["", *markdown_table(["task / head", "cells", "minutes per cell (mean)"], [
        [k, str(v["cells"]), f"{(v['mean_train_seconds'] or 0) / 60:.1f}"] for k, v in s["task_head"].items()], "lr")]
    return out


def caption(report: str, png: str) -> str:
    found = re.search(rf"\(figures/{re.escape(png)}\)\n\n([^!\n][^\n]*)", report)
    return found.group(1) if found else ""


def grid_page(site: Site, exp: Experiment, meta: dict[str, Any], findings: str) -> str:
    """The question, the answer, the one table that supports it, its figure, what else the grid shows; then the
    details folded (per-seed numbers, the full tables, other tables and figures, layer weights, machines and
    time); then how to make it again."""
    d, part = exp.dir, parts(findings)
    spec = yaml.safe_load((d / "experiment.yaml").read_text())
    table = exp.table(meta["table"]) if meta.get("table") else next(iter(exp.tables.values()))
    report = (d / "report.md").read_text() if (d / "report.md").is_file() else ""
    figures = sorted((d / "figures").glob("*.png"))
    main = meta.get("figure") or (f"{table.name}_seeds.png" if (d / "figures" / f"{table.name}_seeds.png").is_file()
                                  else figures[0].name if figures else None)
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
           *answer_section(meta, part, progress(exp)), *main_table(table)]
    if main:
        out += [image(exp.name, f"figures/{main}", Path(main).stem), ""]
        out += [caption(report, main), ""] if caption(report, main) else []
    if part["findings"]:
        out += ["## What else it shows", "", part["findings"], ""]
    out += ["## Details", "", f"*{spec.get('description', '').strip()}*", ""]
    per_seed = [part["per-seed"], ""] if part["per-seed"] else []
    out += fold("Per-seed results", [*per_seed, f"**{table.title}**, each run:", "", *seed_table(table), "",
                                     full_tables(table)])
    for other in exp.tables.values():
        if other is not table:
            out += fold(other.title, [*main_table(other), *seed_table(other), "", full_tables(other)])
    more = [png for png in figures if png.name != main]
    if more:
        body = []
        for png in more:
            body += [image(exp.name, f"figures/{png.name}", png.stem), ""]
            body += [caption(report, png.name), ""] if caption(report, png.name) else []
        out += fold("More figures", body)
    weights = d / "tables" / "layer_weights.md"
    if weights.is_file():
        body = weights.read_text().split("\n", 2)[2]  # without its heading
        out += fold("Layer weights: every run's mean importance score per hidden state", body)
    out += fold("Machines and time", runs_section(exp))
    out += ["## Reproduce", "",
            f"Everything above comes from `experiments/{exp.name}/` (the [self-contained HTML report]"
            f"(../../experiments/{exp.name}/report.html) shows every cell). `hire experiment run` trains the cells "
            "that have no record; `hire experiment report` makes the tables, figures and summary from the records "
            "alone; this page is made from them.", "",
            *code([*(part["reproduce"].splitlines() if part["reproduce"] else []),
                   f"hire experiment run configs/experiments/{exp.name}.yaml",
                   f"hire experiment report configs/experiments/{exp.name}.yaml",
                   "python scripts/docs_pages.py"]),
            *fold("The experiment file", "```yaml\n" + (d / "experiment.yaml").read_text().strip() + "\n```",
                  "example")]
    return "\n".join(out).rstrip("\n") + "\n"


def titled(markdown: str) -> list[str]:
    """A copied table with its ``## Title`` heading made the table's bold caption, as every page's main table."""
    first, _, rest = markdown.strip().partition("\n")
    return [f"**{first.lstrip('#').strip()}**", "", rest.strip(), ""] if first.startswith("#") else [markdown, ""]


def probe_page(exp: Probe, meta: dict[str, Any], findings: str) -> str:
    """The question, the answer, the which-layer table, one task's figure (the template's ``figure``, else the
    first task's), what else it shows; folded: the poolings table, every task's figure and tables, the machine and
    time; then the commands."""
    d, m, part = exp.dir, exp.results["machine"], parts(findings)
    report = (d / "report.md").read_text()
    tasks = [(title.strip(), body) for title, _, body in (s.partition("\n") for s in report.split("\n## ")[1:])
             if (d / title.strip() / "layers.png").is_file()]  # not the summaries or the times
    main = meta.get("figure") or (f"{tasks[0][0]}/layers.png" if tasks else None)
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
           *answer_section(meta, part), *titled((d / "which_layer.md").read_text())]
    if main:
        out += [image(exp.name, main, f"{Path(main).parent.name}: score by layer"), ""]
    if part["findings"]:
        out += ["## What else it shows", "", part["findings"], ""]
    encoders = report.split("\n## ", 1)[0].split("\n", 1)[1].strip()
    out += ["## Details", "", "The encoders:", "", encoders, ""]
    if part["per-seed"]:
        out += fold(meta.get("more", "More tables"), part["per-seed"])
    out += fold(titled((d / "poolings.md").read_text())[0].strip("*"), titled((d / "poolings.md").read_text())[2])
    for title, body in tasks:
        body = re.sub(r"!\[[^\]]*\]\(([^)]+)\)\n?", "", body).strip()
        out += fold(f"{title}: score by layer, every hidden state and pooling",
                    [image(exp.name, f"{title}/layers.png", f"{title}: score by layer"), "", demote(body, 2)])
    minutes = exp.minutes
    out += fold("Machine and time", [
        f"{m.get('processor') or m.get('device')} ({m.get('cpu_count')} CPUs, {m.get('torch_threads')} torch "
        f"threads, {m.get('fit_threads')} fitting thread), precision {m.get('precision')}, torch {m.get('torch')}, "
        f"scikit-learn {m.get('sklearn')}: {minutes['all']} minutes in all ({minutes['encode']} encoding, "
        f"{minutes['fit']} fitting), as `results.json` records them."])
    out += ["## Reproduce", "", f"The commands that made `experiments/{exp.name}/`; `hire probe-report "
            f"experiments/{exp.name}` redraws every table and figure from its `results.json` alone.", "",
            *code([*(part["reproduce"].splitlines() if part["reproduce"] else []),
                   f"hire probe-report experiments/{exp.name}"])]
    return "\n".join(out).rstrip("\n") + "\n"


def reconstruct_command(exp: Reconstruct) -> str:
    """The ``hire reconstruct`` line that makes the folder, from what its ``results.json`` records."""
    data, encoders = exp.results["data"], exp.results["encoders"]
    return (f"hire reconstruct --encoder {','.join(e['encoder'] for e in encoders)} \\\n  --labels "
            f"{shlex.quote(','.join(e['label'] for e in encoders))} --task {data['task']} --split {data['split']} "
            f"--max_examples {data['examples']} --max_length {data['max_length']} \\\n  --decoder "
            f"{exp.results['decoder_asked']} --x_axis {exp.results['x_axis']} --output_dir experiments/{exp.name}")


def reconstruct_page(exp: Reconstruct, meta: dict[str, Any], findings: str) -> str:
    """The question, the answer, the table of every hidden state, its figure, what else it shows; folded: the
    encoders and decoders, the machine and time; then the commands."""
    d, part = exp.dir, parts(findings)
    title, _, body = (d / "reconstruction.md").read_text().partition("\n")
    intro, _, table = body.partition("\n| ")
    table = "| " + table
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", table)
    table = re.sub(r"!\[[^\]]*\]\(([^)]+)\)\n?", "", table).strip()
    paragraphs = intro.strip().split("\n\n")
    legend = [x for x in paragraphs if x.startswith("`*`")]
    paragraphs = [x for x in paragraphs if x not in legend]
    m = exp.results["machine"]
    seconds = sum(e.get("seconds") or 0 for e in exp.results["encoders"])
    where = m.get("processor") or m.get("cpu") or m.get("device") or "unknown"
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
           *answer_section(meta, part), f"**{title.lstrip('# ').strip()}**", "", paragraphs[0], "", table, ""]
    out += [x for paragraph in legend for x in (paragraph, "")]
    out += [x for f in figures for x in (image(exp.name, f, "reconstruction per hidden state"), "")]
    if part["findings"]:
        out += ["## What else it shows", "", part["findings"], ""]
    out += ["## Details", ""]
    out += fold("The encoders and their decoders", "\n\n".join(paragraphs[1:]))
    if part["per-seed"]:
        out += fold(meta.get("more", "More tables"), part["per-seed"])
    cpus = f"{m['cpu_count']} CPUs, " if m.get("cpu_count") else ""
    out += fold("Machine and time", f"{where} ({cpus}{m.get('torch_threads', '?')} torch threads), torch "
                f"{m.get('torch', '?')}: {seconds / 60:.1f} minutes for all the encoders, as `results.json` records "
                "them.")
    out += ["## Reproduce", "", f"The commands that made `experiments/{exp.name}/`, its options as its `results.json` "
            f"records them; `hire reconstruct --report_only --output_dir experiments/{exp.name}` redraws the table and "
            "plot from `results.json`.", "",
            *code([*(part["reproduce"].splitlines() if part["reproduce"] else []), reconstruct_command(exp),
                   f"hire reconstruct --report_only --output_dir experiments/{exp.name}"])]
    return "\n".join(out).rstrip("\n") + "\n"


def rank_table(block: RankBlock) -> list[str]:
    """A block in the study's layout: feature sets by poolings, headline MAP x100, the best in bold, † the cell
    chosen by dev MAP (as ``hire rank-probe``'s report.md draws it)."""
    top, chosen = block.top.map, block.chosen
    rows = []
    for row in block.rows:
        values = []
        for pooling in block.poolings:
            cell = block.cell(row, pooling)
            text = f"**{cell.map.f2}**" if cell.map == top else cell.map.f2
            values.append(f"{text} †" if cell is chosen else text)
        rows.append([row, *values])
    return markdown_table(["feature set", *block.poolings], rows, "l" + "r" * len(block.poolings))


def rank_cells(exp: RankProbe, encoder: str) -> list[str]:
    """An encoder's blocks in the study's layout: cosine's and the best scorer's open (the best scorer: the block
    whose chosen cell has the best dev MAP), the others folded; then each pooling's mean over the layers."""
    blocks = exp.blocks(encoder)
    best = max(blocks, key=lambda b: b.chosen.dev)
    opened = [b for b in blocks if b is best or not b.learned]
    split = exp.split
    out = [f"## Every cell: {encoder}" if len(exp.encoders) > 1 else "## Every cell: layer x pooling", "",
           f"{split.capitalize()} MAP x100 on the {exp.questions(split)} {exp.keep} {split} questions; rows: feature "
           "sets (hidden states, 0 = the embeddings, and concatenations), columns: poolings. Bold: the table's best; "
           "†: the cell chosen by dev MAP, which the findings' summary reports.", ""]
    for block in opened:
        out += [f"### {block.name}", "", *rank_table(block), ""]
    for block in blocks:
        if block not in opened:
            out += [f'??? info "{block.name}"', "", indent("\n".join(rank_table(block)) + "\n"), ""]
    poolings = blocks[0].poolings
    rows = [[b.name, *(b.pooling_mean(p).f2 for p in poolings)] for b in blocks]
    return [*out, f"### Pooling averaged over layers 1-{blocks[0].states[-1]}", "",
            "Each pooling's MAP averaged over the Transformer layers (not the embeddings), as the study compares "
            "poolings.", "", *markdown_table(["block", *poolings], rows, "l" + "r" * len(poolings)), ""]


def rank_figures(exp: RankProbe) -> list[str]:
    """The MAP-by-layer figures, ``figures/<encoder>-<pooling>.png``, by encoder and in the tables' pooling order."""
    poolings = exp.blocks(exp.encoders[0])[0].poolings

    def order(png: Path) -> tuple[bool, str, int]:  # the encoders compared (figures/encoders-*.png) first
        encoder, _, pooling = png.stem.rpartition("-")
        return encoder != "encoders", encoder, poolings.index(pooling) if pooling in poolings else len(poolings)

    figures = sorted((exp.dir / "figures").glob("*.png"), key=order)
    if not figures:
        return []
    out = ["## MAP by layer", "", f"{exp.split.capitalize()} MAP x100 of every block against the hidden state, one "
           "figure per pooling; BM25 dashed.", ""]
    for png in figures:
        encoder, _, pooling = png.stem.rpartition("-")
        encoder = "every encoder (cosine and the best block)" if encoder == "encoders" else encoder
        out += [image(exp.name, f"figures/{png.name}", f"{encoder}, {pooling} pooling: {exp.split} MAP by layer"), ""]
    return out


def rank_run_files(exp: RankProbe) -> str:
    """What the folder holds of the TREC run files the command writes (BM25's and each block's chosen cell's, in
    ``runs/``), beside the qrels: a folder committed before run files were kept has none."""
    runs = sorted((exp.dir / "runs").glob("*.run"))
    kept = sorted({p.name.rsplit(".", 2)[0].removesuffix(".none") for p in runs})
    if not runs:
        return ("`qrels/` holds the qrels; the command also writes the TREC run files of BM25 and of each block's "
                "chosen cell to `runs/` of its output folder, for rescoring with any trec_eval, but this folder was "
                "committed without them.")
    return (f"`qrels/` holds the qrels and `runs/` {len(runs)} TREC run files, dev and test, for rescoring with any "
            f"trec_eval: {', '.join(f'`{k}`' for k in kept)}.")


def rank_summary(exp: RankProbe) -> list[str]:
    """The table that supports a ranking grid's answer: BM25 and each block's cell chosen by dev MAP, every
    encoder's."""
    split, many = exp.split, len(exp.encoders) > 1
    bm25 = exp.bm25
    rows = [[*([""] if many else []), "BM25", "", str(bm25.dev), str(bm25.map), str(bm25.mrr), str(bm25.p1), ""]]
    for encoder in exp.encoders:
        for b in exp.blocks(encoder):
            c = b.chosen
            rows.append([*([encoder] if many else []), b.name, c.where, str(c.dev), str(c.map), str(c.mrr),
                         str(c.p1), str(b.seconds)])
    return [f"**Each scorer's chosen cell against BM25** ({exp.keep} questions: dev {exp.questions('dev')}, "
            f"{split} {exp.questions(split)})", "",
            *markdown_table([*(["encoder"] if many else []), "scorer", "feature set, pooling", "dev MAP",
                             f"{split} MAP", f"{split} MRR", f"{split} P@1", "fit seconds"], rows,
                            ("l" if many else "") + "llrrrrr"), "",
            f"MAP, MRR and P@1 x100 by trec_eval's definitions; each row is its block's cell chosen by dev MAP (the "
            f"{split} split only scored), its fit seconds the whole block's. One fit per cell: no spread between "
            "seeds is measured.", ""]


def rank_probe_page(exp: RankProbe, meta: dict[str, Any], findings: str) -> str:
    """The question, the answer, each scorer's chosen cell against BM25, the figure (the template's ``figure``,
    else the first mean-pooled one), what else it shows; folded: every block's layer x pooling table, the other
    figures, each block's time and the machine; then the commands."""
    part = parts(findings)
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
           *answer_section(meta, part), *rank_summary(exp)]
    figures = [line for line in rank_figures(exp) if line.startswith("![")]
    main = next((f for f in figures if f"/{meta['figure']})" in f), None) if meta.get("figure") else \
        next((f for f in figures if "mean pooling" in f), figures[0] if figures else None)
    if main:
        which = "cosine and each encoder's best block" if "(../../experiments/" in main and "/figures/encoders-" in \
            main else "every block"
        out += [main, "", f"{exp.split.capitalize()} MAP x100 of {which} against the hidden state (0 = the "
                "embeddings); BM25 dashed.", ""]
    if part["findings"]:
        out += ["## What else it shows", "", part["findings"], ""]
    out += ["## Details", ""]
    if part["per-seed"]:
        out += fold(meta.get("more", "More tables"), part["per-seed"])
    for encoder in exp.encoders:
        cells = rank_cells(exp, encoder)
        title = cells[0].lstrip("# ")
        body = [re.sub(r"^### ", "#### ", line) for line in cells[2:]]
        out += fold(title, "\n".join(body))
    more = [f for f in figures if f != main]
    if more:
        out += fold("More figures: MAP by layer, every pooling", [x for f in more for x in (f, "")])
    rows = [[encoder if i == 0 else "", str(exp.texts(encoder)) if i == 0 else "", b.name, str(len(b.cells)),
             str(b.seconds)] for encoder in exp.encoders for i, b in enumerate(exp.blocks(encoder))]
    out += fold("Machine and time", [
        f"{exp.machine}. Questions and passages are encoded once per encoder ({exp.seconds['encode']} s in all) and "
        f"every block reads the cached features; a block's cells are fitted together, so its seconds are for all of "
        f"them. In all {exp.minutes['all']} minutes ({exp.minutes['encode']} encoding, {exp.minutes['fit']} "
        "fitting), as `results.json` records them.", "",
        *markdown_table(["encoder", "texts encoded", "block", "cells", "seconds"], rows, "lrlrr")])
    commands = "commands" if part["reproduce"] else "command"
    out += ["## Reproduce", "", f"The {commands} that made `experiments/{exp.name}/` (every option of `hire "
            f"rank-probe` is in its `results.json`); `hire rank-probe-report experiments/{exp.name}` redraws "
            f"`report.md`, the tables and the figures from `results.json` alone. {rank_run_files(exp)}", "",
            *code([*(part["reproduce"].splitlines() if part["reproduce"] else []), exp.command,
                   f"hire rank-probe-report experiments/{exp.name}"])]
    return "\n".join(out).rstrip("\n") + "\n"


def report_page(exp: CommandReport, meta: dict[str, Any], findings: str) -> str:
    """The question, the answer, the report's first table and its figure, what else it shows; folded: the report's
    other sections (each task's tables, the times, headings two levels down), figures linked in place; then the
    commands."""
    part = parts(findings)
    body = exp.report.split("\n", 1)[1] if exp.report.startswith("# ") else exp.report
    intro, *sections = body.split("\n## ")
    figures = re.compile(r"!\[([^\]]*)\]\(([^)]+)\)\n?")
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
           *answer_section(meta, part)]
    shown = []
    if sections:
        title, _, first = sections.pop(0).partition("\n")
        shown = figures.findall(first)
        out += [f"**{title.strip()}**", "", figures.sub("", first).strip(), ""]
    for alt, path in shown:
        out += [image(exp.name, path, alt), ""]
    if part["findings"]:
        out += ["## What else it shows", "", part["findings"], ""]
    out += ["## Details", "", figures.sub(lambda m: image(exp.name, m.group(2), m.group(1)), intro).strip(), ""]
    if part["per-seed"]:
        out += fold(meta.get("more", "More tables"), part["per-seed"])
    for section in sections:
        title, _, text = section.partition("\n")
        text = figures.sub(lambda m: image(exp.name, m.group(2), m.group(1)) + "\n", text)
        title = "Machine and time" if title.strip() == "Time" else f"{title.strip()}: every layer, each encoder"
        out += fold(title, demote(text.strip(), 2))
    out += ["## Reproduce", "", f"The commands that made `experiments/{exp.name}/`; `{exp.redraw}` makes its report "
            "again from its own files.", "",
            *code([*(part["reproduce"].splitlines() if part["reproduce"] else []), exp.redraw])]
    return "\n".join(out).rstrip("\n") + "\n"


def table7_name(row: dict[str, Any]) -> str:
    """A Table 7 row named as every table names heads: a frozen row by its ``hire features --rows`` name with
    ``(frozen)``, a fine-tuned one by its head."""
    return head_name(row["row"], ["frozen"] if row["kind"] == "frozen features" else [])


def f1(stats: dict[str, Any]) -> str:
    if not stats.get("n"):
        return "–"
    if stats["n"] == 1:
        return f"{stats['median']:.1f}"
    return f"{stats['median']:.1f} [{stats['min']:.1f}, {stats['max']:.1f}]"


def table7_page(exp: CommandReport, meta: dict[str, Any], findings: str) -> str:
    """``scripts/table7.py``'s folder: the question, the answer, the table of every row (median [min, max] over
    seeds), its figure, the findings; folded: the fine-tuned heads paired by seed, each run's score, the machines
    and times; then the commands."""
    part, data, d = parts(findings), exp.data, exp.dir
    records = [json.loads(p.read_text()) for p in sorted((d / "records").glob("*.json"))]
    tuned = any(r["kind"] != "frozen features" for r in data["rows"])
    rows = [[table7_name(r), str(len(r["seeds"])), f1(r["dev"]), f1(r["test"]),
             "–" if r.get("paper") is None else f"{r['paper']:.1f}"] for r in data["rows"]]
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
           *answer_section(meta, part),
           "**CoNLL-2003 entity F1 x 100 (seqeval, strict IOB2), median over seeds [min, max]**", "",
           *markdown_table(["head", "seeds", "dev F1", "test F1", "BERT-base dev F1 (paper)"], rows, "lrrrr"), "",
           "Frozen rows: a frozen encoder's word features (first sub-token) feed a randomly initialised 2-layer "
           "BiLSTM and a linear layer (`hire features`)" + ("; fine-tuned rows: the whole encoder fine-tuned with "
                                                            "the head (`hire train`)." if tuned else "."), ""]
    figure = d / "figures" / "table7.png"
    if figure.is_file():
        out += [image(exp.name, "figures/table7.png", "dev F1 by row"), ""]
    if part["findings"]:
        out += ["## What else it shows", "", part["findings"], ""]
    out += ["## Details", ""]
    paired = data.get("paired") or {}
    if paired:
        lines = [[head_name(h), str(p["n"]), f"{p['median']:+.2f}",
                  f"{p['mean']:+.2f} [{p['ci95'][0]:+.2f}, {p['ci95'][1]:+.2f}]" if p.get("ci95") else "–",
                  verdict(*(p.get("ci95") or (None, None))), p.get("wilcoxon") or "n/a"] for h, p in paired.items()]
        out += fold("Fine-tuned heads against the fine-tuned last layer, paired by seed (dev F1)", [
            *markdown_table(["head", "seeds paired", "median difference", "mean difference [95% interval]", "shown",
                             "Wilcoxon"], lines, "lrrrll"), "", f"{VERDICT_RULE.capitalize()}."])
    per_seed = []
    by_row: dict[str, dict[int, dict[str, Any]]] = {}
    for r in records:
        by_row.setdefault(r.get("row", "?"), {})[int(r.get("seed", 0))] = r["metrics"]
    for row, seeds in by_row.items():
        for seed, m in sorted(seeds.items()):
            metric = m.get("metric", "f1")
            dev, test = (f"{100 * m[k][metric]:.1f}" if isinstance(m.get(k), dict) else "–" for k in ("dev", "test"))
            per_seed.append([head_name(row, ["frozen"]), str(seed), dev, test,
                             f"{m.get('best_epoch', '–')} of {m.get('epochs_run', '–')}",
                             f"{m['train_seconds']:.0f}" if m.get("train_seconds") is not None else "–"])
    if per_seed or part["per-seed"]:
        body = [part["per-seed"], ""] if part["per-seed"] else []
        if per_seed:
            body += ["Each frozen row's runs (this folder's records" + ("; the fine-tuned runs are "
                     "[ner-minilm](ner-minilm.md)'s" if tuned else "") + "):", "",
                     *markdown_table(["head", "seed", "dev F1", "test F1", "best epoch", "train seconds"], per_seed,
                                     "lrrrrr")]
        out += fold("Per-seed results", body)
    machines: dict[str, dict[str, Any]] = {}
    for r in records:
        m = r["metrics"].get("machine") or {}
        key = json.dumps(m, sort_keys=True)
        entry = machines.setdefault(key, {"machine": m, "runs": 0, "seconds": 0.0})
        entry["runs"] += 1
        entry["seconds"] += r["metrics"].get("train_seconds") or 0
    if machines:
        lines = [[str(e["machine"].get("cpu") or e["machine"].get("device") or "?"),
                  str(e["machine"].get("cpu_count", "?")), str(e["machine"].get("torch_threads", "?")),
                  "yes" if e["machine"].get("fast_bf16_cpu") else "no", str(e["machine"].get("torch", "?")),
                  str(e["machine"].get("transformers", "?")), str(e["machine"].get("python", "?")), str(e["runs"]),
                  f"{e['seconds'] / 3600:.1f}"] for e in machines.values()]
        trains = [[table7_name(r), f"{r['train_seconds']:.0f}" if r.get("train_seconds") is not None else "–"]
                  for r in data["rows"]]
        out += fold("Machines and time", [
            *markdown_table(["processor", "CPUs", "torch threads", "bf16 units", "torch", "transformers", "python",
                             "runs", "training hours"], lines, "lrrllllrr"), "",
            "The frozen rows' runs, as their records give them; they trained beside other jobs, so the times are not "
            "speeds (the [feature-cache benchmark](../benchmarks/cpu-2core-featurebased.md) measures speed). "
            "Median training seconds per row:", "",
            *markdown_table(["head", "train seconds (median)"], trains, "lr")])
    out += ["## Reproduce", "", f"The commands that made `experiments/{exp.name}/`; `{exp.redraw}` makes its report, "
            "table and figure again from its own records.", "",
            *code(part["reproduce"].splitlines() if part["reproduce"] else [exp.redraw])]
    return "\n".join(out).rstrip("\n") + "\n"


def index_cells(exp: Any) -> tuple[str, str]:
    """An experiment's size and compute for the results index: cells done of those declared, and hours, from its
    records; what a cell is depends on the kind of experiment (the index says)."""
    if isinstance(exp, Experiment):
        return exp.progress.removesuffix(" cells"), exp.hours
    if isinstance(exp, RankProbe):
        return f"{exp.cells} fits", f"{exp.seconds['all'] / 3600:.1f}"
    if isinstance(exp, Probe):
        tasks = exp.results.get("tasks", {})
        probes = sum(len(t.get("results", {})) for t in tasks.values())
        return f"{probes} probes", f"{float(exp.minutes['all']) / 60:.1f}"
    if isinstance(exp, Reconstruct):
        seconds = sum(e.get("seconds") or 0 for e in exp.results["encoders"])
        return f"{len(exp.encoders)} encoders", f"{seconds / 3600:.1f}"
    if isinstance(exp, CommandReport) and (exp.dir / "tables" / "table7.json").is_file():
        records = [json.loads(p.read_text()) for p in sorted((exp.dir / "records").glob("*.json"))]
        seconds = sum(r["metrics"].get("train_seconds") or 0 for r in records)
        return f"{len(records)} runs", f"{seconds / 3600:.1f}"
    if isinstance(exp, CommandReport):
        tasks = exp.data.get("tasks", {})
        probes = sum(len(t.get("results", {})) for t in tasks.values())
        return f"{probes} probes", "–"
    return "–", "–"


def results_pages(site: Site) -> dict[str, str]:
    pages: dict[str, str] = {}
    cells: list[list[str]] = []
    for name in site.order():
        exp = site.experiments[name]
        meta, findings = site.template(name) or ({}, "")
        if isinstance(exp, Experiment):
            pages[f"docs/results/{name}.md"] = grid_page(site, exp, meta, findings)
        elif isinstance(exp, RankProbe):
            pages[f"docs/results/{name}.md"] = rank_probe_page(exp, meta, findings)
        elif isinstance(exp, CommandReport):
            page = table7_page if (exp.dir / "tables" / "table7.json").is_file() else report_page
            pages[f"docs/results/{name}.md"] = page(exp, meta, findings)
        else:
            page = probe_page if isinstance(exp, Probe) else reconstruct_page
            pages[f"docs/results/{name}.md"] = page(exp, meta, findings)
        cells.append([f"[{meta.get('title', name)}]({name}.md)", meta.get("asks", ""), *index_cells(exp)])
    rows = markdown_table(["experiment", "what it asks", "size", "compute hours"], cells, "llrr")
    meta, intro = site.template("results-index") or ({}, "")
    pages["docs/results/index.md"] = "\n".join(
        [f"# {meta.get('title', 'Results')}", "", note("experiments/*/", "results-index"), "", intro, *rows, ""])
    meta, text = site.template(HELP_PAGE) or ({}, "")
    pages[f"docs/results/{HELP_PAGE}.md"] = "\n".join(
        [f"# {meta.get('title', 'Does HIRE help?')}", "", note("experiments/*/", HELP_PAGE), "", text])
    return pages


def step_ratios(path: Path, head: str = "hire") -> tuple[list[float], dict[str, Any]] | None:
    """A ``bench_heads.py`` report's training-step ratios of ``head`` to the last layer (every length and precision
    it measured), and its machine."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    ratios = [r["ratio_to_last_layer"] for r in data.get("records", [])
              if r.get("head") == head and r.get("ratio_to_last_layer") is not None]
    return (ratios, data.get("machine", {})) if ratios else None


def headline(results: Path) -> list[str]:
    """What a HIRE training step costs against a last-layer step, on the CPU and on the GPU reports of
    all-MiniLM-L6-v2 (``cpu-2core``, ``gpu-h100``)."""
    found = []
    for name, where in (("cpu-2core", "CPU"), ("gpu-h100", "GPU")):
        got = step_ratios(results / name / "results.json")
        if got is None:
            continue
        ratios, m = got
        machine = m.get("gpu") or f"{m.get('cpu')}, {m.get('cores')} cores"
        found.append(f"{span(ratios)}x on the {where} ([{name}]({name}.md): {machine})")
    if not found:
        return []
    return [f"**What HIRE costs.** A HIRE training step on all-MiniLM-L6-v2 takes {' and '.join(found)} the time of "
            "a last-layer step, over every sequence length and precision the suite measured (batch 32).", ""]


def benchmark_pages(root: Path) -> dict[str, str]:
    """One page per speed report in benchmarks/results/ (its NOTE.md first), and an index."""
    results = root / "benchmarks" / "results"
    pages: dict[str, str] = {}
    cells: list[list[str]] = []
    sources = sorted([*results.glob("*/report.md"), *results.glob("*.md")])
    for path in sources:
        name = path.parent.name if path.name == "report.md" else path.stem
        text = path.read_text()
        first, _, rest = text.partition("\n")
        title = first.lstrip("# ").strip()
        machine = re.search(r"^Machine: (.*?); torch", rest, re.M)
        suite = re.search(r"`(benchmarks/\w+\.py[^`]*?)(?: --out \S+)?`", rest)
        notes = path.parent / "NOTE.md" if path.name == "report.md" else None
        body = ""
        if notes and notes.is_file():
            body = '!!! note "Read first: NOTE.md"\n\n' + indent(demote(notes.read_text().strip(), 2)) + "\n\n"
        source = path.relative_to(root).as_posix()
        text = body + rest.strip()
        work = [WORK_NOTE, ""] if TEMPORARY.search(text) else []
        pages[f"docs/benchmarks/{name}.md"] = "\n".join(
            [f"# {name}: {title}", "", note(source, None), "", f"From `{source}`.", "", *work,
             without_temporary(text), ""])
        ran = f"`{without_temporary(suite.group(1))}`" if suite and path.name == "report.md" else title
        cells.append([f"[{name}]({name}.md)", machine.group(1) if machine else "", ran])
    intro = ("Speed and memory, measured by `python benchmarks/bench_heads.py` (every head: training step, "
             "inference, memory, multiply-adds per part) and the scripts beside it; each report names its "
             "machine and how long the suite took. Read ratios rather than seconds: seconds belong to one "
             "machine. The guide [Mixed precision and speed](../guides/precision-speed.md) says what they mean for "
             "a run.")
    rows = markdown_table(["report", "machine", "what it ran"], cells)
    pages["docs/benchmarks/index.md"] = "\n".join(["# Benchmarks", "", note("benchmarks/results/", None), "",
                                                   *headline(results), intro, "", *rows, ""])
    return pages


def readme(root: Path, site: Site) -> str:
    """README.md with its results block (between the two markers) made again."""
    text = (root / "README.md").read_text()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        raise SystemExit(f"README.md: the markers {README_BEGIN!r} and {README_END!r} are missing")
    _, block = site.template("readme") or ({}, "")
    return text[:begin] + README_BEGIN + "\n" + block + text[end:]


def generate(root: Path = ROOT) -> dict[str, str]:
    """Every generated file: path relative to ``root`` -> its text."""
    site = Site(root)
    return {**results_pages(site), **benchmark_pages(root), "README.md": readme(root, site)}


def stale(root: Path, pages: dict[str, str]) -> list[str]:
    """Generated pages on disk that nothing makes any more (an experiment or report removed)."""
    found = [p.relative_to(root).as_posix() for d in ("docs/results", "docs/benchmarks")
             for p in (root / d).glob("*.md")]
    return sorted(p for p in found if p not in pages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page would change")
    args = parser.parse_args(argv)
    pages = generate(ROOT)
    differ = [p for p, text in pages.items() if not (ROOT / p).is_file() or (ROOT / p).read_text() != text]
    extra = stale(ROOT, pages)
    if args.check:
        for path in differ + extra:
            print(f"{path}: {'not made by the generator' if path in extra else 'differs from what the records make'}")
        return 1 if differ or extra else 0
    for path in differ:
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / path).write_text(pages[path])
    for path in extra:
        (ROOT / path).unlink()
    print(f"{len(pages)} pages: {len(differ)} written, {len(extra)} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
