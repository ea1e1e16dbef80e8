"""``hire features``' work: read a token task, cache its word features once, train a tagger per row.

The output folder holds one run folder per row (:func:`hire.featurebased.tagger.train_tagger`) and
``results.json`` / ``results.md``: every row's dev and test scores side by side (with the paper's BERT-base dev F1
for CoNLL-2003 NER). A row whose folder already has ``metrics.json`` from the same configuration is not trained
again (a killed command resumes row by row); one from another configuration is refused unless ``overwrite``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hire.config import ConfigError
from hire.data.examples import TokenExample
from hire.featurebased.encoding import WordEncoding
from hire.featurebased.tagger import TaggerSettings


@dataclass
class FeatureRun(WordEncoding):
    """What ``hire features`` runs (checked by the command line); how words are encoded and cached:
    :class:`~hire.featurebased.encoding.WordEncoding`'s keyword options."""

    encoder: str
    rows: list[str]
    output_dir: str
    task: str = "conll2003"  # or "custom"
    tag_column: str = "ner"  # conll2003: ner, chunk or pos
    data_dir: str | None = None
    files: dict[str, str | None] = field(default_factory=dict)  # custom: train, dev, test
    format: str = "conll"
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    cache_only: bool = False
    overwrite: bool = False
    tagger: TaggerSettings = field(default_factory=TaggerSettings)


def read_task(run: FeatureRun) -> tuple[dict[str, list[TokenExample]], list[str]]:
    """The splits (train, dev, and test where there is one), cut to the example limits, and the training tags."""
    from hire.data.conll import check_tags, read_conll2003, read_token_file, tag_names

    if run.task == "conll2003":
        files = {split: read_conll2003(run.data_dir, split, run.tag_column) for split in ("train", "dev", "test")}
    else:
        files = {split: read_token_file(path, format=run.format, option=f"--{split}_file")
                 for split, path in run.files.items() if path is not None}
    limits = {"train": run.max_train_examples, "dev": run.max_eval_examples, "test": run.max_eval_examples}
    splits = {split: file.examples[: limits[split]] for split, file in files.items()}
    tags = tag_names(files["train"].examples)  # the whole file's: a quick run still knows every tag of its dev data
    for split in ("dev", "test"):
        if split in splits:
            splits[split] = check_tags(splits[split], tags, files[split].path, format=files[split].format)
    return splits, tags


def _row_done(folder: Path, config: dict[str, Any], overwrite: bool) -> bool:
    """Whether ``folder`` holds this row's finished run; another configuration's is refused (or replaced)."""
    if not (folder / "metrics.json").is_file():
        return False
    try:
        saved = json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        saved = None
    same = saved is not None and all(saved.get(k) == v for k, v in config.items())
    if same:
        return True
    if not overwrite:
        raise ConfigError(f"--output_dir {folder}: holds a finished run of other options; use another folder or "
                          "--overwrite")
    return False


def run_features(run: FeatureRun) -> dict[str, Any]:
    """Cache every split's features, train each row, write the summary; returns ``results.json``'s content."""
    from hire.featurebased.cache import encoder_key
    from hire.featurebased.tagger import train_tagger
    from hire.probing.sources import resolve_source

    splits, tags = read_task(run)
    source = resolve_source(run.encoder)
    tokenizer, key = source.tokenizer(words=True), encoder_key(source)
    task = run.task if run.task != "conll2003" else f"conll2003-{run.tag_column}"
    out = Path(run.output_dir)
    configs = {row: {"encoder": run.encoder, "encoder_key": key, "task": task, "files": run.files,
                     "max_train_examples": run.max_train_examples, "max_eval_examples": run.max_eval_examples,
                     "max_length": run.max_length, "row": row, "settings": asdict(run.tagger)} for row in run.rows}
    done = [] if run.cache_only else [row for row in run.rows if _row_done(out / row, configs[row], run.overwrite)]
    features = {split: run.word_features(examples, tokenizer, source.encoder, key, f"{task}-{split}", run.tagger.device,
                                         {"encoder_name": run.encoder, "split": split})
                for split, examples in splits.items()}
    source.release()
    caches = {split: {"path": str(f.path), "sentences": len(f), "words": int(f.offsets[-1]), "cached": f.cached,
                      "encode_seconds": f.encode_seconds} for split, f in features.items()}
    results: dict[str, Any] = {"encoder": run.encoder, "task": task, "caches": caches, "rows": {}}
    if run.cache_only:
        return results
    pair = {split: (features[split], splits[split]) for split in features}
    for row in run.rows:
        if row in done:
            results["rows"][row] = json.loads((out / row / "metrics.json").read_text())
            continue
        results["rows"][row] = train_tagger(row, pair["train"], pair["dev"], pair.get("test"), tags, run.tagger,
                                            out / row, configs[row])
    write_summary(results, out)
    return results


def summary_table(results: dict[str, Any]) -> list[str]:
    """Markdown: each row's best epoch and dev / test score (x100), beside the paper's BERT-base dev F1."""
    from hire.featurebased.rows import PAPER_DEV_F1
    from hire.sharing import markdown_table

    paper = results["task"] == "conll2003-ner"
    lines = []
    for row, m in results["rows"].items():
        metric = m["metric"]
        cells = [row, str(m["best_epoch"]), f"{100 * m['dev'][metric]:.1f}",
                 f"{100 * m['test'][metric]:.1f}" if "test" in m else "-", f"{m['train_seconds']:.0f}"]
        lines.append(cells + ([f"{PAPER_DEV_F1[row]:.1f}" if row in PAPER_DEV_F1 else "-"] if paper else []))
    metric = next(iter(results["rows"].values()))["metric"] if results["rows"] else "f1"
    name = "entity F1" if metric == "f1" else "token accuracy"
    header = ["row", "best epoch", f"dev {name}", f"test {name}", "train s"] + (["BERT-base dev F1"] if paper else [])
    return markdown_table(header, lines, align="lrrrrr")


def write_summary(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    text = [f"# Feature-based tagging: {results['encoder']}, {results['task']}", "",
            "A frozen encoder's word features (first sub-token, cached) feed a 2-layer BiLSTM tagger; one row per "
            "feature set (BERT, Table 7).", "", *summary_table(results)]
    (out / "results.md").write_text("\n".join(text) + "\n")


__all__ = ["FeatureRun", "read_task", "run_features", "summary_table", "write_summary"]
