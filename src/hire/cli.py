"""The ``hire`` command: ``train``, ``evaluate``, ``predict``, ``export``, ``heads`` and ``report``.

``train`` is here; the commands on saved models and run folders are in :mod:`hire.commands`.

``hire train`` takes its options from the typed configuration in :mod:`hire.config` (``--train.lr``,
``--model.head`` ...), optionally on top of a YAML file (``--config configs/rte-minilm.yaml``).
Bad options and bad data stop the command, before anything on disk changes, with one line naming the
option, file or line at fault (exit status 2); so do a full disk or a read-only folder, naming the path.
An interrupted command says so in one line (exit status 130). ``HIRE_DEBUG=1`` shows full tracebacks.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import sys
import types
import typing
from typing import Any, Literal, NoReturn, get_args, get_origin

import yaml

from hire.config import ConfigError, RunConfig, did_you_mean, from_dict, load_yaml, option_fields

_TRUE, _FALSE = {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


def coerce(value: Any, tp: Any, option: str) -> Any:
    """Convert a command-line string (or a YAML value) to the option's declared type."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        return coerce(value, next(a for a in args if a is not type(None)), option)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{option}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in _TRUE | _FALSE:
            return str(value).lower() in _TRUE
        raise ConfigError(f"{option}: expected true or false, not {value!r}")
    if tp in (int, float):
        try:
            number = tp(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None or (tp is int and isinstance(value, float) and not value.is_integer()):
            raise ConfigError(f"{option}: expected {'an integer' if tp is int else 'a number'}, not {value!r}")
        return number
    if origin is list:
        items = value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]
        return [str(v) for v in items]
    if origin is dict:
        return _parse_mapping(value, option)
    return str(value) if value is not None else value


def _parse_mapping(value: Any, option: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    text = str(value).strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{option}: not valid JSON ({err})") from err
        if not isinstance(parsed, dict):
            raise ConfigError(f"{option}: expected a JSON object, not {text}")
        return parsed
    result = {}
    for pair in text.split(","):
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option}: expected key=value pairs separated by commas, got {pair!r}")
        result[key.strip()] = yaml.safe_load(raw)
    return result


def _default_text(f: dataclasses.Field) -> str:
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
    return ",".join(value) if isinstance(value, list) else json.dumps(value) if isinstance(value, dict) else str(value)


def _metavar(tp: Any) -> str:
    if get_origin(tp) in (typing.Union, types.UnionType):
        tp = next(a for a in get_args(tp) if a is not type(None))
    return {int: "INT", float: "FLOAT", bool: "BOOL", str: "STR"}.get(tp) or (
        "A,B" if get_origin(tp) is list else "K=V,..")


def add_config_options(parser: argparse.ArgumentParser) -> None:
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, tp, f in option_fields(RunConfig):
        section = name.split(".")[0] if "." in name else "run"
        group = groups.setdefault(section, parser.add_argument_group(f"{section} options"))
        choices = get_args(tp) if get_origin(tp) is Literal else None
        group.add_argument(f"--{name}", dest=name, default=argparse.SUPPRESS, metavar=None if choices else _metavar(tp),
                           choices=choices, help=f"{f.metadata['help']} (default: {_default_text(f)})")


def resolve_run_config(args: argparse.Namespace) -> RunConfig:
    """Defaults <- the YAML file (``--config``) <- command-line options, type-checked, then validated."""
    values: dict[str, Any] = load_yaml(args.config) if args.config else {}
    where = f"--config {args.config}" if args.config else "options"
    types_by_name = {name: tp for name, tp, _ in option_fields(RunConfig)}
    flat = {}
    for section, content in values.items():  # check and convert the file's values
        if section in ("data", "model", "train"):
            if not isinstance(content, dict):
                raise ConfigError(f"{where}: {section} must be a mapping of options, not {content!r}")
            flat.update({f"{section}.{k}": v for k, v in content.items()})
        else:
            flat[section] = content
    flat.update({k: v for k, v in vars(args).items() if k in types_by_name})
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        if name not in types_by_name:
            raise ConfigError(f"{where}: unknown option {name!r}{did_you_mean(name, types_by_name)}")
        section, _, key = name.rpartition(".")
        target = nested.setdefault(section, {}) if section else nested
        target[key] = coerce(value, types_by_name[name], f"--{name}")
    cfg = from_dict(RunConfig, nested, where)
    cfg.validate()
    return cfg


def _cmd_train(args: argparse.Namespace) -> int:
    cfg = resolve_run_config(args)  # every option checked before torch is even imported
    from hire.training import train

    final = train(cfg)
    print(json.dumps({"task": final["task"], "head": final["head"], "score": round(final["score"], 4),
                      "dev": final["dev"]}, indent=2))
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, with the closest option to a misspelt one."""

    commands: dict[str, argparse.ArgumentParser]  # the top-level parser's commands, by name

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            message += did_you_mean(message.split()[2].partition("=")[0], self._option_string_actions)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> _Parser:
    from hire import commands, encoders_offline
    from hire.experiments import cli as experiment_cli
    from hire.layers import cli as layers_cli
    from hire.probing import cli as probe_cli

    parser = _Parser(prog="hire", description=__doc__.split("\n\n")[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = sub.add_parser("train", help="fine-tune an encoder with a head on a GLUE task or your own data",
                           description="Fine-tune an encoder with a head (default: HIRE) on a GLUE task or "
                           "your own files. Every option below is also a key of a --config YAML file.")
    train.add_argument("--config", help="YAML file of options (e.g. configs/rte-minilm.yaml); "
                       "command-line options override it")
    add_config_options(train)
    train.set_defaults(func=_cmd_train)
    commands.add_commands(sub)
    experiment_cli.add_commands(sub)
    probe_cli.add_commands(sub)
    layers_cli.add_commands(sub)
    encoders_offline.add_commands(sub)
    parser.commands = sub.choices  # unknown options are reported by the command's own parser
    return parser


_OS_REASONS = {
    errno.ENOSPC: "no space left on the device; free some space and run the same command again",
    errno.EDQUOT: "disk quota exceeded; free some space and run the same command again",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EISDIR: "a folder, not a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.ENOENT: "no such file or folder",
}


def describe_os_error(err: OSError) -> str:
    """One line for a failed file operation: the path(s), then what went wrong."""
    if err.errno is None:  # raised with a message of its own
        return str(err)
    reason = _OS_REASONS.get(err.errno) or err.strerror or str(err)
    paths = " -> ".join(str(p) for p in (err.filename, err.filename2) if p is not None)
    return f"{paths}: {reason}" if paths else reason


def main(argv: list[str] | None = None) -> int:
    command = "hire"
    try:
        from hire.runtime import keep_freed_memory

        keep_freed_memory()
        parser = build_parser()
        args, unknown = parser.parse_known_args(argv)
        command = f"hire {args.command}"
        if unknown:
            parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
        return args.func(args)
    except KeyboardInterrupt:
        if os.environ.get("HIRE_DEBUG"):
            raise
        resume = "; run the same command again to resume from the last checkpoint" if command == "hire train" else ""
        print(f"{command}: interrupted{resume}", file=sys.stderr)
        return 130
    except (OSError, ValueError) as err:  # ConfigError and DataError are ValueErrors
        if os.environ.get("HIRE_DEBUG"):
            raise
        message = describe_os_error(err) if isinstance(err, OSError) else str(err)
        print(f"{command}: error: {' '.join(line.strip() for line in message.splitlines() if line.strip())}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["build_parser", "coerce", "describe_os_error", "main", "resolve_run_config"]
