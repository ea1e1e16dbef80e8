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
import sys
from pathlib import Path
from typing import Any

import jinja2
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_data import (
    CommandReport,
    Experiment,
    Probe,
    RankBlock,
    RankProbe,
    Reconstruct,
    hire_against_last_layer,
    load,
    span,
)

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
        """HIRE against the last layer as a cross-encoder's head, per loss, and the verdict the pages state.

        The rule, in one place for every page that states it: with 5 seeds for both losses, *yes* where HIRE is
        ahead on dev MAP in at least 4 of 5 with both, *no* where it is behind in at least 4 of 5 with both, else
        *not clearly*; before that, no verdict.
        """
        rows = [(loss, self.experiment(name).paired({"model.head": "last-layer"}, head="hire", model__ranker="cross",
                                                    train__rank_loss=loss))
                for loss in ("pointwise", "pairwise")]
        done = [pr for _, pr in rows if pr.n >= 5]
        if len(done) < len(rows):
            verdict = "not settled yet"
        elif all(pr.ahead("dev") >= 4 for pr in done):
            verdict = "yes"
        elif all(pr.behind("dev") >= 4 for pr in done):
            verdict = "no"
        else:
            verdict = "not clearly"
        return {"rows": rows, "measured": [(loss, pr) for loss, pr in rows if pr.n], "settled": len(done) == len(rows),
                "verdict": verdict}

    def experiment(self, name: str) -> Any:
        if name not in self.experiments:
            raise KeyError(f"no experiment {name!r} in experiments/")
        return self.experiments[name]

    def order(self) -> list[str]:
        """Experiments in the order their templates' ``order`` says (those without one last, by name)."""
        def key(name: str) -> tuple[float, str]:
            found = self.template(name)
            return (found[0].get("order", 1e9) if found else 1e9, name)
        return sorted(self.experiments, key=key)


def demote(markdown: str, levels: int = 1) -> str:
    """Every heading one level deeper (a copied report's ``## Table`` under the page's ``##`` sections)."""
    return re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + levels) + " ", markdown, flags=re.M)


def indent(text: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in text.splitlines(keepends=True))


def image(exp: str, path: str, alt: str) -> str:
    return f"![{alt}](../../experiments/{exp}/{path})"


def runs_section(exp: Experiment) -> list[str]:
    """Machines, precisions and training time, from summary.json."""
    s = exp.summary
    adopted = s.get("adopted") or {}
    shared = (f" ({sum(adopted.values())} of them trained once for another experiment and adopted: "
              + ", ".join(f"{k} {v}" for k, v in adopted.items()) + ")") if adopted else ""
    out = ["## Runs: machines and time", "",
           f"{s['with_records']} of {s['cells']} cells recorded{shared}; {exp.hours} hours of training in all. "
           "Times are each run's training time as its record gives it; runs that shared a machine with other "
           "runs took longer than they would alone, so compare times within one machine.", ""]
    out += markdown_table(["machine", "cells", "precision", "hours", "minutes per cell (mean)"], [
        [name, str(m["cells"]), ", ".join(m["precisions"]), f"{m['train_seconds'] / 3600:.1f}",
         f"{(m['mean_train_seconds'] or 0) / 60:.1f}"] for name, m in s["machines"].items()], "lrlr")
    out += ["", *markdown_table(["task / head", "cells", "minutes per cell (mean)"], [
        [k, str(v["cells"]), f"{(v['mean_train_seconds'] or 0) / 60:.1f}"] for k, v in s["task_head"].items()], "lr")]
    return out


def grid_page(site: Site, exp: Experiment, meta: dict[str, Any], findings: str) -> str:
    d = exp.dir
    spec = yaml.safe_load((d / "experiment.yaml").read_text())
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
           f"*{spec.get('description', '').strip()}*", "", findings, "## Tables", ""]
    for table in sorted((d / "tables").glob("*.md")):
        if table.stem != "layer_weights":
            out += [demote(table.read_text()).strip(), ""]
    figures = sorted((d / "figures").glob("*.png"))
    if figures:
        out += ["## Figures", ""]
        report = (d / "report.md").read_text()
        for png in figures:
            out += [image(exp.name, f"figures/{png.name}", png.stem), ""]
            caption = re.search(rf"\(figures/{re.escape(png.name)}\)\n\n([^!\n][^\n]*)", report)
            if caption:
                out += [caption.group(1), ""]
    weights = d / "tables" / "layer_weights.md"
    if weights.is_file():
        body = weights.read_text().split("\n", 2)[2]  # without its heading
        out += ['??? info "Every run\'s mean importance score per hidden state"', "", indent(body), ""]
    out += runs_section(exp)
    out += ["", "## Reproduce", "",
            f"Everything above comes from `experiments/{exp.name}/`, which `hire experiment report "
            f"configs/experiments/{exp.name}.yaml` makes from the records alone (the "
            f"[self-contained HTML report](../../experiments/{exp.name}/report.html) shows the same, with every "
            f"cell); `hire experiment run` with the same file trains what is missing.", "",
            '??? example "The experiment file"', "",
            indent("```yaml\n" + (d / "experiment.yaml").read_text().strip() + "\n```\n")]
    return "\n".join(out)


