"""Hostile option values and command lines (issue 73), through every command: text options are never read as YAML,
a value YAML cannot read is one line naming the option, ``--data.separator`` mistakes say what to type, an option
given twice is refused, every lab command checks ``--max_length`` and ``--device`` before any work and names its own
data-folder option, ``hire features`` checks its rows against the encoder's depth, and ``--only`` refuses a value
no cell has.

The commands are found from the CLI itself (:attr:`hire.options.Command.options`, a group's ``commands``), so a new
command's text options are covered without editing this file. Failures run through tests/badinput.py's
``check_fails_cleanly``: exit status 2, one line ``hire <command>: error: ...`` naming the option, no traceback,
nothing created, changed or removed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_args, get_origin

import pytest
from badinput import check_fails_cleanly, given_once
from paths import REPO

from hire.cli import all_commands
from hire.config import ConfigError, DataConfig, RunConfig, option_fields
from hire.options import Command, parse_command, parse_options

# Words YAML reads as something else than themselves, or not at all: an empty flow entry, a mapping, a comment, an
# alias, a tag, an anchor, flow collections left open, a directive, a reserved indicator, a document end.
HOSTILE = [",", ":", "#", "*x", "!x", "&x", "[x", "{x", "%x", "@x", "a: b", "...", "#5", "x #y"]


def _leaves(commands: list[Command] | tuple[Command, ...], prefix: str = "") -> list[tuple[str, Command]]:
    """Every command that parses its own options (a group's commands in its place), by its command line."""
    out: list[tuple[str, Command]] = []
    for command in commands:
        if getattr(command, "commands", ()):  # getattr: a plugin's Command of an older hire
            out += _leaves(command.commands, f"{prefix}{command.name} ")
        elif getattr(command, "options", None) is not None:
            out.append((prefix + command.name, command))
    return out


COMMANDS = _leaves(all_commands())
TYPED = [(name, c) for name, c in COMMANDS if c.options is not RunConfig]


def _is_text(tp: object, positional: bool) -> bool:
    """A text option: ``str`` or ``str | None`` (names, paths, separators), or a positional list of words."""
    return tp is str or set(get_args(tp)) == {str, type(None)} or (positional and get_origin(tp) is list)


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


TEXT_OPTIONS = [(name, command, field) for name, command in TYPED for field, tp, f in option_fields(command.options)
                if _is_text(tp, bool(f.metadata.get("positional")))]
TRAIN_TEXT = [name for name, tp, _ in option_fields(RunConfig) if _is_text(tp, False)]


def _words(options: type, field: str, value: str) -> list[str]:
    """A command line giving ``field`` the ``value`` and every other required option a plain one."""
    words, positional = [], []
    for name, _, f in option_fields(options):
        if name != field and not _required(f):
            continue
        given = value if name == field else "x"
        if f.metadata.get("positional"):
            positional.append(given)
        else:
            words += [f"--{f.metadata.get('flag') or name}", given]
    return [*words, *positional]


# -- 1. text options are never YAML: every command, every text option, every hostile word ------------------------
@pytest.mark.parametrize(("prog", "command", "field"), TEXT_OPTIONS,
                         ids=[f"{prog.replace(' ', '-')}--{field}" for prog, _, field in TEXT_OPTIONS])
def test_a_text_option_takes_any_word_as_typed(prog: str, command: Command, field: str) -> None:
    for value in HOSTILE:
        parsed = getattr(parse_command(command.options, f"hire {prog}", _words(command.options, field, value)), field)
        assert parsed in (value, [value]), (value, parsed)


@pytest.mark.parametrize("option", TRAIN_TEXT)
def test_a_train_text_option_takes_any_word_as_typed(option: str) -> None:
    for value in HOSTILE:
        assert parse_options([f"--{option}", value]).get(option) == value


def test_every_command_with_options_is_walked() -> None:
    """The walk finds the core, typed and lab commands (a new command joins by itself)."""
    found = {prog for prog, _, _ in TEXT_OPTIONS}
    assert {"evaluate", "predict", "export", "report", "probe", "probe-tokens", "features", "rank-probe", "ud-tasks",
            "reconstruct", "deepen", "experiment run", "probe-report", "install-encoder"} <= found
    assert len(TRAIN_TEXT) >= 10 and "data.separator" in TRAIN_TEXT


def test_null_words_and_config_files_keep_their_meaning(tmp_path: Path) -> None:
    """``none`` (what the experiment runner writes for null) is null for an optional text option only; a --config
    file is YAML, and a text option read from it ends up text (a bare number is the name it spells)."""
    assert parse_options(["--data.dev_file", "none"]).data.dev_file is None
    assert parse_options(["--output_dir", "none"]).output_dir == "none"
    config = tmp_path / "c.yaml"
    config.write_text("output_dir: 2024\ndata:\n  separator: ','\n  label_column: '#'\n  test_file: null\n")
    cfg = parse_options(["--config", str(config)])
    assert (cfg.output_dir, cfg.data.separator, cfg.data.label_column, cfg.data.test_file) == ("2024", ",", "#", None)
    config.write_text("data:\n  label_column: [a]\n")
    with pytest.raises(ConfigError, match=r"--data\.label_column: expected a string, not \['a'\]"):
        parse_options(["--config", str(config)])


def test_mapping_values_are_names_unless_numbers() -> None:
    """``key=value`` pairs: a column name that YAML would read as a comment or an alias stays the name."""
    cfg = parse_options(["--data.ranking_columns", "qid=#id,pid=*p,label=2,question=!q"])
    assert cfg.data.ranking_columns == {"qid": "#id", "pid": "*p", "label": 2, "question": "!q"}


CUSTOM = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.train_file", "{tmp}/train.csv",
          "--data.dev_file", "{tmp}/dev.csv", "--model.encoder", "{enc}", "--model.head", "last-layer",
          "--train.mixed_precision", "no"]
