"""Token probes: what every hidden state of a frozen encoder knows about each word, with the controls that say
whether a score shows what the encoder knows or what the probe learned.

**Tasks.** UPOS and dependency relation of every syntactic word of a CoNLL-U treebank (its own train/dev/test;
the relation's universal part, before ``:``, unless ``deprel="full"``), and the POS, chunk and NER tags of
CoNLL-2003 (chunk and NER in IOB2, each tag a class of its own):

- the encoder reads a sentence's *surface tokens* (a UD multi-word token such as *don't* once, as in running
  text), and a syntactic word takes the vector of the surface token that spells it (the words *do* and *n't* of
  *don't* share one vector, so a probe cannot tell them apart: about 1% of English EWT's words);
- each word's vector at every hidden state ``H_0 .. H_l`` is its first, last or mean sub-token's
  (:mod:`hire.lab.words`: computed once per encoder and split, shared by the tasks of a source).

**Probe.** A multinomial logistic regression per hidden state, fitted by
:func:`hire.probing.solvers.logistic.fit_logistic` (scikit-learn's objective on standardised features, as
``hire probe`` fits it), ``C`` chosen per state by token accuracy on dev (ties: the smaller ``C``), that model scored on
dev and test. Metrics: token accuracy; for NER also the **per-token macro F1** over the tags other than ``O`` (each
token scored on its own, not seqeval's entity F1). A dev/test tag never seen in training counts as an error. A
control probe (below) is scored by token accuracy alone: its labels are random per word type, so an F1 over the
task's entity tags would name classes that mean nothing there (and selectivity reads accuracy only).

**Controls.**

- the majority class: the most frequent training tag, scored on dev and test;
- a control task (Hewitt & Liang, 2019): every word *type* (its form, case kept) gets a label drawn from the
  task's training tag distribution, from a hash of the seed and the form alone (so a type has one label in every
  split, and an unseen type gets one too), and the same probe is trained on those labels. *Selectivity* is the
  task accuracy less the control accuracy, per layer: what the probe reads from the representation beyond
  memorising word identities;
- an encoder with random weights (``random:<encoder>``, :mod:`hire.lab.sources`: the encoder's architecture
  from its configuration with ``from_config`` under a fixed seed, and its real tokenizer): what a probe learns
  from token identity alone.

**Which layer knows what.** Per task and encoder: the best layer, **chosen on dev** (the layer with the highest dev
accuracy; its test accuracy is the reported score, and the layer that test alone would pick is shown beside it only
as a labelled oracle), the most selective layer (chosen on dev selectivity the same way), and the expected layer
under the differential scores (edge probing, Tenney et al. 2019), ``E[l] = sum_l l * D_l / sum_l D_l`` with
``D_l = s_l - s_{l-1}`` for ``l = 1 .. L``. Tenney et al. take ``s_l`` from cumulative scalar mixes of layers
``0 .. l``, whose scores never fall; here each layer is probed alone, so ``s_l`` is the running best
``max(s_0 .. s_l)`` of those probes (every ``D_l >= 0``): the expected layer always lies within ``0 .. L``, and is
0 where no layer improves on the embeddings. It describes the test curve and chooses nothing.

``results.json`` holds every cell; :func:`write_token_report` draws ``report.md`` and ``figures/layers.png`` from it
alone (byte-identical when redrawn).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hire.config import ConfigError
from hire.data.examples import DataError, TokenExample
from hire.figures import legend_below, new_axes, pct, save_png
from hire.lab.checks import check_encoders, check_results_dir, results_of
from hire.lab.encoding import WordEncoding
from hire.options import choose_names
from hire.probing.tables import encoder_handles, encoder_style, short_encoder, task_records
from hire.runs import mark_output_folder

RESULTS_VERSION = 1
SPLITS = ("train", "dev", "test")
EVAL_SPLITS = ("dev", "test")
HEADLINE = "test"


@dataclass(frozen=True)
class TokenTask:
    """A token probing task: the data ``source`` (``ud`` or ``conll2003``) and the ``column`` tagged."""

    name: str
    source: str
    column: str
    description: str

    @property
    def metrics(self) -> tuple[str, ...]:
        return ("accuracy", "macro_f1") if self.column == "ner" else ("accuracy",)


TASKS: dict[str, TokenTask] = {t.name: t for t in (
    TokenTask("ud-upos", "ud", "upos", "universal part of speech (UPOS) of every syntactic word"),
    TokenTask("ud-deprel", "ud", "deprel", "dependency relation of every syntactic word to its head"),
    TokenTask("conll-pos", "conll2003", "pos", "CoNLL-2003 part-of-speech tag (Penn Treebank)"),
    TokenTask("conll-chunk", "conll2003", "chunk", "CoNLL-2003 chunk tag (IOB2, each tag a class)"),
    TokenTask("conll-ner", "conll2003", "ner", "CoNLL-2003 named-entity tag (IOB2, each tag a class)"),
)}


def parse_tasks(words: Sequence[str]) -> list[str]:
    """``--tasks``: names or ``all``, comma-separated or repeated; ConfigError naming an unknown one."""
    return choose_names(words, "--tasks", TASKS, "task", all_word=True)


# --- data -------------------------------------------------------------------------------------------------------


@dataclass
class WordSplit:
    """One split of a source: the sentences the encoder reads (``sentences``, surface tokens), and one row per
    probed word: ``token_rows[i]`` is word ``i``'s row in the split's flattened token features, ``forms[i]`` its
    form (its type for the control task), ``tags[column][i]`` its tag."""

    sentences: list[TokenExample]
    token_rows: np.ndarray
    forms: list[str]
    tags: dict[str, list[str]]
    path: str

    def __len__(self) -> int:
        return len(self.forms)


def _universal(deprel: str) -> str:
    return deprel.split(":", 1)[0]


def load_ud(treebank: str | Path | None, deprel: str = "universal", max_sentences: dict[str, int | None] | None = None,
            ) -> dict[str, WordSplit]:
    """A CoNLL-U treebank's train/dev/test as :class:`WordSplit` (columns ``upos`` and ``deprel``), every file
    read and checked (DataError naming file and line); ``max_sentences[split]`` keeps the first N sentences."""
    from hire.data.conllu import default_ud_dir, find_treebank

    if deprel not in ("universal", "full"):
        raise ConfigError(f"--deprel {deprel}: expected universal or full")
    files = find_treebank(treebank if treebank is not None else default_ud_dir(), "--treebank",
                          command="a token probe (trained on train, C chosen on dev, scored on test)")
    out = {}
    for split in SPLITS:
        sentences = files[split].read()[: (max_sentences or {}).get(split)]
        examples, rows, forms, upos, rels = [], [], [], [], []
        offset = 0
        for i, sent in enumerate(sentences):
            tokens = sent.tokens()
            examples.append(TokenExample(sent.sent_id or str(i), tuple(form for form, _, _ in tokens), line=sent.line))
            for t, (_, first, last) in enumerate(tokens):
                for word in sent.words[first - 1 : last]:
                    rows.append(offset + t)
                    forms.append(word.form)
                    upos.append(word.upos)
                    rels.append(word.deprel if deprel == "full" else _universal(word.deprel))
            offset += len(tokens)
        out[split] = WordSplit(examples, np.asarray(rows, dtype=np.int64), forms, {"upos": upos, "deprel": rels},
                               str(files[split]))
    return out


def load_conll2003(data_dir: str | Path | None, max_sentences: dict[str, int | None] | None = None,
                   ) -> dict[str, WordSplit]:
    """CoNLL-2003's train/dev/test as :class:`WordSplit` (columns ``pos``, ``chunk`` and ``ner``, IOB2), read with
    :func:`hire.data.conll.read_conll2003` (DataError naming file and line)."""
    from hire.data.conll import read_conll2003

    out = {}
    for split in SPLITS:
        columns = {c: read_conll2003(data_dir, split, c) for c in ("pos", "chunk", "ner")}
        limit = (max_sentences or {}).get(split)
        sentences = columns["ner"].examples[:limit]
        forms = [w for ex in sentences for w in ex.tokens]
        tags = {c: [t for ex in f.examples[:limit] for t in (ex.tags or ())] for c, f in columns.items()}
        bare = [TokenExample(ex.guid, ex.tokens, document=ex.document, line=ex.line) for ex in sentences]
        out[split] = WordSplit(bare, np.arange(len(forms), dtype=np.int64), forms, tags, str(columns["ner"].path))
    return out


def label_ids(tags: dict[str, list[str]]) -> tuple[list[str], dict[str, np.ndarray]]:
    """The training tags (sorted) and every split's tags as ids into them; a tag unseen in training is -1 (never
    predicted, so always an error)."""
    names = sorted(set(tags["train"]))
    index = {name: i for i, name in enumerate(names)}
    return names, {split: np.array([index.get(t, -1) for t in values], dtype=np.int64)
                   for split, values in tags.items()}


# --- controls ---------------------------------------------------------------------------------------------------


def control_label(form: str, cumulative: np.ndarray, seed: int) -> int:
    """The control task's label of word type ``form``: a uniform number from the SHA-256 of the seed and the form
    (a function of the type alone, whatever split it appears in), mapped through the cumulative label
    distribution ``cumulative`` (its last entry 1)."""
    digest = hashlib.sha256(f"{seed}\x1f{form}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    return int(min(np.searchsorted(cumulative, u, side="right"), len(cumulative) - 1))


def control_labels(forms: dict[str, Sequence[str]], train_labels: np.ndarray, num_labels: int, seed: int,
                   ) -> dict[str, np.ndarray]:
    """Hewitt & Liang's control task: each word type mapped to a label drawn (by :func:`control_label`) from the
    training labels' distribution, for every split's words."""
    counts = np.bincount(train_labels[train_labels >= 0], minlength=num_labels).astype(np.float64)
    cumulative = np.cumsum(counts / counts.sum())
    cumulative[-1] = 1.0
    memo: dict[str, int] = {}
    out = {}
    for split, words in forms.items():
        labels = np.empty(len(words), dtype=np.int64)
        for i, form in enumerate(words):
            if form not in memo:
                memo[form] = control_label(form, cumulative, seed)
            labels[i] = memo[form]
        out[split] = labels
    return out


def majority(train_labels: np.ndarray, gold: dict[str, np.ndarray], metric: Callable[[np.ndarray, np.ndarray],
             dict[str, float]]) -> tuple[int, dict[str, dict[str, float]]]:
    """The most frequent training label (the smallest id on ties) and its scores on each split of ``gold``."""
    label = int(np.bincount(train_labels[train_labels >= 0]).argmax())
    return label, {split: metric(np.full(len(y), label), y) for split, y in gold.items()}


def selectivity(task: dict[str, float], control: dict[str, float]) -> float:
    """Hewitt & Liang's selectivity: task accuracy less control-task accuracy (fractions, as the cells hold)."""
    return task["accuracy"] - control["accuracy"]