def probe_page(exp: Probe, meta: dict[str, Any], findings: str) -> str:
    d, m = exp.dir, exp.results["machine"]
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "", findings,
           "## Tables", ""]
    out += [demote((d / "which_layer.md").read_text()).strip(), "", demote((d / "poolings.md").read_text()).strip(), ""]
    report = (d / "report.md").read_text()
    encoders = report.split("\n## ", 1)[0].split("\n", 1)[1].strip()
    out += ["## Every task", "", "The encoders:", "", encoders, ""]
    for section in report.split("\n## ")[1:]:
        title, _, body = section.partition("\n")
        if not (d / title.strip() / "layers.png").is_file():  # the summaries (above) and the times (below)
            continue
        body = re.sub(r"!\[[^\]]*\]\(([^)]+)\)\n?", "", body).strip()
        out += [f"### {title.strip()}", "", image(exp.name, f"{title.strip()}/layers.png", f"{title}: score by layer"),
                "", f'??? info "{title.strip()}: every hidden state and pooling"', "", indent(demote(body, 2)), ""]
    minutes = exp.minutes
    out += ["## Machine and time", "",
            f"{m.get('processor') or m.get('device')} ({m.get('cpu_count')} CPUs, {m.get('torch_threads')} torch "
            f"threads, {m.get('fit_threads')} fitting thread), precision {m.get('precision')}, torch {m.get('torch')}, "
            f"scikit-learn {m.get('sklearn')}: {minutes['all']} minutes in all ({minutes['encode']} encoding, "
            f"{minutes['fit']} fitting), as `results.json` records them.", "",
            "## Reproduce", "", f"`hire probe-report experiments/{exp.name}` redraws every table and figure from "
            f"`experiments/{exp.name}/results.json`; the command that made it is in the findings above.", ""]
    return "\n".join(out)


def reconstruct_page(exp: Reconstruct, meta: dict[str, Any], findings: str) -> str:
    d = exp.dir
    body = (d / "reconstruction.md").read_text().split("\n", 1)[1]
    body = re.sub(r"!\[[^\]]*\]\(([^)]+)\)", lambda m: image(exp.name, m.group(1), "reconstruction"), body)
    m = exp.results["machine"]
    seconds = sum(e.get("seconds") or 0 for e in exp.results["encoders"])
    where = m.get("processor") or m.get("cpu") or m.get("device") or "unknown"
    return "\n".join([f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
                      findings, "## Tokens recovered per hidden state", "", body.strip(), "",
                      "## Machine and time", "",
                      f"{where} ({m.get('cpu_count', '?')} CPUs), torch {m.get('torch', '?')}: {seconds / 60:.1f} "
                      "minutes for all the encoders, as `results.json` records them.", "",
                      "## Reproduce", "", f"`hire reconstruct --report_only --output_dir experiments/{exp.name}` "
                      "redraws the table and plot from `results.json`.", ""])


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


def rank_probe_page(exp: RankProbe, meta: dict[str, Any], findings: str) -> str:
    """Findings, every block's layer x pooling table, the MAP-by-layer figures, each block's time and the machine,
    from results.json."""
    out = [f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "", findings]
    for encoder in exp.encoders:
        out += rank_cells(exp, encoder)
    out += rank_figures(exp)
    rows = [[encoder if i == 0 else "", str(exp.texts(encoder)) if i == 0 else "", b.name, str(len(b.cells)),
             str(b.seconds)] for encoder in exp.encoders for i, b in enumerate(exp.blocks(encoder))]
    out += ["## Machine and time", "", f"{exp.machine}. Questions and passages are encoded once per encoder "
            f"({exp.seconds['encode']} s in all) and every block reads the cached features; a block's cells are "
            f"fitted together, so its seconds are for all of them. In all {exp.minutes['all']} minutes "
            f"({exp.minutes['encode']} encoding, {exp.minutes['fit']} fitting), as `results.json` records them.", "",
            *markdown_table(["encoder", "texts encoded", "block", "cells", "seconds"], rows, "lrlrr"), "",
            "## Reproduce", "", f"`{exp.command}` made `experiments/{exp.name}/` (every option is in its "
            f"`results.json`); `hire rank-probe-report experiments/{exp.name}` redraws `report.md`, the tables and "
            f"the figures from `results.json` alone. {rank_run_files(exp)}", ""]
    return "\n".join(out)


