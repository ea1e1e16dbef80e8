"""The tasks a probe reads: GLUE, SentEval-style folders, and users' own files.

Every task becomes a :class:`~hire.probing.classifiers.ProbeTask`: labelled splits, label names, metrics and a
protocol.

- ``cv``: one split ``all`` and k-fold cross-validation (SentEval's MR, CR, MPQA; a custom task given
  only ``--train_file``).
- ``split``: ``train`` and labelled evaluation splits (also the ``ud-*`` tasks: :mod:`hire.probing.ud`).
  With a labelled ``test`` split (SentEval's SST-5, a labelled ``--test_file``, the ``ud-*`` tasks) the
  regularisation is chosen on ``dev`` and both are reported, as SentEval does; otherwise (GLUE, whose test
  labels are hidden) it is chosen on a held-out part of ``train`` and the dev splits are reported, so no
  reported number picked its own hyper-parameters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hire.data.examples import DataError, Example
from hire.data.files import data_error, infer_label_names, iter_lines, read_table
from hire.data.glue import GLUE_TASKS, default_glue_dir, get_task, read_glue_split
from hire.metrics import task_metrics
from hire.probing.classifiers import ProbeTask
from hire.probing.ud import is_ud_task, load_ud_task

SENTEVAL_ENV = "HIRE_SENTEVAL_DIR"


@dataclass
class CustomFiles:
    """``--train_file --dev_file --test_file --text_columns --label_column --regression``."""

    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    text_columns: list[str] = field(default_factory=lambda: ["sentence"])
    label_column: str = "label"
    regression: bool = False


def default_senteval_dir() -> Path:
    """``$HIRE_SENTEVAL_DIR``, else ``senteval/`` beside the GLUE folder (``../shared/data/senteval``)."""
    env = os.environ.get(SENTEVAL_ENV)
    return Path(env).expanduser() if env else default_glue_dir().parent / "senteval"


def _senteval_folder(name: str, root: Path) -> Path | None:
    if not root.is_dir():
        return None
    wanted = name.replace("_", "-").lower()
    return next((p for p in sorted(root.iterdir()) if p.is_dir() and p.name.lower() == wanted), None)


def load_probe_task(name: str, data_dir: str | None = None, senteval_dir: str | None = None,
                    custom: CustomFiles | None = None, treebank: str | None = None, seed: int = 0) -> ProbeTask:
    """A UD probing task (``ud-tense``, ...) built from ``treebank`` for ``seed``, a GLUE task by name, a SentEval
    folder by name (``senteval_dir/<NAME>``), or ``custom`` files.

    A ``ud-*`` task given no ``treebank`` reads ``data_dir`` as the treebank folder (``hire probe`` passes its
    ``--treebank`` there while :class:`~hire.probing.grid.ProbeOptions` has no field of its own for it), else
    :func:`~hire.data.conllu.default_ud_dir`.
    """
    if is_ud_task(name):
        return load_ud_task(name, treebank if treebank is not None else data_dir, seed)
    if name.lower() == "custom":
        return _custom_task(custom or CustomFiles())
    root = Path(senteval_dir).expanduser() if senteval_dir else default_senteval_dir()
    folder = _senteval_folder(name, root)
    if folder is not None:
        return _senteval_task(folder)
    try:
        spec = get_task(name)
    except DataError:
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise DataError(f"--task {name}: not a GLUE task ({', '.join(GLUE_TASKS)}), nor a folder of "
                        f"--senteval_dir {root} ({', '.join(known) or 'none there'}), nor a UD probing task "
                        "(ud-probes, ud-tense, ...), nor 'custom'") from None
    glue = Path(data_dir).expanduser() if data_dir else default_glue_dir()
    splits = {s: read_glue_split(spec, s, glue, option="--data_dir") for s in ("train", *spec.dev_splits)}
    files = {s: str(glue / spec.folder / spec.splits[s]) for s in splits}
    labels = list(spec.labels) if spec.labels is not None else None
    return ProbeTask(spec.name, splits, labels, spec.metrics, files)


def _senteval_task(folder: Path) -> ProbeTask:
    """``all.tsv`` (cross-validation) or ``train/dev/test.tsv``, each with the header ``label<TAB>sentence``."""
    names = ["all"] if (folder / "all.tsv").is_file() else ["train", "dev", "test"]
    files = {s: folder / f"{s}.tsv" for s in names}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise DataError(f"{folder}: expected all.tsv, or train.tsv, dev.tsv and test.tsv; missing {missing}")
    splits, notes = {}, []
    for split, path in files.items():
        splits[split], skipped = read_senteval(path)
        if skipped:
            notes.append(f"{path}: {len(skipped)} rows with an empty sentence skipped (lines "
                         f"{', '.join(map(str, skipped))})")
    labels = _label_names(splits, {s: str(p) for s, p in files.items()})
    return ProbeTask(folder.name, splits, labels, ("accuracy",), {s: str(p) for s, p in files.items()}, notes)


def read_senteval(path: Path) -> tuple[list[Example], list[int]]:
    """A SentEval TSV (header ``label<TAB>sentence``) and the line numbers of rows whose sentence is empty,
    which are left out: CR and MPQA, as distributed, hold a few (SentEval encodes them as nothing)."""
    lines = iter_lines(path)
    header = next(lines, (1, ""))[1].split("\t")
    if header != ["label", "sentence"]:
        raise data_error(path, 1, f"expected the header 'label<TAB>sentence', found {header}")
    examples, skipped = [], []
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip():
            raise data_error(path, number, f"expected a label and a sentence separated by a tab, found {line!r}")
        if not fields[1].strip():
            skipped.append(number)
            continue
        examples.append(Example(str(number - 2), fields[1], None, fields[0].strip()))
    if not examples:
        raise data_error(path, None, "no rows")
    return examples, skipped


def _custom_task(files: CustomFiles) -> ProbeTask:
    if not files.train_file:
        raise DataError("--task custom needs --train_file (alone: 10-fold cross-validation; "
                        "with --dev_file: train on one, report the other)")
    if files.test_file and not files.dev_file:
        raise DataError("--test_file needs --dev_file (the regularisation is chosen on dev, test reported)")
    paths = {"train": files.train_file, "dev": files.dev_file, "test": files.test_file}
    paths = {s: p for s, p in paths.items() if p}
    for option, path in paths.items():
        if not Path(path).is_file():
            raise DataError(f"--{option}_file {path}: no such file")
    if len(paths) == 1:
        paths = {"all": paths["train"]}
    splits = {s: read_table(p, files.text_columns, files.label_column, regression=files.regression)
              for s, p in paths.items()}
    labels = None if files.regression else _label_names(splits, paths)
    metrics = task_metrics(None, files.regression, len(labels or [None]))
    return ProbeTask(Path(files.train_file).stem, splits, labels, metrics, paths)


def _label_names(splits: dict[str, list[Example]], paths: dict[str, str]) -> list[str]:
    """Label names from the training split (or ``all``); every other split must use only those."""
    first = "all" if "all" in splits else "train"
    labels = list(infer_label_names(splits[first]))
    if len(labels) < 2:
        raise DataError(f"{paths[first]}: a probe needs at least two classes, found {labels}")
    for split, examples in splits.items():
        unknown = sorted({str(e.label) for e in examples} - set(labels))
        if unknown:
            raise DataError(f"{paths[split]}: labels {unknown} never occur in {paths[first]} (labels: {labels})")
    return labels


def subsample(task: ProbeTask, max_train: int | None, max_eval: int | None, seed: int) -> ProbeTask:
    """At most ``max_train`` examples of ``train`` / ``all`` and ``max_eval`` of each evaluation split:
    a random subset (``seed``) kept in file order, since some files are sorted by label (MR)."""
    splits = {}
    for split, examples in task.splits.items():
        limit = max_train if split in ("train", "all") else max_eval
        if limit is not None and limit < len(examples):
            rng = np.random.default_rng([seed, len(examples)])
            keep = np.sort(rng.choice(len(examples), size=limit, replace=False))
            examples = [examples[i] for i in keep]
        splits[split] = examples
    return ProbeTask(task.name, splits, task.label_names, task.metrics, task.files, task.notes)