def expected_layer(scores: Sequence[float]) -> float:
    """``sum_l l * D_l / sum_l D_l`` with ``D_l = s_l - s_{l-1}`` (``l = 1 .. L``) over the running best
    ``s_l = max(scores[0] .. scores[l])``, as Tenney et al.'s cumulative mixes give: every ``D_l >= 0``, so the
    mean lies within ``1 .. L``; 0 where no layer improves on the embeddings (or there is no layer beyond them).
    (Over the raw per-layer scores, a curve that falls after its peak makes ``sum_l D_l = s_L - s_0`` small or
    negative, and the mean leaves ``0 .. L`` or is undefined: hence the running best.)"""
    s = np.maximum.accumulate(np.asarray(scores, dtype=np.float64))
    delta = np.diff(s)
    total = float(delta.sum())
    if len(s) < 2 or total <= 1e-12:
        return 0.0
    return float((np.arange(1, len(s)) * delta).sum() / total)


def summarise(layers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A cell's summary from its layers: the layer chosen on dev accuracy and its test accuracy, the test-best layer
    (an oracle, not a result), the expected layer of the test curve, the layer chosen on dev selectivity and its test
    selectivity. The first layer wins ties."""
    dev = [cell["task"]["dev"]["accuracy"] for cell in layers]
    test = [cell["task"][HEADLINE]["accuracy"] for cell in layers]
    chosen, oracle = int(np.argmax(dev)), int(np.argmax(test))
    selective = int(np.argmax([cell["selectivity"]["dev"] for cell in layers]))
    return {"best_layer": chosen, "best": test[chosen], "best_dev": dev[chosen],
            "oracle_layer": oracle, "oracle": test[oracle], "expected_layer": expected_layer(test),
            "best_selectivity_layer": selective, "best_selectivity": layers[selective]["selectivity"][HEADLINE]}


def accuracy_only(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Token accuracy alone (0 on no tokens): the control task's one metric."""
    return {"accuracy": float(np.mean(pred == gold)) if len(gold) else 0.0}


def token_metrics(tag_names: Sequence[str], column: str) -> Callable[[np.ndarray, np.ndarray], dict[str, float]]:
    """The scorer of a task: token accuracy, and for NER the per-token macro F1 over the tags other than ``O``."""
    from sklearn.metrics import f1_score

    entity = [i for i, name in enumerate(tag_names) if name != "O"]

    def score(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
        out = accuracy_only(pred, gold)
        if column == "ner":
            out["macro_f1"] = float(f1_score(gold, pred, labels=entity, average="macro", zero_division=0))
        return out

    return score


# --- fitting ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitSettings:
    """The logistic-regression probe: the ``C`` grid (chosen on dev by accuracy), L-BFGS's iteration limit, where
    it runs and its stopping tolerance."""

    c_grid: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0)
    max_iter: int = 1000
    device: str = "cpu"
    tol: float = 1e-4  # L-BFGS stops when no gradient entry exceeds this (scikit-learn's tol)


def probe_layers(features: dict[str, np.ndarray], targets: dict[str, dict[str, np.ndarray]],
                 score: Mapping[str, Callable[[np.ndarray, np.ndarray], dict[str, float]]], settings: FitSettings,
                 ) -> dict[str, list[dict[str, Any]]]:
    """A probe per hidden state for each labelling in ``targets`` (e.g. ``{"task": {split: ids}, "control":
    ...}``: training ids >= 0; a dev/test id -1 is never predicted), on ``features[split]`` ``(N, l + 1, d)``,
    its dev and test predictions scored by ``score[labelling]`` (a control labelling: :func:`accuracy_only`).

    Each hidden state is one feature set of :mod:`hire.probing.fit`, fitted as ``hire probe`` fits a task with a
    labelled test split: standardised on train (:func:`~hire.probing.solvers.standardise.standardise`,
    :func:`~hire.probing.solvers.standardise.row_sets`, its preconditioner), one
    :func:`~hire.probing.solvers.logistic.fit_logistic` per
    ``C`` of the grid, each started from the previous ``C``'s solution (scikit-learn's objective and stopping
    rule), and each state's ``C`` the first best by dev accuracy (the smaller ``C`` on ties). The states are
    fitted one after another. Returns, per labelling, one cell per state: ``{"layer", "C", "dev": scores,
    "test": scores, "not_converged"}``."""
    import torch

    from hire.probing.solvers.logistic import fit_logistic
    from hire.probing.solvers.objective import preconditioner
    from hire.probing.solvers.standardise import row_sets, standardise

    device = torch.device(settings.device)
    grid = sorted(settings.c_grid)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
    for layer in range(features["train"].shape[1]):
        raw = {split: torch.from_numpy(np.asarray(a[:, layer], dtype=np.float32)).to(device)
               for split, a in features.items()}
        mean, scale = standardise(raw["train"])
        xs = {split: (x - mean).div_(scale) for split, x in raw.items()}
        del raw
        rs = row_sets(xs["train"], [np.arange(len(xs["train"]))])
        pre = preconditioner(xs["train"])
        for name, labels in targets.items():
            classes = np.unique(labels["train"])
            classes_t = torch.as_tensor(classes, device=device)
            y = torch.as_tensor(np.searchsorted(classes, labels["train"]), device=device)
            fits: list[Any] = []
            for c in grid:  # each C's solver starts from the previous (smaller) C's solution
                fits.append(fit_logistic(xs["train"], y, classes_t, rs, [0], [c], settings.max_iter,
                                         fits[-1] if fits else None, pre, settings.tol))
            dev = [f.predict(xs["dev"], classes_t)[0].cpu().numpy() for f in fits]
            accuracy = [float(np.mean(p == labels["dev"])) if len(p) else 0.0 for p in dev]
            best = int(np.argmax(accuracy))  # the first best: ties keep the smaller C
            preds = {"dev": dev[best], "test": fits[best].predict(xs["test"], classes_t)[0].cpu().numpy()}
            out[name].append({"layer": layer, "C": grid[best],
                              **{split: score[name](preds[split], labels[split]) for split in EVAL_SPLITS},
                              "not_converged": int(sum(int((~f.converged).sum()) for f in fits))})
        del xs, rs, pre
    return out


# --- encoders ----------------------------------------------------------------------------------------------------


def check_encoder_specs(specs: Sequence[str]) -> None:
    """Every ``--encoders`` entry named once and loadable (a ``random:`` twin's base too:
    :func:`hire.lab.sources.check_source`), before any work."""
    if not specs:
        raise ConfigError("--encoders: give at least one encoder")
    if len(set(specs)) < len(specs):
        raise ConfigError("--encoders: the same encoder twice")
    check_encoders(list(specs), "--encoders")


# --- the run ----------------------------------------------------------------------------------------------------


@dataclass
class TokenProbeRun(WordEncoding):
    """What ``hire probe-tokens`` does: ``encoders`` (specs) x ``tasks`` into ``output_dir``; how words are encoded
    and cached: :class:`~hire.lab.encoding.WordEncoding`'s keyword options."""

    encoders: list[str]
    tasks: list[str]
    output_dir: str
    treebank: str | None = None
    conll2003: str | None = None
    subword: str = "first"
    deprel: str = "universal"
    max_train_sentences: int | None = None
    max_eval_sentences: int | None = None
    fit: FitSettings = field(default_factory=FitSettings)
    seed: int = 0
    overwrite: bool = False

    def config(self) -> dict[str, Any]:
        """What every cell of one results.json shares (the encoders and tasks may grow)."""
        from hire.data.conll import default_conll2003_dir
        from hire.data.conllu import default_ud_dir

        needs = {TASKS[t].source for t in self.tasks}
        return {"subword": self.subword, "deprel": self.deprel, "max_length": self.max_length,
                "max_train_sentences": self.max_train_sentences, "max_eval_sentences": self.max_eval_sentences,
                "c_grid": sorted(self.fit.c_grid), "max_iter": self.fit.max_iter, "tol": self.fit.tol,
                "seed": self.seed,
                "treebank": str(Path(self.treebank or default_ud_dir()).expanduser().resolve()) if "ud" in needs
                else None,
                "conll2003": str(Path(self.conll2003 or default_conll2003_dir()).expanduser().resolve())
                if "conll2003" in needs else None}


def _limits(run: TokenProbeRun) -> dict[str, int | None]:
    return {"train": run.max_train_sentences, "dev": run.max_eval_sentences, "test": run.max_eval_sentences}


def load_sources(run: TokenProbeRun) -> dict[str, dict[str, WordSplit]]:
    """Every source the tasks need, read and checked (before any encoding)."""
    needs = {TASKS[t].source for t in run.tasks}
    out = {}
    if "ud" in needs:
        out["ud"] = load_ud(run.treebank, run.deprel, _limits(run))
    if "conll2003" in needs:
        out["conll2003"] = load_conll2003(run.conll2003, _limits(run))
    return out


def read_results(output_dir: str | Path) -> dict[str, Any] | None:
    """The results.json of an output folder, or None where there is none; DataError where it is unreadable."""
    path = Path(output_dir) / "results.json"
    if not path.is_file():
        return None
    try:
        results = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not a readable results.json ({err})") from None
    if not isinstance(results, dict) or results.get("command") != "probe-tokens" or "tasks" not in results:
        raise DataError(f"{path}: not the results.json of hire probe-tokens")
    return results


def prepare(run: TokenProbeRun) -> tuple[dict[str, Any], dict[str, dict[str, WordSplit]]]:
    """Check everything before any encoding or writing: the options, the folder's earlier results (the same
    options, else ``--overwrite``), the encoders and the data. Returns the results to extend and the data."""
    if not run.tasks:
        raise ConfigError("--tasks: give at least one task")
    if run.subword not in ("first", "last", "mean"):
        raise ConfigError(f"--subword {run.subword}: expected first, last or mean")
    if not run.fit.c_grid or any(c <= 0 for c in run.fit.c_grid):
        raise ConfigError("--c_grid: expected positive numbers separated by commas")
    check_results_dir(run.output_dir, command="probe-tokens", writes=("results.json", "report.md", "figures"),
                      own=results_of("probe-tokens", "command", "probe-tokens"))
    if run.cache_dir is not None:
        check_results_dir(run.cache_dir, "--cache_dir")
    config = run.config()
    earlier = None if run.overwrite else read_results(run.output_dir)
    if earlier is not None:  # probes run before --tol existed stopped at its default
        earlier["config"] = {**earlier.get("config", {}), "tol": earlier.get("config", {}).get("tol", FitSettings.tol)}
    if earlier is not None and earlier["config"] != config:
        changed = sorted(k for k in config if earlier["config"].get(k) != config[k])
        raise ConfigError(f"--output_dir {run.output_dir}: holds probes run with other options ({', '.join(changed)});"
                          " use another folder, the same options, or --overwrite")
    check_encoder_specs(run.encoders)
    data = load_sources(run)
    results = earlier or {"command": "probe-tokens", "version": RESULTS_VERSION, "config": config, "encoders": [],
                          "tasks": {}, "encoding": {}}
    return results, data


def _write_json(path: Path, value: Any) -> None:
    from hire.checks import replacing

    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        tmp.write_text(json.dumps(value, indent=1) + "\n")


def run_token_probes(run: TokenProbeRun, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Probe every encoder x task not yet in ``run.output_dir``'s results.json, saving after each, then write the
    report. Everything is checked (:func:`prepare`) before the first encoding."""
    import torch

    from hire.hardware import machine
    from hire.lab.sources import resolve_source
    from hire.lab.words import encoder_key

    results, data = prepare(run)
    out = Path(run.output_dir)
    known = {e["label"] for e in results["encoders"]}
    for spec in run.encoders:
        todo = [t for t in run.tasks if spec not in results["tasks"].get(t, {}).get("results", {})]
        if not todo:
            log(f"{spec}: every task already probed")
            continue
        encoder = resolve_source(spec)
        tokenizer, key = encoder.tokenizer(words=True), encoder_key(encoder)
        if spec not in known:
            results["encoders"].append({"label": spec, "encoder": spec, "kind": encoder.kind, "key": key})
            known.add(spec)
        features: dict[str, dict[str, Any]] = {}
        for source in sorted({TASKS[t].source for t in todo}):
            features[source] = {}
            for split in SPLITS:
                words = data[source][split]
                cached = run.word_features(words.sentences, tokenizer, encoder.encoder, key, f"{source}-{split}",
                                           run.fit.device, {"encoder_spec": spec}, run.subword)
                features[source][split] = cached
                results["encoding"].setdefault(spec, {})[f"{source}-{split}"] = {
                    "sentences": len(words.sentences), "words": len(words), "cached": cached.cached,
                    "seconds": round(cached.encode_seconds, 3), "path": str(cached.path)}
        encoder.release()
        for name in todo:
            task = TASKS[name]
            log(f"{spec}: probing {name}")
            cell, meta = probe_task(task, data[task.source], features[task.source], run)
            entry = results["tasks"].setdefault(name, meta)
            entry["results"][spec] = cell
            results["machine"] = {**machine(), "device": run.fit.device, "fit_threads": torch.get_num_threads()}
            mark_output_folder(out, "probe-tokens")
            _write_json(out / "results.json", results)
    write_token_report(results, out)
    return results


def probe_task(task: TokenTask, splits: dict[str, WordSplit], features: dict[str, Any], run: TokenProbeRun,
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """One encoder's cell of a task (per layer: the task probe, the control probe, selectivity), and the task's
    encoder-independent description (tags, examples, majority baseline)."""
    names, gold = label_ids({s: splits[s].tags[task.column] for s in SPLITS})
    score = token_metrics(names, task.column)
    control = control_labels({s: splits[s].forms for s in SPLITS}, gold["train"], len(names), run.seed)
    label, baseline = majority(gold["train"], {s: gold[s] for s in EVAL_SPLITS}, score)
    start = time.perf_counter()
    arrays = {}
    for split in SPLITS:
        cached = features[split]
        rows = splits[split].token_rows
        arrays[split] = np.asarray(cached.features)[rows] if len(rows) != len(cached.features) or not np.array_equal(
            rows, np.arange(len(rows))) else cached.features
    fitted = probe_layers(arrays, {"task": gold, "control": control}, {"task": score, "control": accuracy_only},
                          run.fit)
    layers = []
    for t, c in zip(fitted["task"], fitted["control"], strict=True):
        layers.append({"layer": t["layer"], "task": t, "control": c,
                       "selectivity": {s: selectivity(t[s], c[s]) for s in EVAL_SPLITS}})
    cell = {"layers": layers, "summary": summarise(layers), "num_hidden_states": len(layers),
            "seconds": {"encode": round(sum(features[s].encode_seconds for s in SPLITS), 3),
                        "fit": round(time.perf_counter() - start, 3)},
            "cached": {s: bool(features[s].cached) for s in SPLITS}}
    meta = {"source": task.source, "column": task.column, "description": task.description,
            "metrics": list(task.metrics), "tags": names,
            "files": {s: splits[s].path for s in SPLITS},
            "words": {s: len(splits[s]) for s in SPLITS},
            "unseen_tags": {s: int((gold[s] < 0).sum()) for s in EVAL_SPLITS},
            "majority": {"label": names[label], **baseline},
            "control": {"seed": run.seed, "types": len({f for s in SPLITS for f in splits[s].forms})},
            "results": {}}
    return cell, meta


# --- report -----------------------------------------------------------------------------------------------------

def _oracle(s: dict[str, Any]) -> str:
    """The test-best layer where it is not the dev choice (an oracle: never the reported result), else ``-``."""
    return "-" if s["oracle_layer"] == s["best_layer"] else f"{s['oracle_layer']} ({pct(s['oracle'])})"


def task_section(name: str, task: dict[str, Any], labels: list[str]) -> list[str]:
    """A task's Markdown: what it is, the majority baseline, and per encoder a table of every layer (task and
    control accuracy, selectivity, NER's macro F1, the chosen C)."""
    from hire.model.sharing import markdown_table

    words = ", ".join(f"{s} {n}" for s, n in task["words"].items())
    maj = task["majority"]
    parts = [f"## {name}", "", f"{task['description']}: {len(task['tags'])} tags; words: {words}.",
             f"Majority class ({maj['label']!r}): " + ", ".join(
                 f"{s} {pct(maj[s]['accuracy'])}" + (f" (macro F1 {pct(maj[s]['macro_f1'])})"
                                                     if "macro_f1" in maj[s] else "") for s in EVAL_SPLITS) + ".", ""]
    unseen = {s: n for s, n in task["unseen_tags"].items() if n}
    if unseen:
        parts += ["Words whose tag never occurs in training (always wrong): "
                  + ", ".join(f"{s} {n}" for s, n in unseen.items()) + ".", ""]
    ner = "macro_f1" in task["metrics"]
    header = ["layer", "dev acc", "test acc", "control dev", "control test", "selectivity dev", "selectivity test"]
    header += ["dev macro F1", "test macro F1"] if ner else []
    header += ["C", "control C"]
    for label in labels:
        cell = task["results"][label]
        rows = []
        for c in cell["layers"]:
            t, k = c["task"], c["control"]
            row = [str(c["layer"]), pct(t["dev"]["accuracy"]), pct(t["test"]["accuracy"]),
                   pct(k["dev"]["accuracy"]), pct(k["test"]["accuracy"]),
                   pct(c["selectivity"]["dev"]), pct(c["selectivity"]["test"])]
            if ner:
                row += [pct(t["dev"]["macro_f1"]), pct(t["test"]["macro_f1"])]
            rows.append([*row, f"{t['C']:g}", f"{k['C']:g}"])
        s = summarise(cell["layers"])
        oracle = "" if s["oracle_layer"] == s["best_layer"] else (
            f" (oracle, not a result: test alone would pick layer {s['oracle_layer']}, {pct(s['oracle'])})")
        parts += [f"### {label}", "", *markdown_table(header, rows, align="r"), "",
                  f"Chosen on dev: layer {s['best_layer']} (dev {pct(s['best_dev'])}), test accuracy "
                  f"{pct(s['best'])}{oracle}; expected layer {s['expected_layer']:.2f}; most selective layer "
                  f"(chosen on dev) {s['best_selectivity_layer']}.", ""]
    return parts


def summary_rows(results: dict[str, Any], labels: list[str]) -> list[list[str]]:
    """Per task and encoder (test scores): the majority, layer 0, the last layer, the layer chosen on dev and its
    score, the test-best layer where it differs (an oracle), the expected layer, the most selective layer (chosen on
    dev) and its selectivity."""
    rows = []
    for name, task, label, cell in task_records(results, labels):
        acc = [c["task"][HEADLINE]["accuracy"] for c in cell["layers"]]
        s = summarise(cell["layers"])
        rows.append([name, label, pct(task["majority"][HEADLINE]["accuracy"]), pct(acc[0]), pct(acc[-1]),
                     f"{s['best_layer']} ({pct(s['best'])})", _oracle(s), f"{s['expected_layer']:.2f}",
                     f"{s['best_selectivity_layer']} ({pct(s['best_selectivity'])})"])
    return rows


def tasks_figure(results: dict[str, Any], labels: list[str]) -> Any:
    """Test accuracy (x 100, not normalised) against the hidden state: one colour per task, one line style and
    marker per encoder; the legend under the axes names the colours and the styles once each."""
    from matplotlib.lines import Line2D

    fig, ax = new_axes((8, 5.2))
    colours = [f"C{i}" for i in range(10)]
    most = 1
    names = list(results["tasks"])
    for t, name in enumerate(names):
        task = results["tasks"][name]
        for i, label in enumerate(labels):
            if label not in task["results"]:
                continue
            layers = task["results"][label]["layers"]
            most = max(most, len(layers))
            ax.plot([c["layer"] for c in layers], [100 * c["task"][HEADLINE]["accuracy"] for c in layers],
                    markersize=4, linewidth=1.4, color=colours[t % len(colours)], **encoder_style(i))
    ax.set_xticks(range(most))
    ax.set_xlabel("hidden state (0 = embeddings)")
    ax.set_ylabel(f"{HEADLINE} token accuracy x 100")
    ax.set_title("Token probes: accuracy by hidden state", fontsize=10)
    ax.grid(alpha=0.3)
    groups = [([Line2D([], [], color=colours[t % len(colours)], linewidth=3) for t in range(len(names))], names)]
    if len(labels) > 1:
        groups.append((encoder_handles(len(labels)), [short_encoder(x) for x in labels]))
    legend_below(fig, groups, ncol=min(len(names), 3) if len(labels) > 1 else len(names))
    return fig


def plot_tasks(path: Path, results: dict[str, Any], labels: list[str]) -> None:
    """:func:`tasks_figure` as a deterministic PNG."""
    save_png(tasks_figure(results, labels), path)


def write_token_report(results: dict[str, Any], out: str | Path) -> str:
    """``report.md`` and ``figures/layers.png`` under ``out``, from ``results`` (a results.json) alone."""
    from hire.model.sharing import markdown_table

    out = Path(out)
    labels = [e["label"] for e in results["encoders"]]
    cfg = results["config"]
    parts = ["# Token probes", "",
             f"A multinomial logistic regression per hidden state on each word's {cfg['subword']} sub-token "
             f"vector, C chosen from {cfg['c_grid']} by dev token accuracy (L-BFGS to tol "
             f"{cfg.get('tol', FitSettings.tol):g}); scores x 100. Control: each word type "
             f"mapped to a random tag drawn from the training tag distribution (seed {cfg['seed']}); selectivity = "
             "task accuracy - control accuracy. NER's macro F1 is per token, over the tags other than O.", "",
             *[f"- {e['label']}: {e['kind']} (key {e['key'][:12]})" for e in results["encoders"]], ""]
    header = ["task", "encoder", "majority", "layer 0", "last layer", "best layer (chosen on dev)",
              "test-best layer (oracle)", "expected layer", "most selective layer (chosen on dev)"]
    parts += ["## Which layer knows what", "",
              "Test accuracy x 100. Best layer: the layer with the highest dev accuracy, and its test accuracy; the "
              "test-best layer is shown only where test alone would pick another (an oracle, not a result). "
              "Expected layer: sum_l l * D_l / sum_l D_l with D_l = s_l - s_(l-1) and s_l the running best "
              "max(s_0..s_l) of the test accuracies of the per-layer probes (Tenney et al. 2019's differential "
              "scores over cumulative mixes): always within 0..L, 0 where no layer improves on the embeddings. Most "
              "selective layer: the highest dev selectivity (task - control accuracy), its test selectivity in "
              "brackets.", "",
              *markdown_table(header, summary_rows(results, labels), align="llr"), "",
              "![accuracy by hidden state, every task](figures/layers.png)", ""]
    for name, task in results["tasks"].items():
        parts += task_section(name, task, [x for x in labels if x in task["results"]])
    time_rows = [[name, label, f"{cell['seconds']['encode']:.1f}", f"{cell['seconds']['fit']:.1f}"]
                 for name, _, label, cell in task_records(results, labels)]
    m = results.get("machine", {})
    where = ", ".join(f"{k} {m[k]}" for k in ("device", "cpu", "cpu_count", "gpu", "torch", "fit_threads") if k in m)
    parts += ["## Time", "", where, "", *markdown_table(["task", "encoder", "encode s", "fit s"], time_rows,
                                                        align="llr"), "",
              "Encoding is shared by the tasks of one source (its seconds are those of the run that wrote the cache; "
              "0 where the features were found cached).", ""]
    text = "\n".join(parts)
    plot_tasks(out / "figures" / "layers.png", results, labels)
    (out / "report.md").write_text(text)
    return text


def redraw(output_dir: str | Path) -> str:
    """Redraw ``report.md`` and the figure of a ``hire probe-tokens`` folder from its results.json alone."""
    folder = Path(output_dir)
    results = read_results(folder)
    if results is None:
        raise DataError(f"{folder / 'results.json'}: no such file (run hire probe-tokens --output_dir {folder})")
    mark_output_folder(folder, "probe-tokens")  # a folder from before markers: its results make it the probe's
    return write_token_report(results, folder)


__all__ = ["TASKS", "FitSettings", "TokenProbeRun", "TokenTask", "WordSplit", "accuracy_only", "check_encoder_specs",
           "control_label", "control_labels", "expected_layer", "label_ids", "load_conll2003", "load_ud", "majority",
           "parse_tasks", "probe_layers", "probe_task", "read_results", "redraw", "run_token_probes", "selectivity",
           "summarise", "token_metrics", "write_token_report"]
