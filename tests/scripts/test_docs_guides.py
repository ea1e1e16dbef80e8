"""The way into the documentation: every guide is linked from the getting-started page and from the guide most
users open first (your own data); the README's first commands are the getting-started page's, with the same times;
the API reference's index names every package; the site's search splits words as a reader types them (``csv`` in
``train.csv``, ``subword`` in ``--data.subword``); ``hire --help`` and the help of the commands that read tasks
name every registered kind of task (:func:`hire.tasktype.task_kinds`, so a kind added later must be named too)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from paths import REPO

from hire import tasktype
from hire.cli import main

DOCS = REPO / "docs"
GUIDES = sorted(p.name for p in (DOCS / "guides").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def links(text: str, page: Path) -> set[str]:
    """The pages that ``text``, standing at ``page``, links, as paths relative to docs/."""
    found = set()
    for target in LINK.findall(text):
        if not target.startswith(("http://", "https://")):
            found.add(Path(os.path.relpath(os.path.normpath(page.parent / target), DOCS)).as_posix())
    return found


def unlinked_guides(text: str, page: Path) -> list[str]:
    have = links(text, page)
    return [g for g in GUIDES if f"guides/{g}" not in have and page != DOCS / "guides" / g]


@pytest.mark.parametrize("page", ["getting-started.md", "guides/your-data.md"])
def test_every_guide_is_linked_from_the_first_pages(page: str) -> None:
    missing = unlinked_guides((DOCS / page).read_text(), DOCS / page)
    assert not missing, f"docs/{page} does not link {missing}"


def test_a_guide_left_unlinked_is_caught() -> None:
    """The check above fails on a getting-started page that lost its link to the ranking guide."""
    page = DOCS / "getting-started.md"
    damaged = page.read_text().replace("(guides/ranking.md", "(guides/x.md")
    assert unlinked_guides(damaged, page) == ["ranking.md"]


def first_commands(text: str, heading: str) -> str:
    """The first ``bash`` block under the second-level heading ``heading``."""
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_readme_and_getting_started_give_the_same_first_run() -> None:
    """The same commands with the same measured times (each command says how long it takes)."""
    readme = first_commands((REPO / "README.md").read_text(), "On the command line")
    page = first_commands((DOCS / "getting-started.md").read_text(), "A first run on the command line")

    def lines(block: str) -> list[str]:  # a command continued over several lines is one
        return [" ".join(line.split()) for line in block.replace("\\\n", " ").splitlines()
                if line.strip() and not line.startswith(". .venv")]

    assert lines(readme) == lines(page)
    timed = [line for line in lines(page) if line.startswith("hire ")]
    assert timed and all(re.search(r"# .*\b(seconds|minutes?)\b", line) for line in timed), timed


def test_the_reference_index_names_every_package() -> None:
    """Every package of src/hire (and each kind of task's package under hire.tasks) is in the reference index."""
    src = REPO / "src" / "hire"
    packages = ["hire.tasktype", *(f"hire.{p.parent.name}" for p in sorted(src.glob("*/__init__.py"))),
                *(f"hire.tasks.{p.parent.name}" for p in sorted((src / "tasks").glob("*/__init__.py")))]
    index = (DOCS / "reference" / "index.md").read_text()
    missing = [p for p in packages if not re.search(rf"`{re.escape(p)}`", index)]
    assert not missing, f"docs/reference/index.md does not name {missing}"


# The site's search: mkdocs-material tokenises the index's text between its tags in the browser with lunr,
# splitting on the configured separator and trimming non-word characters at both ends of each token (lunr.trimmer).
def tokens(text: str, separator: str) -> set[str]:
    text = re.sub(r"<[^>]*>", " ", text)
    return {re.sub(r"^\W+|\W+$", "", t).lower() for t in re.split(separator, text) if t}


def search_separator() -> str:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    search = next(p["search"] for p in config["plugins"] if isinstance(p, dict) and "search" in p)
    return search["separator"]


WANTED = {"guides/your-data.md": {"csv", "tsv", "jsonl"}, "guides/token-tasks.md": {"conll", "subword"}}


def test_the_search_separator_splits_file_names_and_options() -> None:
    separator = search_separator()
    for page, words in WANTED.items():
        assert words <= tokens((DOCS / page).read_text(), separator), page
    # mkdocs-material's default splits on spaces and hyphens only: "train.csv", "data.subword" stay whole.
    assert "subword" not in tokens("--data.subword", r"[\s\-]+") and "csv" not in tokens("train.csv", r"[\s\-]+")
    assert {"data", "subword"} <= tokens("--data.subword", separator)
    assert {"train", "csv"} <= tokens("(train.csv)", separator) and {"task", "kind"} <= tokens("TaskKind", separator)
    assert "3.10" in tokens("Python 3.10", separator)  # a version stays one word


def test_the_built_search_index_finds_the_words(tmp_path: Path) -> None:
    """Build two guides with the project's search settings; the index's own separator finds the words in it."""
    pytest.importorskip("material", reason="the documentation tools: pip install -e '.[docs]'")
    (tmp_path / "docs" / "guides").mkdir(parents=True)
    for page in WANTED:
        shutil.copy(DOCS / page, tmp_path / "docs" / page)
    (tmp_path / "docs" / "index.md").write_text("# Home\n")
    config = {"site_name": "t", "docs_dir": str(tmp_path / "docs"), "site_dir": str(tmp_path / "site"),
              "theme": {"name": "material", "font": False}, "plugins": [{"search": {"separator": search_separator()}}],
              "markdown_extensions": ["attr_list", "pymdownx.superfences", "admonition", "pymdownx.details"]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(tmp_path / "mkdocs.yml")],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    index = json.loads((tmp_path / "site" / "search" / "search_index.json").read_text())
    assert index["config"]["separator"] == search_separator()
    for page, words in WANTED.items():
        text = " ".join(d["title"] + " " + d["text"] for d in index["docs"] if d["location"].startswith(page[:-3]))
        assert words <= tokens(text, index["config"]["separator"]), (page, words - tokens(text, r"[\s\-]+"))


def help_text(*words: str) -> str:
    """What ``hire WORDS --help`` prints, on one line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*words, "--help"])
    return " ".join(out.getvalue().split())


def alnum(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).lower()


def unnamed_kinds(text: str, named: bool) -> list[str]:
    """The registered kinds whose description (what ``TaskKind.describe`` says its models do) the help omits, and
    with ``named``, those none of whose tasks by name it mentions."""
    missing = []
    for name, kind in tasktype.task_kinds().items():
        said = kind.describe() in text
        if named and kind.task_names():  # conll2003 is named CoNLL-2003 in prose
            said = said and any(alnum(t) in alnum(text) for t in kind.task_names())
        if not said:
            missing.append(name)
    return missing


@pytest.mark.parametrize(("command", "named"), [((), True), (("train",), True), (("evaluate",), True),
                                                (("predict",), False)])
def test_the_help_names_every_kind_of_task(command: tuple[str, ...], named: bool) -> None:
    assert not unnamed_kinds(help_text(*command), named), f"hire {' '.join(command)} --help"


def test_a_kind_the_help_omits_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind registered later (a plug-in's) and not in the help fails the check above."""
    tasktype.task_kinds()  # hire's own kinds loaded first

    class Haiku(tasktype.TaskKind):
        name = "haiku"

        def describe(self) -> str:
            return "counts syllables"

        def task_names(self) -> tuple[str, ...]:
            return ("basho",)

    monkeypatch.setitem(tasktype._KINDS, "haiku", Haiku())
    assert unnamed_kinds(help_text(), True) == ["haiku"]