CONLL = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format", "conll", "--data.train_file",
         "{tmp}/tr.conll", "--data.dev_file", "{tmp}/tr.conll", "--model.encoder", "{enc}", "--model.head",
         "last-layer", "--train.mixed_precision", "no", "--train.max_steps", "1"]
PROBE = ["probe", "--encoder", "{enc}", "--task", "RTE", "--max_train_examples", "16", "--max_eval_examples", "8",
         "--folds", "2", "--mixed_precision", "no", "--device", "cpu", "--cache_dir", "{tmp}/cache", "--output_dir",
         "{tmp}/out"]
RANK = ["rank-probe", "--encoders", "{enc}", "--task", "custom", "--train_file", "{tmp}/r.tsv", "--dev_file",
        "{tmp}/r.tsv", "--output_dir", "{tmp}/out", "--cache_dir", "{tmp}/cache", "--device", "cpu",
        "--mixed_precision", "no"]
FEATURES = ["features", "--encoder", "{enc}", "--task", "custom", "--train_file", "{tmp}/tr.conll", "--dev_file",
            "{tmp}/tr.conll", "--output_dir", "{tmp}/out", "--cache_dir", "{tmp}/cache", "--device", "cpu",
            "--rows", "last"]
TOKENS = ["probe-tokens", "--encoders", "{enc}", "--tasks", "conll-ner", "--conll2003", "{tmp}/folder",
          "--output_dir", "{tmp}/out", "--cache_dir", "{tmp}/cache", "--device", "cpu"]
RECONSTRUCT = ["reconstruct", "--encoder", "{enc}", "--max_examples", "4", "--device", "cpu", "--output_dir",
               "{tmp}/out"]
EVALUATE = ["evaluate", "--model", "{sst2}", "--task", "SST-2"]
RANKING = "qid\tquestion\tpid\tpassage\tlabel\nq1\twho?\tp1\tshe .\t1\nq1\twho?\tp2\tit .\t0\n"
CONLL_TEXT = "EU B-ORG\nrejects O\n\nfine O\nfilm O\n"
EXPERIMENT = "base: {options: {data.task: RTE, model.encoder: '{enc}'}}\ngrid: {model.head: [hire]}\n"
STATUS = ["experiment", "status", "{tmp}/exp.yaml", "--runs_dir", "{tmp}/runs", "--experiments_dir", "{tmp}/exps"]


