"""The rank probe's records: ``results.json`` started afresh or resumed (:func:`_start`), the BM25 row with its run
files and qrels (:func:`_bm25`), the data's record, each block's run file and the grid's best cell."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from hire.data.trec import write_qrels, write_run
from hire.figures import slug
from hire.lab.results import RESULTS, machine
from hire.ranking.blocks import _metrics
from hire.ranking.bm25 import BM25Settings, bm25_scores
from hire.ranking.data import RankingData, data_sha256
from hire.ranking.settings import RankProbeOptions
from hire.ranking.tables import FORMAT, GROWS, chosen_cell, read_results
from hire.runs import mark_output_folder


def _start(options: RankProbeOptions, encoders: list[dict[str, Any]]) -> dict[str, Any]:
    """A fresh results record, or the one in ``--output_dir`` when it was made by the same command or by one that
    this command extends (more encoders, scorers or losses: the finished blocks are kept)."""
    path = Path(options.output_dir) / RESULTS
    fresh = {"format": FORMAT, "config": options.comparable(), "encoders": encoders, "data": {}, "bm25": None,
             "results": {}, "machine": machine(options.fit.device)}
    if not path.is_file() or options.overwrite:
        return fresh
    old = read_results(path, "pass --overwrite to write it afresh (cached features are reused)")
    fixed = [{k: v for k, v in c.items() if k not in GROWS} for c in (old["config"], fresh["config"])]
    weights = {e["label"]: e["fingerprint"] for e in encoders}
    if fixed[0] != fixed[1] or not all(weights.get(e["label"], e["fingerprint"]) == e["fingerprint"]
                                       for e in old["encoders"]):
        raise ValueError(f"--output_dir {options.output_dir} holds rank-probe results of other options or weights (a "
                         "later command may only add encoders, scorers and losses); pass --overwrite to replace "
                         "them, or choose another folder")
    kept = {e["label"]: e for e in old["encoders"]}
    merged = list({**kept, **{e["label"]: e for e in encoders}}.values())
    config = {**fresh["config"], **{k: list(dict.fromkeys([*old["config"][k], *fresh["config"][k]])) for k in GROWS}}
    return {**old, "config": config, "encoders": merged, "machine": fresh["machine"]}


def run_file(label: str, scorer: str, loss: str, split: str) -> str:
    """A block's best cell's TREC run file, relative to the output folder."""
    return f"runs/{slug(label)}.{scorer}.{loss}.{split}.run"


def _bm25(data: RankingData, out: Path) -> dict[str, Any]:
    """The BM25 row, its run files and every evaluation split's qrels."""
    settings = BM25Settings()
    record: dict[str, Any] = {"settings": asdict(settings), "runs": {}}
    mark_output_folder(out, "rank-probe")  # its first files: the folder is the rank probe's from here on
    for folder in ("runs", "qrels"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    for split in ("dev", "test"):
        if split in data.splits:
            examples = data.splits[split]
            scores = np.asarray(bm25_scores(examples, settings), dtype=np.float64)
            write_qrels(out / f"qrels/{split}.qrels", examples)
            write_run(out / f"runs/bm25.{split}.run", examples, scores.tolist(), tag="bm25")
            record[split] = _metrics(examples, scores)
            record["runs"][split] = f"runs/bm25.{split}.run"
    return record


def _data_record(options: RankProbeOptions, data: RankingData) -> dict[str, Any]:
    return {"task": options.task, "keep": options.keep, "files": data.files, "dropped": data.dropped,
            "sha256": data_sha256(data),
            "questions": {s: len({e.qid for e in ex}) for s, ex in data.splits.items()},
            "candidates": {s: len(ex) for s, ex in data.splits.items()}}


def overall_best(results: dict[str, Any]) -> dict[str, Any] | None:
    """The grid's best cell by dev MAP: its encoder, scorer, loss, feature set and run files."""
    best: dict[str, Any] | None = None
    for label, record in results["results"].items():
        for block in record["blocks"].values():
            cell = chosen_cell(block)
            if best is None or cell["dev"]["map"] > best["dev"]["map"]:
                best = {"label": label, "scorer": block["scorer"], "loss": block["loss"], **cell,
                        "runs": block["best"]["runs"]}
    return best
