"""Typed run configuration: dataclasses whose field comments are the command line's ``--help``.

A run is data: its resolved configuration is written to the run folder as ``config.yaml``, and any
such file (or a named one in ``configs/``) can be passed back with ``--config``. Command-line options
(``--train.lr 3e-5``) override the file, which overrides the defaults: :mod:`hire.options` parses them
(jsonargparse), the fields' ``help`` is ``hire train --help``.

:meth:`RunConfig.validate` checks every option (type, range, the files and folders it names, the encoder,
the head and its options) before anything on disk changes, and raises :class:`ConfigError` with a message
that starts with the option at fault: ``--train.lr: must be >= 0, not -1.0``.
"""

from __future__ import annotations

import dataclasses
import difflib
import filecmp
import functools
import os
import re
import types
import typing
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

import yaml
from jsonargparse.typing import restricted_number_type

from hire.checks import (
    UNUSABLE,
    ConfigError,
    check_input_file,
    check_output_folder,
    check_saved_model,
    path_kind,
    real_path,
)
from hire.model.optiontypes import Range, value_problem
from hire.optionfields import (  # noqa: F401 (the option types, by the names the rest of hire knows them)
    MIN_MAX_LENGTH,
    AtLeast1,
    MaxLength,
    NonNegative,
    NonNegativeInt,
    Positive,
    Probability,
    Seed,
    UnitInterval,
    ranged,
)
from hire.optionfields import option_field as _f
from hire.tasktype import TaskKind, task_kind_for, task_kinds


