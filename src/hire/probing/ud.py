"""SentEval's probing tasks (Conneau et al., 2018) rebuilt from any Universal Dependencies treebank.

Conneau et al. made ten classification data sets from parsed text by simple rules: surface (SentLen, WC),
syntactic (BShift, TreeDepth, TopConst) and semantic (Tense, SubjNum, ObjNum, CoordInv; SOMO needs a language
model and has no analogue here). A CoNLL-U treebank carries the annotation those rules read (a tree, UPOS,
morphological features), so the same tasks follow from its own train/dev/test split, in any language.

Common to every task, as SentEval did:

- sentences of 5 to 28 surface tokens (a multi-word token such as *don't* counts once);
- the text is the surface tokens joined by single spaces (SentEval's files were tokenised the same way; it
  also makes the two classes of BShift and CoordInv look alike apart from the word order);
- the classes are balanced by downsampling: in every split, each class keeps as many examples as the split's
  smallest class, chosen at random (``seed``) and kept in treebank order;
- a task is skipped, with a message, unless every class keeps at least :data:`MIN_PER_CLASS` examples (50 in
  train, 10 in dev and in test); Tense, SubjNum and ObjNum are skipped where the treebank has no FEATS.

Each builder's docstring states its exact rule, the SentEval task it mirrors and how it differs.
"""

from __future__ import annotations

import functools
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hire.data.conllu import SPLITS, Sentence, SplitFiles, default_ud_dir, find_treebank, read_conllu
from hire.data.examples import DataError, Example
from hire.probing.classifiers import ProbeTask

MIN_TOKENS, MAX_TOKENS = 5, 28
MIN_PER_CLASS = {"train": 50, "dev": 10, "test": 10}  # after balancing; fewer: the task is skipped
ALL_TASKS = "ud-probes"
SENTLEN_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))  # SentEval's six length classes
DEPTH_CLASSES = ("<=3", "4", "5", "6", ">=7")
WC_MAX_SHARE = 0.02  # WC leaves out words found in more than 2% of training sentences (the most frequent)
WC_MAX_WORDS = 1000  # SentEval's number of WC classes
TOPCONST_CLASSES = 19  # SentEval: the 19 most frequent top-constituent sequences, and OTHER
TOPCONST_SKIP = {"punct", "aux", "cop", "mark", "case", "det"}  # function words inside a constituent
CONTENT = {"NOUN", "VERB", "ADJ", "ADV"}
SUBJECTS = {"nsubj", "csubj", "expl"}

Tokens = list[str]
Labelled = dict[str, list[tuple[str, Tokens, Sentence]]]  # split -> (label, text tokens, source sentence)


@dataclass(frozen=True)
class UDTask:
    """A task's name, the SentEval task it mirrors, its group, and whether it reads morphological features."""

    name: str
    senteval: str
    group: str  # surface, syntactic or semantic (Conneau et al.'s grouping)
    needs_feats: bool
    build: Callable[[dict[str, list[Sentence]], int], tuple[Labelled, list[str]]]

    @property
    def rule(self) -> str:
        """The builder's docstring: the exact rule, the SentEval counterpart and the difference."""
        return " ".join((self.build.__doc__ or "").split())


@dataclass
class UDSuite:
    """The tasks built from one treebank: ``tasks`` (balanced, ready to probe), ``skipped`` (name -> why),
    ``counts`` (name -> split -> class -> examples before balancing) and the treebank's files."""

    files: dict[str, SplitFiles]
    tasks: dict[str, ProbeTask] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    counts: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def _text(sentence: Sentence) -> Tokens:
    return [form for form, _, _ in sentence.tokens()]


def _base(deprel: str) -> str:
    return deprel.split(":")[0]