def _write(tmp_path: Path, shared: dict[str, Path]) -> None:
    """The files the cases name beyond the bad-input world's (in it before the snapshot: the user's files too)."""
    (tmp_path / "tr.conll").write_text(CONLL_TEXT)
    (tmp_path / "r.tsv").write_text(RANKING)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT.replace("{enc}", str(shared["enc"])))


# (id, command line, what the error line must contain)
CASES: list[tuple[str, list[str], str]] = [
    # -- 1. a file or folder named by a word YAML misreads: the path itself is named, never a YAML traceback
    ("train-file-star", given_once([*CUSTOM, "--data.train_file", "*x"]), "--data.train_file *x: no such file"),
    ("train-file-bang", given_once([*CUSTOM, "--data.train_file", "!x"]), "--data.train_file !x: no such file"),
    ("train-encoder-star", given_once([*CUSTOM, "--model.encoder", "*x"]), "--model.encoder *x"),
    ("evaluate-model-bang", ["evaluate", "--model", "!x", "--task", "SST-2"], "--model !x"),
    ("evaluate-task-colon", ["evaluate", "--model", "{sst2}", "--task", ":"], "--task"),
    ("predict-input-star", ["predict", "--model", "{single}", "--input", "*x"], "--input *x: no such file"),
    ("predict-model-comma", ["predict", "--model", ",", "--input", "{tmp}/input.csv"], "--model ,"),
    ("export-model-star", ["export", "--model", "*x", "--output_dir", "{tmp}/out"], "--model *x"),
    ("report-run-bang", ["report", "!x"], "!x"),
    ("probe-train-file-star", ["probe", "--encoder", "{enc}", "--task", "custom", "--train_file", "*x",
                               "--output_dir", "{tmp}/out", "--device", "cpu"], "*x"),
    ("probe-encoder-bang", ["probe", "--encoder", "!x", "--task", "RTE"], "--encoder !x"),
    ("rank-probe-train-file-star", given_once([*RANK, "--train_file", "*x"]), "--train_file *x"),
    ("features-train-file-colon", given_once([*FEATURES, "--train_file", ":"]), "--train_file :"),
    ("probe-tokens-treebank-star", given_once([*TOKENS, "--tasks", "ud-upos", "--treebank", "*x"]), "*x"),
    ("reconstruct-input-bang", [*RECONSTRUCT, "--input", "!x"], "--input !x"),
    ("deepen-encoder-star", ["deepen", "--encoder", "*x", "--duplicate", "1", "--output", "{tmp}/out"], "*x"),
    ("ud-tasks-treebank-comma", ["ud-tasks", "--treebank", ","], "--treebank ,"),
    ("experiment-status-star", ["experiment", "status", "*x"], "*x"),
    ("probe-report-bang", ["probe-report", "!x"], "!x"),
    # -- 1. a value YAML cannot read, for an option that is not text: its type refuses it in one line
    ("epochs-comma", [*CUSTOM, "--train.epochs", ","], "--train.epochs: expected an integer, not ','"),
    ("epochs-colon", [*CUSTOM, "--train.epochs", ":"], "--train.epochs: expected an integer, not ':'"),
    ("precision-star", given_once([*CUSTOM, "--train.mixed_precision", "*x"]),
     "--train.mixed_precision: expected one of auto, no, bf16, fp16, not '*x'"),
    ("max-steps-comment", [*CUSTOM, "--train.max_steps", "#5"], "--train.max_steps: expected an integer or null"),
    ("tag-column-comment", [*CONLL, "--data.tag_column", "#"], "--data.tag_column: expected an integer or one of"),
    ("head-option-alias", [*CUSTOM, "--model.head_options", "dropout=*x"], "--model.head_options"),
    ("text-columns-open-list", [*CUSTOM, "--data.text_columns", "[a, b"], "--data.text_columns: not a valid YAML"),
    ("probe-max-length-colon", [*PROBE, "--max_length", ":"], "--max_length: expected an integer, not ':'"),
    ("features-epochs-bang", [*FEATURES, "--epochs", "!x"], "--epochs: expected an integer, not '!x'"),
    # -- 2. --data.separator: what to type
    ("separator-backslash-t", [*CONLL, "--data.separator", "\\t"], "--data.separator '\\t': these characters "
     "themselves, not a tab; type a real tab"),
    ("separator-word-tab", [*CONLL, "--data.separator", "tab"], "not a tab; type a real tab"),
    ("separator-empty", [*CONLL, "--data.separator", ""], "--data.separator: empty; leave the option out"),
    ("separator-two-spaces", [*CONLL, "--data.separator", "  "], "--data.separator '  ': would split only where "
     "exactly these 2 blanks stand"),
    ("separator-backslash-s", [*CONLL, "--data.separator", "\\s+"], "not spaces; type the character itself"),
    ("separator-not-in-the-file", [*CONLL, "--data.separator", ","], "tr.conll, line 1: the column separator given, "
     "',', is not in the line"),
    ("separator-hash-not-in-the-file", [*CONLL, "--data.separator", "#"], "the column separator given, '#'"),
    # -- 3. an option given twice, in every kind of command
    ("train-twice", [*CUSTOM, "--train.lr", "1e-3", "--train.lr", "2e-3"],
     "--train.lr: given twice on the command line; give it once"),
    ("train-twice-abbreviated", [*CUSTOM, "--train.l", "1e-3", "--train.lr", "2e-3"],
     "--train.lr: given twice on the command line (as --train.l); give it once"),
    ("train-twice-equals", [*CUSTOM, "--train.lr=1e-3", "--train.lr", "2e-3"], "--train.lr: given twice"),
    ("train-twice-flag", [*CUSTOM, "--overwrite", "--overwrite"], "--overwrite: given twice"),
    ("train-twice-with-config", ["train", "--config", "{tmp}/flat.yaml", "--output_dir", "a", "--output_dir", "b"],
     "--output_dir: given twice"),
    ("train-twice-list", [*CUSTOM, "--data.text_columns", "a", "--data.text_columns", "b"],
     "--data.text_columns: given twice"),
    ("evaluate-twice", [*EVALUATE, "--task", "SST-2"], "--task: given twice"),
    ("predict-twice", ["predict", "--model", "{single}", "--input", "{tmp}/input.csv", "--output", "{tmp}/a.jsonl",
                       "--output", "{tmp}/b.jsonl"], "--output: given twice"),
    ("export-twice", ["export", "--model", "{single}", "--output_dir", "{tmp}/a", "--output_dir", "{tmp}/b"],
     "--output_dir: given twice"),
    ("report-twice", ["report", "{tmp}/done", "--markdown", "{tmp}/a.md", "--markdown", "{tmp}/b.md"],
     "--markdown: given twice"),
    ("probe-twice", [*PROBE, "--seed", "1", "--seed", "2"], "--seed: given twice"),
    ("rank-probe-twice", [*RANK, "--device", "cpu"], "--device: given twice"),
    ("features-twice", [*FEATURES, "--epochs", "1", "--epochs", "2"], "--epochs: given twice"),
    ("probe-tokens-twice", [*TOKENS, "--cache_dir", "{tmp}/c2"], "--cache_dir: given twice"),
    ("reconstruct-twice", [*RECONSTRUCT, "--max_examples", "2"], "--max_examples: given twice"),
    ("deepen-twice", ["deepen", "--encoder", "{enc}", "--duplicate", "1", "--duplicate", "0", "--output",
                      "{tmp}/out"], "--duplicate: given twice"),
    ("ud-tasks-twice", ["ud-tasks", "--seed", "1", "--seed", "2"], "--seed: given twice"),
    ("experiment-twice", [*STATUS, "--runs_dir", "{tmp}/r2"], "--runs_dir: given twice"),
    ("install-encoder-twice", ["install-encoder", "all-mpnet-base-v2", "--dir", "{tmp}/a", "--dir", "{tmp}/b"],
     "--dir: given twice"),
    # -- 4. --max_length beyond the encoder's positions (the tiny encoder has 160), and devices that are not here
    ("probe-max-length", [*PROBE, "--max_length", "1000"], "--max_length: must be <= 160, the most tokens the "
     "encoder takes, not 1000"),
    ("rank-probe-max-length", [*RANK, "--max_length", "1000"], "--max_length: must be <= 160"),
    ("features-max-length", [*FEATURES, "--max_length", "1000"], "--max_length: must be <= 160"),
    ("probe-tokens-max-length", [*TOKENS, "--max_length", "1000"], "--max_length: must be <= 160"),
    ("reconstruct-max-length", [*RECONSTRUCT, "--max_length", "1000"], "--max_length: must be <= 160"),
    ("probe-max-length-random", given_once([*PROBE, "--encoder", "random:{enc}", "--max_length", "161"]),
     "--max_length: must be <= 160"),
    *[(f"{args[0]}-device-{device}", given_once([*args, "--device", device]),
       f"--device {device}: expected auto, cpu, cuda or cuda:N")
      for args in (PROBE, RANK, FEATURES, TOKENS, RECONSTRUCT) for device in ("meta", "mps")],
    ("probe-device-cuda-99", given_once([*PROBE, "--device", "cuda:99"]), "--device cuda:99: "),
    ("features-device-cuda-x", given_once([*FEATURES, "--device", "cuda:x"]), "--device cuda:x: expected auto"),
    # -- 5. the data folder's option, as the command names it
    ("rank-probe-data-dir", ["rank-probe", "--encoders", "{enc}", "--data_dir", "{tmp}/folder", "--output_dir",
                             "{tmp}/out", "--cache_dir", "{tmp}/cache", "--device", "cpu"],
     "(set --data_dir or $HIRE_WIKIQA_DIR"),
    ("features-data-dir", ["features", "--encoder", "{enc}", "--data_dir", "{tmp}/folder", "--output_dir",
                           "{tmp}/out", "--cache_dir", "{tmp}/cache", "--device", "cpu"],
     "set the data dir with --data_dir or HIRE_CONLL2003_DIR"),
    ("probe-tokens-conll2003", TOKENS, "set the data dir with --conll2003 or HIRE_CONLL2003_DIR"),
    ("evaluate-data-dir", [*EVALUATE, "--data_dir", "{tmp}/folder"], "set the data dir with --data_dir or"),
    # -- 6. hire features: rows the encoder has not the hidden states for, before any work
    ("features-rows-last-4", given_once([*FEATURES, "--rows", "sum-last-4"]), "--rows sum-last-4: need 4 hidden "
     "states, and --encoder {enc} has 3 (its 2 layers and the embeddings); leave it out, or give --rows all"),
    ("features-rows-both", given_once([*FEATURES, "--rows", "last,concat-last-4,sum-last-4"]),
     "--rows concat-last-4,sum-last-4: need 4 hidden states"),
    # -- 7. --only with a value no cell has
    ("only-unknown-head", [*STATUS, "--only", "model.head=last-layer"], "--only: no cell of the experiment has "
     "model.head=last-layer; its cells have model.head=hire"),
    ("only-unknown-seed", [*STATUS, "--only", "train.seed=7"], "train.seed=7; its cells have train.seed=42"),
    ("only-unknown-cell", [*STATUS, "--only", "cell=RTE__hire__seed1"], "its cells have cell=RTE__hire__seed42"),
    ("only-unknown-task-run", ["experiment", "run", *STATUS[2:], "--only", "data.task=MRPC", "--dry_run"],
     "no cell of the experiment has data.task=MRPC; its cells have data.task=RTE"),
    ("only-one-of-two-unknown", [*STATUS, "--only", "model.head=hire", "--only", "model.head=pool-cls"],
     "model.head=pool-cls"),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_options_fail_cleanly(args: list[str], message: str, shared: dict[str, Path], tmp_path: Path,
                                      via: str) -> None:
    _write(tmp_path, shared)
    check_fails_cleanly(args, message, shared, tmp_path, via)


# -- what must keep working ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("separator", [",", " ", "\t", "#", ":", "|", " | "])
def test_a_real_separator_is_taken(separator: str) -> None:
    from hire.tasks.tokens import check_separator

    check_separator(separator)
    assert parse_options(["--data.separator", separator]).data.separator == separator


def test_repeatable_options_and_config_files_still_add_up(tmp_path: Path) -> None:
    from hire.experiments.cli import RunOptions
    from hire.probing.cli import ProbeCommand

    probe = parse_command(ProbeCommand, "hire probe", ["--encoder", "a", "--encoder", "b,c", "--task", "RTE",
                                                       "--task", "CoLA"], config=True)
    assert (probe.encoder, probe.task) == (["a", "b,c"], ["RTE", "CoLA"])
    run = parse_command(RunOptions, "hire experiment run", ["e.yaml", "--only", "a=1", "--only", "b=2"], config=True)
    assert run.only == ["a=1", "b=2"]
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text("train:\n  lr: 0.1\n  epochs: 2\n")
    two.write_text("train:\n  lr: 0.2\n")
    cfg = parse_options(["--config", str(one), "--config", str(two), "--train.lr", "0.3"])
    assert (cfg.train.lr, cfg.train.epochs) == (0.3, 2)  # the command line over both files, the second over the first


def test_the_experiment_runner_never_gives_an_option_twice(tmp_path: Path) -> None:
    """Every cell of every committed experiment file becomes a ``hire train`` command line that gives each option
    once and reads back as the cell's options."""
    from hire.experiments.experiment import load_experiment
    from hire.experiments.loop import train_command

    root = REPO / "configs" / "experiments"
    checked = 0
    for path in sorted(root.glob("*.yaml")):
        for cell in load_experiment(path).cells:
            words = train_command(cell, tmp_path / cell.id)[4:]
            options = [w for w in words if w.startswith("--")]
            assert len(options) == len(set(options)), (path.name, cell.id)
            cfg = parse_options(words)
            assert all(cfg.get(key) == value or key == "data.task" for key, value in cell.options.items())
            checked += 1
    assert checked > 100


def test_features_all_rows_are_the_rows_the_encoder_has(shared: dict[str, Path], capsys) -> None:
    """``--rows all`` (the default) on a 2-layer encoder: the last-4 rows are left out, said in one line."""
    from hire.featurebased import ROWS
    from hire.featurebased.cli import rows_of_encoder

    rows = rows_of_encoder([], list(ROWS), str(shared["enc"]))
    assert rows == [r for r in ROWS if not r.endswith("last-4")]
    assert capsys.readouterr().err.strip() == (f"hire features: sum-last-4, concat-last-4 skipped: need 4 hidden "
                                               f"states, and --encoder {shared['enc']} has 3 (its 2 layers and the "
                                               "embeddings)")
    assert rows_of_encoder(["all"], list(ROWS), str(shared["enc"])) == rows


def test_the_lab_device_check_is_one_for_all() -> None:
    """One check, shared by every lab command: cpu and auto always pass; anything but cpu or cuda is refused."""
    from hire.lab.checks import resolve_device

    assert resolve_device("cpu") == "cpu" and resolve_device("auto") in ("cpu", "cuda")
    for device in ("meta", "mps", "xpu", "cuda:-1", "CPU", " cpu", "cuda:1:2", ""):
        with pytest.raises(ConfigError, match="expected auto, cpu, cuda or cuda:N"):
            resolve_device(device)


def test_separator_checks_in_code_too() -> None:
    """A configuration built in Python goes through the same check (``RunConfig.validate``)."""
    with pytest.raises(ConfigError, match=r"--data\.separator '\\t': these characters themselves, not a tab"):
        DataConfig(task="custom", format="conll", train_file="x", dev_file="y", separator="\\t").validate()