def _either(parts: list[str]) -> str:
    """``a, b or c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _kind_fields(section: str, first: bool | None = None) -> list[tuple[str, Any, Any]]:
    """``(name, type, field)`` of every kind's options of ``section`` (``data``, ``model``, ``train``), in the order
    the kinds were registered; ``first``: only the kinds whose data options stand before ``--data.max_length``
    (True) or after it (False)."""
    out = []
    for kind in task_kinds().values():
        options = getattr(kind, f"{section}_options")
        if options is None or (first is not None and kind.options_first != first):
            continue
        hints = get_type_hints(options, include_extras=True)
        for f in dataclasses.fields(options):
            again = field(default=f.default, metadata=f.metadata) if f.default_factory is dataclasses.MISSING else \
                field(default_factory=f.default_factory, metadata=f.metadata)
            out.append((f.name, hints[f.name], again))
    return out


def _kind_options(kind: TaskKind, section: str) -> list[str]:
    options = getattr(kind, f"{section}_options")
    return [] if options is None else [f.name for f in dataclasses.fields(options)]


def _own_fields(cls: type) -> list[tuple[Any, Any]]:
    """``(field, type)`` of each field of dataclass ``cls``, with a fresh field object for the composed class."""
    hints = get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        again = field(default=f.default, metadata=f.metadata) if f.default_factory is dataclasses.MISSING else \
            field(default_factory=f.default_factory, metadata=f.metadata)
        again.name = f.name
        out.append((again, hints[f.name]))
    return out


def _data_fields() -> list[tuple[str, Any, Any]]:
    """The ``--data`` options: the task and its files, the options of the kinds whose options stand beside the files
    (a table's columns), the lengths and the custom files' layout, then every other kind's options."""
    kinds = list(task_kinds().values())
    formats = [(name, text) for kind in kinds for name, text in kind.formats.items()]
    named = [kind.named_help for kind in kinds if kind.named_help]
    folders = [kind.data_dir_help for kind in kinds if kind.data_dir_help]
    return [
        ("task", str, _f("RTE", f"{', '.join(named)}, or 'custom' for your own files (--data.train_file ...)")),
        ("data_dir", str | None, _f(None, f"the task's folder, as the official download: {_either(folders)}")),
        ("train_file", str | None, _f(None, "custom task: training file (.csv, .tsv or .jsonl with a header)")),
        ("dev_file", str | None, _f(None, "custom task: labelled evaluation file")),
        ("test_file", str | None, _f(None, "custom task: file to predict (labels optional)")),
        *_kind_fields("data", first=True),
        ("max_length", MaxLength, _f(128, "maximum tokens per example (longer ones are truncated)")),
        ("max_train_examples", AtLeast1 | None, _f(None, "use only the first N training examples (quick runs; for a "
                                                   "ranking task, N questions with all their candidates)")),
        ("max_eval_examples", AtLeast1 | None, _f(None, "use only the first N examples of each evaluation split "
                                                  "(for a ranking task, N questions)")),
        ("format", Literal[tuple(name for name, _ in formats)],  # type: ignore[valid-type]
         _f(formats[0][0], f"custom task: the files' layout: {_either([text for _, text in formats])}")),
        *_kind_fields("data", first=False),
    ]


class _DataSection:
    """The methods of :data:`DataConfig`, whose fields :func:`_data_fields` composes from the kinds of task."""

    def validate(self) -> None:
        """The task and the files it names, the kind of task's own checks (:meth:`TaskKind.check_data`); another
        kind's options, and a named task's custom-file options, are refused."""
        cfg: Any = self
        owner, custom = task_kind_for(cfg), cfg.task.lower() == "custom"
        for kind in reversed(list(task_kinds().values())):  # the kind asked first refuses first
            if kind is not owner:
                _only_for(cfg, "data", [n for n in _kind_options(kind, "data") if custom or n not in kind.custom_only],
                          kind.only_for)
        owner.check_options(cfg)
        if not custom:
            own_files = f"--data.task custom ({cfg.task} has its own files)"
            _only_for(cfg, "data", ("format",), own_files)
            owner.check_data(cfg)
            custom_only = [n for kind in task_kinds().values() for n in kind.custom_only]
            _only_for(cfg, "data", ("train_file", "dev_file", "test_file", *custom_only), own_files)
            kind = None if cfg.data_dir is None else path_kind(cfg.data_dir)
            if cfg.data_dir is not None and kind != "a folder":
                what = f"{kind}, not a folder" if kind else "no such folder"
                raise ConfigError(f"--data.data_dir {cfg.data_dir}: {what}")
            return
        if not cfg.train_file:
            raise ConfigError("--data.train_file: --data.task custom needs a training file")
        if not cfg.dev_file:
            raise ConfigError("--data.dev_file: --data.task custom needs a labelled file to pick the best model")
        for name in ("train_file", "dev_file", "test_file"):
            if getattr(cfg, name) is not None:
                check_input_file(getattr(cfg, name), f"--data.{name}")
        owner.check_data(cfg)
        if _same_content(cfg.train_file, cfg.dev_file) and (cfg.train_file, cfg.dev_file) not in _WARNED:
            _WARNED.add((cfg.train_file, cfg.dev_file))  # once, though a run validates its options twice
            warnings.warn(f"--data.dev_file {cfg.dev_file} holds the same rows as --data.train_file "
                          f"{cfg.train_file}: the best model is picked, and scored, on its own training data",
                          RuntimeWarning, stacklevel=2)


DataConfig: Any = dataclasses.make_dataclass(
    "DataConfig", _data_fields(), bases=(_DataSection,), namespace={"__module__": __name__}
)  # --data: the task, its files, and each kind of task's own options (hire.tasks)


def _only_for(section: Any, name: str, options: Iterable[str], where: str) -> None:
    """``--NAME.OPTION: only for WHERE`` for the first of ``options`` that ``section`` (the options of section
    ``name``) gives another value than the default."""
    default = type(section)()
    for option in options:
        if getattr(section, option) != getattr(default, option):
            raise ConfigError(f"--{name}.{option}: only for {where}")


_WARNED: set[tuple[str, str]] = set()  # (train file, dev file) pairs already warned about


@dataclass
class _ModelBase:
    encoder: str = _f("all-MiniLM-L6-v2", "encoder: Hugging Face hub name or local path")
    head: str = _f("hire", "head by name; `hire heads` lists them")
    head_options: dict[str, Any] = _f({}, "head options as JSON or key=value,key=value (e.g. fusion_layers=1)")
    init_from: str | None = _f(None, "start from an earlier fine-tuned model folder (e.g. MNLI before RTE); "
                               "a new output layer is made when the label set differs")
    classifier_dropout: Probability = _f(0.1, "dropout before each product of the output layer")
    freeze_encoder: bool = _f(False, "feature-based use: train only the head and output layer on the encoder's "
                              "fixed hidden states (no gradient into the encoder, no dropout in it)")


class _ModelSection:
    """The methods of :data:`ModelArgs`: its fields are :class:`_ModelBase`'s, then each kind's model options."""

    def validate(self, given: Iterable[str] | None = None) -> None:
        """The encoder (or the model to start from) exists; the head takes the options given. With
        ``init_from``, the options the loaded model fixes take its values (:meth:`take_from_loaded_model`)."""

        if self.init_from is not None:
            check_saved_model(self.init_from, "--model.init_from")
            self.take_from_loaded_model(given)
        else:
            check_encoder(self.encoder, "--model.encoder")
            check_head(self.head, self.head_options)

    def take_from_loaded_model(self, given: Iterable[str] | None = None) -> None:
        """Starting from a saved model (``init_from``), its encoder, head, head options and classifier dropout
        are what trains: the model fixes them. An option left out means "as the loaded model" and takes the
        model's value, so that the run's ``config.yaml`` records what really ran; an option given with another
        value than the model's would be silently ignored, and is an error naming both values.

        ``given``: the names of the options that were given (``encoder``, ``head`` ...: the command line and its
        ``--config`` file, :func:`hire.options.parse_options` records them); where it is None (a configuration
        built in Python), an option counts as given when its value is not the default."""
        from hire.model.heads import head_option_defaults
        from hire.model.heads import head_options as options_of
        from hire.saved_model import saved_model_config

        assert self.init_from is not None
        saved, default = saved_model_config(self.init_from, "--model.init_from"), ModelArgs()
        names = set(given) if given is not None else {
            f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(default, f.name)}
        where = f"--model.init_from {self.init_from}"
        head = str(saved.get("head") or default.head)
        if "head" in names and self.head != head:
            raise ConfigError(f"--model.head {self.head}: {where} has head {head!r}, which it keeps; leave "
                              f"--model.head out, or train a new {self.head} head from an encoder (--model.encoder "
                              "without --model.init_from)")
        check_head(head, self.head_options)
        theirs = {k: v for k, v in dict(saved.get("head_options") or {}).items() if k in options_of(head)}
        defaults = head_option_defaults(head)
        for key, value in self.head_options.items() if "head_options" in names else ():
            if value != theirs.get(key, defaults.get(key)):
                raise ConfigError(f"--model.head_options: {key}={value}, but {where} has {key}="
                                  f"{theirs.get(key, defaults.get(key))} (its {head} head is fixed); leave "
                                  f"--model.head_options out, or give its values")
        encoder = str(saved.get("encoder") or "")
        if "encoder" in names and self.encoder != encoder and (
                not encoder or real_path(self.encoder) != real_path(encoder)):
            raise ConfigError(f"--model.encoder {self.encoder}: {where} was fine-tuned from encoder "
                              f"{encoder or '(not recorded)'}, which it keeps; leave --model.encoder out")
        dropout = saved.get("classifier_dropout", default.classifier_dropout)
        if "classifier_dropout" in names and self.classifier_dropout != dropout:
            raise ConfigError(f"--model.classifier_dropout {self.classifier_dropout}: {where} has classifier "
                              f"dropout {dropout}, which it keeps; leave --model.classifier_dropout out")
        self.head, self.head_options, self.classifier_dropout = head, theirs, dropout
        self.encoder = encoder or self.encoder


ModelArgs: Any = dataclasses.make_dataclass(
    "ModelArgs", [(f.name, t, f) for f, t in _own_fields(_ModelBase)] + _kind_fields("model"),
    bases=(_ModelSection,), namespace={"__module__": __name__})  # --model: the encoder, the head, the kinds' own


@dataclass
class _TrainBase:
    epochs: AtLeast1 = _f(10, "maximum training epochs (paper: 3-27, with early stopping)")
    batch_size: AtLeast1 = _f(32, "examples per optimizer step, the global batch: split evenly over the processes "
                         "when several train together (paper: 16, 32 or 48)")
    lr: NonNegative = _f(2e-5, "peak learning rate (paper: 1e-5 or 2e-5; small encoders want more)")
    head_lr: Positive | None = _f(None, "learning rate of the head and output layer (default: --train.lr)")
    weight_decay: NonNegative = _f(0.1, "decoupled weight decay (not on biases and LayerNorm weights)")
    adam_beta1: Probability = _f(0.9, "Adam beta1")
    adam_beta2: Probability = _f(0.98, "Adam beta2")
    adam_eps: Positive = _f(1e-6, "Adam epsilon")
    warmup_ratio: UnitInterval = _f(0.06, "linear warm-up over this fraction of the steps, then linear decay")
    max_grad_norm: Positive = _f(1.0, "gradient-norm clipping")
    eval_every: AtLeast1 | None = _f(None, "evaluate every N optimizer steps (default: at the end of each "
                                     "epoch)")
    patience: AtLeast1 | None = _f(None, "early stopping: stop after N evaluations without improvement")
    checkpoint_every: AtLeast1 = _f(100, "save a resumable checkpoint every N steps (and at each evaluation)")
    seed: Seed = _f(42, "random seed (data order, dropout, new weights)")
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = _f(
        "auto", "auto: bf16 where the hardware has fast bf16 (this CPU, recent GPUs), else fp32")
    group_by_length: bool = _f(True, "batch examples of similar length together (less padding)")
    max_steps: AtLeast1 | None = _f(None, "stop after N optimizer steps (overrides epochs)")


TrainConfig: Any = dataclasses.make_dataclass(
    "TrainConfig", [(f.name, t, f) for f, t in _own_fields(_TrainBase)] + _kind_fields("train"),
    namespace={"__module__": __name__})  # --train: the recipe, and each kind's own training options


@dataclass
class RunConfig:
    output_dir: str = _f("runs/run", "run folder: configuration, metrics, best model, predictions, logs")
    overwrite: bool = _f(False, "replace a finished run, or one of another configuration, already in --output_dir "
                         "(on the command line only: --overwrite, or --overwrite true)")
    predict_test: bool = _f(True, "after training, also predict the task's unlabelled test splits and write its GLUE "
                            "submission files (later: `hire evaluate --model RUN/best --task T --split test`)")
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelArgs = field(default_factory=ModelArgs)
    train: TrainConfig = field(default_factory=TrainConfig)

    # The dotted names of the options that were given (not left at their defaults), where known: set by
    # hire.options.parse_options; None for a configuration built in Python. Not an option, not saved.
    given: frozenset[str] | None = field(default=None, repr=False, compare=False, metadata={"internal": True})

    def to_dict(self) -> dict[str, Any]:
        """The configuration as it is saved (``config.yaml``, a model card's recipe, ``--print_config``): every
        option but the one-shot actions (``ONE_SHOT``), which act on this command alone and must never come
        back from a file (a saved ``overwrite: true`` would let a later ``--config`` replace a finished run)."""
        values = dataclasses.asdict(self)
        for name in (*ONE_SHOT, "given"):
            values.pop(name, None)
        return values

    def save(self, path: Path) -> None:
        path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def from_dict(cls, values: Any) -> RunConfig | None:
        """A configuration from what :meth:`to_dict` wrote (a run's ``config.yaml``), options left out at their
        defaults; None where ``values`` is not one: not a mapping, an unknown option, a value of the wrong type
        or out of range (:func:`value_problem`). Hand-written option files go through ``hire.options``."""
        sections = {"data": DataConfig, "model": ModelArgs, "train": TrainConfig}
        if not isinstance(values, dict) or not all(isinstance(values.get(s, {}), dict | type(None)) for s in sections):
            return None
        try:
            cfg = cls(**{k: v for k, v in values.items() if k not in sections},
                      **{s: kind(**(values.get(s) or {})) for s, kind in sections.items()})
        except TypeError:  # an option this version does not have
            return None
        if any(value_problem(cfg.get(name), tp) is not None for name, tp, _ in option_fields(RunConfig)):
            return None
        return cfg

    def validate(self) -> None:
        """Check every option before anything on disk changes; :class:`ConfigError` names the first bad one.

        Types and ranges (each field's annotation, :func:`value_problem`) first, then the task and
        its files, the output folder, the encoder and the head (which imports the heads, and with them torch).
        """

        for name, tp, _ in option_fields(RunConfig):
            problem = value_problem(self.get(name), tp)
            if problem is not None:
                raise ConfigError(f"--{name}: {problem}")
        self.data.validate()
        owner = task_kind_for(self.data)
        kinds = list(task_kinds().values())
        for kind in reversed(kinds):  # another kind's training options
            if kind is not owner:
                _only_for(self.train, "train", _kind_options(kind, "train"), kind.only_for)
        for kind in kinds:  # each kind's checks across sections (a ranker's options, resolved)
            kind.check_run(self, kind is owner)
        for kind in reversed(kinds):  # another kind's model options
            if kind is not owner:
                _only_for(self.model, "model", _kind_options(kind, "model"), kind.only_for)
        check_output_folder(self.output_dir, "--output_dir")
        out = Path(real_path(self.output_dir))
        for option, value in (("--model.init_from", self.model.init_from), ("--model.encoder", self.model.encoder)):
            path = Path(value).expanduser() if value else None
            if path is not None and path.exists() and Path(real_path(path)).is_relative_to(out):
                raise ConfigError(f"{option} {value}: inside --output_dir {self.output_dir}, whose contents the "
                                  "run replaces; choose another --output_dir")
        given = None if self.given is None else [n.partition(".")[2] for n in self.given if n.startswith("model.")]
        self.model.validate(given)

    def is_given(self, name: str) -> bool:
        """Whether option ``name`` (dotted) was given: as recorded (:attr:`given`), or, for a configuration built in
        Python, whether its value differs from the default."""
        return name in self.given if self.given is not None else self.get(name) != RunConfig().get(name)

    def get(self, name: str) -> Any:
        """An option's value by its dotted name (``train.lr``)."""
        value: Any = self
        for part in name.split("."):
            value = getattr(value, part)
        return value


ONE_SHOT = ("overwrite",)  # options that act on one command and are never saved (RunConfig.to_dict)


def _same_content(a: str | None, b: str | None) -> bool:
    """Whether files ``a`` and ``b`` are one file, or hold the same bytes."""
    if not a or not b:
        return False
    try:
        return os.path.samefile(a, b) or filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def option_fields(cls: type, prefix: str = "") -> list[tuple[str, Any, dataclasses.Field]]:
    """``(dotted name, type, field)`` of every option of dataclass ``cls``, sections flattened; the type keeps
    its range (``Annotated[int, AtLeast1]``)."""
    hints, out = get_type_hints(cls, include_extras=True), []
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            out += option_fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, hints[f.name], f))
    return out


