"""Answer ranking on a frozen encoder's pooled states: the layer x pooling x interaction grid.

The layer-wise study (``layerwise-bert-activations-blog.txt``, part 2) ranks a question's candidate passages with
BERT embeddings: the question and each passage are encoded *apart*, pooled (CLS, SEP, mean, max) from a hidden
state, and combined by a scorer ``s(u, v)`` (``u`` the question's vector, ``v`` the passage's):

- ``cosine``:   ``u . v / (|u| |v|)``, no training, on the raw pooled vectors;
- ``bilinear``: ``u^T W v + b``;
- ``logistic``: ``w . [u; v; u*v; |u-v|] + b``;
- ``mlp``:      ``w2 . relu(W1 [u; v; u*v; |u-v|] + b1) + b2`` (one hidden layer).

The learned scorers read standardised features (each dimension centred and scaled by its mean and spread over the
training questions and passages together, so that ``u`` and ``v`` stay comparable) and are trained with the
pairwise rank hinge loss ``max(0, margin - s(q, p+) + s(q, p-))`` over every (better, worse) candidate pair of a
question, or pointwise binary cross-entropy for comparison; Adam; early stopping on dev MAP.

**Batched training.** Every feature set (:func:`hire.probing.classifiers.feature_sets`: each hidden state, first +
last, the last four, all, under each pooling) is trained at once: feature sets of the same width form a
:class:`~hire.ranking.features.FeatureGroup` whose parameters are single tensors with a leading feature-set axis
``F``, and one optimiser step updates them all on the same batch of questions. Nothing couples the feature sets: the
loss is the sum of their own mean losses, Adam works element by element, each set's initial weights come from a
generator seeded by the set's own name, and early stopping keeps each set's own best weights. A set trained alone
therefore learns what it learns in the batch (the tests check it); the batch only replaces ``F`` small matrix products
by one.

**Modules, by job.** This one runs the whole grid (:func:`run_rank_probe`); :mod:`~hire.ranking.settings` holds the
options, :mod:`~hire.ranking.data` reads the splits and groups candidates by question, :mod:`~hire.ranking.encode`
encodes them through the feature cache, :mod:`~hire.ranking.features` groups the feature sets by width,
:mod:`~hire.ranking.scorers` and :mod:`~hire.ranking.train` score and train, :mod:`~hire.ranking.blocks` makes one
(scorer, loss) block's cells and :mod:`~hire.ranking.results` keeps ``results.json``, BM25 and the run files.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hire.data.trec import write_run
from hire.figures import slug
from hire.lab.features import FeatureSettings
from hire.lab.results import save_results
from hire.lab.sources import load_encoders
from hire.ranking.blocks import best_cell, run_block
from hire.ranking.data import Candidates, data_sha256, load_data
from hire.ranking.encode import count_cut_candidates, encode_candidates
from hire.ranking.results import _bm25, _data_record, _start, overall_best, run_file
from hire.ranking.settings import RankProbeOptions, block_key


def run_rank_probe(options: RankProbeOptions) -> dict[str, Any]:
    """The whole grid: every encoder x (scorer, loss) block x feature set, with BM25 beside; resumable by block.
    Everything is read and checked before anything is encoded or written."""
    out = Path(options.output_dir)
    labels = options.labels or list(options.encoders)
    data = load_data(options)
    sources, fingerprints, encoders = load_encoders(options.encoders, labels)
    results = _start(options, encoders)
    earlier = (results.get("data") or {}).get("sha256")
    if earlier is not None and earlier != data_sha256(data):
        raise ValueError(f"--output_dir {options.output_dir} holds rank-probe results of other data (the content of "
                         "its files changed since); pass --overwrite to replace them, or choose another folder")
    results["data"] = _data_record(options, data)
    if not results.get("bm25"):
        results["bm25"] = _bm25(data, out)
        save_results(results, out)
    candidates = {s: Candidates.of(ex) for s, ex in data.splits.items()}
    settings = FeatureSettings(options.max_length, options.batch_size, options.mixed_precision, options.cache_dtype,
                               options.fit.device)
    for label, source, fp in zip(labels, sources, fingerprints, strict=True):
        record = results["results"].setdefault(label, {"blocks": {}})
        todo = [(s, loss) for s, loss in options.blocks() if block_key(s, loss) not in record["blocks"]]
        if not todo:  # finished by an earlier run of the same command
            if record.get("encode") and "cut" not in record["encode"]:  # written before cuts were counted
                record["encode"]["cut"] = count_cut_candidates(source, candidates, options.max_length)
                save_results(results, out)
            continue
        features, record["encode"] = encode_candidates(source, fp, options.task, candidates, settings,
                                                       Path(options.cache_dir))
        shape = features["train"][0].shape  # (questions, l + 1, 4, d)
        record["num_hidden_states"], record["hidden_size"] = int(shape[1]), int(shape[3])
        for scorer, loss in todo:
            start = time.perf_counter()
            rows, scores = run_block(scorer, loss, candidates, features, options.fit)
            seconds = time.perf_counter() - start
            best = best_cell(rows)
            runs = {}
            for split, split_scores in scores.items():
                runs[split] = run_file(label, scorer, loss, split)
                write_run(out / runs[split], candidates[split].examples, split_scores.tolist(),
                          tag=f"{slug(label)}.{scorer}.{loss}")
            record["blocks"][block_key(scorer, loss)] = {
                "scorer": scorer, "loss": loss, "rows": rows, "seconds": round(seconds, 3),
                "best": {"row": best["row"], "pooling": best["pooling"], "runs": runs}}
            save_results(results, out)
        source.release()
    results["best"] = overall_best(results)
    blocks = [b for r in results["results"].values() for b in r["blocks"].values()]
    results["seconds"] = {"encode": round(sum(r.get("encode", {}).get("seconds", 0.0)
                                              for r in results["results"].values()), 3),
                          "fit": round(sum(b["seconds"] for b in blocks), 3)}
    save_results(results, out)
    return results
