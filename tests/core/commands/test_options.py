"""``hire train``'s options (hire.options, on jsonargparse): the command line over a ``--config`` file over the
defaults, the forms each type takes, ``--help``, and the round trips the runs and experiments rely on."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import yaml

from hire import hardware
from hire.cli import main
from hire.config import ConfigError, DataConfig, ModelArgs, RunConfig, TrainConfig, option_fields
from hire.experiments.loop import cli_value
from hire.options import by_name, parse_options


def unusual() -> RunConfig:
    """A configuration whose every option differs from its default (None where the default is a value)."""
    return RunConfig(
        output_dir="runs/x", overwrite=True, predict_test=False,
        data=DataConfig(task="custom", data_dir="glue", train_file="a.csv", dev_file="b.csv", test_file="c.csv",
                        text_columns=["question", "answer"], label_column="gold", regression=True, max_length=64,
                        max_train_examples=100, max_eval_examples=50, format="conll", token_column=1, tag_column=3,
                        separator="\t", scheme="bioes", subword="mean", context="document", unknown_tags="o",
                        keep="all", ranking_columns={"qid": "QuestionID", "label": "Label"}, doc_stride=64,
                        max_answer_length=12),
        model=ModelArgs(encoder="enc", head="scalar-mix", head_options={"fusion_layers": 1, "dropout": 0.25},
                        init_from="runs/mnli/best", classifier_dropout=0.0, freeze_encoder=True, ranker="bi"),
        train=TrainConfig(epochs=3, batch_size=8, lr=1e-4, head_lr=3e-3, weight_decay=0.0, adam_beta1=0.8,
                          adam_beta2=0.999, adam_eps=1e-8, warmup_ratio=0.1, max_grad_norm=0.5, eval_every=7,
                          patience=2, checkpoint_every=5, seed=3, mixed_precision="no", group_by_length=False,
                          max_steps=9, rank_loss="pairwise", rank_margin=0.5))


def test_every_option_differs_in_the_unusual_config() -> None:
    cfg, default = unusual(), RunConfig()
    assert [n for n, _, _ in option_fields(RunConfig) if cfg.get(n) == default.get(n)] == []


def test_runner_command_lines_parse_back_to_the_same_values() -> None:
    """``hire experiment run`` writes every option with ``cli_value``; ``hire train`` must read the same back."""
    cfg = unusual()
    argv = [word for name, _, _ in option_fields(RunConfig) for word in (f"--{name}", cli_value(cfg.get(name)))]
    assert parse_options(argv) == cfg
    assert parse_options(["--train.head_lr", cli_value(None), "--data.data_dir", "null"]) == RunConfig()


def test_saved_config_round_trips_through_config(tmp_path) -> None:
    """Every option comes back, but the one-shot ``overwrite``, which is never saved (issue 43: a saved
    ``overwrite: true`` let a later ``--config`` replace a finished run)."""
    cfg = unusual()
    cfg.save(tmp_path / "config.yaml")
    assert "overwrite" not in yaml.safe_load((tmp_path / "config.yaml").read_text())
    once = dataclasses.replace(cfg, overwrite=False)
    assert parse_options(["--config", str(tmp_path / "config.yaml")]) == once
    assert parse_options(yaml.safe_load((tmp_path / "config.yaml").read_text())) == once
    assert parse_options(["--config", str(tmp_path / "config.yaml"), "--overwrite"]) == cfg


def test_a_config_file_never_overwrites(tmp_path) -> None:
    """``overwrite: true`` in a ``--config`` file is refused (give --overwrite on the command line); a false one,
    which older versions saved in every config.yaml, changes nothing."""
    (tmp_path / "yes.yaml").write_text("overwrite: true\ntrain:\n  lr: 1.0e-4\n")
    (tmp_path / "no.yaml").write_text("overwrite: false\ntrain:\n  lr: 1.0e-4\n")
    with pytest.raises(ConfigError, match=r"overwrite: true is not taken from a file.*give --overwrite on the command"):
        parse_options(["--config", str(tmp_path / "yes.yaml")])
    assert parse_options(["--config", str(tmp_path / "no.yaml")]) == RunConfig(train=TrainConfig(lr=1e-4))
    assert parse_options(["--config", str(tmp_path / "no.yaml"), "--overwrite"]).overwrite


@pytest.mark.parametrize(("words", "value"), [
    (["--overwrite"], True), (["--overwrite", "true"], True), (["--overwrite=true"], True),
    (["--overwrite", "false"], False), (["--overwrite", "--train.lr", "1"], True), ([], False),
])
def test_a_yes_no_option_may_stand_alone(words: list[str], value: bool) -> None:
    """Messages say "add --overwrite": the bare flag works (issue 43), as do the forms with a value."""
    assert parse_options(words).overwrite is value
    flag = [word.replace("--overwrite", "--data.regression") for word in words]  # every yes/no option alike
    assert parse_options(flag).data.regression is value


@pytest.mark.parametrize(("text", "line"), [
    ("train:\n  lr: 1.0e-4\n  lr: 2.0e-4\n", "line 3: the key 'lr' is given twice (first on line 2)"),
    ("output_dir: a\ntrain: {}\noutput_dir: b\n", "line 3: the key 'output_dir' is given twice (first on line 1)"),
    ("train:\n  lr: 1.0e-4\ntrain:\n  seed: 3\n", "line 3: the key 'train' is given twice (first on line 1)"),
])
def test_a_key_given_twice_in_a_config_file_is_refused(tmp_path, text: str, line: str) -> None:
    """YAML loaders keep the last value silently: a setting given twice is an error naming the file and lines."""
    (tmp_path / "twice.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        parse_options(["--config", str(tmp_path / "twice.yaml")])
    assert str(err.value) == f"--config {tmp_path / 'twice.yaml'}: {line}; keep one"


def test_the_command_line_overrides_the_file_wherever_config_stands(tmp_path) -> None:
    (tmp_path / "c.yaml").write_text("output_dir: from-file\ndata:\n  task: CoLA\ntrain:\n  lr: 1.0e-4\n  seed: 7\n")
    for argv in (["--config", str(tmp_path / "c.yaml"), "--train.lr", "3e-5", "--output_dir", "mine"],
                 ["--train.lr", "3e-5", "--output_dir", "mine", f"--config={tmp_path / 'c.yaml'}"]):
        cfg = parse_options(argv)
        assert (cfg.train.lr, cfg.output_dir, cfg.data.task, cfg.train.seed) == (3e-5, "mine", "CoLA", 7)


@pytest.mark.parametrize(("words", "name", "value"), [
    (["--data.text_columns", "sentence1,sentence2"], "data.text_columns", ["sentence1", "sentence2"]),
    (["--data.text_columns", "[a, b]"], "data.text_columns", ["a", "b"]),
    (["--model.head_options", "fusion_layers=1,dropout=0.2"], "model.head_options", {"fusion_layers": 1,
                                                                                      "dropout": 0.2}),
    (["--model.head_options", '{"fusion_layers": 1}'], "model.head_options", {"fusion_layers": 1}),
    (["--model.head_options", ""], "model.head_options", {}),
    (["--train.head_lr", "none"], "train.head_lr", None),
    (["--train.patience", "null"], "train.patience", None),
    (["--data.data_dir", "None"], "data.data_dir", None),
    (["--train.lr=3e-5"], "train.lr", 3e-5),
    (["--train.lr", "1"], "train.lr", 1.0),
    (["--train.group_by_length", "false"], "train.group_by_length", False),
    (["--overwrite", "yes"], "overwrite", True),
    (["--train.mixed_precision", "no"], "train.mixed_precision", "no"),
    (["--data.task", "null"], "data.task", "null"),  # a string option takes the word as it is
])
def test_forms_of_values(words: list[str], name: str, value: object) -> None:
    assert parse_options(words).get(name) == value


def test_mappings_by_section_or_by_dotted_name() -> None:
    cfg = parse_options({"data": {"task": "CoLA"}, "train.lr": "1e-4", "model.head_options": "k=2"})
    assert (cfg.data.task, cfg.train.lr, cfg.model.head_options) == ("CoLA", 1e-4, {"k": 2})
    assert by_name({"train": {"lr": 1}, "model.head": "hire", "output_dir": "x"}) == {
        "train.lr": 1, "model.head": "hire", "output_dir": "x"}


@pytest.mark.parametrize(("options", "message"), [
    (["--train.lr", "abc"], "--train.lr: expected a number, not 'abc'"),
    (["--train.epochs", "2.5"], "--train.epochs: expected an integer, not 2.5"),
    (["--train.head_lr", "fast"], "--train.head_lr: expected a number or null, not 'fast'"),
    (["--overwrite", "maybe"], "--overwrite: expected true or false, not 'maybe'"),
    (["--train.lr"], "--train.lr: expected one argument"),
    (["--train.lrr", "1"], "unrecognized arguments: --train.lrr 1 (did you mean '--train.lr'?)"),
    (["--model.head_options", "fusion_layers"], "--model.head_options: expected JSON or key=value pairs"),
    (["--model.head_options", "[1]"], "--model.head_options: expected a mapping"),
    ({"train": {"lrr": 1}}, "unknown option 'train.lrr' (did you mean 'train.lr'?)"),
    ({"model": 3}, "model must be a mapping of options, not 3"),
    ({"data.text_columns": {"a": 1}}, "--data.text_columns: expected a list of names"),
    ({"train.mixed_precision": False}, "--train.mixed_precision: expected one of auto, no, bf16, fp16, not False "
                                       "(YAML reads a bare no as false: write it in quotes"),
])
def test_errors_are_one_line_naming_the_option(options: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_options(options)  # type: ignore[arg-type]
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_help_explains_every_option_by_section(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        main(["train", "--help"])
    assert done.value.code == 0
    text = "".join(capsys.readouterr().out.split())  # white space aside: the help's lines break anywhere
    sections = [text.index(f"{s}options:") for s in ("run", "data", "model", "train")]
    assert sections == sorted(sections)
    for name, _, f in option_fields(RunConfig):
        assert f"--{name}" in text and "".join(f.metadata["help"].split()) in text, name
    # A range is the option's type, named in the help: the parser checks it where it reads the value.
    assert "--train.lrLRpeaklearningrate" in text and "(type:NonNegativeFloat,default:2e-05)" in text
    assert "(type:Optional[AtLeast1],default:null)" in text
    assert "(type:list[str],default:['sentence'])" in text and "--configCONFIG" in text


@pytest.mark.parametrize("flags, choice, warns", [
    ("flags : fpu avx2", "bf16", True),            # an AVX2-only CPU: bf16 is emulated there
    ("flags : avx512f avx512_bf16", "bf16", False),
    ("flags : amx_tile amx_bf16", "bf16", False),
    (None, "bf16", False),                         # not Linux: nothing to tell from
    ("flags : fpu avx2", "auto", False),           # auto picks fp32 there, silently
    ("flags : fpu avx2", "no", False),
])
def test_bf16_on_a_cpu_without_bf16_units_warns(monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder,
                                                 flags: str | None, choice: str, warns: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(hardware, "cpuinfo", lambda: flags)
    resolved = hardware.resolve_mixed_precision(choice)
    assert resolved == {"auto": "bf16" if flags and "bf16" in flags else "no"}.get(choice, choice)
    messages = [str(w.message) for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert bool(messages) == warns, messages
    assert not warns or ("emulates bf16" in messages[0] and "'auto' picks fp32" in messages[0])


@pytest.mark.parametrize("option", ["--mixed_precision", "--train.mixed_precision"])
def test_fp16_without_a_gpu_is_refused(monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    """Accelerate runs fp16 on a CPU in fp32, and the run would record fp16 (issue 43): an error naming the option
    that asked for it, which says what works on a CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError) as err:
        hardware.resolve_mixed_precision("fp16", option)
    assert str(err.value) == f"{option} fp16: needs a CUDA GPU, and there is none here; on a CPU use bf16, no or auto"
    assert hardware.resolve_mixed_precision("no", option) == "no"