def parser_type(tp: Any) -> Any:
    """``tp`` as jsonargparse checks it: ``Annotated[int, Range]`` is the restricted number type of the range's name
    and bounds (in a union too), so that the parser refuses a value out of range where it reads it."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        found = next((a for a in args[1:] if hasattr(a, "_restrictions")), None)
        return args[0] if found is None else _restricted(found)
    if isinstance(tp, Range):
        return _restricted(tp)
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(parser_type(a) for a in args)]  # noqa: UP007 (built from a tuple)
    return tp


@functools.cache
def _restricted(rng: Any) -> Any:
    """jsonargparse's restricted number type of a :class:`Range` (the same type for the same bounds), or ``rng``
    itself where it is one already."""
    if not isinstance(rng, Range):
        return rng
    return restricted_number_type(rng.name, rng._type, list(rng.bounds))


# Encoders whose position ids start after the padding id (RoBERTa's offset of pad + 1).
_POSITIONS_AFTER_PAD = {"roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text", "xmod",
                        "roberta-prelayernorm", "ibert", "mpnet"}


_HUB_NAME = re.compile(r"\w[\w.-]*(/\w[\w.-]*)?")


def check_encoder(name: str, option: str) -> None:
    """A local model folder, a short name (the default encoder's, or one installed by ``hire install-encoder``),
    or a hub name (already cached when offline)."""
    path = Path(name).expanduser()
    kind = path_kind(path)
    if kind is not None and kind.startswith(UNUSABLE):
        raise ConfigError(f"{option} {name}: {kind}")
    if kind is not None:
        if not (path / "config.json").is_file():
            raise ConfigError(f"{option} {name}: not a Hugging Face model folder (no config.json)")
        return
    if not _HUB_NAME.fullmatch(name) or ".." in name or "--" in name:
        raise ConfigError(f"{option} {name}: no such folder, and not a Hugging Face hub name")
    from huggingface_hub import constants, try_to_load_from_cache

    from hire.installed_encoders import installed_encoder
    from hire.model.encoder import DEFAULT_ENCODER

    try:
        installed = installed_encoder(name)  # all-mpnet-base-v2 not installed: the command that installs it
    except ValueError as err:
        raise ConfigError(f"{option}: {err}") from None
    if (installed is not None or name in (DEFAULT_ENCODER, f"sentence-transformers/{DEFAULT_ENCODER}")
            or not constants.HF_HUB_OFFLINE):
        return  # resolved by hire.model.encoder.resolve_encoder, or downloaded
    if not isinstance(try_to_load_from_cache(name, "config.json"), str):
        raise ConfigError(f"{option} {name}: no such folder, and not a known name or a model in the Hugging "
                          "Face cache (HF_HUB_OFFLINE is set, so nothing is downloaded)")


def check_head(head: str, options: dict[str, Any]) -> None:
    """The head exists, and takes each of ``options`` with a value of its type and range (as the head declares
    them: :func:`hire.model.heads.check_head_options`)."""
    from hire.model.heads import check_head_options, head_options

    try:
        head_options(head)
    except ValueError as err:
        raise ConfigError(f"--model.head: {err}") from None
    try:
        check_head_options(head, options)
    except ValueError as err:
        raise ConfigError(f"--model.head_options: {str(err).removeprefix(f'head {head!r}: option ')}") from None


def encoder_max_length(encoder_config: Any) -> int | None:
    """The most tokens an encoder takes (from a ``transformers`` config or its dict); None if unbounded."""
    values = encoder_config if isinstance(encoder_config, dict) else encoder_config.to_dict()
    model_type = values.get("model_type", "")
    if model_type.startswith("deberta") and not values.get("position_biased_input", True):
        return None  # relative positions only
    positions = values.get("max_position_embeddings")
    if not isinstance(positions, int):
        return None
    if model_type in _POSITIONS_AFTER_PAD:
        pad = values.get("pad_token_id")
        positions -= (1 if pad is None else pad) + 1
    return positions


def check_max_length(max_length: int, encoder_config: Any, option: str = "--data.max_length") -> None:
    """``max_length`` fits the encoder's position embeddings (call once the encoder's config is known)."""
    limit = encoder_max_length(encoder_config)
    if limit is not None and max_length > limit:
        raise ConfigError(f"{option}: must be <= {limit}, the most tokens the encoder takes, not {max_length}")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'train.lr'?)"`` for the closest of ``choices``, or ``""``."""
    choices = list(choices)
    close = [c for c in choices if "." in c and c.rpartition(".")[2] == name.rpartition(".")[2].lstrip("-")]
    close = close or difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
