"""The ``hire`` command: ``train``, ``evaluate``, ``predict``, ``heads`` and ``report``.

``hire train`` takes its options from the typed configuration in :mod:`hire.config` (``--train.lr``,
``--model.head`` ...), optionally on top of a YAML file (``--config configs/rte-minilm.yaml``).
Bad options and bad data stop the command with one line naming the option, file or line at fault
(set ``HIRE_DEBUG=1`` for the full traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints

import yaml

from hire.config import ConfigError, RunConfig, from_dict, load_yaml
from hire.data.examples import DataError

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
        return dict(parsed)
    result = {}
    for pair in text.split(","):
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option}: expected key=value pairs separated by commas, got {pair!r}")
        result[key.strip()] = yaml.safe_load(raw)
    return result


def _leaves(cls: type, prefix: str = "") -> list[tuple[str, Any, dataclasses.Field]]:
    hints, out = get_type_hints(cls), []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += _leaves(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, hints[f.name], f))
    return out


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
    for name, tp, f in _leaves(RunConfig):
        section = name.split(".")[0] if "." in name else "run"
        group = groups.setdefault(section, parser.add_argument_group(f"{section} options"))
        choices = get_args(tp) if get_origin(tp) is Literal else None
        group.add_argument(f"--{name}", dest=name, default=argparse.SUPPRESS, metavar=None if choices else _metavar(tp),
                           choices=choices, help=f"{f.metadata['help']} (default: {_default_text(f)})")


def resolve_run_config(args: argparse.Namespace) -> RunConfig:
    """Defaults <- the YAML file (``--config``) <- command-line options, type-checked."""
    values: dict[str, Any] = load_yaml(args.config) if args.config else {}
    where = f"--config {args.config}" if args.config else "options"
    types_by_name = {name: tp for name, tp, _ in _leaves(RunConfig)}
    flat = {}
    for section, content in values.items():  # check and convert the file's values
        if isinstance(content, dict) and section in ("data", "model", "train"):
            flat.update({f"{section}.{k}": v for k, v in content.items()})
        else:
            flat[section] = content
    flat.update({k: v for k, v in vars(args).items() if k in types_by_name})
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        if name not in types_by_name:
            raise ConfigError(f"{where}: unknown option {name!r}")
        section, _, key = name.rpartition(".")
        target = nested.setdefault(section, {}) if section else nested
        target[key] = coerce(value, types_by_name[name], f"--{name}")
    return from_dict(RunConfig, nested, where)


def _cmd_train(args: argparse.Namespace) -> int:
    from hire.training import train

    cfg = resolve_run_config(args)
    final = train(cfg)
    print(json.dumps({"task": final["task"], "head": final["head"], "score": round(final["score"], 4),
                      "dev": final["dev"]}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from hire import evaluate_cli

    parser = argparse.ArgumentParser(prog="hire", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = sub.add_parser("train", help="fine-tune an encoder with a head on a GLUE task or your own data",
                           description="Fine-tune an encoder with a head (default: HIRE) on a GLUE task or "
                           "your own files. Every option below is also a key of a --config YAML file.")
    train.add_argument("--config", help="YAML file of options (e.g. configs/rte-minilm.yaml); "
                       "command-line options override it")
    add_config_options(train)
    train.set_defaults(func=_cmd_train)
    evaluate_cli.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from hire.runtime import keep_freed_memory

    keep_freed_memory()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, DataError, ValueError, FileNotFoundError) as err:
        if os.environ.get("HIRE_DEBUG"):
            raise
        print(f"hire {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["build_parser", "coerce", "main", "resolve_run_config"]
