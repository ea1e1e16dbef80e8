"""The slow run's ``hire`` processes (tests/badinput.py's :class:`HireDriver`, tests/hire_driver.py): each command
line forked from one process that imported hire once must show what a fresh ``hire`` process shows (exit status,
stdout, stderr with its warnings and tracebacks), carry nothing over from the command line before, and be stopped
at its time limit.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from badinput import HireDriver, hire_driver, hire_script, process_env, run_forked, same_output

pytestmark = pytest.mark.slow

SAME = ["train", "--data.task", "custom", "--data.train_file", "same.csv", "--data.dev_file", "same.csv"]
CASES = {
    "help": ["--help"],
    "unknown-command": ["trian"],
    "bad-option": ["train", "--train.lr", "-1"],
    "unknown-option": ["train", "--train.lrr", "1"],
    # a warning hire shows once per process (its own registry, config._WARNED), then the configuration on stdout
    "warning-and-stdout": [*SAME, "--print_config"],
}


@pytest.fixture(params=["light", "heavy"])
def driver(request: pytest.FixtureRequest) -> HireDriver:
    return hire_driver(process_env(), request.param)  # the session's, which the bad-input tests use


def fresh(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*hire_script(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def main_frame(traceback: str) -> str:
    return re.sub(r'File "[^"]+", line \d+, in <module>', "File MAIN, in <module>", traceback)


@pytest.mark.parametrize("case", list(CASES))
def test_a_forked_command_shows_what_a_fresh_process_shows(case: str, tmp_path: Path) -> None:
    (tmp_path / "same.csv").write_text("sentence,label\na fine film,pos\na dull film,neg\n")
    env = process_env()
    expected = fresh(CASES[case], tmp_path, env)
    for _ in range(2):  # the second time too: nothing shown once per process stays shown
        forked = run_forked(CASES[case], tmp_path, env)
        assert same_output(forked, expected), (forked, expected)
    heavy = hire_driver(env, "heavy").run(CASES[case], tmp_path, env)  # torch imported or not, the same
    assert heavy is not None and same_output(heavy, expected), (heavy, expected)
    if case == "warning-and-stdout":
        assert "hire train: warning: --data.dev_file same.csv holds the same rows" in forked.stderr
        assert forked.returncode == 0 and "train_file: same.csv" in forked.stdout


def test_a_traceback_and_the_environment_are_the_commands_own(driver: HireDriver, tmp_path: Path) -> None:
    """HIRE_DEBUG=1 lets the error through: a traceback and exit status 1 as in a fresh process; the next command
    line, without it, is one line again."""
    env = process_env({"HIRE_DEBUG": "1"})
    expected, forked = fresh(CASES["bad-option"], tmp_path, env), driver.run(CASES["bad-option"], tmp_path, env)
    assert forked is not None
    assert forked.returncode == expected.returncode == 1
    assert "Traceback (most recent call last)" in forked.stderr
    assert forked.stderr.splitlines()[-1].endswith("ConfigError: --train.lr: must be >= 0, not -1.0")
    assert main_frame(forked.stderr) == main_frame(expected.stderr)  # but the script's own frame: its file, line
    plain = driver.run(CASES["bad-option"], tmp_path, process_env())
    assert plain is not None
    assert (plain.returncode, plain.stderr) == (2, "hire train: error: --train.lr: must be >= 0, not -1.0\n")


def test_a_light_driver_hands_back_what_needs_torch(tmp_path: Path) -> None:
    """A command line refused before torch is run by the light driver; one that goes on to torch is handed back,
    having written nothing, and the heavy driver runs it."""
    light, env = hire_driver(process_env(), "light"), process_env()
    cheap = light.run(CASES["bad-option"], tmp_path, env)
    assert cheap is not None and cheap.returncode == 2
    torch_needed = ["train", "--data.task", "custom", "--data.train_file", "t.csv", "--data.dev_file", "t.csv",
                    "--model.encoder", str(tmp_path), "--output_dir", "run"]
    (tmp_path / "t.csv").write_text("sentence,label\na fine film,pos\na dull film,neg\n")
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    before = sorted(tmp_path.rglob("*"))
    assert light.run(torch_needed, tmp_path, env) is None
    assert sorted(tmp_path.rglob("*")) == before
    heavy = run_forked(torch_needed, tmp_path, env)
    assert heavy.returncode == 2 and heavy.stderr.splitlines()[-1].startswith("hire train: error: "), heavy.stderr


def test_a_command_past_its_time_is_stopped(driver: HireDriver, tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        driver.run(["--help"], tmp_path, process_env(), timeout=0)
    assert getattr(driver.run(CASES["bad-option"], tmp_path, process_env()), "returncode", None) == 2
