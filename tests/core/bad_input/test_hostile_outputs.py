"""What commands write (issue 73): no command writes over a file it did not create.

:func:`test_no_command_writes_over_a_users_file` walks every command that writes, found from the CLI itself
(:func:`hire.cli.all_commands`: each typed command's options dataclass, its output options), so that a new command
is walked without editing this file: each runs, in this process (``call_hire``), against an output folder that
already holds a user's files under every name any command writes, and none of those files may change. The other
tests are the defects of the hostile pass, each checked where it was: a folder a command made is its own again
(it resumes), a cache or a finished row is keyed by content, ``hire report``'s counts and headers, rank-probe's
messages and ties, and ``hire experiment status``'s failed cells.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import pytest
from badinput import call_hire, snapshot, write_world

from hire.checks import OUTPUT_MARKER, ConfigError, check_own_file, check_own_folder, output_owner
from hire.cli import all_commands
from hire.runs import mark_output_folder, mark_run_folder

# Every name a command writes at the top of its output folder (or beside its input), as a user's file or folder.
USER_FILES = ("README.md", "report.md", "results.json", "results.md", "metrics.json", "metrics.jsonl", "config.yaml",
              "config.json", "state.json", "predictions.jsonl", "predictions-dev.jsonl", "predictions-test.jsonl",
              "input.predictions.jsonl", "input.predictions.run", "ranking.jsonl", "ranking.run", "poolings.csv",
              "layers.png", "reconstruction.md", "reconstruction.csv", "reconstruction.png", "model.safetensors",
              "tokenizer.json", "vocab.txt", "epochs.jsonl", "deepen.json", "input.csv")
USER_FOLDERS = ("predictions", "submission", "tables", "figures", "runs", "qrels", "best", "last", "Tense", "SentLen",
                "tensorboard")
OUTPUT_OPTIONS = ("output_dir", "output", "markdown")  # the options through which a command names what it writes
# Commands whose folders are not output folders in this sense, and why (each still named here, never silently).
NOT_WALKED = {"install-encoder": "its --dir is a cache of installed encoders, one subfolder per encoder"}

RANK_HEADER = "qid\tquestion\tpid\tpassage\tlabel\n"
RANKS = [("q1", "good film?", "p1", "a fine film", 1), ("q1", "good film?", "p2", "a dull film", 0),
         ("q2", "bad acting?", "p3", "bad acting", 1), ("q2", "bad acting?", "p4", "great", 0),
         ("q3", "fun?", "p5", "good fun", 1), ("q3", "fun?", "p6", "awful", 0)]

# Each command's cheap command lines (tiny encoder, tiny data); {out} is the folder of the user's files.
RECIPES: dict[str, list[list[str]]] = {
    "train": [["--data.task", "custom", "--data.train_file", "{tmp}/train.csv", "--data.dev_file", "{tmp}/dev.csv",
               "--model.encoder", "{enc}", "--model.head", "last-layer", "--train.epochs", "1",
               "--train.mixed_precision", "no", "--output_dir", "{out}"]],
    "evaluate": [["--model", "{sst2}", "--task", "SST-2", "--data_dir", "{tmp}/glue", "--split", "dev",
                  "--output_dir", "{out}"]],
    "predict": [["--model", "{single}", "--input", "{tmp}/input.csv", "--output", "{out}/predictions.jsonl"],
                ["--model", "{single}", "--input", "{out}/input.csv"],
                ["--model", "{ranker}", "--input", "{tmp}/rank.tsv", "--output", "{out}/ranking.jsonl"],
                ["--model", "{ranker}", "--input", "{tmp}/rank.tsv", "--output", "{out}/ranking.run"],
                ["--model", "{tagger}", "--input", "{tmp}/tags.conll", "--output", "{out}/predictions-dev.jsonl"]],
    "export": [["--model", "{single}", "--output_dir", "{out}"]],
    "report": [["{tmp}/done", "--markdown", "{out}/report.md"], ["{tmp}/done", "--markdown", "{out}/README.md"]],
    "features": [["--encoder", "{enc}", "--task", "custom", "--train_file", "{tmp}/tags.conll", "--dev_file",
                  "{tmp}/tags.conll", "--rows", "last", "--epochs", "1", "--device", "cpu", "--cache_dir",
                  "{tmp}/cache", "--output_dir", "{out}"]],
    "deepen": [["--encoder", "{enc}", "--duplicate", "1", "--output", "{out}"]],
    "reconstruct": [["--encoder", "{enc}", "--input", "{tmp}/train.csv", "--max_examples", "4", "--device", "cpu",
                     "--output_dir", "{out}"]],
    "probe": [["--encoder", "{enc}", "--task", "custom", "--train_file", "{tmp}/train.csv", "--dev_file",
               "{tmp}/dev.csv", "--label_column", "label", "--mixed_precision", "no", "--device", "cpu",
               "--cache_dir", "{tmp}/cache", "--output_dir", "{out}"]],
    "ud-tasks": [["--treebank", "{tb}", "--output_dir", "{out}"]],
    "probe-report": [["{out}"]],
    "probe-tokens": [["--encoders", "{enc}", "--tasks", "ud-upos", "--treebank", "{tb}", "--device", "cpu",
                      "--cache_dir", "{tmp}/cache", "--output_dir", "{out}"]],
    "probe-tokens-report": [["{out}"]],
    "rank-probe": [["--encoders", "{enc}", "--task", "custom", "--train_file", "{tmp}/rank.tsv", "--dev_file",
                    "{tmp}/rank.tsv", "--test_file", "{tmp}/rank.tsv", "--scorers", "cosine", "--device", "cpu",
                    "--cache_dir", "{tmp}/cache", "--output_dir", "{out}"]],
    "rank-probe-report": [["{out}"]],
}


def leaf_commands(commands=None, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], type | None]]:
    """Every command of ``hire`` (a group's commands, ``experiment run`` ...), with its options dataclass."""
    found = []
    for command in all_commands() if commands is None else commands:
        if command.commands:
            found += leaf_commands(command.commands, (*prefix, command.name))
        else:
            found.append(((*prefix, command.name), command.options))
    return found


def output_options(options: type | None) -> list[list[str]]:
    """The options through which a command names what it writes, each as its words on a command line that points
    it at the folder of the user's files (a positional one, ``hire probe-report OUTPUT_DIR``, as the word alone)."""
    if options is None or not dataclasses.is_dataclass(options):
        return []
    return [([] if f.metadata.get("positional") else [f"--{f.metadata.get('flag') or f.name}"])
            + ["{out}" if f.name == "output_dir" else "{out}/" + USER_FILES[0]]
            for f in dataclasses.fields(options) if f.name in OUTPUT_OPTIONS]


WRITERS = [(words, outputs) for words, options in leaf_commands() if (outputs := output_options(options))
           and words[0] not in NOT_WALKED]


def conllu_sentence(rng: random.Random, n: int) -> str:
    """A sentence of a tiny treebank: DET NOUN VERB DET NOUN ."""
    nouns, verbs = ["film", "fun", "acting", "cat"], ["sees", "likes"]
    words = [("DET", "a", 2, "det", "_"), ("NOUN", rng.choice(nouns), 3, "nsubj", "Number=Sing"),
             ("VERB", rng.choice(verbs), 0, "root", "Tense=Pres|VerbForm=Fin"), ("DET", "the", 5, "det", "_"),
             ("NOUN", rng.choice(nouns), 3, "obj", f"Number={rng.choice(['Sing', 'Plur'])}"),
             ("PUNCT", ".", 3, "punct", "_")]
    lines = [f"# sent_id = s{n}", f"# text = {' '.join(w[1] for w in words)}"]
    lines += [f"{i}\t{form}\t{form}\t{upos}\t_\t{feats}\t{head}\t{rel}\t_\t_"
              for i, (upos, form, head, rel, feats) in enumerate(words, start=1)]
    return "\n".join(lines) + "\n\n"


def write_treebank(folder: Path) -> Path:
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in {"train": 30, "dev": 10, "test": 10}.items():
        (folder / f"xx_tiny-ud-{split}.conllu").write_text("".join(conllu_sentence(rng, i) for i in range(n)))
    (folder / "README.md").write_text("# UD Tiny\n\nThe treebank's own README, from its release.\n")
    return folder


def tags_conll(n: int = 12, tag: str = "PER") -> str:
    """CoNLL-2003 columns (word POS chunk NER) of ``n`` sentences."""
    rows = []
    for i in range(n):
        rows += [f"good NN B-NP B-{tag}", f"{['film', 'fun'][i % 2]} NN I-NP I-{tag}", "great JJ B-ADJP O", ""]
    return "\n".join(rows)


def write_inputs(tmp: Path, shared: dict[str, Path]) -> dict[str, str]:
    """The world (tests/badinput.py's, with a finished run ``done``), plus a treebank, a CoNLL file, ranking
    candidates, a tiny SST-2 dev split, a ranker and a tagger; the placeholders of the recipes."""
    from hire import build_model, load_tokenizer

    write_world(tmp, shared["enc"])
    (tmp / "tags.conll").write_text(tags_conll())
    (tmp / "rank.tsv").write_text(RANK_HEADER + "".join("\t".join(map(str, r)) + "\n" for r in RANKS))
    (tmp / "glue" / "SST-2").mkdir(parents=True)
    (tmp / "glue" / "SST-2" / "dev.tsv").write_text("sentence\tlabel\ngood fun\t1\nawful\t0\n")
    (tmp / "glue" / "SST-2" / "test.tsv").write_text("index\tsentence\n0\tgood fun\n")
    places = {"tmp": str(tmp), "tb": str(write_treebank(tmp / "tb")), **{k: str(v) for k, v in shared.items()}}
    models = tmp.parent / "models"
    if not (models / "ranker").is_dir():
        tokenizer = load_tokenizer(str(shared["enc"]))
        build_model(str(shared["enc"]), "last-layer", num_labels=1, task_type="ranking").save_pretrained(
            models / "ranker", tokenizer)
        build_model(str(shared["enc"]), "last-layer", num_labels=3, task_type="token",
                    label_names=["B-PER", "I-PER", "O"]).save_pretrained(models / "tagger", load_tokenizer(
                        str(shared["enc"]), True))
    places.update(ranker=str(models / "ranker"), tagger=str(models / "tagger"))
    return places


def fill_with_users_files(folder: Path) -> None:
    """A folder of the user's: a file under every name any command writes, and folders holding files too."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in USER_FILES:
        (folder / name).write_text("sentence,label\nmine,pos\n" if name == "input.csv" else f"the user's {name}\n")
    for name in USER_FOLDERS:
        (folder / name).mkdir()
        (folder / name / "notes.txt").write_text("the user's notes\n")


def expand(args: list[str], places: dict[str, str]) -> list[str]:
    out = []
    for arg in args:
        for key, value in places.items():
            arg = arg.replace("{" + key + "}", value)
        out.append(arg)
    return out


@pytest.fixture(scope="module")
def world(shared: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_inputs(tmp_path_factory.mktemp("outputs-world"), shared)


def test_the_walk_finds_every_command_that_writes() -> None:
    """The walk is found from the CLI: the commands known to write are among those it finds, each with a recipe
    (a new command without one is still walked, with its output option alone)."""
    names = {" ".join(words) for words, _ in WRITERS}
    assert {"train", "evaluate", "predict", "export", "report", "features", "deepen", "reconstruct", "probe",
            "ud-tasks", "probe-report", "probe-tokens", "probe-tokens-report", "rank-probe",
            "rank-probe-report"} <= names
    assert set(RECIPES) <= names


@pytest.mark.parametrize(("words", "outputs"), WRITERS, ids=[" ".join(w) for w, _ in WRITERS])
def test_no_command_writes_over_a_users_file(words: tuple[str, ...], outputs: list[list[str]], world: dict[str, str],
                                             tmp_path: Path) -> None:
    """THE WALKING TEST: each command that writes, against a folder of the user's files under every name any
    command writes: refused in one line naming the option (where the command is known), and no file changed."""
    out = tmp_path / "out"
    places = {**world, "out": str(out)}
    recipes = RECIPES.get(" ".join(words)) or outputs  # a command without a recipe: its output option alone
    for recipe in recipes:
        fill_with_users_files(out)
        before, shared_before = snapshot(out), snapshot(Path(world["tmp"]))
        result = call_hire([*words, *expand(recipe, places)], tmp_path)
        after = snapshot(out)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, f"{' '.join(words)} {recipe}: changed {changed}\n{result.stderr[-2000:]}"
        assert snapshot(Path(world["tmp"])) == shared_before
        if " ".join(words) in RECIPES:
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert result.returncode == 2, result.stderr[-2000:]
            assert lines[-1].startswith(f"hire {' '.join(words)}: error: "), result.stderr[-2000:]
            assert str(out) in lines[-1] and "Traceback" not in result.stderr
        for path in out.iterdir():
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


# -- 1. data loss: the one rule of output folders (hire.checks.check_own_folder), and where each command used it ----
def _own_results(folder: Path) -> bool:
    return (folder / "results.json").is_file() and "mine-before-markers" in (folder / "results.json").read_text()


@pytest.mark.parametrize(("make", "message"), [
    (lambda f: None, None),  # a new folder
    (lambda f: f.mkdir(), None),  # an empty one
    (lambda f: (f.mkdir(), (f / ".lock").write_text("")), None),  # a lock file alone holds nothing of anyone's
    (lambda f: (mark_output_folder(f, "features"), (f / "results.md").write_text("x")), None),  # its own, marked
    (lambda f: (f.mkdir(), (f / "results.json").write_text('"mine-before-markers"')), None),  # its own, from before
    (lambda f: (f.mkdir(), (f / "results.md").write_text("mine")),
     "holds results.md, which `hire features` would replace and did not write"),
    (lambda f: (f.mkdir(), (f / "notes.txt").write_text("mine")), "holds files that `hire features` did not write "
     "(notes.txt)"),
    (lambda f: (mark_output_folder(f, "rank-probe"), (f / "results.json").write_text("{}")),
     "holds the output of `hire rank-probe` (results.json), which `hire features` would replace"),
    (lambda f: mark_output_folder(f, "probe"), "holds the output of `hire probe`, not of this command"),
    (lambda f: (f.mkdir(), mark_run_folder(f)), "holds the output of `hire train`"),
    (lambda f: (f.mkdir(), (f / "results.json").write_text('{"format": "hire-rank-probe/1"}')),
     "holds results.json, which `hire features` would replace"),
], ids=["new", "empty", "lock-only", "own-marker", "own-legacy", "users-file-it-writes", "users-other-file",
        "another-commands-output", "another-commands-empty-output", "a-run-folder", "another-commands-legacy"])
def test_one_rule_for_every_output_folder(make, message: str | None, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    make(folder)
    before = snapshot(tmp_path)
    check = lambda: check_own_folder(folder, "--output_dir", "features", ("results.json", "results.md", "last"),  # noqa: E731
                                     _own_results)
    if message is None:
        check()
    else:
        with pytest.raises(ConfigError, match=r"^--output_dir ") as err:
            check()
        assert message in str(err.value) and "choose a new or empty folder" in str(err.value)
    assert snapshot(tmp_path) == before  # a check writes nothing


def test_the_marker_names_its_command_and_is_written_once(tmp_path: Path) -> None:
    folder = mark_output_folder(tmp_path / "a" / "b", "probe")
    assert output_owner(folder) == "probe" and json.loads((folder / OUTPUT_MARKER).read_text())["command"] == "probe"
    stamp = (folder / OUTPUT_MARKER).stat().st_mtime_ns
    mark_output_folder(folder, "probe")
    assert (folder / OUTPUT_MARKER).stat().st_mtime_ns == stamp
    assert output_owner(tmp_path) is None and output_owner(tmp_path / "missing") is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / OUTPUT_MARKER).write_text("not json")
    assert output_owner(tmp_path / "bad") is None


@pytest.mark.parametrize(("content", "refused"), [
    (None, False), ("", False), ('{"guid": "0", "label": "pos"}\n', False), ("my own notes\n", True),
    ('{"label": "pos"}\n', True), (b"\xff\xfe binary", True)],
    ids=["missing", "empty", "its-own", "users-text", "users-json", "users-binary"])
def test_an_output_file_is_replaced_only_where_the_command_wrote_it(content, refused: bool, tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    check = lambda: check_own_file(path, "--output", "predict", lambda line: line.startswith('{"guid"'))  # noqa: E731
    if refused:
        with pytest.raises(ConfigError, match="a file that `hire predict` did not write, which it would replace"):
            check()
    else:
        check()


def test_a_device_is_written_to_not_refused() -> None:
    check_own_file("/dev/null", "--output", "predict", lambda line: False)


def _lines_of(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def _refused(result, command: str, *parts: str) -> None:
    lines = _lines_of(result)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines[-1].startswith(f"hire {command}: error: "), result.stderr[-2000:]
    for part in parts:
        assert part in lines[-1], lines[-1]


def test_ud_tasks_never_writes_into_a_treebanks_folder(world: dict[str, str], tmp_path: Path) -> None:
    """Pointed at the treebank's own folder, ud-tasks would have replaced the release's README.md."""
    treebank = write_treebank(tmp_path / "tb")
    before = snapshot(treebank)
    result = call_hire(["ud-tasks", "--treebank", str(treebank), "--output_dir", str(treebank)], tmp_path)
    _refused(result, "ud-tasks", f"--output_dir {treebank}: holds README.md, which `hire ud-tasks` would replace")
    assert snapshot(treebank) == before


def test_ud_tasks_writes_its_own_folder_again(world: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    for _ in range(2):
        result = call_hire(["ud-tasks", "--treebank", world["tb"], "--output_dir", str(out)], tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
    assert output_owner(out) == "ud-tasks" and (out / "README.md").read_text().startswith("# Probing tasks from ")
    legacy = tmp_path / "legacy"  # a folder written before markers: recognised by its README.md
    legacy.mkdir()
    (legacy / "README.md").write_text("# Probing tasks from somewhere\n")
    assert call_hire(["ud-tasks", "--treebank", world["tb"], "--output_dir", str(legacy)], tmp_path).returncode == 0


FEATURES = ["features", "--encoder", "{enc}", "--task", "custom", "--train_file", "{tmp}/tags.conll", "--dev_file",
            "{tmp}/tags.conll", "--rows", "last", "--epochs", "1", "--device", "cpu", "--cache_dir", "{tmp}/cache"]


@pytest.mark.parametrize("kind", ["users-results-md", "rank-probe-results", "probe-tokens-results", "probe-marked"])
def test_features_never_replaces_another_folders_results(kind: str, world: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if kind == "users-results-md":
        (out / "results.md").write_text("# my results\n")
    elif kind == "rank-probe-results":
        (out / "results.json").write_text('{"format": "hire-rank-probe/1", "results": {}}\n')
        (out / "report.md").write_text("the rank probe's report\n")
    elif kind == "probe-tokens-results":
        (out / "results.json").write_text('{"command": "probe-tokens", "tasks": {}}\n')
    else:
        mark_output_folder(out, "probe")
        (out / "results.json").write_text('{"format": "hire-probe/1"}\n')
    before = snapshot(out)
    result = call_hire([*expand(FEATURES, world), "--output_dir", str(out)], tmp_path)
    _refused(result, "features", f"--output_dir {out}: ")
    assert snapshot(out) == before


def test_rank_probe_never_replaces_a_users_report(world: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("# my report\n")
    before = snapshot(out)
    args = [*RECIPES["rank-probe"][0][:-1], str(out)]
    result = call_hire(["rank-probe", *expand(args, world)], tmp_path)
    _refused(result, "rank-probe", "holds report.md, which `hire rank-probe` would replace")
    assert snapshot(out) == before


def test_predict_with_a_ranker_never_replaces_a_run_file_it_did_not_write(world: dict[str, str],
                                                                       tmp_path: Path) -> None:
    """``--output r.jsonl`` also writes ``r.run``, a path the user never named: a user's ``r.run`` stays."""
    (tmp_path / "r.run").write_text("my run file\n")
    before = snapshot(tmp_path)
    result = call_hire(["predict", "--model", world["ranker"], "--input", f"{world['tmp']}/rank.tsv", "--output",
                        str(tmp_path / "r.jsonl")], tmp_path)
    _refused(result, "predict", f"the run file beside --output {tmp_path / 'r.jsonl'}", "did not write")
    assert snapshot(tmp_path) == before


def test_predict_with_a_ranker_refuses_an_output_named_like_its_run_file(world: dict[str, str],
                                                                        tmp_path: Path) -> None:
    """``--output x.run`` wrote the JSON lines, then replaced them with the run file of the same name."""
    result = call_hire(["predict", "--model", world["ranker"], "--input", f"{world['tmp']}/rank.tsv", "--output",
                        str(tmp_path / "x.run")], tmp_path)
    _refused(result, "predict", "give a name ending in .jsonl")
    assert not (tmp_path / "x.run").exists()


def test_predict_replaces_its_own_outputs_only(world: dict[str, str], tmp_path: Path) -> None:
    """The default ``INPUT.predictions.jsonl`` of a user's is refused; hire's own (a run before) is replaced, and a
    ranker's JSON lines and run file likewise."""
    (tmp_path / "input.csv").write_text((Path(world["tmp"]) / "input.csv").read_text())
    (tmp_path / "input.predictions.jsonl").write_text("my predictions\n")
    args = ["predict", "--model", world["single"], "--input", str(tmp_path / "input.csv")]
    _refused(call_hire(args, tmp_path), "predict", "--output (the default)", "input.predictions.jsonl")
    assert (tmp_path / "input.predictions.jsonl").read_text() == "my predictions\n"
    (tmp_path / "input.predictions.jsonl").unlink()
    for _ in range(2):
        result = call_hire(args, tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
    ranked = ["predict", "--model", world["ranker"], "--input", f"{world['tmp']}/rank.tsv", "--output",
              str(tmp_path / "ranked.jsonl")]
    for _ in range(2):
        result = call_hire(ranked, tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "ranked.run").read_text().split("\n")[0].endswith(" hire")
    assert json.loads((tmp_path / "ranked.jsonl").read_text().split("\n")[0])["qid"] == "q1"


def test_report_markdown_replaces_only_its_own_table(world: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# my notes\n")
    result = call_hire(["report", f"{world['tmp']}/done", "--markdown", str(tmp_path / "notes.md")], tmp_path)
    _refused(result, "report", "--markdown", "did not write")
    assert (tmp_path / "notes.md").read_text() == "# my notes\n"
    table = tmp_path / "new" / "report.md"  # a folder that does not exist yet is made
    for _ in range(2):
        result = call_hire(["report", f"{world['tmp']}/done", "--markdown", str(table)], tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
    assert table.read_text().startswith("| run | task | head |")


@pytest.mark.parametrize(("line", "own"), [
    ('{"guid": "0", "prediction": "pos"}', True), ('{"guid": "3", "tokens": ["a"]}', True),
    ('{"qid": "q1", "pid": "p1", "rank": 1, "score": 0.5}', True), ('{"id": 1}', False), ("guid,label", False),
    ("", False)])
def test_predicts_own_json_lines_are_recognised(line: str, own: bool) -> None:
    from hire.prediction import predictions_line as _predictions_line

    assert _predictions_line(line) is own


@pytest.mark.parametrize(("line", "own"), [("q1 Q0 p1 1 0.5 hire", True), ("q1 Q0 p1 1 0.5 bm25", False),
                                           ("q1 0 p1 1", False), ("my run", False)])
def test_predicts_own_run_file_is_recognised(line: str, own: bool) -> None:
    from hire.tasks.ranking.predict import run_line as _run_line

    assert _run_line(line) is own


# -- 3. silently wrong: cached results keyed by content, never by a path whose file may change ----------------------
def _retag(path: Path) -> None:
    """The same path, other content: every PER entity becomes an ORG."""
    path.write_text(path.read_text().replace("-PER", "-ORG"))


def test_features_never_keeps_a_rows_scores_after_its_data_changed(world: dict[str, str], tmp_path: Path) -> None:
    train = tmp_path / "tags.conll"
    train.write_text(tags_conll())
    args = [*expand(FEATURES, {**world, "tmp": str(tmp_path)}), "--output_dir", str(tmp_path / "out")]
    assert call_hire(args, tmp_path).returncode == 0
    first = json.loads((tmp_path / "out" / "last" / "metrics.json").read_text())
    key = json.loads((tmp_path / "out" / "last" / "config.json").read_text())["data_sha256"]
    assert call_hire(args, tmp_path).returncode == 0  # the same data: the row is kept, not trained again
    assert json.loads((tmp_path / "out" / "last" / "metrics.json").read_text()) == first
    _retag(train)
    before = snapshot(tmp_path / "out")
    result = call_hire(args, tmp_path)
    _refused(result, "features", "the data's content differs from the row's", "--overwrite")
    assert snapshot(tmp_path / "out") == before
    assert call_hire([*args, "--overwrite"], tmp_path).returncode == 0
    retrained = json.loads((tmp_path / "out" / "last" / "config.json").read_text())["data_sha256"]
    assert retrained["train"] != key["train"] and retrained["dev"] != key["dev"]
    predictions = [p for p in (tmp_path / "out" / "last").rglob("*.jsonl") if "dev" in p.name]
    assert predictions and "B-ORG" in predictions[0].read_text()  # scored on the new tags


def test_the_features_data_key_is_the_content_not_the_path() -> None:
    from hire.data.examples import TokenExample
    from hire.featurebased.grid import data_sha256

    one = {"train": [TokenExample("0", ("good", "film"), ("B-PER", "I-PER"))]}
    moved = {"train": [TokenExample("7", ("good", "film"), ("B-PER", "I-PER"), line=9)]}  # other ids, lines
    other = {"train": [TokenExample("0", ("good", "film"), ("B-ORG", "I-ORG"))]}
    assert data_sha256(one) == data_sha256(moved) != data_sha256(other)


def test_rank_probe_never_keeps_blocks_scored_on_other_data(world: dict[str, str], tmp_path: Path) -> None:
    ranks = tmp_path / "rank.tsv"
    ranks.write_text((Path(world["tmp"]) / "rank.tsv").read_text())
    args = ["rank-probe", *expand(RECIPES["rank-probe"][0], {**world, "tmp": str(tmp_path), "out": str(tmp_path /
                                                                                                      "out")})]
    assert call_hire(args, tmp_path).returncode == 0
    assert call_hire(args, tmp_path).returncode == 0  # the same data: every block is kept
    ranks.write_text(ranks.read_text().replace("a fine film", "a dull film!"))
    before = snapshot(tmp_path / "out")
    _refused(call_hire(args, tmp_path), "rank-probe", "results of other data", "--overwrite")
    assert snapshot(tmp_path / "out") == before
    assert call_hire([*args, "--overwrite"], tmp_path).returncode == 0


def test_probe_never_keeps_a_tasks_results_fitted_on_other_data(world: dict[str, str], tmp_path: Path) -> None:
    for name in ("train.csv", "dev.csv"):
        (tmp_path / name).write_text((Path(world["tmp"]) / name).read_text())
    args = ["probe", *expand(RECIPES["probe"][0], {**world, "tmp": str(tmp_path), "out": str(tmp_path / "out")}),
            "--c_grid", "1", "--fit_threads", "1"]
    assert call_hire(args, tmp_path).returncode == 0
    (tmp_path / "dev.csv").write_text((tmp_path / "dev.csv").read_text().replace("a dull film,neg", "so dull,neg"))
    before = snapshot(tmp_path / "out")
    _refused(call_hire(args, tmp_path), "probe", "results of other data", "--overwrite")
    assert snapshot(tmp_path / "out") == before


def test_the_probe_and_rank_probe_data_keys_are_the_content() -> None:
    from hire.data.examples import Example
    from hire.data.ranking import RankingExample
    from hire.probing.classifiers import ProbeTask
    from hire.probing.grid import data_sha256 as probe_key
    from hire.ranking.data import RankingData
    from hire.ranking.data import data_sha256 as rank_key

    def task(label: str) -> ProbeTask:
        return ProbeTask("t", {"train": [Example("0", "good", None, label)]}, ["neg", "pos"], ("accuracy",),
                         {"train": "same/path.csv"})

    assert probe_key(task("pos")) == probe_key(task("pos")) != probe_key(task("neg"))

    def data(passage: str) -> RankingData:
        return RankingData({"dev": [RankingExample("q", "good?", "p", passage, 1.0)]}, {"dev": "same/path.tsv"}, {})

    assert rank_key(data("fine")) == rank_key(data("fine")) != rank_key(data("fine!"))


# -- 4. silently wrong: hire features --task custom --tag_column -------------------------------------------------
@pytest.mark.parametrize(("column", "first_tag"), [(None, "B-PER"), ("ner", "B-PER"), ("chunk", "B-NP"),
                                                   ("pos", "NN")])
def test_features_custom_files_read_the_tag_column_asked_for(column: str | None, first_tag: str,
                                                            tmp_path: Path) -> None:
    from hire.featurebased.grid import FeatureRun, read_task

    (tmp_path / "tags.conll").write_text(tags_conll())
    run = FeatureRun("enc", ["last"], str(tmp_path / "out"), "custom", column,
                     files={"train": str(tmp_path / "tags.conll"), "dev": str(tmp_path / "tags.conll")})
    splits, tags = read_task(run)
    assert splits["train"][0].tags[0] == first_tag and first_tag in tags


def test_features_tag_column_with_token_files_is_refused(world: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "tags.jsonl").write_text('{"tokens": ["good"], "tags": ["O"]}\n')
    args = ["features", "--encoder", world["enc"], "--task", "custom", "--format", "tokens", "--train_file",
            str(tmp_path / "tags.jsonl"), "--dev_file", str(tmp_path / "tags.jsonl"), "--tag_column", "chunk",
            "--output_dir", str(tmp_path / "out")]
    _refused(call_hire(args, tmp_path), "features", "--tag_column chunk: for CoNLL columns")
    assert not (tmp_path / "out").exists()


# -- 5. silently wrong: hire report's counts and headers -------------------------------------------------------
def _run_row(dev: dict) -> dict:
    return {"run": "runs/ner", "task": "ner", "head": "hire", "dev": dev, "score": 0.5, "steps": 10,
            "train_seconds": 60.0, "mixed_precision": "bf16"}


def test_report_shows_counts_as_counts_and_every_header_once() -> None:
    from hire.reporting import runs_table

    table = runs_table([_run_row({"dev": {"precision": 0.5, "recall": 0.25, "f1": 0.33, "words": 740.0,
                                          "score": 0.33}})])
    header, _, row = table.splitlines()[:3]
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert len(cells) == len(set(cells)), cells
    assert cells[-1] == "mixed precision" and "precision" in cells
    values = dict(zip(cells, [c.strip() for c in row.strip("|").split("|")], strict=True))
    assert values["words"] == "740" and values["precision"] == "50.00" and values["mixed precision"] == "bf16"


@pytest.mark.parametrize(("name", "value", "shown"), [("words", 740.0, "740"), ("examples", 12, "12"),
                                                      ("accuracy", 0.5, "50.00"), ("mcc", -0.125, "-12.50"),
                                                      ("questions", 89.0, "89")])
def test_report_metric_cells(name: str, value: float, shown: str) -> None:
    from hire.reporting import metric_cell

    assert metric_cell(name, value) == shown


def test_report_a_metric_named_as_a_settings_column_gets_its_own_header() -> None:
    from hire.reporting import runs_table

    header = runs_table([_run_row({"dev": {"steps": 0.5, "score": 0.5}})]).splitlines()[0]
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert "dev steps" in cells and cells.count("steps") == 1


@pytest.mark.parametrize(("line", "own"), [
    ("| run | task | head | mcc | score | steps | train time | precision |", True),  # before the headers were distinct
    ("| run | task | head | mcc | score | steps | train time | mixed precision |", True), ("# my notes", False),
    ("| a | b |", False)])
def test_report_recognises_its_own_tables(line: str, own: bool) -> None:
    from hire.reporting import is_runs_table

    assert is_runs_table(line) is own


# -- 6. misleading: rank-probe's unlabelled file, and its all-tied cells ------------------------------------------
def test_rank_probe_names_an_unlabelled_test_file_not_keep(world: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "test.tsv").write_text("qid\tquestion\tpid\tpassage\n" + "".join(
        f"{q}\t{question}\t{p}\t{passage}\n" for q, question, p, passage, _ in RANKS))
    args = ["rank-probe", *expand(RECIPES["rank-probe"][0], {**world, "out": str(tmp_path / "out")})]
    args[args.index("--test_file") + 1] = str(tmp_path / "test.tsv")
    result = call_hire(args, tmp_path)
    _refused(result, "rank-probe", f"{tmp_path / 'test.tsv'}: the candidates have no labels")
    assert "--keep" not in _lines_of(result)[-1] and "keep=" not in _lines_of(result)[-1]
    assert not (tmp_path / "out").exists()


def test_all_tied_scores_are_told_apart_from_a_ranking() -> None:
    import numpy as np

    from hire.data.ranking import RankingExample
    from hire.ranking.blocks import all_tied
    from hire.ranking.data import Candidates

    candidates = Candidates.of([RankingExample(q, "?", p, p, float(p == "a")) for q in ("q1", "q2")
                                for p in ("a", "b")])
    assert all_tied(candidates, np.array([0.5, 0.5, 0.25, 0.25]))
    assert not all_tied(candidates, np.array([0.5, 0.5, 0.25, 0.3]))


def test_the_report_marks_an_all_tied_cell() -> None:
    from hire.ranking.tables import ALL_TIED, block_table, summary_section

    cells = [{"row": str(i), "layers": [i], "pooling": p, "dev": {"map": 0.5, "mrr": 0.5, "p@1": 0.5},
              "test": {"map": 0.4, "mrr": 0.4, "p@1": 0.4}, **({"all_tied": ["dev", "test"]} if i == 0 else {})}
             for i in range(2) for p in ("cls", "sep", "mean", "max")]
    block = {"scorer": "cosine", "loss": "none", "rows": cells, "seconds": 1.0,
             "best": {"row": "0", "pooling": "cls", "runs": {}}}
    _, rows = block_table(block, "test")
    assert all(ALL_TIED in cell for cell in rows[0][1:]) and not any(ALL_TIED in cell for cell in rows[1][1:])
    results = {"data": {"questions": {"dev": 1, "test": 1}}, "results": {"enc": {"blocks": {"cosine/none": block}}},
               "bm25": {}, "best": None}
    summary = summary_section(results)
    assert f"50.0 {ALL_TIED}" in summary or ALL_TIED in summary
    assert "the tie rule's" in summary


# -- 7. misleading: a failed grid cell, and Ctrl-C while waiting for local jobs ------------------------------------
GRID = "base: {options: {data.task: RTE, model.encoder: unused}}\nseeds: [1]\ngrid: {model.head: [last-layer, hire]}\n"


@pytest.mark.parametrize(("log", "state"), [
    (None, "left"), ("$ hire train ...\nhire train: error: --data.train_file x: no such file\n", "failed"),
    ("$ hire train ...\nTraceback (most recent call last):\n  File x\nRuntimeError: boom\n", "failed"),
    ("$ hire train ...\nstep 3\nhire train: interrupted; run the same command again to resume\n", "left"),
    ("$ hire train ...\nhire train: error: boom\n$ hire train ...\nstep 5\n", "left")],
    ids=["never-run", "train-error", "traceback", "interrupted", "running-again"])
def test_status_says_failed_for_a_cell_whose_training_failed(log: str | None, state: str, tmp_path: Path) -> None:
    from hire.experiments.experiment import load_experiment
    from hire.experiments.records import run_dir
    from hire.experiments.status import Estimates, cell_statuses, status_report

    (tmp_path / "grid.yaml").write_text(GRID)
    exp = load_experiment(tmp_path / "grid.yaml")
    cell = exp.cells[0]
    logs = run_dir(tmp_path / "runs", exp, cell).parent / "logs"
    if log is not None:
        logs.mkdir(parents=True)
        (logs / f"{cell.id}.log").write_text(log)
    statuses = cell_statuses(exp, tmp_path / "runs")
    assert statuses[0].state == state and statuses[1].state == "left"
    lines = status_report(exp, statuses, Estimates.from_records(tmp_path / "none", 1.0), listing=True)
    assert ("1 failed" in lines[0]) is (state == "failed")
    if state == "failed":
        assert any(line.strip().startswith(f"failed   {cell.id}") and str(logs / f"{cell.id}.log") in line
                   for line in lines), lines


def test_a_failed_cell_is_trained_again() -> None:
    from hire.experiments.status import TO_TRAIN

    assert "failed" in TO_TRAIN and "left" in TO_TRAIN and "started" in TO_TRAIN


@pytest.mark.parametrize(("executor", "stop"), [("local", "kill -INT 41 42"), ("slurm", "scancel 41 42")])
def test_ctrl_c_on_wait_says_the_jobs_go_on_and_how_to_stop_them(executor: str, stop: str) -> None:
    from types import SimpleNamespace

    from hire.experiments.cluster import going_on

    text = going_on("grid", executor, [SimpleNamespace(job_id=41), SimpleNamespace(job_id=42)])
    assert "go on training" in text and f"`{stop}`" in text
    assert "every submitted job had ended" in going_on("grid", executor, [])
