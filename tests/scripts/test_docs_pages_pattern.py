"""The results pages' one pattern (issue 76): finished work reads as finished, an unfinished grid says how many of
its cells are done, verdict words follow one interval rule (the README's too), no temporary path on any page, one
naming of heads, and the results index in the navigation's order. Each check is a function run on the real pages
and on a copy damaged on purpose, so that it is seen to fail."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from paths import REPO

pytest.importorskip("jinja2", reason="the documentation tools: pip install -e '.[docs]'")
sys.path.insert(0, str(REPO / "scripts"))
import docs_pages
from docs_data import Experiment, head_name, hire_against_last_layer, row_names, verdict

UNFINISHED = re.compile(r"\bso far\b|\bplanned\b|\bonce\b[^.]{0,60}\b(?:are|is) in\b|\bnot yet\b"
                        r"|\bstill (?:being|running)|\buntil\b[^.]{0,60}\b(?:are|is) in\b|\bno verdict yet\b",
                        re.I)
TEMPORARY = re.compile(r"(?<![\w.])(?:/tmp/|/var/folders/|/private/var/folders/)")
OLD_LABELS = ("MiniLM+HIRE", "MPNet+HIRE", "frozen: HIRE", "HIRE, head lr", "ranker=", "rank_loss=", "(last layer)")


def without_experiment_file(page: str) -> str:
    """A page less the experiment file it quotes verbatim (a record: its comments are as written then)."""
    return page.split('??? example "The experiment file"', 1)[0]


def unfinished_words(page: str) -> list[str]:
    return [m.group(0) for m in UNFINISHED.finditer(without_experiment_file(page))]


def temporary_paths(text: str) -> list[str]:
    return [line for line in text.splitlines() if TEMPORARY.search(line)]


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return docs_pages.generate(REPO)


@pytest.fixture(scope="module")
def site() -> docs_pages.Site:
    return docs_pages.Site(REPO)


def test_finished_work_reads_as_finished(pages: dict[str, str], site: docs_pages.Site) -> None:
    """No "so far", "planned", "once ... are in" on the page of a finished grid, or on any other results page."""
    grids = [n for n, e in site.experiments.items() if isinstance(e, Experiment)]
    running = {f"docs/results/{n}.md" for n in grids if not site.experiments[n].finished}  # CODAH's, for now
    assert grids and len(running) < len(grids)
    for path, text in pages.items():
        if path in running:  # says how many of its cells are done instead
            assert "Unfinished grid" in text and " cells are done (" in text, path
        elif path.startswith("docs/results/") or path == "README.md":
            assert not unfinished_words(text), (path, unfinished_words(text))
    damaged = pages["docs/results/ner-minilm.md"].replace("## The answer", "## Findings so far, once all seeds are in")
    assert unfinished_words(damaged)


def copy_for_pages(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    for part in ("experiments", "docs/findings", "benchmarks/results"):
        shutil.copytree(REPO / part, copy / part)
    for name in ("README.md", "mkdocs.yml"):
        shutil.copy(REPO / name, copy / name)
    return copy


def test_an_unfinished_grid_says_how_many_cells_are_done(tmp_path: Path) -> None:
    copy = copy_for_pages(tmp_path)
    records = sorted((copy / "experiments" / "ner-minilm" / "records").glob("*__seed5.json"))
    assert len(records) == 4
    for path in records:
        path.unlink()
    page = docs_pages.generate(copy)["docs/results/ner-minilm.md"]
    assert "16 of 20 cells are done" in page
    assert "Unfinished grid" in page.split("## The answer")[0]
    finished = docs_pages.generate(REPO)["docs/results/ner-minilm.md"]
    assert "Unfinished" not in finished and "20 of 20 cells recorded" in finished


def test_the_rule_gives_every_verdict() -> None:
    assert verdict(0.1, 2.0) == "ahead" and verdict(-3.6, 0.7) == "no difference shown"
    assert verdict(-6.0, -2.6) == "behind" and verdict(None, None) == "one pair: no interval"


def readme_block(text: str) -> str:
    return text[text.index(docs_pages.README_BEGIN):text.index(docs_pages.README_END)]


def readme_claims(text: str, comparisons: list[dict]) -> list[str]:
    """What the README's results block says that the verdicts (the pages' rule) do not: each interval of its table
    against the verdict of that comparison, and each verdict word its prose gives an encoder and a task."""
    block = readme_block(text)
    expected = {}
    for c in comparisons:
        if c["experiment"] in ("table1-minilm", "table1-mpnet") and c["table"] == "table1":
            expected["MiniLM" if "minilm" in c["experiment"] else "MPNet", c["task"]] = c
    wrong = []
    rows = [line for line in block.splitlines() if line.startswith("|")]
    header = [h.strip() for h in rows[0].strip("|").split("|")]
    for line in rows:
        cells = [x.strip() for x in line.strip("|").split("|")]
        found = re.match(r"\*(\w+): hire − last-layer", cells[0])
        if not found:
            continue
        for task, cell in zip(header[1:], cells[1:], strict=True):
            interval = re.fullmatch(r"([+-]\d+\.\d) \[([+-]\d+\.\d), ([+-]\d+\.\d)\]", cell)
            if interval is None:
                continue
            c = expected[found.group(1), task]
            if cell != c["hire"].vs.ci or verdict(float(interval[2]), float(interval[3])) != c["verdict"]:
                wrong.append(f"{found.group(1)} {task}: {cell} against {c['hire'].vs.ci} ({c['verdict']})")
    prose = " ".join(line for line in block.splitlines() if not line.startswith("|"))
    listing = re.compile(r"(behind|ahead) on ((?:[\w-]+ \((?:MiniLM|MPNet)\)(?:, | and )?)+)")
    claimed = set()
    for word, listed in listing.findall(prose):
        for task, enc in re.findall(r"([\w-]+) \((MiniLM|MPNet)\)", listed):
            claimed.add((enc, task))
            if expected[enc, task]["verdict"] != word:
                wrong.append(f"prose: {word} on {task} ({enc}), the rule says {expected[enc, task]['verdict']}")
    shown = {k for k, c in expected.items() if c["verdict"] in ("ahead", "behind")}
    if claimed != shown:
        wrong.append(f"prose names {sorted(claimed)} as shown, the rule shows {sorted(shown)}")
    for task, both in re.findall(r"on (\w[\w-]*) it reads \"([^\"]+)\" on both", prose):
        for enc in ("MiniLM", "MPNet"):
            if expected[enc, task]["verdict"] != both:
                wrong.append(f"prose: {task} reads {both!r} on both; {enc} is {expected[enc, task]['verdict']!r}")
    for task, a, b in re.findall(r"on (\w[\w-]*) it reads \"([^\"]+)\" on MiniLM and \"([^\"]+)\" on MPNet", prose):
        for enc, word in (("MiniLM", a), ("MPNet", b)):
            if expected[enc, task]["verdict"] != word:
                wrong.append(f"prose: {task} reads {word!r} on {enc}; the rule says {expected[enc, task]['verdict']!r}")
    return wrong


def test_the_readme_says_what_the_verdicts_say(pages: dict[str, str], site: docs_pages.Site) -> None:
    comparisons = hire_against_last_layer({n: site.experiments[n] for n in site.order()})
    readme = pages["README.md"]
    assert not readme_claims(readme, comparisons)
    assert (REPO / "README.md").read_text() == readme
    damaged = readme.replace("RTE (MiniLM)", "RTE (MiniLM) and RTE (MPNet)", 1)  # MPNet's RTE: no difference shown
    assert damaged != readme and readme_claims(damaged, comparisons)
    damaged = readme.replace("behind on SST-2 (MiniLM) and RTE (MiniLM)", "behind on SST-2 (MiniLM)", 1)
    assert damaged != readme and readme_claims(damaged, comparisons)  # a verdict the prose leaves out
    damaged = readme.replace("-1.7 [-3.6, +0.7]", "-1.7 [-3.6, -0.7]")
    assert damaged != readme and readme_claims(damaged, comparisons)


def test_no_page_shows_a_temporary_path(pages: dict[str, str]) -> None:
    committed = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    found = {p.relative_to(REPO).as_posix(): temporary_paths(p.read_text()) for p in committed}
    assert not {k: v for k, v in found.items() if v}
    assert not {k: temporary_paths(v) for k, v in pages.items() if temporary_paths(v)}
    damaged = pages["docs/benchmarks/index.md"].replace("`benchmarks/bench_heads.py`",
                                                        "`benchmarks/bench_heads.py --out /tmp/x`", 1)
    assert temporary_paths(damaged)
    assert temporary_paths("see /var/folders/ab/cd/T/tmp1/out") and not temporary_paths("`--out WORK/x`")
    assert docs_pages.without_temporary("--out /tmp/gpu-h100 and /var/folders/q/r/T/x") == \
        "--out WORK/gpu-h100 and WORK/x"


def test_one_naming_of_heads_and_variants(pages: dict[str, str]) -> None:
    assert head_name("hire", ["head lr 1e-4"]) == "hire (head lr 1e-4)"
    assert head_name("hire", [], "all-MiniLM-L6-v2") == "MiniLM: hire"
    assert row_names([{"model.head": "hire", "model.freeze_encoder": True, "train.head_lr": 0.001},
                      {"model.head": "hire", "model.freeze_encoder": False, "train.head_lr": None}]) == \
        ["hire (frozen)", "hire (fine-tuned)"]
    assert row_names([{"model.head": "hire", "model.ranker": "cross", "train.rank_loss": "pointwise"},
                      {"model.head": "hire", "model.ranker": "cross", "train.rank_loss": "pairwise"},
                      {"model.head": "last-layer", "model.ranker": "bi", "train.rank_loss": "in-batch"}]) == \
        ["hire (cross, pointwise)", "hire (cross, pairwise)", "last-layer (bi, in-batch)"]
    for path, text in pages.items():
        if path.startswith("docs/results/") or path == "README.md":
            tables = "\n".join(line for line in without_experiment_file(text).splitlines() if line.startswith("|"))
            assert not [label for label in OLD_LABELS if label in tables], path


def test_the_index_lists_the_experiments_in_the_navigations_order(pages: dict[str, str]) -> None:
    nav = [m.group(1) for m in re.finditer(r"results/([\w.-]+)\.md", (REPO / "mkdocs.yml").read_text())]
    nav = [n for n in nav if n not in ("index", "does-hire-help")]
    listed = re.findall(r"^\| \[[^\]]+\]\(([\w.-]+)\.md\)", pages["docs/results/index.md"], re.M)
    assert listed == nav
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert config["nav"]  # the order read from the navigation, not from a list typed twice


SECTIONS = ("## The answer", "## What else it shows", "## Details", "## Reproduce")
REDRAWS = re.compile(r"^hire (?:probe-report|probe-tokens-report|rank-probe-report|experiment report) (\S+)", re.M)


def pattern_faults(page: str) -> list[str]:
    """How a results page departs from the one pattern: the question, "## The answer" before the first table, that
    table and a figure open before "## Details", what else it shows, the details, and "## Reproduce" last with its
    commands in a bash block; no other section at the top level (the rest is folded under Details)."""
    faults = []
    headings = re.findall(r"^## .*$", page, re.M)
    if [h for h in headings if h not in SECTIONS] or headings != [h for h in SECTIONS if h in headings]:
        faults.append(f"top-level sections {headings}")
    for needed in ("## The answer", "## Details", "## Reproduce"):
        if needed not in headings:
            faults.append(f"no {needed!r}")
    if faults:
        return faults
    answer, details, reproduce = (page.index(h) for h in ("## The answer", "## Details", "## Reproduce"))
    table, figure = page.find("\n| "), page.find("\n![")
    if not page.index("**The question.**") < answer:
        faults.append("the question does not come first")
    if not answer < table < details:
        faults.append("the supporting table is not between the answer and the details")
    if not answer < figure < details:
        faults.append("no figure between the answer and the details")
    if "```bash" not in page[reproduce:]:
        faults.append("the Reproduce section has no bash block")
    return faults


def test_every_results_page_follows_the_pattern(pages: dict[str, str], site: docs_pages.Site) -> None:
    names = list(site.experiments)
    assert len(names) >= 25
    for name in names:
        faults = pattern_faults(pages[f"docs/results/{name}.md"])
        assert not faults, (name, faults)
    page = pages["docs/results/probe-ud-minilm.md"]
    answer = page[page.index("## The answer"):page.index("**Which layer?")]
    damaged = [
        page.replace(answer, "").replace("## What else it shows", answer + "## What else it shows"),  # answer late
        page.replace("## Details", "## Every task"),  # details not folded under Details
        page.replace("## What else it shows", "## Findings"),  # an old section name
        page.replace("```bash", "```"),  # commands not in a bash block
        re.sub(r"\n!\[[^\n]*ud-tense/layers.png\)", "", page, count=1),  # no figure open
    ]
    for copy in damaged:
        assert copy != page and pattern_faults(copy)


def test_reproduce_commands_name_the_folders_they_read(pages: dict[str, str]) -> None:
    """Each redraw command of a Reproduce block names a folder that exists (``experiments/<name>``, not ``<name>``)."""
    def wrong(page: str) -> list[str]:
        block = page.split("## Reproduce", 1)[-1]
        return [m for m in REDRAWS.findall(block) if not (REPO / m).exists()]

    found = {path: wrong(text) for path, text in pages.items() if path.startswith("docs/results/")}
    assert not {k: v for k, v in found.items() if v}
    assert sum(bool(REDRAWS.findall(t.split("## Reproduce", 1)[-1])) for t in pages.values()) >= 20
    page = pages["docs/results/probe-tokens-minilm.md"]
    damaged = page.replace("hire probe-tokens-report experiments/probe-tokens-minilm",
                           "hire probe-tokens-report probe-tokens-minilm")
    assert damaged != page and wrong(damaged) == ["probe-tokens-minilm"]


def test_a_grid_page_leads_with_the_answer_and_folds_the_details(pages: dict[str, str]) -> None:
    for name in ("ner-minilm", "wikiqa-minilm", "table1-minilm", "table7-minilm", "table7-mpnet"):
        page = pages[f"docs/results/{name}.md"]
        answer, table, details = page.index("## The answer"), page.index("\n| "), page.index("## Details")
        assert answer < table < details, name
        assert page.index("![") < details and "```bash" in page.split("## Reproduce", 1)[1]
        opened = page[:details]
        assert "| seed |" not in opened and "| seed 1 |" not in opened, name  # per-seed tables are folded
        assert '??? note "Per-seed results"' in page, name
