"""``hire probe`` end to end: features (cached), the probes of every feature set (fitted together, on
``--device``), ``results.json``, the report.

Results are data: everything the tables and figures show is in ``results.json``, written (atomically)
after every finished (task, encoder), so an interrupted grid resumes where it stopped when the same
command is run again, and ``hire probe-report`` redraws every table and figure from that file alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
import torch
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from hire.lab.features import FeatureSettings, split_features
from hire.lab.results import RESULTS, ResultsFormat, device_name, save_results
from hire.lab.sources import EncoderSource, fingerprint, load_encoders, resolve_source
from hire.probing.classifiers import ProbeSettings, cv_folds, feature_sets
from hire.probing.fit import probe_feature_sets
from hire.probing.tasks import CustomFiles, ProbeTask, load_probe_task, subsample
from hire.runs import mark_output_folder

GROWS = ("encoders", "labels", "tasks")  # what a later command may add to (the rest must be the same)
FORMAT = "hire-probe/1"


@dataclass
class ProbeOptions:
    """What ``hire probe`` was asked; saved in ``results.json`` (a resumed run must ask the same)."""

    encoders: list[str]
    tasks: list[str]
    output_dir: str
    labels: list[str] = field(default_factory=list)
    cache_dir: str = ""
    data_dir: str | None = None
    senteval_dir: str | None = None
    custom: CustomFiles = field(default_factory=CustomFiles)
    max_length: int = 128
    batch_size: int = 64
    mixed_precision: str = "no"  # resolved
    cache_dtype: str = "float16"
    device: str = "cpu"
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    fit_threads: int = 1  # CPU threads while fitting: one is fastest for these sizes on a shared machine
    overwrite: bool = False
    treebank: str | None = None  # the UD treebank folder the ud-* tasks are built from (None: the default one)

    def comparable(self) -> dict[str, Any]:
        """The options that change a result (not where files go, batch size or device)."""
        values = asdict(self)
        for key in ("output_dir", "cache_dir", "batch_size", "device", "fit_threads", "overwrite"):
            values.pop(key)
        values["probe"] = {k: list(v) if isinstance(v, tuple) else v for k, v in values["probe"].items()}
        return values


def probe_machine(options: ProbeOptions) -> dict[str, Any]:
    """The machine a probe ran on, as ``results.json`` records it: the CPU's name and bf16 units (as training
    runs record them), threads, the device (:func:`hire.lab.results.device_name`), the precisions and the
    library versions."""
    from hire.hardware import machine

    host = machine()
    return {"platform": platform.platform(), "processor": host["cpu"], "fast_bf16_cpu": host["fast_bf16_cpu"],
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "device": device_name(options.device),
            "fit_threads": options.fit_threads,
            "precision": options.mixed_precision, "cache_dtype": options.cache_dtype,
            "python": sys.version.split()[0], "torch": torch.__version__,
            "sklearn": sklearn.__version__, "fitter": f"hire.probing.fit ({options.probe.probe})"}


def _labels(options: ProbeOptions) -> list[str]:
    labels = options.labels or list(options.encoders)
    if len(labels) != len(options.encoders):
        raise ValueError(f"--labels: {len(labels)} labels for {len(options.encoders)} encoders")
    if len(set(labels)) != len(labels):
        raise ValueError(f"--labels: every encoder needs its own label, got {labels}")
    return labels


def _start(options: ProbeOptions, encoders: list[dict[str, Any]]) -> dict[str, Any]:
    """A fresh results record, or the one in ``--output_dir`` when it was made by the same command or by one
    that this command extends: the same options, with more encoders or tasks (whose results are kept)."""
    path = Path(options.output_dir) / RESULTS
    fresh = {"format": FORMAT, "config": options.comparable(), "encoders": encoders, "tasks": {},
             "machine": probe_machine(options)}
    if not path.is_file() or options.overwrite:
        return fresh
    old = read_results(path, "pass --overwrite to write it afresh (cached features are reused)")
    configs = (_with_default_probe(old.get("config", {})), fresh["config"])
    fixed = [{k: v for k, v in config.items() if k not in GROWS} for config in configs]
    weights = {e["label"]: e["fingerprint"] for e in encoders}
    extends = fixed[0] == fixed[1] and set(old.get("config", {}).get("tasks", ())) <= set(options.tasks) and all(
        weights.get(e["label"]) == e["fingerprint"] for e in old.get("encoders", []))
    if not extends:
        raise ValueError(f"--output_dir {options.output_dir} holds probe results of other options or weights (a "
                         "later command may only add encoders and tasks); pass --overwrite to replace them, or "
                         "choose another folder")
    return {**old, "config": fresh["config"], "encoders": encoders, "machine": fresh["machine"]}


def _with_default_probe(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the settings it predates at their defaults: results written before a setting existed were
    made as its default makes them (a linear probe, no treebank)."""
    probe = config.get("probe")
    if not isinstance(probe, dict):
        return config
    defaults = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(ProbeSettings()).items()}
    return {"treebank": None, **config, "probe": {**defaults, **probe}}