def report_page(exp: CommandReport, meta: dict[str, Any], findings: str) -> str:
    """The findings, then the folder's own report (its headings one level down, its figures linked in place)."""
    body = exp.report.split("\n", 1)[1] if exp.report.startswith("# ") else exp.report
    body = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", lambda m: image(exp.name, m.group(2), m.group(1)), body)
    return "\n".join([f"# {meta.get('title', exp.name)}", "", note(f"experiments/{exp.name}/", exp.name), "",
                      findings, "## The report", "", demote(body.strip()), "", "## Reproduce", "",
                      f"`{exp.redraw}` makes the report again from `experiments/{exp.name}/`'s own files.", ""])


def results_pages(site: Site) -> dict[str, str]:
    pages: dict[str, str] = {}
    cells: list[list[str]] = []
    for name in site.order():
        exp = site.experiments[name]
        meta, findings = site.template(name) or ({}, "")
        if isinstance(exp, Experiment):
            pages[f"docs/results/{name}.md"] = grid_page(site, exp, meta, findings)
            cells.append([f"[{meta.get('title', name)}]({name}.md)", meta.get("asks", ""),
                          f"{exp.summary['with_records']} of {exp.summary['cells']}", str(exp.hours)])
        elif isinstance(exp, RankProbe):
            pages[f"docs/results/{name}.md"] = rank_probe_page(exp, meta, findings)
            cells.append([f"[{meta.get('title', name)}]({name}.md)", meta.get("asks", ""), str(exp.cells),
                          f"{exp.seconds['all'] / 3600:.1f}"])
        elif isinstance(exp, CommandReport):
            pages[f"docs/results/{name}.md"] = report_page(exp, meta, findings)
            cells.append([f"[{meta.get('title', name)}]({name}.md)", meta.get("asks", ""), "", ""])
        else:
            page = probe_page if isinstance(exp, Probe) else reconstruct_page
            pages[f"docs/results/{name}.md"] = page(exp, meta, findings)
            cells.append([f"[{meta.get('title', name)}]({name}.md)", meta.get("asks", ""), "", ""])
    rows = markdown_table(["experiment", "what it asks", "cells", "training hours"], cells, "llr")
    meta, intro = site.template("results-index") or ({}, "")
    pages["docs/results/index.md"] = "\n".join(
        [f"# {meta.get('title', 'Results')}", "", note("experiments/*/", "results-index"), "", intro, *rows, ""])
    meta, text = site.template(HELP_PAGE) or ({}, "")
    pages[f"docs/results/{HELP_PAGE}.md"] = "\n".join(
        [f"# {meta.get('title', 'Does HIRE help?')}", "", note("experiments/*/", HELP_PAGE), "", text])
    return pages


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
        pages[f"docs/benchmarks/{name}.md"] = "\n".join(
            [f"# {name}: {title}", "", note(source, None), "", f"From `{source}`.", "", body + rest.strip(), ""])
        ran = f"`{suite.group(1)}`" if suite and path.name == "report.md" else title
        cells.append([f"[{name}]({name}.md)", machine.group(1) if machine else "", ran])
    intro = ("Speed and memory, measured by `python benchmarks/bench_heads.py` (every head: training step, "
             "inference, memory, multiply-adds per part) and the scripts beside it; each report names its "
             "machine and how long the suite took. Read ratios rather than seconds: seconds belong to one "
             "machine. The guide [Mixed precision and speed](../guides/precision-speed.md) says what they mean for "
             "a run.")
    rows = markdown_table(["report", "machine", "what it ran"], cells)
    pages["docs/benchmarks/index.md"] = "\n".join(["# Benchmarks", "", note("benchmarks/results/", None), "",
                                                   intro, "", *rows, ""])
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
