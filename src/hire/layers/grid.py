"""``hire reconstruct`` end to end: the sentences, each encoder's per-layer counts, ``results.json``, the report."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hire.data.examples import Example
from hire.lab.sources import resolve_source
from hire.layers.deepen import read_deepen_record
from hire.layers.plan import describe_plan, repeats
from hire.layers.reconstruct import load_for_reconstruction, reconstruction_counts
from hire.layers.tables import FORMAT, RESULTS, write_reconstruct_report
from hire.runs import mark_output_folder


@dataclass
class ReconstructOptions:
    encoders: list[str]
    output_dir: str
    labels: list[str] = field(default_factory=list)
    task: str | None = "CoLA"  # a GLUE task, or None with ``input``
    split: str | None = None  # default: the task's first dev split
    data_dir: str | None = None
    input: str | None = None
    text_columns: list[str] = field(default_factory=lambda: ["sentence"])
    max_examples: int | None = 500
    max_length: int = 128
    batch_size: int = 32
    decoder: str = "auto"
    x_axis: str = "relative"
    device: str = "cpu"


def load_examples(opts: ReconstructOptions) -> tuple[list[Example], dict[str, Any]]:
    """The first ``max_examples`` sentences (or pairs) of the GLUE split or the ``--input`` file."""
    from hire.data.files import read_table
    from hire.data.glue import default_glue_dir, get_task, read_glue_split

    if opts.input is not None:
        examples = read_table(opts.input, opts.text_columns, None, require_label=False)
        data = {"name": Path(opts.input).name, "file": str(opts.input), "text_columns": opts.text_columns}
    else:
        spec = get_task(opts.task or "CoLA")
        split = opts.split or spec.dev_splits[0]
        examples = read_glue_split(spec, split, opts.data_dir, option="--data_dir")
        root = Path(opts.data_dir).expanduser() if opts.data_dir else default_glue_dir()
        data = {"name": f"{spec.name} {split}", "task": spec.name, "split": split,
                "file": str(root / spec.folder / spec.splits[split])}
    examples = examples[: opts.max_examples] if opts.max_examples else examples
    pair = any(e.text_b is not None for e in examples)
    return examples, {**data, "examples": len(examples), "pair": pair, "max_length": opts.max_length}


def default_label(spec: str) -> str:
    """A local folder's name, else the name as given (a hub name, all-MiniLM-L6-v2)."""
    path = Path(spec).expanduser()
    return path.resolve().name if path.exists() else spec


def _deepen_info(folder: Path | None) -> dict[str, Any] | None:
    record = read_deepen_record(folder) if folder is not None else None
    if record is None:
        return None
    plan = record["original"]["plan"]
    return {"source": record["original"]["source"], "plan": plan, "duplicate": repeats(plan),
            "description": describe_plan(plan, record["source_layers"]) if plan == record["plan"]
            else f"{record['description']} (from a deepened {record['source']})"}


def encoder_record(spec: str, label: str, examples: list[Example], opts: ReconstructOptions) -> dict[str, Any]:
    """One encoder's counts and accuracies per hidden state, and which decoder gave them."""
    source = resolve_source(spec)
    model = load_for_reconstruction(source, opts.decoder)
    start = time.perf_counter()
    counts = reconstruction_counts(model, examples, opts.max_length, opts.batch_size, opts.device, desc=label)
    if counts["tokens"] == 0:
        raise ValueError(f"--encoder {spec}: its tokenizer turns the {len(examples)} examples into special tokens "
                         "only ([CLS], [SEP], [UNK] ...); there is no input token to reconstruct")
    return {"label": label, "encoder": spec, "path": source.path, "kind": source.kind,
            "model_type": model.model_type, "num_layers": model.encoder.config.num_hidden_layers,
            "decoder": model.decoder.kind, "decoder_note": model.decoder.note, **counts,
            "deepen": _deepen_info(source.folder), "seconds": round(time.perf_counter() - start, 2)}


def run_reconstruction(opts: ReconstructOptions) -> dict[str, Any]:
    """Every encoder on the same sentences; writes ``results.json`` and the report; returns the results."""
    examples, data = load_examples(opts)
    labels = opts.labels or [default_label(s) for s in opts.encoders]
    records = [encoder_record(spec, label, examples, opts) for spec, label in zip(opts.encoders, labels, strict=True)]
    results = {"format": FORMAT, "data": data, "x_axis": opts.x_axis, "decoder_asked": opts.decoder,
               "encoders": records,
               "machine": {"device": opts.device, "torch": torch.__version__, "python": platform.python_version(),
                           "torch_threads": torch.get_num_threads()}}
    out = mark_output_folder(opts.output_dir, "reconstruct")
    (out / RESULTS).write_text(json.dumps(results, indent=2) + "\n")
    write_reconstruct_report(results, out)
    return results