def data_sha256(task: ProbeTask) -> str:
    """The SHA-256 of a task's examples as read (each split's texts and labels, after subsampling): what its
    results were fitted on, whatever the files are called (a file changed in place gives another key)."""
    digest = hashlib.sha256()
    for split, examples in sorted(task.splits.items()):
        digest.update(split.encode() + b"\0")
        for ex in examples:
            digest.update(json.dumps([ex.text_a, ex.text_b, ex.label], ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()


def _task_record(task: ProbeTask) -> dict[str, Any]:
    return {"protocol": task.protocol, "headline": task.headline, "eval_splits": task.eval_splits,
            "metrics": list(task.metrics), "regression": task.regression, "pair": task.pair,
            "labels": task.label_names, "examples": {s: len(e) for s, e in task.splits.items()},
            "files": task.files, "notes": task.notes, "results": {}}


def probe_encoder(task: ProbeTask, source: EncoderSource, print_name: str, fp: str, options: ProbeOptions,
                  ) -> dict[str, Any]:
    """Features of every split (cached), then a probe for every feature set."""
    settings = FeatureSettings(options.max_length, options.batch_size, options.mixed_precision,
                               options.cache_dtype, options.device)
    cache_dir = Path(options.cache_dir)
    features, cached, encode_seconds = {}, {}, 0.0
    for split, examples in task.splits.items():
        feats = split_features(source, fp, task.name, split, examples, settings, cache_dir)
        features[split], cached[split] = (feats.a, feats.b), feats.cached
        encode_seconds += feats.encode_seconds
    labels = {s: task.labels(s) for s in task.splits}
    folds = None
    if task.protocol == "cv":
        folds = cv_folds(labels["all"], options.probe.folds, task.regression, options.probe.seed)
    a = next(iter(features.values()))[0]
    sets = feature_sets(a.shape[1])
    start = time.perf_counter()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(options.fit_threads)
        with threadpool_limits(options.fit_threads), tqdm(total=len(sets), desc=f"probing {task.name} ({print_name})",
                                                          unit="set", dynamic_ncols=True) as bar:
            rows = probe_feature_sets(features, labels, sets, task.metrics, task.regression, options.probe, folds,
                                      options.device, progress=bar.update)
    finally:
        torch.set_num_threads(threads)
    fit_seconds = time.perf_counter() - start
    sentences = sum(len(e) * (2 if task.pair else 1) for e in task.splits.values())
    return {"rows": rows, "num_hidden_states": int(a.shape[1]), "hidden_size": int(a.shape[3]),
            "cached": cached, "sentences": sentences,
            "seconds": {"encode": round(encode_seconds, 3), "fit": round(fit_seconds, 3)}}


def run_probe(options: ProbeOptions) -> dict[str, Any]:
    """Probe every encoder on every task; returns (and writes) the results record."""
    out = Path(options.output_dir)
    labels = _labels(options)
    sources, fingerprints, encoders = load_encoders(options.encoders, labels)
    results = _start(options, encoders)
    tasks = {}
    for name in options.tasks:  # read every task first: a bad file stops the run before any work
        task = load_probe_task(name, options.data_dir, options.senteval_dir, options.custom,
                               treebank=options.treebank, seed=options.probe.seed)
        tasks[name] = subsample(task, options.max_train_examples, options.max_eval_examples, options.probe.seed)
        for note in task.notes:
            print(f"hire probe: {task.name}: {note}", file=sys.stderr)
    for task in tasks.values():  # a task's earlier results stand for the data they were fitted on, not its path
        earlier = results["tasks"].get(task.name, {}).get("data_sha256")
        if earlier is not None and earlier != data_sha256(task):
            raise ValueError(f"--output_dir {options.output_dir}: holds {task.name} results of other data (the "
                             "content of its files changed since); pass --overwrite to replace them, or choose "
                             "another folder")
    mark_output_folder(out, "probe")  # every task read: the folder is the probe's from here on
    for task in tasks.values():
        record = results["tasks"].setdefault(task.name, {**_task_record(task), "data_sha256": data_sha256(task)})
        for label, source, fp in zip(labels, sources, fingerprints, strict=True):
            if label in record["results"]:
                continue  # finished by an earlier, interrupted run of the same command
            record["results"][label] = probe_encoder(task, source, label, fp, options)
            save_results(results, out)
    for source in sources:
        source.release()
    seconds = [r["seconds"] for t in results["tasks"].values() for r in t["results"].values()]
    results["seconds"] = {k: round(float(np.sum([s[k] for s in seconds])), 3) for k in ("encode", "fit")}
    save_results(results, out)
    return results


@dataclass
class GridTask:
    """One (task, encoder) of a ``hire probe`` results file, ready to be fitted again: the task as the grid read
    it, its probe settings, the features of every split (from the cache, or encoded again with the grid's
    settings), labels, folds and feature sets. For the scripts that refit a committed grid (its check against
    scikit-learn, its speed benchmark)."""

    task: ProbeTask
    probe: ProbeSettings
    features: dict[str, tuple[np.ndarray, np.ndarray | None]]
    labels: dict[str, np.ndarray]
    folds: list[tuple[np.ndarray, np.ndarray]] | None
    sets: list[Any]
    encode_seconds: float


def grid_task(results: dict[str, Any], task_name: str, label: str, cache_dir: str | Path, device: str = "cpu",
              retrained: str | None = None) -> GridTask | str:
    """The grid's ``task_name`` for its encoder ``label``, or why it cannot be had here (a string): the encoder
    is not here, or not with the weights the grid names (its sha256). ``retrained``: an encoder to use in the
    place of the grid's (the same recipe trained again, say, where the grid's run folder is gone), whatever its
    weights: its features are not the grid's, so its scores compare with a refit on them, not with the grid's."""
    config = results["config"]
    encoder = next(e for e in results["encoders"] if e["label"] == label)
    try:
        source = resolve_source(retrained or encoder["encoder"])
        fp = fingerprint(source)["sha256"]
    except (ValueError, OSError) as error:
        return f"encoder not here: {error}"
    if fp != encoder["fingerprint"] and retrained is None:
        return "other weights than the grid's (sha256 differs)"
    probe = ProbeSettings(**{k: tuple(v) if isinstance(v, list) else v
                             for k, v in _with_default_probe(config)["probe"].items()})
    task = load_probe_task(task_name, config["data_dir"], config["senteval_dir"], CustomFiles(**config["custom"]),
                           treebank=config.get("treebank"), seed=probe.seed)
    task = subsample(task, config["max_train_examples"], config["max_eval_examples"], probe.seed)
    settings = FeatureSettings(config["max_length"], 64, config["mixed_precision"], config["cache_dtype"], device)
    start = time.perf_counter()
    features = {}
    for split, examples in task.splits.items():
        f = split_features(source, fp, task.name, split, examples, settings, Path(cache_dir))
        features[split] = (f.a, f.b)
    encode = time.perf_counter() - start
    source.release()
    labels = {s: task.labels(s) for s in task.splits}
    folds = cv_folds(labels["all"], probe.folds, task.regression, probe.seed) if task.protocol == "cv" else None
    sets = feature_sets(next(iter(features.values()))[0].shape[1])
    return GridTask(task, probe, features, labels, folds, sets, encode)


def grid_parser(doc: str, out_help: str) -> Any:
    """The ``argparse`` parser of a script that refits a committed grid: OUT, then ``--results``, ``--task``,
    ``--encoder``, ``--device`` and ``--cache_dir``; the script adds its own options."""
    import argparse

    from hire.lab.features import default_cache_dir

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("out", help=out_help)
    parser.add_argument("--results", default="experiments/probe-minilm/results.json", help="the grid's results.json")
    parser.add_argument("--task", action="append", default=[], help="only these tasks (repeatable)")
    parser.add_argument("--encoder", action="append", default=[], help="only these encoder labels (repeatable)")
    def device(choice: str) -> str:
        from hire.config import ConfigError
        from hire.lab.checks import resolve_device

        try:
            return resolve_device(choice)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"--device {choice}: ")) from None

    parser.add_argument("--device", default="cpu", type=device, help="the batched fitter's device")
    parser.add_argument("--cache_dir", default=str(default_cache_dir()))
    return parser


