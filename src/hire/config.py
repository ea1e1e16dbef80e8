"""Typed run configuration: dataclasses whose field comments are the command line's ``--help``.

A run is data: its resolved configuration is written to the run folder as ``config.yaml``, and any
such file (or a named one in ``configs/``) can be passed back with ``--config``. Command-line options
(``--train.lr 3e-5``) override the file, which overrides the defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class DataConfig:
    task: str = _f("RTE", "GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI), or 'custom' "
                   "for your own files (--data.train_file ...)")
    data_dir: str | None = _f(None, "GLUE folder (one sub-folder per task, as the official download); "
                              "default: $HIRE_GLUE_DIR, else ../shared/data/glue beside the repository")
    train_file: str | None = _f(None, "custom task: training file (.csv, .tsv or .jsonl with a header)")
    dev_file: str | None = _f(None, "custom task: labelled evaluation file")
    test_file: str | None = _f(None, "custom task: file to predict (labels optional)")
    text_columns: list[str] = _f(["sentence"], "custom task: one or two text column names, comma-separated")
    label_column: str = _f("label", "custom task: the label column")
    regression: bool = _f(False, "custom task: the label is a real number (else: classes)")
    max_length: int = _f(128, "maximum tokens per example (longer ones are truncated)")
    max_train_examples: int | None = _f(None, "use only the first N training examples (quick runs)")
    max_eval_examples: int | None = _f(None, "use only the first N examples of each evaluation split")


@dataclass
class ModelArgs:
    encoder: str = _f("all-MiniLM-L6-v2", "encoder: Hugging Face hub name or local path")
    head: str = _f("hire", "head by name; `hire heads` lists them")
    head_options: dict[str, Any] = _f({}, "head options as JSON or key=value,key=value (e.g. fusion_layers=1)")
    init_from: str | None = _f(None, "start from an earlier fine-tuned model folder (e.g. MNLI before RTE); "
                               "a new output layer is made when the label set differs")
    classifier_dropout: float = _f(0.1, "dropout before each product of the output layer")


@dataclass
class TrainConfig:
    epochs: int = _f(10, "maximum training epochs (paper: 3-27, with early stopping)")
    batch_size: int = _f(32, "examples per batch, per device (paper: 16, 32 or 48)")
    lr: float = _f(2e-5, "peak learning rate (paper: 1e-5 or 2e-5; small encoders want more)")
    head_lr: float | None = _f(None, "learning rate of the head and output layer (default: --train.lr)")
    weight_decay: float = _f(0.1, "decoupled weight decay (not on biases and LayerNorm weights)")
    adam_beta1: float = _f(0.9, "Adam beta1")
    adam_beta2: float = _f(0.98, "Adam beta2")
    adam_eps: float = _f(1e-6, "Adam epsilon")
    warmup_ratio: float = _f(0.06, "linear warm-up over this fraction of the steps, then linear decay")
    max_grad_norm: float = _f(1.0, "gradient-norm clipping")
    eval_every: int | None = _f(None, "evaluate every N optimizer steps (default: at the end of each epoch)")
    patience: int | None = _f(None, "early stopping: stop after N evaluations without improvement")
    checkpoint_every: int = _f(100, "save a resumable checkpoint every N steps (and at each evaluation)")
    seed: int = _f(42, "random seed (data order, dropout, new weights)")
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = _f(
        "auto", "auto: bf16 where the hardware has fast bf16 (this CPU, recent GPUs), else fp32")
    group_by_length: bool = _f(True, "batch examples of similar length together (less padding)")
    max_steps: int | None = _f(None, "stop after N optimizer steps (overrides epochs)")


@dataclass
class RunConfig:
    output_dir: str = _f("runs/run", "run folder: configuration, metrics, best model, predictions, logs")
    overwrite: bool = _f(False, "replace a finished or foreign run already in --output_dir")
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelArgs = field(default_factory=ModelArgs)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: Path) -> None:
        path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


class ConfigError(ValueError):
    """A bad option or configuration file; the message names it."""


def from_dict(cls: type, values: dict[str, Any], where: str) -> Any:
    """Build dataclass ``cls`` from nested ``values``; unknown keys are errors naming ``where``."""
    names = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in (values or {}).items():
        if key not in names:
            raise ConfigError(f"{where}: unknown option {key!r}; valid: {', '.join(names)}")
        f = names[key]
        if dataclasses.is_dataclass(f.default_factory if f.default_factory is not dataclasses.MISSING
                                    else None):
            value = from_dict(f.default_factory, value, f"{where}.{key}")  # type: ignore[arg-type]
        kwargs[key] = value
    return cls(**kwargs)


def load_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file")
    try:
        values = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"--config {path}: not valid YAML ({err})") from err
    if not isinstance(values, dict):
        raise ConfigError(f"--config {path}: expected a mapping of options at the top level")
    return values
