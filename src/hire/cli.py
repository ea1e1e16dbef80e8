"""The hire command: fine-tune, evaluate, predict with and share models whose head reads every hidden layer, for every
kind of task: a model that labels sentences (a class or a score per text or pair of texts: GLUE's CoLA, SST-2, MRPC,
STS-B, QQP, MNLI, QNLI, RTE and WNLI, your CSV, TSV or JSON-lines tables), tags words (NER, chunks, parts of speech:
CoNLL-2003, your CoNLL-column or token JSON-lines files), ranks passages (answer ranking: WikiQA, your
question-passage tables), answers questions with a span of the passage (extractive question answering: SQuAD v1.1 and
v2.0, your SQuAD JSON or JSON lines) or chooses one of several answers (multiple choice: CODAH, DREAM, SWAG, your
JSON lines).

``train`` is here; the commands on saved models and run folders are in :mod:`hire.commands`. The lab's commands
(experiment grids, probing, layer surgery, installing encoders) plug in through the ``hire.commands`` entry-point
group (``pyproject.toml``): each entry is a function that returns its commands (:class:`hire.options.Command`).
The core library never imports the lab; the lab builds on the core (an import-linter contract checks it).
``hire`` runs the command its first word names (:func:`hire.options.dispatch`); ``hire --help`` lists them all.

Every command is typed and parsed by jsonargparse (:mod:`hire.options`): ``hire train`` takes its options
from the typed configuration in :mod:`hire.config` (``--train.lr``, ``--model.head`` ...), optionally on top of
a YAML file (``--config configs/cola-minilm.yaml``); the others from the dataclass of their options
(:mod:`hire.commands`, and the lab's). Ranges and choices are the options' types, checked where the value is read.
Bad options and bad data stop the command, before anything on disk changes, with one line naming the
option, file or line at fault (exit status 2); so do a full disk or a read-only folder, naming the path.
An interrupted command says so in one line (exit status 130). ``HIRE_DEBUG=1`` shows full tracebacks.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import warnings
from typing import Any

from hire.config import RunConfig
from hire.options import Command, config_text, dispatch, parse_options, take_print_config


def resolve_run_config(options: list[str]) -> RunConfig:
    """Defaults <- the YAML file (``--config``) <- command-line options (:mod:`hire.options`), then validated."""
    cfg = parse_options(options)
    cfg.validate()
    return cfg


def _cmd_train(words: list[str]) -> int:
    options, printing = take_print_config(words)
    cfg = resolve_run_config(options)  # every option checked before torch is even imported
    if printing is not None:  # --print_config: what would run, once it is known to be valid
        print(config_text(cfg, printing), end="")
        return 0
    from hire.training import train

    final = train(cfg)
    # The held-out test score too, where there is one: scored once, with the model that dev chose.
    held = {"held_out": final["held_out"]} if final.get("held_out") else {}
    print(json.dumps({"task": final["task"], "head": final["head"], "score": round(final["score"], 4),
                      "dev": final["dev"], **held}, indent=2))
    return 0


COMMAND_PLUGINS = "hire.commands"  # the entry-point group through which more commands plug in (the lab's)


def all_commands() -> list[Command]:
    """Every ``hire`` command: ``train``, those of :mod:`hire.commands`, then the plugins' (each entry point of
    :data:`COMMAND_PLUGINS` is a function that returns its commands)."""
    from hire import commands

    train = Command("train", "fine-tune an encoder with a head on a named task or your own files, of any kind",
                    _cmd_train, RunConfig)
    return [train, *commands.add_commands(), *(c for plugin in plugin_commands() for c in plugin.load()())]


def plugin_commands() -> list[Any]:
    """The installed packages' command plugins (entry points of :data:`COMMAND_PLUGINS`), in the order
    ``pyproject.toml`` declares hire's own (then by name)."""
    from importlib.metadata import entry_points

    return list(entry_points(group=COMMAND_PLUGINS))


_OS_REASONS = {
    errno.ENOSPC: "no space left on the device; free some space and run the same command again",
    errno.EDQUOT: "disk quota exceeded; free some space and run the same command again",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EISDIR: "a folder, not a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.ENOENT: "no such file or folder",
    errno.ELOOP: "a symbolic link loop",
}


def describe_os_error(err: OSError) -> str:
    """One line for a failed file operation: the path(s), then what went wrong."""
    if err.errno is None:  # raised with a message of its own
        return str(err)
    reason = _OS_REASONS.get(err.errno) or err.strerror or str(err)
    paths = " -> ".join(str(p) for p in (err.filename, err.filename2) if p is not None)
    return f"{paths}: {reason}" if paths else reason


def _one_line_warnings(command: str) -> Any:
    """Show hire's own warnings as one line, ``hire train: warning: ...`` (others as Python shows them); returns
    the formatter it replaces."""
    previous = warnings.formatwarning
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep

    def formatwarning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
        if str(filename).startswith(package):
            return f"{command}: warning: {' '.join(str(message).split())}\n"
        return previous(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning  # type: ignore[assignment]
    return previous


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    commands = all_commands()
    command = f"hire {words[0]}" if words and words[0] in {c.name for c in commands} else "hire"
    formatwarning = _one_line_warnings(command)
    try:
        from hire.runtime import bound_kernel_cache, keep_freed_memory

        keep_freed_memory()
        bound_kernel_cache()
        return dispatch("hire", __doc__.split("\n\n")[0], commands, words)
    except KeyboardInterrupt:
        if os.environ.get("HIRE_DEBUG"):
            raise
        resume = "; run the same command again to resume from the last checkpoint" if command == "hire train" else ""
        print(f"{command}: interrupted{resume}", file=sys.stderr)
        return 130
    except (OSError, ValueError, RuntimeError) as err:  # ConfigError and DataError are ValueErrors
        # A RuntimeError is a user's fault only where pathlib (Python < 3.13) reports a symbolic link loop so.
        if os.environ.get("HIRE_DEBUG") or (isinstance(err, RuntimeError) and not _symlink_loop(err)):
            raise
        if isinstance(err, RuntimeError):
            message = f"{str(err).partition(' from ')[2].strip(chr(39))}: a symbolic link loop"
        else:
            message = describe_os_error(err) if isinstance(err, OSError) else str(err)
        print(f"{command}: error: {' '.join(line.strip() for line in message.splitlines() if line.strip())}",
              file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = formatwarning
        leave_process_group()


def _symlink_loop(err: RuntimeError) -> bool:
    """Whether ``err`` is ``Path.resolve``'s report of a symbolic link loop (Python 3.11, 3.12)."""
    return type(err) is RuntimeError and str(err).startswith("Symlink loop from ")


def leave_process_group() -> None:
    """Destroy torch.distributed's process group, if a command (``hire train`` under torchrun) made one.

    A process that exits with its gloo group alive leaves the group's threads to the interpreter's teardown,
    which can abort a run that finished ("terminate called without an active exception", SIGABRT: torchrun
    then reports the finished run as failed). torch asks for an explicit ``destroy_process_group()``.
    Looked up in ``sys.modules`` so that commands which never imported torch do not import it here.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["all_commands", "describe_os_error", "leave_process_group", "main", "resolve_run_config"]
