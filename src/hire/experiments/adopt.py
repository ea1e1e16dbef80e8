"""Train a configuration once: a cell may take the record of an identical cell of another experiment.

Experiments overlap. The learning-rate sweep's last-layer cell at the rate a task settles on *is* Table 1's
last-layer cell of seed 1, and Table 1's HIRE cells on CoLA are the ablations' baseline cells. A cell with no
run folder and no record here adopts the record of another experiment's cell whose resolved configuration
is the same in every run option (task, head, encoder, learning rate, epochs, seed, precision, ...); a
record set to ``auto`` precision counts as set to what that resolved to on its machine.
The copy names its new cell and experiment and says where it came from (``adopted_from``); Figure 2's
per-example layer weights come along where the source has them. Nothing is adopted across a difference in
any option, and a cell the target already holds (a run folder or a record) is never replaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hire.config import ConfigError
from hire.experiments.experiment import Experiment
from hire.experiments.records import (
    gzip_bytes,
    json_bytes,
    read_examples_file,
    read_record,
    records_dir,
    run_dir,
    wants_examples,
    write_if_changed,
)
from hire.experiments.spec import PRECISION, Cell, canonical, default_options, resolved_precision
from hire.options import parse_options
from hire.runs import is_run_folder


def _config_key(config: dict[str, Any]) -> str | None:
    """Every run option of a configuration (a record's, nested, or a cell's, flat), as one comparable key
    (None: not a configuration)."""
    try:
        resolved = parse_options(config)
    except ConfigError:  # a record that does not read as a configuration matches nothing
        return None
    return canonical({name: resolved.get(name) for name in default_options()})


def _record_keys(record: dict[str, Any]) -> list[str]:
    """A record's configuration keys: as set, and where its precision was ``auto``, also with the precision it
    resolved to (it trained exactly as a run set to that; see :func:`hire.experiments.spec.record_differences`)."""
    key = _config_key(record.get("config", {}))
    if key is None:
        return []
    if (resolved := resolved_precision(record)) is None:
        return [key]
    return [key, canonical({**json.loads(key), PRECISION: resolved})]


def source_records(folders: list[Path]) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Records of the source folders by their configuration keys (the first folder wins a tie)."""
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for folder in folders:
        for path in sorted(records_dir(folder).glob("*.json")):
            record = read_record(path)
            for key in _record_keys(record):
                found.setdefault(key, (path, record))
    return found


def adopt(exp: Experiment, runs_dir: Path, exp_dir: Path, sources: list[Path], *,
          only: Callable[[Cell], bool] = lambda cell: True, dry_run: bool = False,
          say: Callable[[str], None] = print) -> list[str]:
    """Copy into ``exp``'s records every identical cell's record from the experiment result folders
    ``sources`` (e.g. ``experiments/lr-sweep-minilm``); returns the ids of the cells that adopted one."""
    found = source_records([Path(s) for s in sources if Path(s).resolve() != Path(exp_dir).resolve()])
    target, adopted = records_dir(exp_dir), []
    for cell in exp.cells:
        if not only(cell) or (target / f"{cell.id}.json").is_file() or is_run_folder(run_dir(runs_dir, exp, cell)):
            continue
        match = found.get(_config_key(cell.options) or "")
        if match is None:
            continue
        path, record = match
        examples = path.with_name(path.stem + ".layer_weights.json.gz")
        if wants_examples(exp, cell) and not examples.is_file():
            say(f"  {cell.id}: {path} matches but lacks Figure 2's per-example weights; not adopted")
            continue
        say(f"{'would adopt' if dry_run else 'adopted'} {cell.id} <- {path.parent.parent.name}/{record['cell']}")
        adopted.append(cell.id)
        if dry_run:
            continue
        copy = {**record, "experiment": exp.name, "cell": cell.id,
                "options": {k: cell.options[k] for k in exp.identity},
                "adopted_from": {"experiment": record.get("experiment"), "cell": record.get("cell")}}
        if wants_examples(exp, cell):
            data = {**read_examples_file(examples), "cell": cell.id}
            data_bytes = gzip_bytes(json.dumps(data, sort_keys=True).encode())
            write_if_changed(target / f"{cell.id}.layer_weights.json.gz", data_bytes)
        write_if_changed(target / f"{cell.id}.json", json_bytes(copy))
    return adopted
