"""Made-up data sets that several test modules share, written once: a ranking set in WikiQA's layout, tagged
sentences in CoNLL columns, and a treebank in UD's layout."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from badinput import given_once
from tiny import save_tiny_encoder

# A ranking set in WikiQA's TSV layout.

HEADER = "QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel"
COLUMNS = "qid=QuestionID,question=Question,pid=SentenceID,passage=Sentence,label=Label"
THINGS = ["lake", "river", "tower", "bridge", "castle", "forest", "valley", "harbour", "market", "temple"]
PLACES = ["north", "south", "east", "west", "hills", "coast", "plain", "island"]
FILLER = ["people", "often", "visit", "during", "summer", "the", "old", "town", "has", "many", "shops"]


def ranking_rows(n: int, seed: int, start: int = 0) -> list[str]:
    """WikiQA-style rows: question Q<i> asks where a thing is; its one correct sentence names the thing and its
    place, the others are filler or name other things (some questions have no correct sentence, as in WikiQA)."""
    rng = random.Random(seed)
    rows = []
    for q in range(start, start + n):
        thing, place = rng.choice(THINGS), rng.choice(PLACES)
        question = f"where is the {thing}"
        candidates = rng.randint(3, 6)
        answer = rng.randrange(candidates) if q % 5 else -1  # every fifth question has no correct answer
        for c in range(candidates):
            if c == answer:
                text, label = f"the {thing} is in the {place}", 1
            else:
                other = rng.choice([t for t in THINGS if t != thing])
                if rng.random() < 0.5:  # the answer's own words about another thing
                    text = f"the {other} is in the {rng.choice(PLACES)}"
                else:
                    text = " ".join(rng.choices(FILLER, k=rng.randint(3, 8))) + f" near the {other}"
                label = 0
            rows.append(f"Q{q}\t{question}\tD{q}\tTitle {q}\tD{q}-{c}\t{text}\t{label}")
    return rows


def write_tsv(path: Path, rows: list[str]) -> Path:
    path.write_bytes((HEADER + "\r\n" + "".join(r + "\r\n" for r in rows)).encode())  # CRLF, as WikiQA
    return path


def ranking_world(root: Path) -> dict[str, Path]:
    """A made-up ranking set in WikiQA's TSV layout (train, dev, test) and two tiny encoders that know its words."""
    files = {"train": write_tsv(root / "train.tsv", ranking_rows(30, 0)),
             "dev": write_tsv(root / "dev.tsv", ranking_rows(10, 1, start=100)),
             "test": write_tsv(root / "test.tsv", ranking_rows(8, 2, start=200))}
    words = THINGS + PLACES + FILLER + ["where", "is", "in", "near"]
    files["encoder"] = save_tiny_encoder(root / "encoder", words)
    files["encoder3"] = save_tiny_encoder(root / "encoder3", words, layers=3)  # for concat-last-4
    return files


