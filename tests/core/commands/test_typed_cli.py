"""One typed command line: ``hire`` dispatches on its first word to every command, core and lab (the lab's plug
in through the ``hire.commands`` entry points), each a dataclass of options parsed by jsonargparse
(:mod:`hire.options`): ``--help`` lists them, ranges and choices are types, errors are one line naming the
option (the closest name for a misspelt one), exit status 2, and a ``--config`` file gives the same options."""

from __future__ import annotations

from pathlib import Path

import pytest

from hire.cli import all_commands, main
from hire.options import Command, parse_command

LAB = {"experiment", "probe", "probe-report", "deepen", "reconstruct", "install-encoder", "features", "ud-tasks",
       "rank-probe", "rank-probe-report", "probe-tokens", "probe-tokens-report"}
CORE = {"train", "evaluate", "predict", "export", "heads", "report"}


def test_help_lists_every_command_core_and_lab(capsys: pytest.CaptureFixture) -> None:
    assert main(["--help"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert listed == CORE | LAB == {command.name for command in all_commands()}
    assert main(["experiment", "--help"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert {"run", "status", "collect", "adopt", "report"} <= listed


def test_the_lab_plugs_in_through_entry_points() -> None:
    from hire.cli import plugin_commands

    names = {command.name for plugin in plugin_commands() for command in plugin.load()()}
    assert names == LAB and all(isinstance(c, Command) for c in all_commands())


@pytest.mark.parametrize("command", [*sorted(CORE | LAB - {"experiment"}), "experiment run", "experiment adopt"])
def test_every_command_explains_its_options(command: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        main([*command.split(), "--help"])
    assert done.value.code == 0
    assert f"usage: hire {command}" in capsys.readouterr().out


@pytest.mark.parametrize(("words", "line"), [
    ([], "hire: error: give a command; choose from train, "),
    (["trian"], "hire: error: unknown command 'trian' (did you mean 'train'?)"),
    (["experiment", "stauts", "x.yaml"], "hire experiment: error: unknown command 'stauts' (did you mean 'status'?)"),
    (["experiment", "run", "x.yaml", "--jbos", "2"], "hire experiment: error: unrecognized arguments: --jbos 2 (did "
                                                    "you mean '--jobs'?)"),
    (["experiment", "run", "x.yaml", "--jobs", "0"], "hire experiment: error: --jobs: must be >= 1, not 0"),
    (["experiment", "run", "x.yaml", "--max_runs", "-1"], "--max_runs: must be >= 0, not -1"),
    (["experiment", "run", "x.yaml", "--executor", "pbs"], "--executor: expected one of slurm, local or null, not "
                                                           "'pbs'"),
    (["experiment", "run", "x.yaml", "--gpus_per_job", "0"], "--gpus_per_job: only with --executor"),  # 0 is given
    (["experiment", "adopt", "x.yaml"], "the following arguments are required: --from"),
    (["experiment", "status"], "the following arguments are required: experiment"),
    (["probe", "--folds", "1"], "hire probe: error: --folds: must be >= 2, not 1"),
    (["probe", "--batch_size", "0"], "--batch_size: must be >= 1, not 0"),
    (["probe", "--cache_dtype", "float64"], "--cache_dtype: expected one of float16, float32, not 'float64'"),
    (["probe", "--enocder", "x"], "did you mean '--encoder'?"),
    (["reconstruct", "--max_examples", "-1"], "hire reconstruct: error: --max_examples: must be >= 0, not -1"),
    (["reconstruct", "--decoder", "mlm"], "--decoder: expected one of auto, mlm-head, tied-embeddings"),
    (["deepen", "--encoder", "e", "--output", "o"], "hire deepen: error: --duplicate or --layers: give one of them"),
    (["install-encoder", "bert"],
     "hire install-encoder: error: name: 'bert' is no installable encoder; choose from all-mpnet-base-v2"),
])
def test_bad_options_are_one_line_with_exit_status_2(words: list[str], line: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(words) == 2
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_config_file_gives_a_lab_commands_options(tmp_path: Path) -> None:
    """``--config`` YAML under the command line (wherever it stands); a repeatable option's list in the file, the
    command line's words after it; the file's keys checked as options (the closest name for a misspelt one)."""
    from hire.experiments.cli import RunOptions

    config = tmp_path / "run.yaml"
    config.write_text("jobs: 2\nonly: [data.task=RTE]\nmax_runs: 3\n")

    def parse(*words: str) -> RunOptions:
        return parse_command(RunOptions, "hire experiment run", ["exp.yaml", *words], config=True)

    args = parse("--max_runs", "1", "--config", str(config), "--only", "model.head=hire")
    assert (args.jobs, args.max_runs, args.only) == (2, 1, ["data.task=RTE", "model.head=hire"])
    assert parse().only == [] and parse("--only", "a=1", "--only", "b=2").only == ["a=1", "b=2"]
    config.write_text("jbos: 2\n")
    with pytest.raises(ValueError, match=r"--config .*run.yaml: unknown option 'jbos' \(did you mean 'jobs'\?\)"):
        parse("--config", str(config))
    config.write_text("jobs: 0\n")
    with pytest.raises(ValueError, match="--jobs: must be >= 1, not 0"):
        parse("--config", str(config))
