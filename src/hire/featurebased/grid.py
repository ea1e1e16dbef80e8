"""``hire features``' work: read a token task, cache its word features once, train a tagger per row.

The output folder holds one run folder per row (:func:`hire.featurebased.tagger.train_tagger`) and
``results.json`` / ``results.md``: every row's dev and test scores side by side (with the paper's BERT-base dev F1
for CoNLL-2003 NER). A row whose folder already has ``metrics.json`` from the same configuration is not trained
again (a killed command resumes row by row); one from another configuration is refused unless ``overwrite``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hire.config import ConfigError
from hire.data.examples import TokenExample
from hire.featurebased.tagger import TaggerSettings
from hire.lab.encoding import WordEncoding
from hire.runs import mark_output_folder


@dataclass
class FeatureRun(WordEncoding):
    """What ``hire features`` runs (checked by the command line); how words are encoded and cached:
    :class:`~hire.lab.encoding.WordEncoding`'s keyword options."""

    encoder: str
    rows: list[str]
    output_dir: str
    task: str = "conll2003"  # or "custom"
    tag_column: str | None = "ner"  # ner, chunk or pos (custom: None, the last column)
    data_dir: str | None = None
    files: dict[str, str | None] = field(default_factory=dict)  # custom: train, dev, test
    format: str = "conll"
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    cache_only: bool = False
    overwrite: bool = False
    tagger: TaggerSettings = field(default_factory=TaggerSettings)


CONLL2003_COLUMNS = {"pos": 1, "chunk": 2, "ner": 3}  # CoNLL-2003's columns after the word


def read_task(run: FeatureRun) -> tuple[dict[str, list[TokenExample]], list[str]]:
    """The splits (train, dev, and test where there is one), cut to the example limits, and the training tags."""
    from hire.data.conll import check_tags, read_conll2003, read_token_file, tag_names

    if run.task == "conll2003":
        files = {split: read_conll2003(run.data_dir, split, run.tag_column or "ner")
                 for split in ("train", "dev", "test")}
    else:  # a tag column by name is CoNLL-2003's layout (word POS chunk NER); parts of speech have no scheme
        column = -1 if run.tag_column is None else CONLL2003_COLUMNS[run.tag_column]
        scheme = "none" if run.tag_column == "pos" else "auto"
        files = {split: read_token_file(path, format=run.format, tag_column=column, scheme=scheme,
                                        option=f"--{split}_file")
                 for split, path in run.files.items() if path is not None}
    limits = {"train": run.max_train_examples, "dev": run.max_eval_examples, "test": run.max_eval_examples}
    splits = {split: file.examples[: limits[split]] for split, file in files.items()}
    tags = tag_names(files["train"].examples)  # the whole file's: a quick run still knows every tag of its dev data
    for split in ("dev", "test"):
        if split in splits:
            splits[split] = check_tags(splits[split], tags, files[split].path, format=files[split].format)
    return splits, tags


def data_sha256(splits: dict[str, list[TokenExample]]) -> dict[str, str]:
    """Each split's content as read (every sentence's words, tags and document), SHA-256: a row's results are
    kept for the data they were trained and scored on, not for a file's path, whose content may change."""
    digests = {}
    for split, examples in splits.items():
        digest = hashlib.sha256()
        for ex in examples:
            digest.update(json.dumps([ex.tokens, ex.tags, ex.document], ensure_ascii=False).encode() + b"\n")
        digests[split] = digest.hexdigest()
    return digests


def _row_done(folder: Path, config: dict[str, Any], overwrite: bool) -> bool:
    """Whether ``folder`` holds this row's finished run; another configuration's is refused (or replaced). A row
    is the same only with the same data content (``data_sha256``): one trained before rows recorded it, or on a
    file whose content has changed since, is never taken for this one."""
    if not (folder / "metrics.json").is_file():
        return False
    try:
        saved = json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        saved = None
    if not isinstance(saved, dict):
        saved = None
    changed = list(config) if saved is None else [k for k, v in config.items() if saved.get(k) != v]
    if not changed:
        return True
    if not overwrite:
        why = ("of other data (the data's content differs from the row's: a file changed since, or the row "
               "predates content keys)" if changed == ["data_sha256"] else
               f"of other options ({', '.join(changed[:4])})")
        raise ConfigError(f"--output_dir {folder}: holds a finished run {why}; use another folder or "
                          "--overwrite to train it again")
    return False


def run_features(run: FeatureRun) -> dict[str, Any]:
    """Cache every split's features, train each row, write the summary; returns ``results.json``'s content."""
    from hire.featurebased.tagger import train_tagger
    from hire.lab.sources import resolve_source
    from hire.lab.words import encoder_key

    splits, tags = read_task(run)
    source = resolve_source(run.encoder)
    tokenizer, key = source.tokenizer(words=True), encoder_key(source)
    task = f"{run.task}-{run.tag_column or 'ner'}" if run.task == "conll2003" else \
        run.task + (f"-{run.tag_column}" if run.tag_column else "")
    out = Path(run.output_dir)
    configs = {row: {"encoder": run.encoder, "encoder_key": key, "task": task, "files": run.files,
                     "max_train_examples": run.max_train_examples, "max_eval_examples": run.max_eval_examples,
                     "max_length": run.max_length, "row": row, "settings": asdict(run.tagger),
                     "data_sha256": data_sha256(splits)} for row in run.rows}
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
    mark_output_folder(out, "features")  # before the first row's folder: the output is the features' from here on
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
    from hire.model.sharing import markdown_table

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