def grid_pairs(results: dict[str, Any], tasks: list[str], encoders: list[str]) -> list[tuple[str, str]]:
    """The grid's (task, encoder label) pairs in its order, only ``tasks`` and ``encoders`` where given;
    ValueError naming ``--task`` or ``--encoder`` where one is not in the grid."""
    labels = [e["label"] for e in results["encoders"]]
    for option, given, known in (("--task", tasks, list(results["tasks"])), ("--encoder", encoders, labels)):
        unknown = [g for g in given if g not in known]
        if unknown:
            raise ValueError(f"{option} {', '.join(unknown)}: not in the grid (it has {', '.join(known)})")
    return [(name, label) for name, record in results["tasks"].items() if not tasks or name in tasks
            for label in record["results"] if not encoders or label in encoders]


PROBE_RESULTS = ResultsFormat(
    "probe", FORMAT, {"config": dict, "encoders": list, "tasks": dict, "machine": dict},
    lambda results: isinstance(results["config"].get("probe"), dict)
    and all(isinstance(e, dict) and "label" in e for e in results["encoders"])
    and all(isinstance(t, dict) and isinstance(t.get("results"), dict) for t in results["tasks"].values()),
    "config, encoders or tasks")
load_results = PROBE_RESULTS.load
read_results = PROBE_RESULTS.read


def read_grid(path: str | Path) -> dict[str, Any]:
    """The committed grid that a refitting script's ``--results`` names; ValueError naming the option where the
    file is missing or is not a ``hire probe`` results file."""
    if not Path(path).is_file():
        raise ValueError(f"--results {path}: no such file (a `hire probe` results.json)")
    return read_results(Path(path), "not a `hire probe` results file")