def ranking_options(world: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return given_once(["train", "--output_dir", str(out), "--data.task", "custom", "--data.format", "ranking",
                       "--data.train_file", str(world["train"]), "--data.dev_file", str(world["dev"]),
                       "--data.test_file", str(world["test"]), "--data.ranking_columns", COLUMNS,
                       "--data.max_length", "32", "--model.encoder", str(world["encoder"]), "--train.batch_size",
                       "16", "--train.max_steps", "6", "--train.eval_every", "3", "--train.checkpoint_every", "2",
                       "--train.lr", "3e-3", "--train.mixed_precision", "no", *extra])[1:]


# Tagged sentences in CoNLL columns.

# CoNLL-2003's first sentences (IOB2) with their tags.
CONLL2003_SENTENCES = [
    ("EU rejects German call to boycott British lamb .", "B-ORG O B-MISC O O O B-MISC O O"),
    ("Peter Blackburn", "B-PER I-PER"),
    ("BRUSSELS 1996-08-22", "B-LOC O"),
    ("The European Commission said on Thursday it disagreed with German advice .",
     "O B-ORG I-ORG O O O O O O B-MISC O O"),
    ("Germany 's representative to the European Union 's veterinary committee Werner Zwingmann said .",
     "B-LOC O O O O B-ORG I-ORG O O O B-PER I-PER O O"),
]


TYPES = ("PER", "LOC", "ORG")
WORDS = {"PER": ["anna", "bob", "carla", "dieter"], "LOC": ["paris", "bonn", "oslo", "lima"],
         "ORG": ["acme", "nasa", "fifa", "unesco"], "O": ["the", "met", "in", "at", "said", "and", "a", "visit"]}


def sentences(n: int, seed: int, long_every: int = 0) -> list[list[tuple[str, str]]]:
    """Random tagged sentences (IOB1 as CoNLL-2003 released: an entity starts with I- unless it follows one of
    its own type); every ``long_every``-th sentence is 60 words long."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = 60 if long_every and i % long_every == 0 else rng.randint(3, 9)
        words, previous = [], "O"
        while len(words) < length:
            kind = rng.choice([*TYPES, "O", "O"])
            if kind == "O":
                words.append((rng.choice(WORDS["O"]), "O"))
                previous = "O"
                continue
            for j in range(rng.randint(1, 2)):
                prefix = "B" if j == 0 and previous == kind else "I"
                words.append((rng.choice(WORDS[kind]), f"{prefix}-{kind}"))
            previous = kind
        out.append(words[:length])
    return out


def write_conll(path: Path, data: list[list[tuple[str, str]]]) -> Path:
    lines = ["-DOCSTART- -X- O", ""]
    for sentence in data:
        lines += [f"{w} X {t}" for w, t in sentence] + [""]
    path.write_text("\n".join(lines) + "\n")
    return path


# A treebank in UD's layout.

Spec = list[tuple[str, str, int, str, str]]  # (form, UPOS, head, deprel, feats)
FIN = "Mood=Ind|Tense={}|VerbForm=Fin"


def conllu(specs: list[Spec], multiword: dict[int, tuple[int, str]] | None = None) -> str:
    """CoNLL-U text: one sentence per spec (lemma: the lower-cased form; ``multiword``: first id -> (last, form),
    for the first sentence)."""
    out = []
    for n, spec in enumerate(specs):
        lines = [f"# sent_id = s{n}", f"# text = {' '.join(w[0] for w in spec)}"]
        for i, (form, upos, head, deprel, feats) in enumerate(spec, start=1):
            if n == 0 and multiword and i in multiword:
                last, surface = multiword[i]
                lines.append(f"{i}-{last}\t{surface}" + "\t_" * 8)
            lemma = form if upos == "PROPN" else form.lower()
            lines.append(f"{i}\t{form}\t{lemma}\t{upos}\t_\t{feats}\t{head}\t{deprel}\t_\t_")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out) + "\n"


def synthetic_treebank(folder: Path, name: str = "xx_test", sizes: tuple[int, int, int] = (900, 160, 160),
                       feats: bool = True, seed: int = 0) -> Path:
    """A made-up treebank in UD's layout: "The dog(s) chase(d) the cat(s) [in the N [of the N]...]
    [, and CLAUSE] ." with random number, tense and length."""
    rng = np.random.default_rng(seed)
    nouns = [("dog", "dogs"), ("cat", "cats"), ("bird", "birds"), ("car", "cars"), ("tree", "trees")]
    verbs = [("chases", "chase", "chased"), ("sees", "see", "saw"), ("likes", "like", "liked")]

    def clause(offset: int, head: int, deprel: str, pps: int) -> Spec:
        subj, obj = nouns[rng.integers(5)], nouns[rng.integers(5)]
        sn, on, tense, verb = rng.integers(2), rng.integers(2), rng.integers(2), verbs[rng.integers(3)]
        form = verb[2] if tense else (verb[0] if sn == 0 else verb[1])
        v = offset + 3
        words: Spec = [("The", "DET", offset + 2, "det", "_"),
                       (subj[sn], "NOUN", v, "nsubj", f"Number={('Sing', 'Plur')[sn]}"),
                       (form, "VERB", head or 0, deprel, FIN.format(("Pres", "Past")[tense])),
                       ("the", "DET", offset + 5, "det", "_"), (obj[on], "NOUN", v, "obj",
                                                                f"Number={('Sing', 'Plur')[on]}")]
        governor, relation = v, "obl"
        for k in range(pps):
            i = offset + len(words)
            words += [("in" if k == 0 else "of", "ADP", i + 3, "case", "_"), ("the", "DET", i + 3, "det", "_"),
                      (nouns[rng.integers(5)][0], "NOUN", governor, relation, "Number=Sing")]
            governor, relation = i + 3, "nmod"
        return words

    for split, size in zip(("train", "dev", "test"), sizes, strict=True):
        specs = []
        for _ in range(size):
            words = clause(0, 0, "root", int(rng.integers(0, 6)))
            if rng.random() < 0.4:
                n = len(words)
                second = clause(n + 2, 3, "conj", int(rng.integers(0, 3)))
                words += [(",", "PUNCT", n + 5, "punct", "_"), ("and", "CCONJ", n + 5, "cc", "_"), *second]
            words.append((".", "PUNCT", 3, "punct", "_"))
            if not feats:
                words = [(f, u, h, d, "_") for f, u, h, d, _ in words]
            specs.append(words)
        (folder / f"{name}-ud-{split}.conllu").write_text(conllu(specs))
    return folder