# -- the rules -------------------------------------------------------------------------------------------------
def sentlen(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """SentLen (SentEval SentLen): the number of surface tokens, in SentEval's six bins 5-8, 9-12, 13-16,
    17-20, 21-25, 26-28. The same as SentEval's but for counting the treebank's tokens."""
    def label(x: Sentence) -> str | None:
        n = len(x.tokens())
        return next((f"{a}-{b}" for a, b in SENTLEN_BINS if a <= n <= b), None)
    return _labelled(treebank, label), [f"{a}-{b}" for a, b in SENTLEN_BINS]


def treedepth(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """TreeDepth (SentEval TreeDepth): the depth of the dependency tree, the root counting 1 (the most words on
    a path from the root down), in five classes <=3, 4, 5, 6, >=7. SentEval measured constituency trees (depths
    5-11 as classes) and decorrelated depth from length; dependency trees are shallower, and the depth here is
    not decorrelated from the length (the SentLen probe shows how much length alone explains)."""
    def label(x: Sentence) -> str:
        depth = max(x.depths())
        return "<=3" if depth <= 3 else ">=7" if depth >= 7 else str(depth)
    return {s: [(label(x), _text(x), x) for x in sents] for s, sents in treebank.items()}, list(DEPTH_CLASSES)


def topconst(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """TopConst (analogue of SentEval TopConst): the sequence, in word order, of the universal relations
    (subtypes dropped: ``nsubj:pass`` is ``nsubj``) of the root's dependents, with ``ROOT`` at the root's
    place, leaving out punct, aux, cop, mark, case and det (function words that a constituency tree puts inside
    a phrase), e.g. ``nsubj_ROOT_obj``. Classes: the 19 most frequent sequences in train that keep enough
    examples in every split, and OTHER for every other sequence (where those are enough for a class).
    SentEval read the constituents under the sentence node of a constituency tree (``NP_VP_.``, with
    punctuation) and had 19 + OTHER classes."""
    raw = {s: [(top_relations(x), _text(x), x) for x in sents] for s, sents in treebank.items()}
    counts = {s: Counter(lab for lab, _, _ in items) for s, items in raw.items()}
    keep = [lab for lab, _ in counts["train"].most_common() if _enough(counts, lab)][:TOPCONST_CLASSES]
    kept = set(keep)
    out = {s: [(lab if lab in kept else "OTHER", t, x) for lab, t, x in items] for s, items in raw.items()}
    other = {s: Counter(lab for lab, _, _ in items) for s, items in out.items()}
    if _enough(other, "OTHER"):
        return out, [*keep, "OTHER"]
    return {s: [item for item in items if item[0] != "OTHER"] for s, items in out.items()}, keep


def top_relations(x: Sentence) -> str:
    """TopConst's label before the class cut: the root's dependents' universal relations and ``ROOT``, in word
    order, without :data:`TOPCONST_SKIP`, joined by ``_``."""
    root = x.root.id
    ids = sorted([root, *x.children()[root]])
    return "_".join("ROOT" if i == root else _base(x.words[i - 1].deprel) for i in ids
                    if i == root or _base(x.words[i - 1].deprel) not in TOPCONST_SKIP)


def wc(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """WC (SentEval WC): which of N words the sentence contains, among sentences holding exactly one token of
    those N (lower-cased). The candidates are alphabetic content words (most often NOUN, VERB, ADJ or ADV in
    train) found in at most 2% of the training sentences (the most frequent words left out), taken from the
    most frequent down; a candidate is kept when every kept word still has enough examples in every split,
    which fixes N (at most SentEval's 1000). SentEval took 1000 words of frequency ranks 2,000-3,000 of a far
    larger corpus, with 100 training sentences each; a treebank supports tens of words, more frequent ones."""
    train = treebank["train"]
    upos: dict[str, Counter[str]] = {}
    sentence_freq: Counter[str] = Counter()
    for x in train:
        for w in x.words:
            upos.setdefault(w.form.lower(), Counter())[w.upos] += 1
        sentence_freq.update({form.lower() for form in _text(x)})
    limit = WC_MAX_SHARE * len(train)
    candidates = [w for w, n in sentence_freq.most_common() if w.isalpha() and n <= limit
                  and w in upos and upos[w].most_common(1)[0][0] in CONTENT]
    lowered = {s: [[form.lower() for form in _text(x)] for x in sents] for s, sents in treebank.items()}
    words = _choose_words(lowered, candidates)
    chosen = set(words)
    out: Labelled = {}
    for s, sents in treebank.items():
        out[s] = []
        for x, forms in zip(sents, lowered[s], strict=True):
            hits = [f for f in forms if f in chosen]
            if len(hits) == 1:
                out[s].append((hits[0], _text(x), x))
    return out, words


def _choose_words(lowered: dict[str, list[list[str]]], candidates: list[str]) -> list[str]:
    """Greedy, most frequent first: add a word when every chosen word then has :data:`MIN_PER_CLASS` sentences
    holding exactly one chosen token (it alone) in every split. Hits per sentence are updated incrementally."""
    where = {s: _occurrences(forms, set(candidates)) for s, forms in lowered.items()}
    hits = {s: [0] * len(forms) for s, forms in lowered.items()}
    single = {s: [""] * len(forms) for s, forms in lowered.items()}  # the one chosen word where hits == 1
    exact: dict[str, Counter[str]] = {s: Counter() for s in lowered}
    chosen: list[str] = []
    for word in candidates:
        if len(chosen) == WC_MAX_WORDS:
            break
        if any(sum(n == 1 for _, n in where[s].get(word, [])) < MIN_PER_CLASS[s] for s in lowered):
            continue  # can never reach the minimum, whatever else is chosen
        trial = {s: exact[s].copy() for s in lowered}
        for s in lowered:
            for i, n in where[s].get(word, []):
                if hits[s][i] == 1:
                    trial[s][single[s][i]] -= 1
                if hits[s][i] == 0 and n == 1:
                    trial[s][word] += 1
        if all(trial[s][w] >= MIN_PER_CLASS[s] for s in lowered for w in [*chosen, word]):
            for s in lowered:
                for i, n in where[s].get(word, []):
                    hits[s][i] += n
                    single[s][i] = word
            exact, chosen = trial, [*chosen, word]
    return chosen


def _occurrences(sentences: list[list[str]], candidates: set[str]) -> dict[str, list[tuple[int, int]]]:
    found: dict[str, list[tuple[int, int]]] = {}
    for i, forms in enumerate(sentences):
        for word, n in Counter(f for f in forms if f in candidates).items():
            found.setdefault(word, []).append((i, n))
    return found


def tense(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """Tense (SentEval Tense): the Tense feature (Past or Pres) of the main clause's finite verb: the root when it
    has VerbForm=Fin, else the root's leftmost aux, aux:pass or cop dependent with VerbForm=Fin. So a copular
    sentence takes its copula's tense ("she was happy": Past, from *was*), and a perfect, progressive or passive
    its auxiliary's ("has eaten": Pres). Sentences without such a verb, or whose finite verb has no Tense
    (modals such as *will*, imperatives), are left out. SentEval labelled the main verb's tense from its
    part-of-speech tag (VBD against VBP/VBZ)."""
    def label(x: Sentence) -> str | None:
        root = x.root
        finite = root if root.feats.get("VerbForm") == "Fin" else next(
            (x.words[i - 1] for i in x.children()[root.id] if x.words[i - 1].deprel in ("aux", "aux:pass", "cop")
             and x.words[i - 1].feats.get("VerbForm") == "Fin"), None)
        value = finite.feats.get("Tense") if finite is not None else None
        return value if value in ("Past", "Pres") else None
    return _labelled(treebank, label), ["Pres", "Past"]


def _number(relations: set[str]) -> Callable[[Sentence], str | None]:
    def label(x: Sentence) -> str | None:
        deps = [x.words[i - 1] for i in x.children()[x.root.id] if x.words[i - 1].deprel in relations]
        if len(deps) != 1 or deps[0].upos not in ("NOUN", "PROPN"):
            return None
        value = deps[0].feats.get("Number")
        return value if value in ("Sing", "Plur") else None
    return label


def subjnum(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """SubjNum (SentEval SubjNum): the Number (Sing or Plur) of the root's only nsubj or nsubj:pass dependent
    (so a passive's subject counts, and a copular sentence's), when that subject is a NOUN or PROPN. Pronoun
    subjects, sentences with no or two subjects, and other Number values (Ptan) are left out. SentEval read the
    subject noun's tag (NN against NNS) and kept test nouns out of train; this does not."""
    return _labelled(treebank, _number({"nsubj", "nsubj:pass"})), ["Sing", "Plur"]


def objnum(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """ObjNum (SentEval ObjNum): the Number (Sing or Plur) of the root's only obj dependent, when it is a NOUN
    or PROPN; sentences with no direct object of the root (intransitive, passive, copular) are left out.
    SentEval read the object noun's tag (NN against NNS) and kept test nouns out of train; this does not."""
    return _labelled(treebank, _number({"obj"})), ["Sing", "Plur"]


def _labelled(treebank: dict[str, list[Sentence]], label: Callable[[Sentence], str | None]) -> Labelled:
    return {s: [(lab, _text(x), x) for x in sents for lab in [label(x)] if lab is not None]
            for s, sents in treebank.items()}


def bshift(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """BShift (SentEval BShift): in half the sentences (chosen at random), two adjacent tokens are swapped (label
    I), the other half are as written (O). The pair is chosen at random among adjacent tokens that are not
    punctuation and differ, and not the first pair (a capital letter inside the sentence would give the swap
    away). SentEval swapped any two adjacent words."""
    def swaps(x: Sentence) -> list[int]:
        tokens = x.tokens()
        punct = [all(x.words[i - 1].upos == "PUNCT" for i in range(a, b + 1)) for _, a, b in tokens]
        return [i for i in range(1, len(tokens) - 1) if not punct[i] and not punct[i + 1]
                and tokens[i][0].lower() != tokens[i + 1][0].lower()]

    def invert(x: Sentence, rng: np.random.Generator) -> Tokens:
        text, options = _text(x), swaps(x)
        i = options[int(rng.integers(len(options)))]
        text[i], text[i + 1] = text[i + 1], text[i]
        return text
    return _halves(treebank, seed, 1, lambda x: bool(swaps(x)), invert), ["O", "I"]


def coordinv(treebank: dict[str, list[Sentence]], seed: int) -> tuple[Labelled, list[str]]:
    """CoordInv (SentEval CoordInv): sentences made of two coordinated clauses, "A[,] cc B[.]": the root has
    exactly one conj dependent, that conjunct has a subject (nsubj, csubj or expl; so it is a clause, not a
    second verb phrase) and a cc dependent that starts its subtree, the subtree is contiguous and only
    punctuation follows it, and the root has a subject too. In half of them (at random) the clauses are swapped,
    "B[,] cc A[.]" (label I), with the first letter's case moved (a capital first word whose lemma is lower case
    is lower-cased, the new first word capitalised); the other half are as written (O). SentEval found the
    coordination in constituency trees; the swap is the same."""
    def parts(x: Sentence) -> tuple[list[int], int, list[int], list[int], list[int]] | None:
        """(clause A, cc, [comma], clause B, trailing punctuation) as token positions, or None."""
        kids, root, words = x.children(), x.root.id, x.words
        conj = [i for i in kids[root] if _base(words[i - 1].deprel) == "conj"]
        if len(conj) != 1 or not any(_base(words[i - 1].deprel) in SUBJECTS for i in kids[root]):
            return None
        c = conj[0]
        if not any(_base(words[i - 1].deprel) in SUBJECTS for i in kids[c]):
            return None
        span = _subtree(kids, c)
        first, last = min(span), max(span)
        if len(span) != last - first + 1 or any(words[i - 1].upos != "PUNCT" for i in range(last + 1, len(words) + 1)):
            return None
        if words[first - 1].upos == "PUNCT" and first < last and _base(words[first].deprel) == "cc":
            cc, comma = first + 1, first  # UD attaches the comma before "but" to the second conjunct
        elif _base(words[first - 1].deprel) == "cc":
            cc, comma = first, (first - 1 if words[first - 2].upos == "PUNCT" else None)
        else:
            return None
        if words[cc - 1].head != c or (comma or cc) < 3:
            return None
        tokens = x.tokens()
        start = {a: k for k, (_, a, _) in enumerate(tokens)}
        if any(w not in start for w in (comma or cc, cc, cc + 1)) or (last + 1 <= len(words) and last + 1 not in start):
            return None  # a multi-word token across a clause boundary
        end = start[last + 1] if last + 1 <= len(words) else len(tokens)
        a_end = start[comma or cc]
        return (list(range(a_end)), start[cc], [start[comma]] if comma else [], list(range(start[cc] + 1, end)),
                list(range(end, len(tokens))))

    def invert(x: Sentence, rng: np.random.Generator) -> Tokens:
        found = parts(x)
        assert found is not None
        a, k, comma, b, tail = found
        text = _text(x)
        first = x.words[x.tokens()[a[0]][1] - 1]
        clause_a = [text[i] for i in a]
        if first.form[:1].isupper() and not first.lemma[:1].isupper():
            clause_a[0] = clause_a[0][:1].lower() + clause_a[0][1:]
        clause_b = [text[i] for i in b]
        clause_b[0] = clause_b[0][:1].upper() + clause_b[0][1:]
        return [*clause_b, *(text[i] for i in comma), text[k], *clause_a, *(text[i] for i in tail)]
    return _halves(treebank, seed, 2, lambda x: parts(x) is not None, invert), ["O", "I"]


def _subtree(kids: dict[int, list[int]], node: int) -> list[int]:
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(kids[n])
    return out


def _halves(treebank: dict[str, list[Sentence]], seed: int, salt: int, eligible: Callable[[Sentence], bool],
            invert: Callable[[Sentence, np.random.Generator], Tokens]) -> Labelled:
    """Per split: the eligible sentences, a random half changed (I) and as many kept (O), in treebank order."""
    out: Labelled = {}
    for k, (s, sents) in enumerate(treebank.items()):
        rng = np.random.default_rng([seed, salt, k])
        pool = [x for x in sents if eligible(x)]
        order = rng.permutation(len(pool))
        half = len(pool) // 2
        changed = set(order[:half].tolist())
        kept = set(order[half:2 * half].tolist())
        out[s] = [("I", invert(x, rng), x) if i in changed else ("O", _text(x), x)
                  for i, x in enumerate(pool) if i in changed or i in kept]
    return out


UD_TASKS = {t.name: t for t in (
    UDTask("ud-sentlen", "SentLen", "surface", False, sentlen),
    UDTask("ud-wc", "WC", "surface", False, wc),
    UDTask("ud-bshift", "BShift", "syntactic", False, bshift),
    UDTask("ud-treedepth", "TreeDepth", "syntactic", False, treedepth),
    UDTask("ud-topconst", "TopConst", "syntactic", False, topconst),
    UDTask("ud-tense", "Tense", "semantic", True, tense),
    UDTask("ud-subjnum", "SubjNum", "semantic", True, subjnum),
    UDTask("ud-objnum", "ObjNum", "semantic", True, objnum),
    UDTask("ud-coordinv", "CoordInv", "semantic", False, coordinv),
)}


def is_ud_task(name: str) -> bool:
    """``ud-probes`` or one of :data:`UD_TASKS` (case-insensitive)."""
    return name.lower() == ALL_TASKS or name.lower() in UD_TASKS


def expand(names: Sequence[str]) -> list[str]:
    """``ud-probes`` replaced by every UD task, in order; duplicates dropped; other names kept."""
    out: list[str] = []
    for name in names:
        for n in (list(UD_TASKS) if name.lower() == ALL_TASKS else [name.lower() if is_ud_task(name) else name]):
            if n not in out:
                out.append(n)
    return out


# -- building, balancing, the thresholds -------------------------------------------------------------------------
def _enough(counts: dict[str, Counter[str]], label: str) -> bool:
    return all(counts[s][label] >= MIN_PER_CLASS[s] for s in counts)


@functools.lru_cache(maxsize=2)
def _read(files: tuple[tuple[str, tuple[str, ...], tuple[float, ...]], ...]) -> dict[str, list[Sentence]]:
    """Every split's sentences of 5-28 tokens (cached by paths and modification times)."""
    return {s: [x for p in paths for x in read_conllu(p) if MIN_TOKENS <= len(x.tokens()) <= MAX_TOKENS]
            for s, paths, _ in files}


def read_treebank(treebank: str | Path | None, option: str = "--treebank",
                  command: str = "a UD probing task") -> tuple[dict[str, SplitFiles], dict[str, list[Sentence]]]:
    """The treebank's files (default :func:`~hire.data.conllu.default_ud_dir`; a folder, or each split named:
    :func:`~hire.data.conllu.find_treebank`) and its sentences of 5-28 tokens. Every task needs all three splits
    (trained on train, regularisation chosen on dev, scored on test)."""
    files = find_treebank(treebank if treebank is not None else default_ud_dir(), option, command=command)
    return files, _read(tuple((s, tuple(map(str, f.paths)), tuple(p.stat().st_mtime for p in f.paths))
                              for s, f in files.items()))


def build_ud_tasks(treebank: str | Path | None = None, names: Sequence[str] | None = None, seed: int = 0,
                   option: str = "--treebank", command: str = "a UD probing task") -> UDSuite:
    """The tasks ``names`` (default: all of :data:`UD_TASKS`) from a treebank folder, deterministic for ``seed``.

    A task the treebank cannot support is in ``skipped`` with the reason, not in ``tasks``.
    """
    files, sentences = read_treebank(treebank, option, command)
    suite = UDSuite(files)
    has_feats = any(w.feats for x in sentences["train"] for w in x.words)
    for name in expand(names or [ALL_TASKS]):
        spec = UD_TASKS.get(name)
        if spec is None:
            raise DataError(f"--task {name}: not a UD probing task ({', '.join([ALL_TASKS, *UD_TASKS])})")
        if spec.needs_feats and not has_feats:
            suite.skipped[name] = (f"{files['train']}: no morphological features (FEATS is _ throughout); "
                                   f"{spec.senteval} needs them")
            continue
        labelled, classes = spec.build(sentences, seed)
        counts = {s: Counter(lab for lab, _, _ in items) for s, items in labelled.items()}
        suite.counts[name] = {s: {c: counts[s][c] for c in classes} for s in SPLITS}
        task, why = _balanced(spec, labelled, classes, counts, seed, files)
        if task is None:
            suite.skipped[name] = why
        else:
            suite.tasks[name] = task
    return suite


def _balanced(spec: UDTask, labelled: Labelled, classes: list[str], counts: dict[str, Counter[str]], seed: int,
              files: dict[str, SplitFiles]) -> tuple[ProbeTask | None, str]:
    """Each class downsampled to the split's smallest (random, kept in order); None and why where too few."""
    if len(classes) < 2:
        return None, (f"{files['train']}: {spec.senteval} found {len(classes)} class(es) with enough examples "
                      f"(a class needs {_minimum()})")
    short = [(s, c, counts[s][c]) for s in SPLITS for c in classes if counts[s][c] < MIN_PER_CLASS[s]]
    if short:
        s, c, n = min(short, key=lambda t: t[2] / MIN_PER_CLASS[t[0]])
        return None, (f"{files[s]}: {spec.senteval} class {c!r} has {n} {s} examples (a class needs "
                      f"{_minimum()}; too few for a probe)")
    splits = {}
    for k, s in enumerate(SPLITS):
        size = min(counts[s][c] for c in classes)
        rng = np.random.default_rng([seed, k, zlib.crc32(spec.name.encode())])
        keep: set[int] = set()
        for c in classes:
            members = [i for i, (lab, _, _) in enumerate(labelled[s]) if lab == c]
            keep.update(members[j] for j in rng.choice(len(members), size=size, replace=False).tolist())
        splits[s] = [Example(x.sent_id or f"{x.line}", " ".join(tokens), None, lab)
                     for i, (lab, tokens, x) in enumerate(labelled[s]) if i in keep]
    n = {s: len(splits[s]) // len(classes) for s in SPLITS}
    note = (f"{spec.senteval} analogue from {files['train'].parent}: {len(classes)} classes, balanced to "
            f"{n['train']} / {n['dev']} / {n['test']} examples per class (train / dev / test)")
    task = ProbeTask(spec.name, splits, list(classes), ("accuracy",), {s: str(p) for s, p in files.items()}, [note])
    return task, ""


def _minimum() -> str:
    return f"at least {MIN_PER_CLASS['train']} examples in train, {MIN_PER_CLASS['dev']} in dev and " \
           f"{MIN_PER_CLASS['test']} in test"


def load_ud_task(name: str, treebank: str | Path | None = None, seed: int = 0, option: str = "--treebank",
                 ) -> ProbeTask:
    """One task by name, ready to probe; DataError with the reason where the treebank cannot support it."""
    suite = build_ud_tasks(treebank, [name], seed, option)
    key = name.lower()
    if key in suite.skipped:
        raise DataError(f"--task {name}: skipped: {suite.skipped[key]}")
    return suite.tasks[key]


# -- what a task is: counts and examples ------------------------------------------------------------------------
def describe(suite: UDSuite) -> str:
    """Markdown: per task, its rule, the examples per split and class (before and after balancing) and one
    training example per class; per skipped task, why."""
    out = [f"# Probing tasks from {suite.files['train'].parent}\n",
           f"Sentences of {MIN_TOKENS}-{MAX_TOKENS} tokens; classes balanced by downsampling; a class needs "
           f"{_minimum()}.\n"]
    for name in [*suite.counts, *(n for n in suite.skipped if n not in suite.counts)]:
        spec = UD_TASKS[name]
        out.append(f"## {name} (SentEval {spec.senteval}, {spec.group})\n\n{spec.rule}\n")
        if name in suite.skipped:
            out.append(f"Skipped: {suite.skipped[name]}\n")
        if name in suite.counts:
            task = suite.tasks.get(name)
            out.append(_counts_table(suite.counts[name], task))
        if name in suite.tasks:
            task = suite.tasks[name]
            rows = ["| class | example (train) |", "|---|---|"]
            for label in task.label_names or []:
                example = next(e for e in task.splits["train"] if e.label == label)
                rows.append(f"| {label} | {example.text_a.replace('|', '&#124;')} |")
            out.append("\n".join(rows) + "\n")
    return "\n".join(out)


def _counts_table(counts: dict[str, dict[str, int]], task: ProbeTask | None) -> str:
    """class x split: kept after balancing (of all that the rule found)."""
    rows = ["| class | " + " | ".join(SPLITS) + " |", "|---|" + "---:|" * len(SPLITS)]
    kept = {s: Counter(str(e.label) for e in task.splits[s]) for s in SPLITS} if task else None
    for label in counts["train"]:
        cells = [f"{kept[s][label]} of {counts[s][label]}" if kept else str(counts[s][label]) for s in SPLITS]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    totals = [f"{sum(kept[s].values())} of {sum(counts[s].values())}" if kept else str(sum(counts[s].values()))
              for s in SPLITS]
    rows.append("| all | " + " | ".join(totals) + " |")
    return "\n".join(rows) + "\n"


def write_senteval_folders(suite: UDSuite, out: Path, description: str) -> None:
    """Each task as a SentEval folder named after the SentEval task (``out/Tense/train.tsv``, ``dev.tsv``,
    ``test.tsv``, header ``label<TAB>sentence``), which ``hire probe --senteval_dir out --task Tense`` reads; the
    description as ``out/README.md``. The folder is marked as ud-tasks' own first (the command checked that it
    is new, empty or its own: never a treebank's folder, whose README.md is the release's)."""
    from hire.runs import mark_output_folder

    mark_output_folder(out, "ud-tasks")
    for name, task in suite.tasks.items():
        folder = out / UD_TASKS[name].senteval
        folder.mkdir(exist_ok=True)
        for split, examples in task.splits.items():
            lines = ["label\tsentence", *(f"{e.label}\t{e.text_a}" for e in examples)]
            (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "README.md").write_text(description, encoding="utf-8")
