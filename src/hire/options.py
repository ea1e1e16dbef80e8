"""Options to a :class:`~hire.config.RunConfig`, parsed by jsonargparse. ``hire train``'s command line, its
``--config`` files, saved ``config.yaml`` files and the options of experiment cells all go through
:func:`parse_options`: one way to turn options into a configuration.

:func:`run_parser` has one option per field of the configuration (``--output_dir``, ``--data.task``,
``--train.lr`` ...), grouped by section, with the field's ``help`` and default, and ``--config FILE``.
jsonargparse merges the YAML file under the command line, converts every value to its field's type
(``3e-5``, ``true``, ``null``, ``auto``) and refuses unknown options. What it does not do is here, and
small: the command line overrides the file wherever ``--config`` stands (jsonargparse goes by position);
a text option (a name, a path, a separator: ``str`` or ``str | None``) is the word as typed, never read as YAML
(``--data.separator ,`` or ``'#'``, a file named ``*x``), and ``none`` reads as null where the option may be null
(``hire.experiments.loop.cli_value`` writes it); an option given twice on the command line is an error, as a key
given twice in a ``--config`` file is; a list may be one comma-separated word (``--data.text_columns
sentence1,sentence2``) and a mapping ``key=value`` pairs (``--model.head_options fusion_layers=1``) besides JSON
or YAML; a yes/no option may stand alone (``--overwrite``, as ``--overwrite true``); a ``--config`` file is
checked first, so that a missing file, bad YAML, a key given twice or an unknown key is one line naming the file
(and the line), and it may not set a one-shot action (``overwrite: true``: only the command line does).
:func:`parse_options` records which options were given (``RunConfig.given``): starting from a saved model, an
option left out takes the model's value. ``--print_config`` prints the configuration only once it is validated
(:func:`take_print_config`).

An option's range or choices are its type (``Annotated[int, AtLeast1]``, ``Literal[...]``): the parser checks
them where it reads the value. Errors are :class:`~hire.config.ConfigError` of one line that starts with the
option or file at fault (``--train.lr: expected a number, not 'abc'``, ``--train.epochs: must be >= 1, not 0``:
jsonargparse's message of several lines, put in one). The rules that need more than the value (files, encoder,
head) are :meth:`RunConfig.validate`'s, applied after parsing.

Every other command (``hire evaluate``, ``predict``, ``export``, ``heads``, ``report``, and the lab's) is typed
the same way: a dataclass of options (:func:`option`), parsed by :func:`parse_command` through the same types and
the same one-line errors (:func:`one_line`), with ``--config`` where it has many options. :func:`typed_command`
makes it a :class:`Command`; :func:`command_group` makes a command of several (``hire experiment run|status|...``);
:func:`dispatch` runs the one a command line's first word names (``hire`` itself is such a group).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import re
import textwrap
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import yaml
from jsonargparse import ActionConfigFile, ArgumentParser, DefaultHelpFormatter, get_loader, set_loader

from hire.checks import check_input_file, read_yaml
from hire.config import ONE_SHOT, ConfigError, RunConfig, did_you_mean, option_fields, parser_type
from hire.model.optiontypes import describe_type, range_of, range_text

SECTIONS = ("data", "model", "train")
_yaml = get_loader("yaml")  # jsonargparse's YAML: 1e-4 is a number, as in YAML 1.2


NULL_WORDS = ("none", "None", "null")  # an optional option's null on the command line (``loop.cli_value`` writes none)


def _load(text: str) -> Any:
    """A ``--config`` file: YAML, and ``none`` for null (``loop.cli_value``)."""
    return None if text.strip() in ("none", "None") else _yaml(text)


def _load_word(text: str) -> Any:
    """A command-line value of an option that is not text (a number, a choice, a yes/no; text never comes here:
    :func:`_option_type`), read as YAML reads it in a ``--config`` file, but for two things YAML does with a lone
    word: one that starts with ``#`` is that word, not a comment (nothing, the option's default), and one that is not
    valid YAML (``,``, ``:``, ``*x``, ``!x``) stays the word (jsonargparse keeps it on the loader's exceptions): the
    option's type then refuses it in one line (``--train.epochs: expected an integer, not ','``)."""
    return text if text.lstrip().startswith("#") else _load(text)


set_loader("hire", _load_word, exceptions=(yaml.YAMLError,))


class BadValue(argparse.ArgumentTypeError, ValueError):
    """A value :func:`comma_list` or :func:`mapping` cannot read: argparse keeps its message for a command-line
    word (an ``ArgumentTypeError``), jsonargparse for a value of a YAML file (a ``ValueError``)."""


def _flow_yaml(text: str, refusal: str) -> Any:
    """``text`` read as YAML (JSON is YAML in flow style); a :class:`BadValue` that starts with ``refusal`` and
    gives YAML's reason in one line."""
    try:
        return _yaml(text)
    except yaml.YAMLError as err:
        raise BadValue(f"{refusal} ({' '.join(str(err).split())})") from None


def comma_list(value: Any) -> list[str]:
    """A list option: a YAML list, or one comma-separated word (``sentence1,sentence2``)."""
    if not isinstance(value, list | str):
        raise BadValue(f"expected a list of names or comma-separated names, not {value!r}")
    if isinstance(value, str) and value.strip().startswith("["):  # a YAML list: [sentence1, sentence2]
        value = _flow_yaml(value, "not a valid YAML list")
        if not isinstance(value, list):
            raise BadValue(f"expected a list of names or comma-separated names, not {value!r}")
    items = value if isinstance(value, list) else value.split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def mapping(value: Any) -> dict[str, Any]:
    """A mapping option: a YAML mapping, JSON (``{"fusion_layers": 1}``) or ``key=value,key=value``."""
    if isinstance(value, dict) or value is None:
        return dict(value or {})
    text = str(value).strip()
    if text.startswith(("{", "[")):  # JSON, or YAML in flow style
        parsed = _flow_yaml(text, "not valid JSON or YAML")
        if not isinstance(parsed, dict):
            raise BadValue(f"expected a mapping, not {text}")
        return parsed
    pairs = [pair.partition("=") for pair in text.split(",") if pair.strip()]
    if any(not sep or not key.strip() for key, sep, _ in pairs):
        raise BadValue(f"expected JSON or key=value pairs separated by commas, not {text!r}")
    return {key.strip(): _pair_value(raw) for key, _, raw in pairs}


def _pair_value(raw: str) -> Any:
    """The value of a ``key=value`` pair: a number, a yes/no or null as YAML reads it, else the text as given: a
    name is never YAML's reading of it (``#id`` is a column name, not a comment; ``*x`` is not an alias)."""
    if not raw.strip():
        return None
    try:
        value = _yaml(raw)
    except yaml.YAMLError:
        return raw.strip()
    if isinstance(value, str) or (value is None and raw.strip() not in ("~", *NULL_WORDS)):
        return raw.strip()
    return value


class _Form:
    """The type of an option that jsonargparse would not read from one word: the function that reads it
    (argparse gives it the word, jsonargparse a YAML file's value), named in ``--help`` as the field's type."""

    def __init__(self, read: Callable[[Any], Any], name: str) -> None:
        self.read, self.name = read, name

    def __call__(self, value: Any) -> Any:
        return self.read(value)

    def __str__(self) -> str:
        return self.name


_FORMS = {list: _Form(comma_list, "list[str]"), dict: _Form(mapping, "dict[str, Any]")}


def _read_text(value: Any, optional: bool) -> str | None:
    """A text option's value (a name, a path, a separator): the command-line word as typed, never read as YAML
    (``,``, ``:``, ``#``, ``*x``, ``!x`` are themselves), ``none`` or ``null`` for null where the option may be
    null; from a ``--config`` file, the string YAML read, or the number it read from an unquoted name
    (``output_dir: 2024`` is the folder 2024)."""
    if isinstance(value, str):
        return None if optional and value in NULL_WORDS else value
    if value is None and optional:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise BadValue(f"expected a string{' or null' if optional else ''}, not {value!r}")


_TEXT = _Form(functools.partial(_read_text, optional=False), "str")
_OPTIONAL_TEXT = _Form(functools.partial(_read_text, optional=True), "Optional[str]")


def _option_type(tp: Any) -> Any:
    """The ``type`` an option is parsed with: a text option (``str``, ``str | None``: names, paths, separators) is
    read by :func:`_read_text`, never as YAML; a list or a mapping by :data:`_FORMS`; anything else is the type
    that jsonargparse checks (a range, a choice)."""
    if tp is str:
        return _TEXT
    if get_origin(tp) in (typing.Union, types.UnionType) and set(get_args(tp)) == {str, type(None)}:
        return _OPTIONAL_TEXT
    return _FORMS.get(get_origin(tp), parser_type(tp))


class _ConfigFile(ActionConfigFile):
    """``--config FILE``: read and checked here (one line naming the file, and the YAML line at fault), then
    merged by jsonargparse, which takes a configuration as a file or as YAML text. The options read stand in the
    parsed ``config`` (in place of jsonargparse's ``None``), so that the file is read once."""

    def __call__(self, parser: Any, cfg: Any, values: Any, option_string: str | None = None) -> None:
        options = read_config_file(values, parser.hire_options)
        try:
            self.apply_config(parser, cfg, self.dest, yaml.safe_dump(options))
        except (KeyError, TypeError, argparse.ArgumentError) as err:
            message = err.args[0] if isinstance(err, KeyError) else str(err)
            raise ConfigError(f"--config {values}: {one_line(message, _fields(parser.hire_options))}") from None
        cfg[self.dest][-1] = options


def read_config_file(path: str | Path, options: type = RunConfig) -> dict[str, Any]:
    """The options of a ``--config`` file (of dataclass ``options``' fields): a UTF-8 YAML mapping, its sections
    mappings too (or empty)."""
    path = Path(path)
    check_input_file(path, "--config", "a YAML file")
    where = f"--config {path}"
    values = read_yaml(path, where, _load)
    if not isinstance(values, dict | type(None)):
        raise ConfigError(f"{where}: expected a mapping of options at the top level")
    values = _sections(values or {}, f"{where}: ")
    for name in ONE_SHOT:  # an action on one command, never taken from a file (a false one, saved by older
        if values.pop(name, None):  # versions in config.yaml, changes nothing and is dropped)
            raise ConfigError(f"{where}: {name}: true is not taken from a file (it would act on every command "
                              f"that reads the file); give --{name} on the command line")
    names = [name for name, _, _ in option_fields(options)]
    for name in by_name(values):  # here, not after the merge, where jsonargparse no longer knows the file
        if name not in names:
            raise ConfigError(f"{where}: unknown option {name!r}{did_you_mean(name, names)}")
    return values


def _sections(options: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """``options`` with its sections checked: each a mapping, or empty (then left out)."""
    for section in SECTIONS:
        if not isinstance(options.get(section), dict | type(None)):
            raise ConfigError(f"{where}{section} must be a mapping of options, not {options[section]!r}")
    return {key: value for key, value in options.items() if not (key in SECTIONS and value is None)}


@functools.cache
def run_parser() -> ArgumentParser:
    """The jsonargparse parser of ``hire train``: every field of :class:`RunConfig`, and ``--config``."""
    parser = ArgumentParser(prog="hire train", exit_on_error=False, parser_mode="hire",
                            description="Fine-tune an encoder with a head (default: HIRE) on a named task "
                            "(--data.task) or your own files (--data.task custom, --data.format), of any "
                            "kind: a model that labels sentences (GLUE; CSV, TSV or JSON-lines tables), "
                            "tags words (CoNLL-2003; CoNLL-column or token JSON-lines files), ranks "
                            "passages (WikiQA; question-passage tables), answers questions with a span of "
                            "the passage (SQuAD v1.1/v2.0; SQuAD JSON or JSON lines) or chooses one of "
                            "several answers (CODAH, DREAM; JSON lines, SWAG, CODAH or DREAM files). Every"
                            " option below is also a key of a --config YAML file.")
    parser.hire_options = RunConfig
    parser.add_argument("--config", action=_ConfigFile, help="YAML file of options (e.g. configs/cola-minilm.yaml, "
                        "or a run's config.yaml); the command line overrides it, wherever --config stands")
    groups = {section: parser.add_argument_group(f"{section} options") for section in ("run", *SECTIONS)}
    for name, tp, f in option_fields(RunConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        section = name.partition(".")[0] if "." in name else "run"
        # A yes/no option may stand alone (--overwrite), as well as take its value (--overwrite true).
        flag = {"nargs": "?", "const": True} if tp is bool else {}
        groups[section].add_argument(f"--{name}", type=_option_type(tp), default=default, help=f.metadata["help"],
                                     **flag)
    return parser


def parse_options(options: Sequence[str] | Mapping[str, Any]) -> RunConfig:
    """A :class:`RunConfig` from command-line words or a mapping of options (by section, as ``config.yaml``,
    or by dotted name, ``{"train.lr": 1e-4}``), over the defaults; not yet validated (``cfg.validate()``)."""
    parser = run_parser()
    try:
        if isinstance(options, Mapping):
            namespace = parser.parse_object(_sections(options))
        else:
            namespace = parser.parse_args(_config_first(_command_words(parser, options, RunConfig)))
    except argparse.ArgumentError as err:
        raise ConfigError(one_line(str(err), _fields(RunConfig))) from None
    values = namespace.as_dict()
    files = values.pop("config", None) or []
    cfg = _build(RunConfig, values)
    if isinstance(options, Mapping):
        cfg.given = frozenset(by_name(_sections(options)))
    else:  # the options named on the command line, and those of the --config files (as read while parsing)
        words = {word[2:].partition("=")[0] for word in options if word.startswith("--")} - {"config"}
        cfg.given = frozenset(words.union(*(by_name(read) for read in files)))
    return cfg


PRINT_FLAGS = ("skip_default", "skip_unset")  # those jsonargparse's --print_config documents in --help


def take_print_config(argv: Sequence[str]) -> tuple[list[str], set[str] | None]:
    """``argv`` without ``--print_config`` (alone, ``=FLAGS`` or followed by FLAGS, comma-separated from
    ``PRINT_FLAGS``), and its flags (None where it is not asked for). The command prints the configuration only
    once it is parsed and validated: an invalid one is an error, never printed as if it would run."""
    words, flags = list(argv), None
    rest: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--print_config" or word.startswith("--print_config="):
            given = word.partition("=")[2]
            if not given and i + 1 < len(words) and set(words[i + 1].split(",")) <= set(PRINT_FLAGS):
                given, i = words[i + 1], i + 1
            names = {f.strip() for f in given.split(",") if f.strip()}
            unknown = sorted(names - set(PRINT_FLAGS))
            if unknown:
                raise ConfigError(f"--print_config: unknown flag {', '.join(map(repr, unknown))}; give "
                                  f"--print_config alone, or --print_config={','.join(PRINT_FLAGS)} (either or both)")
            flags = (flags or set()) | names
        else:
            rest.append(word)
        i += 1
    return rest, flags


def config_text(cfg: RunConfig, flags: Collection[str] = ()) -> str:
    """``cfg`` as YAML, as a run saves it (``config.yaml``: no one-shot actions), for ``--print_config``:
    ``skip_default`` leaves out the options at their default value, ``skip_unset`` those not given (where
    :func:`parse_options` recorded them)."""
    default, given = RunConfig(), cfg.given

    def kept(name: str) -> bool:
        if "skip_default" in flags and cfg.get(name) == default.get(name):
            return False
        return not ("skip_unset" in flags and given is not None and name not in given)

    values: dict[str, Any] = {}
    for name, _, _ in option_fields(RunConfig):
        if name not in ONE_SHOT and kept(name):
            section, _, key = name.rpartition(".")
            (values.setdefault(section, {}) if section else values)[key] = cfg.get(name)
    return yaml.safe_dump(values, sort_keys=False)


def by_name(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options by dotted name (``{"train.lr": x}``), from a mapping by section (``{"train": {"lr": x}}``, as
    ``config.yaml``) or by name already."""
    sections = {key for key, value in options.items() if key in SECTIONS and isinstance(value, dict)}
    return {**{key: value for key, value in options.items() if key not in sections},
            **{f"{key}.{k}": v for key in sections for k, v in options[key].items()}}


def _build(cls: type, values: dict[str, Any]) -> Any:
    """An instance of dataclass ``cls`` from parsed ``values``; a number the parser checked against its range
    comes back as the range's type (an ``int`` subclass), and is stored as the plain number it is."""
    hints = get_type_hints(cls)

    def plain(value: Any) -> Any:
        return value if isinstance(value, bool) or type(value) in (int, float) or not isinstance(
            value, int | float) else (int if isinstance(value, int) else float)(value)

    return cls(**{k: _build(hints[k], v) if dataclasses.is_dataclass(hints[k]) else plain(v)
                  for k, v in values.items()})


def _command_words(parser: ArgumentParser, argv: Sequence[str], options: type) -> list[str]:
    """``argv`` (of dataclass ``options``' parser), checked for what argparse and jsonargparse would take without a
    word. An option given twice: argparse keeps the last value and drops the first, where a ``--config`` file that
    gives a key twice is an error; a repeatable option (``--only a=1 --only b=2``, ``--encoder a --encoder b``)
    adds each word, and ``--config`` may come several times (each file over the one before, the command line over
    them all); an abbreviation counts as the option it stands for (``--train.l`` for ``--train.lr``). A value that
    starts with ``#`` for an option that may be null: jsonargparse reads it as YAML, a comment, and the option would
    silently be null (text options, read as typed, take it: ``--data.separator '#'``)."""
    actions, fields = parser._option_string_actions, _fields(options)
    seen: dict[str, str] = {}
    for i, word in enumerate(argv):
        if word == "--":  # the words after it are no options
            break
        if not word.startswith("--"):
            continue
        name, equals, value = word.partition("=")
        action = actions.get(name)
        if action is None:  # an abbreviation argparse expands where it is unique; anything else argparse refuses
            matches = {id(a): a for option, a in actions.items() if option.startswith(name)}
            action = next(iter(matches.values())) if len(matches) == 1 else None
        if action is None or isinstance(action, _Repeat | ActionConfigFile) or not action.option_strings:
            continue
        option = action.option_strings[-1]
        if action.dest in seen:
            spelt = sorted({seen[action.dest], name} - {option})
            raise ConfigError(f"{option}: given twice on the command line{f' (as {spelt[0]})' if spelt else ''}; "
                              "give it once")
        seen[action.dest] = name
        value = value if equals else argv[i + 1] if i + 1 < len(argv) else ""
        if value.lstrip().startswith("#") and not isinstance(action.type, _Form) and action.dest in fields:
            raise ConfigError(f"{option}: expected {describe_type(fields[action.dest][1])}, not {value!r}")
    return list(argv)


def _config_first(argv: list[str]) -> list[str]:
    """The ``--config FILE`` words first: jsonargparse applies the words in their order, and the command line
    overrides the file wherever ``--config`` stands."""
    first = {j for i, word in enumerate(argv) if word == "--config" for j in (i, i + 1)}
    first |= {i for i, word in enumerate(argv) if word.startswith("--config=")}
    return [argv[i] for i in sorted(first) if i < len(argv)] + [w for i, w in enumerate(argv) if i not in first]


_PARSER_KEY = re.compile(r'^Parser key "([^"]+)":\s*(.*)$', re.S)
_GIVEN = re.compile(r"(?:Got value|Given value): (.*?)\s*$", re.S)
_NOT_OF_TYPE = re.compile(r"Not of type \w+: (?:(.*?) (?:does not conform to restriction|not an integer|not a "
                          r"number).*|.*: '(.*)'\s*)$", re.S)
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(nan|inf|infinity)", re.I)


def _fields(options: type) -> dict[str, tuple[str, Any]]:
    """``{dest: (option, type)}`` of dataclass ``options``' fields, as :func:`one_line` names them."""
    return {name: (name if f.metadata.get("positional") else f"--{f.metadata.get('flag') or name}", tp)
            for name, tp, f in option_fields(options)}


def one_line(message: str, fields: Mapping[str, tuple[str, Any]]) -> str:
    """jsonargparse's (or argparse's) message as hire's one line, which starts with the option at fault.

    This stays because jsonargparse's messages are several lines of Python's words (``Parser key "train.lr":
    Not of type NonNegativeFloat: -1 does not conform to restriction v>=0``), and nothing in it suggests the
    closest name for a misspelt option. A value out of range reads ``--train.epochs: must be >= 1, not 0``, one
    not of its type ``--train.lr: expected a number, not 'abc'``; ``fields`` maps each parser key to its option
    and type (:func:`_fields`)."""
    message = message.strip()
    if found := re.match(r"the following arguments are required: (.*)$", message, re.S):
        names = [name.strip() for name in found[1].split(",")]
        return f"the following arguments are required: {', '.join(fields.get(n, (n,))[0] for n in names)}"
    if (found := _PARSER_KEY.match(message)) and found[1] in fields:
        (option, tp), detail = fields[found[1]], found[2]
        given, rng = _given_value(detail), range_of(tp)
        if given is not None and rng is not None and "does not conform to restriction" in detail:
            value = rng._type(float(given)) if rng._type is int and "." in given else rng._type(given)
            if isinstance(value, float) and not math.isfinite(value):
                return f"{option}: must be a finite number, not {value}"
            return f"{option}: must be {range_text(rng)}, not {value!r}"
        if given is not None and (detail.startswith(("Expected", "Does not validate", "Not of type"))):
            shown = given if given in ("True", "False", "None") or _NUMBER.fullmatch(given) else repr(given)
            quote = given == "False" and get_origin(tp) is Literal and "no" in get_args(tp)
            hint = ' (YAML reads a bare no as false: write it in quotes, "no")' if quote else ""
            return f"{option}: expected {describe_type(tp)}, not {shown}{hint}"
        return f"{option}: {' '.join(detail.split())}"
    if found := re.match(r"argument (--[\w.]+): (.*)$", message, re.S):
        return f"{found[1]}: {' '.join(found[2].split())}"
    options = [option for option, _ in fields.values() if option.startswith("--")]
    if found := re.match(r"unrecognized arguments: (\S+)(.*)$", message, re.I | re.S):
        return f"unrecognized arguments: {found[1]}{found[2]}{did_you_mean(found[1].partition('=')[0], options)}"
    if found := re.search(r"(?:Option|Key) '([^']+)' is not (?:accepted|expected)", message):  # older: Key
        return f"unknown option {found[1]!r}{did_you_mean(found[1], [o[2:] for o in options])}"
    return " ".join(message.split())


def _given_value(detail: str) -> str | None:
    """The value a jsonargparse message says it was given, as text (None where it does not say)."""
    if found := _GIVEN.search(detail):
        return found[1]
    if found := _NOT_OF_TYPE.search(detail):
        return found[1] if found[1] is not None else found[2]
    return None


# -- every other command: a dataclass of options, parsed the same way -----------------------------------------
REQUIRED = dataclasses.MISSING


def option(help: str, default: Any = REQUIRED, positional: bool = False, flag: str | None = None) -> Any:
    """A command's option: its ``--help`` text and default (none: the option is required); ``positional`` for
    the words that name what the command acts on (``hire report RUN ...``); ``flag`` where the option's name is
    not the field's (``--from``, a Python keyword). A list option (not positional) is repeatable:
    ``--only a=1 --only b=2``, or a YAML list in a ``--config`` file."""
    metadata = {"help": help, "positional": positional, "flag": flag}
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def split_words(values: Sequence[str] | None) -> list[str]:
    """A repeatable option's words as one list of names: each word may hold several, comma-separated (spaces
    around a name and empty names dropped)."""
    return [name.strip() for value in values or () for name in value.split(",") if name.strip()]


def choose_names(words: Sequence[str], option: str, choices: Collection[str], noun: str = "name",
                 all_word: bool = False) -> list[str]:
    """The names of ``choices`` that ``option``'s words pick (:func:`split_words`), each once, in the order
    given; with ``all_word``, the word ``all`` picks every choice. None given picks every choice. An unknown name
    is a :class:`ConfigError` naming the option and the choices."""
    picked: list[str] = []
    for name in split_words(words):
        everything = all_word and name == "all"
        if name not in choices and not everything:
            raise ConfigError(f"{option}: unknown {noun} {name!r}; choose from {'all, ' if all_word else ''}"
                              f"{', '.join(choices)}")
        picked += [c for c in (choices if everything else (name,)) if c not in picked]
    return picked or list(choices)


class _Repeat(argparse.Action):
    """A repeatable option: each time it is given adds its word to the list (after a ``--config`` file's)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])


class _Formatter(DefaultHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """jsonargparse's help, with the epilog's examples kept as written."""


@functools.cache
def command_parser(options: type, prog: str, description: str, epilog: str = "",
                   config: bool = False) -> ArgumentParser:
    """The jsonargparse parser of a command whose options are the fields of dataclass ``options``: each field's
    annotation is its type (a range, a choice as ``Literal``), checked where the value is read; with ``config``,
    ``--config FILE`` too (a YAML file of the same options). ``description`` is refilled to 100 columns (a
    docstring's line breaks and indentation fold into single spaces)."""
    parser = ArgumentParser(prog=prog, exit_on_error=False, parser_mode="hire", description=textwrap.fill(
                            " ".join(description.split()), 100), epilog=epilog or None, formatter_class=_Formatter)
    parser.hire_options = options
    if config:
        parser.add_argument("--config", action=_ConfigFile, help="YAML file of options (the keys are the options' "
                            "names); the command line overrides it, wherever --config stands")
    for name, tp, f in option_fields(options):
        text, listed = f.metadata["help"], get_origin(tp) is list
        if f.metadata.get("positional"):
            parser.add_argument(name, nargs="+" if listed else None, type=_TEXT if listed else _option_type(tp),
                                metavar=name.upper(), help=text)
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        default = None if required else f.default if f.default is not dataclasses.MISSING else f.default_factory()
        given = {"required": True} if required else {"default": default}
        flag = f"--{f.metadata.get('flag') or name}"
        if listed:
            parser.add_argument(flag, dest=name, action=_Repeat, metavar=name.upper(), help=f"{text}; repeatable",
                                **given)
            continue
        alone = {"nargs": "?", "const": True} if tp is bool else {}  # --overwrite, as well as --overwrite true
        parser.add_argument(flag, dest=name, type=_option_type(tp), help=text, **given, **alone)
    return parser


def parse_command(options: type, prog: str, argv: Sequence[str], description: str = "", epilog: str = "",
                  config: bool = False) -> Any:
    """An instance of dataclass ``options`` from a command's words; :class:`ConfigError` of one line naming the
    option at fault (an unknown one with the closest valid name)."""
    parser = command_parser(options, prog, description, epilog, config)
    try:
        values = parser.parse_args(_config_first(_command_words(parser, argv, options))).as_dict()
    except argparse.ArgumentError as err:
        raise ConfigError(one_line(str(err), _fields(options))) from None
    values.pop("config", None)
    for name, tp, f in option_fields(options):
        if get_origin(tp) is list and not f.metadata.get("positional"):
            values[name] = _words(values[name], f"--{f.metadata.get('flag') or name}")
    return _build(options, values)


def _words(value: Any, option: str) -> list[str]:
    """A repeatable option's words: a list of them (one word alone, from a ``--config`` file)."""
    words = [value] if isinstance(value, str) else value
    if not isinstance(words, list) or not all(isinstance(w, str | int | float) for w in words):
        raise ConfigError(f"{option}: expected a word or a list of words, not {value!r}")
    return [str(w) for w in words]


@dataclasses.dataclass(frozen=True)
class Command:
    """A ``hire`` command: its name, its line in ``hire --help``, and ``main``, which runs it on the words after
    its name (:func:`typed_command` parses them into the command's options; :func:`command_group` hands them to
    one of its commands). The lab's commands plug in as such objects (``hire.commands`` entry points).
    ``options`` is the dataclass of a typed command's options and ``commands`` a group's commands: what a test
    that walks every command (its output options) finds them by."""

    name: str
    help: str
    main: Callable[[list[str]], int]
    options: type | None = None
    commands: tuple[Command, ...] = ()


def typed_command(name: str, options: type, run: Callable[[Any], int], help: str, description: str | None = "",
                  epilog: str = "", config: bool = False, prog: str = "") -> Command:
    """Command ``name``, whose options are the fields of dataclass ``options``: ``run`` gets them parsed and
    checked (:func:`parse_command`); ``--help`` shows ``description`` (default: ``help``; the lab passes the
    options' docstring, ``Options.__doc__``, which says what the command does) and ``epilog``."""
    prog = prog or f"hire {name}"
    return Command(name, help, lambda words: run(parse_command(options, prog, words, description or help, epilog,
                                                                config)), options)


def folder_command(name: str, made_by: str, run: Callable[[str], int], help: str, description: str) -> Command:
    """Command ``name`` whose one option is the positional OUTPUT_DIR, a folder that ``hire {made_by}`` wrote
    (the commands that redraw a report from its ``results.json`` take nothing else): ``run`` gets the folder."""
    options = dataclasses.make_dataclass(
        "FolderCommand", [("output_dir", str, option(f"a `hire {made_by}` output folder", positional=True))],
        kw_only=True)
    return typed_command(name, options, lambda args: run(args.output_dir), help, description)


def command_group(prog: str, help: str, description: str, commands: Sequence[Command], epilog: str = "") -> Command:
    """A command made of commands (``hire experiment run|status|...``): the first word picks one; ``--help``
    lists them. ``prog`` is the group's command line (``hire experiment``), its last word the group's name."""
    return Command(prog.rpartition(" ")[2], help, lambda words: dispatch(prog, description, commands, words, epilog),
                   commands=tuple(commands))


def dispatch(prog: str, description: str, commands: Sequence[Command], words: Sequence[str], epilog: str = "") -> int:
    """Run the command that ``words[0]`` names with the words after it; ``--help`` (or ``-h``) lists them."""
    named = {command.name: command for command in commands}
    if words and words[0] in ("-h", "--help"):
        width = max(map(len, named)) + 4
        lines = [f"usage: {prog} COMMAND [OPTIONS]", "", textwrap.fill(description, 100), "", "commands:",
                 *(f"  {c.name:<{width}}{c.help}" for c in commands), "",
                 f"`{prog} COMMAND --help` says what a command does and the options it takes."]
        print("\n".join(lines) + (f"\n\n{epilog.rstrip()}" if epilog else ""))
        return 0
    if not words or words[0] not in named:
        what = f"unknown command {words[0]!r}{did_you_mean(words[0], named)}" if words else "give a command"
        raise ConfigError(f"{what}; choose from {', '.join(named)} (see {prog} --help)")
    return named[words[0]].main(list(words[1:]))


__all__ = ["Command", "by_name", "choose_names", "comma_list", "command_group", "command_parser", "config_text",
           "dispatch", "folder_command", "mapping", "one_line", "option", "parse_command", "parse_options",
           "read_config_file", "run_parser", "split_words", "take_print_config", "typed_command"]
