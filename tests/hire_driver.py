"""A ``hire`` process that runs many commands, each in a process of its own: the bad-input tests' slow run, and the
end-to-end tests' ``hire`` processes (:func:`badinput.hire_process`).

Started by :class:`badinput.HireDriver` (never by pytest's collection: no test here). It imports what every ``hire``
command imports once, then, for each command line it is sent, forks: the child is a copy of the process as it
stood after those imports, sets the command's working folder, environment and ``sys.argv``, points file
descriptors 0 to /dev/null and 1 and 2 to the files it is given (so that output written by C code, log handlers
and warnings is caught as well as Python's prints), and runs ``sys.exit(main())`` at the top level of this module,
as the console script does: the exit status, a traceback of an uncaught error, ``SystemExit`` from the option
parser, ``atexit`` handlers and the interpreter's teardown are a real process's. No state (warnings shown once,
log levels, caches, the environment) carries from one command to the next, since each runs in a fresh child of
the same parent.

Two kinds, the second argument says which:

- ``light``: ``hire.cli`` and the commands (what a fresh ``hire`` has imported when it parses its options). A child
  that goes on to import torch or transformers stops there, before that import, creating the file ``reroute`` of the
  case names and writing nothing more: the command line is for a ``heavy`` one. Most bad input is refused before
  torch; such a child's teardown is quick (hundredths of a second), as a fresh process's is.
- ``heavy``: torch, transformers and hire's modules on them imported too (seconds that each child is spared; its
  teardown takes a few tenths).

Protocol: one JSON object a line on stdin, ``{"argv", "cwd", "env", "stdout", "stderr", "reroute", "timeout"}`` and
optionally ``"kill"`` (a kill point of ``tests/killer.py``: the child dies there, as ``killer.py KILL -- ARGS`` does);
one JSON line back on the process's first stdout, ``{"returncode", "timed_out"}`` (a child killed by signal N: -N,
as :mod:`subprocess` says). Before the first command it answers ``{"ready": true}`` once its imports are done;
what they printed is in the log file named as its first argument (stdout and stderr of this process).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time

WARM = {"light": ("hire.cli",),
        "heavy": ("hire.cli", "torch", "transformers", "hire.model", "hire.training", "hire.commands",
                  "hire.evaluation", "hire.saved_model", "hire.data")}
HEAVY = {"torch", "transformers", "tokenizers", "safetensors", "huggingface_hub", "numpy", "scipy", "sklearn"}


class _Reroute:
    """A finder first on ``sys.meta_path`` of a light child: an import of a heavy package ends the child (exit
    status 0, no output flushed) after creating ``marker``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in HEAVY:
            os.close(os.open(self.marker, os.O_WRONLY | os.O_CREAT, 0o600))
            os._exit(0)


def _start(log: str, script_dir: str, kind: str) -> tuple[int, int]:
    """Keep the protocol's pipes on fds of their own, point 0 at /dev/null and 1, 2 at the log; import."""
    requests, answers = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    sys.path[0] = script_dir  # as for the console script: its own folder, not this one's
    import importlib

    for name in WARM[kind]:
        importlib.import_module(name)
    from hire.cli import all_commands

    all_commands()  # the plugins' commands, as every command line loads them
    if kind == "light" and HEAVY & set(sys.modules):
        print(f"hire_driver.py: light, yet imported {sorted(HEAVY & set(sys.modules))}", flush=True)
    # The imported objects stay out of the collector's way: a child's teardown would otherwise touch (and so copy)
    # every page the parent's heap is on, about a second a command instead of a few tenths.
    gc.collect()
    gc.freeze()
    sys.stdout.flush()
    sys.stderr.flush()
    return requests, answers


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    """The child's exit status (as :mod:`subprocess` gives it), killing it after ``timeout`` seconds."""
    deadline, pause = time.monotonic() + timeout, 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), True
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _become(case: dict, requests: int, answers: int, kind: str) -> None:
    """In the child: the command's process (its folder, environment, argv and output files)."""
    os.close(requests)
    os.close(answers)
    os.chdir(case["cwd"])
    os.environ.clear()
    os.environ.update(case["env"])
    sys.argv = list(case["argv"])
    for fd, path in ((1, case["stdout"]), (2, case["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    if kind == "light":
        sys.meta_path.insert(0, _Reroute(case["reroute"]))
    if case.get("kill"):  # a kill point of tests/killer.py, armed as ``killer.py KILL -- ARGS`` arms it
        sys.path.append(os.path.dirname(os.path.abspath(__file__)))
        import killer

        killer.install(case["kill"])


def serve(log: str, script_dir: str, kind: str) -> bool:
    """Answer command lines until stdin ends (False), or, in a forked child, return True to run one."""
    requests, answers = _start(log, script_dir, kind)
    reader = os.fdopen(requests, "r", encoding="utf-8", closefd=False)
    os.write(answers, b'{"ready": true}\n')
    for line in reader:
        case = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become(case, requests, answers, kind)
            return True
        code, timed_out = _wait(pid, case["timeout"])
        os.write(answers, (json.dumps({"returncode": code, "timed_out": timed_out}) + "\n").encode())
    return False


if __name__ == "__main__":
    if not serve(*sys.argv[1:4]):
        sys.exit(0)
    from hire.cli import main

    sys.exit(main())
