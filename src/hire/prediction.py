"""What ``hire evaluate`` and ``hire predict`` share, whatever the kind of task: loading a checked saved model in the
precision its run used, and the checks of where predictions go. Each kind of task reads a user's input and writes
its predictions in its own package (``hire.tasks.<kind>.predict``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hire.checks import check_output_file, check_own_file
from hire.config import ConfigError, check_max_length
from hire.runs import check_not_run_file, is_run_folder
from hire.saved_model import check_weights


def texts(columns: list[str] | tuple[str, ...]) -> str:
    return f"sentence pairs ({', '.join(columns)})" if len(columns) == 2 else f"single sentences ({columns[0]})"


def load_for_prediction(model_dir: str, precision: str | None, words: bool = False) -> tuple[Any, Any, Any]:
    """The model (prepared), its tokenizer and the accelerator; the tokenizer first, as it is the cheaper.
    ``precision`` None: :func:`model_precision`."""
    from accelerate import Accelerator

    from hire.hardware import resolve_mixed_precision
    from hire.model import load_tokenizer

    tokenizer = load_tokenizer(model_dir, words)
    accelerator = Accelerator(mixed_precision=resolve_mixed_precision(model_precision(model_dir, precision)))
    return accelerator.prepare(load_checked_model(model_dir)), tokenizer, accelerator


def recorded_precision(model_dir: str | Path) -> str | None:
    """The precision that the run of ``model_dir`` trained and evaluated in, when the folder is a run's ``best/``
    (its ``metrics.json``, or ``state.json`` while it trains); None for any other folder or where the run
    records none."""
    run = run_of_best(model_dir)
    if run is None:
        return None
    for name in ("metrics.json", "state.json"):
        try:
            value = json.loads((run / name).read_text(encoding="utf-8")).get("mixed_precision")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, str) and value in ("no", "bf16", "fp16"):
            return value
    return None


def model_precision(model_dir: str | Path, choice: str | None) -> str:
    """The precision ``hire evaluate`` and ``hire predict`` run in: ``--mixed_precision`` where given; by default
    the one the model's run trained and scored its dev splits in (:func:`recorded_precision`), and fp32 for a
    model that is not a run's ``best/``. A run's bf16 where this machine has no fast bf16 (a GPU without it, a CPU
    without bf16 units), or its fp16 without a CUDA GPU, falls back to fp32 with a warning: emulated, it would be
    many times slower."""
    import warnings

    import torch

    from hire.hardware import cpu_has_fast_bf16

    if choice is not None:
        return choice
    recorded = recorded_precision(model_dir)
    if recorded is None:
        return "no"
    cuda = torch.cuda.is_available()
    if recorded == "fp16":
        fast = cuda
    elif recorded == "bf16":
        fast = torch.cuda.is_bf16_supported() if cuda else cpu_has_fast_bf16()
    else:
        fast = True
    if not fast:
        warnings.warn(f"--model {model_dir}: its run trained in {recorded}, which this machine does not run fast "
                      f"({'no CUDA GPU' if recorded == 'fp16' else 'no bf16 units known here'}): predicting in "
                      "fp32, so scores can differ from the recorded ones in the last digits (--mixed_precision "
                      "chooses)", RuntimeWarning, stacklevel=2)
        return "no"
    return recorded


def load_checked_model(model_dir: str) -> Any:
    """``HireModel.from_pretrained``, once :func:`check_model_folder` has passed and the weights are known to fit
    the configuration: every parameter of the model it describes is in the weights, in its shape (checked on a
    model built on torch's meta device, which holds no data). transformers would start a missing weight at random
    with a log line, which makes every prediction silently wrong."""
    import torch
    from safetensors import SafetensorError

    from hire.model import BiEncoder, HireModel, is_bi_encoder, load_config
    from hire.model.encoder import Encoder

    shapes = check_weights(model_dir)
    bi = is_bi_encoder(model_dir)
    if shapes is not None:
        with torch.device("meta"):
            if bi:  # the encoder as transformers saves it: its parameters without hire's "encoder.model." prefix
                config = json.loads((Path(model_dir).expanduser() / "config.json").read_text(encoding="utf-8"))
                empty = Encoder.from_config(config).model
            else:
                empty = HireModel(load_config(Path(model_dir).expanduser()))
        missing = [name for name, _ in empty.named_parameters() if name not in shapes]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise ConfigError(f"--model {model_dir}: the weights lack {missing[0]}{more}, which the model of its "
                              "config.json has; they are not this model's")
        for name, parameter in empty.named_parameters():
            if list(parameter.shape) != shapes[name]:
                raise ConfigError(f"--model {model_dir}: the weights hold {name} in the shape {shapes[name]}, the "
                                  f"model of its config.json needs {list(parameter.shape)}; they are not this "
                                  "model's")
    try:
        return BiEncoder.from_pretrained(model_dir) if bi else HireModel.from_pretrained(model_dir)
    except SafetensorError as err:
        raise ConfigError(f"--model {model_dir}: the weights do not load ({' '.join(str(err).split())[:300]})") \
            from err


def output_option(option: str, given: Any) -> str:
    """How a message names an output path: by its option, or as the option's default where none was given."""
    return option if given else f"{option} (the default)"


def default_eval_dir(model_dir: str | Path, task: str) -> Path:
    """Where ``hire evaluate`` writes by default: beside the model in its run (``RUN/eval-TASK``) when the model
    is a run's ``best/``, whose files only ``hire train`` writes; else inside the model folder (``MODEL/eval-TASK``)."""
    model = Path(model_dir).expanduser()
    run = run_of_best(model)
    if run is not None:
        return model.parent / f"eval-{task}" if model.name == "best" else run / f"eval-{task}"
    return model / f"eval-{task}"


def run_of_best(model_dir: str | Path) -> Path | None:
    """The run folder whose ``best/`` ``model_dir`` is (links followed); None for any other model folder."""
    model = Path(model_dir).expanduser().resolve()
    return model.parent if model.name == "best" and is_run_folder(model.parent) else None


def predictions_file(args: Any, config: dict[str, Any]) -> Path:
    """Where ``hire predict`` writes (``args``: :class:`hire.commands.PredictOptions`), checked (never the input, a
    file of the model or of a run), and its ``--max_length`` checked against the encoder."""
    option = output_option("--output", args.output)
    output = check_output_file(args.output or Path(args.input).with_suffix(".predictions.jsonl"), option,
                               {"--input": args.input})
    check_not_run_file(output, option)
    check_not_in_model(output, option, args.model)
    check_own_file(output, option, "predict", predictions_line, "choose another path with --output")
    check_max_length(args.max_length, config.get("encoder_config", {}), "--max_length")
    return output


def predictions_line(line: str) -> bool:
    """Whether ``line`` (a file's first) is one of ``hire predict``'s JSON lines: a sentence's or a tagged
    sentence's (``guid`` first), a ranked candidate's (``qid``, ``pid``, ``rank``, ``score``), or a question's (``id``
    first, with its ``answer`` or ``prediction``)."""
    try:
        row = json.loads(line)
    except ValueError:
        return False
    if not isinstance(row, dict):
        return False
    first = next(iter(row), None)
    return first == "guid" or {"qid", "pid", "rank", "score"} <= row.keys() or (
        first == "id" and ("answer" in row or "prediction" in row))


def precision_name(acc: Any) -> str:
    """How ``hire predict`` names the precision it ran in: accelerate's "no" is fp32."""
    return "fp32" if acc.mixed_precision == "no" else f"{acc.mixed_precision} precision"


def check_not_in_model(path: Path, option: str, model_dir: str) -> None:
    """Refuse an output file that is one of the model's own (its config.json, weights, tokenizer ...)."""
    model = Path(model_dir).expanduser().resolve()
    target = Path(path).expanduser().resolve()
    if target.exists() and target.is_relative_to(model):
        raise ConfigError(f"{option} {path}: a file of --model {model_dir}, which it would replace; choose another "
                          "path")
