"""SentEval's probing tasks from a UD treebank: every rule on hand-made sentences with known labels, balance,
determinism for a seed, the skip-with-message paths, and a treebank the tests never saw through `hire probe`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits
from tiny import save_tiny_encoder
from worlds import FIN, Spec, conllu, synthetic_treebank

from hire.cli import main
from hire.data.conllu import Sentence, read_conllu
from hire.probing import ud
from hire.probing.tasks import load_probe_task


def read(tmp_path: Path, specs: list[Spec], **kwargs: dict[int, tuple[int, str]]) -> list[Sentence]:
    path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.conllu"
    path.write_text(conllu(specs, **kwargs))
    return read_conllu(path)


COPULAR: Spec = [("She", "PRON", 4, "nsubj", "Number=Sing"), ("was", "AUX", 4, "cop", FIN.format("Past")),
           ("very", "ADV", 4, "advmod", "_"), ("happy", "ADJ", 0, "root", "Degree=Pos"),
                 (".", "PUNCT", 4, "punct", "_")]
PASSIVE: Spec = [("The", "DET", 2, "det", "_"), ("cakes", "NOUN", 4, "nsubj:pass", "Number=Plur"),
                 ("were", "AUX", 4, "aux:pass", FIN.format("Past")),
                 ("eaten", "VERB", 0, "root", "Tense=Past|VerbForm=Part|Voice=Pass"), (".", "PUNCT", 4, "punct", "_")]
PERFECT: Spec = [("The", "DET", 2, "det", "_"), ("dog", "NOUN", 4, "nsubj", "Number=Sing"),
                 ("has", "AUX", 4, "aux", FIN.format("Pres")), ("eaten", "VERB", 0, "root", "Tense=Past|VerbForm=Part"),
                 ("apples", "NOUN", 4, "obj", "Number=Plur"), (".", "PUNCT", 4, "punct", "_")]
MODAL: Spec = [("The", "DET", 2, "det", "_"), ("dogs", "NOUN", 4, "nsubj", "Number=Plur"),
               ("will", "AUX", 4, "aux", "VerbForm=Fin"), ("chase", "VERB", 0, "root", "VerbForm=Inf"),
               ("a", "DET", 6, "det", "_"), ("cat", "NOUN", 4, "obj", "Number=Sing"), (".", "PUNCT", 4, "punct", "_")]
FINITE: Spec = [("Dogs", "NOUN", 2, "nsubj", "Number=Plur"), ("chased", "VERB", 0, "root", FIN.format("Past")),
                ("the", "DET", 4, "det", "_"), ("cat", "NOUN", 2, "obj", "Number=Sing"),
                (".", "PUNCT", 2, "punct", "_")]
# "They might be only memories, but I can still feel each one." (Conneau et al.'s CoordInv example)
COORD: Spec = [("They", "PRON", 5, "nsubj", "Number=Plur"), ("might", "AUX", 5, "aux", "VerbForm=Fin"),
               ("be", "AUX", 5, "cop", "VerbForm=Inf"), ("only", "ADV", 5, "advmod", "_"),
               ("memories", "NOUN", 0, "root", "Number=Plur"), (",", "PUNCT", 11, "punct", "_"),
               ("but", "CCONJ", 11, "cc", "_"), ("I", "PRON", 11, "nsubj", "Number=Sing"),
               ("can", "AUX", 11, "aux", "VerbForm=Fin"), ("still", "ADV", 11, "advmod", "_"),
               ("feel", "VERB", 5, "conj", "VerbForm=Inf"), ("each", "DET", 13, "det", "_"),
               ("one", "NOUN", 11, "obj", "Number=Sing"), (".", "PUNCT", 5, "punct", "_")]
VP_COORD: Spec = [("I", "PRON", 2, "nsubj", "Number=Sing"), ("came", "VERB", 0, "root", FIN.format("Past")),
                  ("and", "CCONJ", 4, "cc", "_"), ("saw", "VERB", 2, "conj", FIN.format("Past")),
                  ("it", "PRON", 4, "obj", "Number=Sing"), (".", "PUNCT", 2, "punct", "_")]


def labels(rule: Callable[..., tuple[ud.Labelled, list[str]]], sentences: list[Sentence]) -> list[str | None]:
    """The rule's label for each sentence (None: left out), through the builder itself."""
    labelled, _ = rule({"train": sentences}, 0)
    found = {id(x): lab for lab, _, x in labelled["train"]}
    return [found.get(id(x)) for x in sentences]


def test_tense_subject_and_object_number(tmp_path: Path) -> None:
    sents = read(tmp_path, [COPULAR, PASSIVE, PERFECT, MODAL, FINITE, VP_COORD])
    # copula's tense; passive's auxiliary; the perfect's finite auxiliary (Pres, not the participle's Past);
    # a modal has no Tense (left out); a finite root
    assert labels(ud.tense, sents) == ["Past", "Past", "Pres", None, "Past", "Past"]
    # a pronoun subject is left out; the passive's nsubj:pass counts
    assert labels(ud.subjnum, sents) == [None, "Plur", "Sing", "Plur", "Plur", None]
    # no object (copular, passive): left out
    assert labels(ud.objnum, sents) == [None, None, "Plur", "Sing", "Sing", None]


def test_length_depth_and_top_relations(tmp_path: Path) -> None:
    sents = read(tmp_path, [COPULAR, COORD, PERFECT], multiword={1: (2, "She's")})
    assert [len(x.tokens()) for x in sents] == [4, 14, 6]  # "She's" is one token for two words
    assert labels(ud.sentlen, sents) == [None, "13-16", "5-8"]  # 4 tokens: under SentEval's 5
    assert [max(x.depths()) for x in sents] == [2, 4, 3]  # memories > feel > one > each; eaten > dog > The
    assert labels(ud.treedepth, sents) == ["<=3", "4", "<=3"]
    assert [ud.top_relations(x) for x in sents] == ["nsubj_advmod_ROOT", "nsubj_advmod_ROOT_conj", "nsubj_ROOT_obj"]


def test_coordination_inversion(tmp_path: Path) -> None:
    sents = read(tmp_path, [COORD, VP_COORD, COORD])
    labelled, classes = ud.coordinv({"train": sents}, 0)
    assert classes == ["O", "I"]
    got = sorted((lab, " ".join(t)) for lab, t, _ in labelled["train"])  # the VP coordination is not eligible
    assert got == [("I", "I can still feel each one , but they might be only memories ."),
                   ("O", "They might be only memories , but I can still feel each one .")]


def test_bigram_shift_swaps_one_adjacent_pair(tmp_path: Path) -> None:
    sents = read(tmp_path, [COORD] * 40)
    labelled, _ = ud.bshift({"train": sents}, 3)
    counts = Counter(lab for lab, _, _ in labelled["train"])
    assert counts == {"O": 20, "I": 20}
    original = [w[0] for w in COORD]
    for lab, tokens, _ in labelled["train"]:
        diff = [i for i, (a, b) in enumerate(zip(tokens, original, strict=True)) if a != b]
        if lab == "O":
            assert diff == []
        else:
            assert len(diff) == 2 and diff[1] == diff[0] + 1 and diff[0] >= 1
            assert tokens[diff[0]] == original[diff[1]] and "," not in (tokens[diff[0]], tokens[diff[1]])


def test_word_content_chooses_words_with_enough_sentences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ud, "MIN_PER_CLASS", {"train": 2, "dev": 1, "test": 1})
    monkeypatch.setattr(ud, "WC_MAX_SHARE", 0.5)

    def noun_sentence(*nouns: str) -> Spec:
        spec = [("We", "PRON", 2, "nsubj", "_"), ("saw", "VERB", 0, "root", FIN.format("Past"))]
        return spec + [(n, "NOUN", 2, "obj", "Number=Sing") for n in nouns] + [(".", "PUNCT", 2, "punct", "_")]
    train = read(tmp_path, [noun_sentence("apple"), noun_sentence("apple"), noun_sentence("pear"),
                            noun_sentence("pear"), noun_sentence("plum"), noun_sentence("apple", "pear"),
                            noun_sentence("kiwi", "kiwi")])
    dev = read(tmp_path, [noun_sentence("apple"), noun_sentence("pear"), noun_sentence("plum")])
    labelled, words = ud.wc({"train": train, "dev": dev, "test": dev}, 0)
    # plum: one training sentence; kiwi: only twice in one sentence; "saw" is in every sentence (over 50%)
    assert words == ["apple", "pear"]
    assert [lab for lab, _, _ in labelled["train"]] == ["apple", "apple", "pear", "pear"]  # not "apple pear"


@pytest.fixture(scope="module")
def treebank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_treebank(tmp_path_factory.mktemp("treebank"))


def test_tasks_are_balanced_deterministic_and_skip_with_a_reason(treebank: Path) -> None:
    suite = ud.build_ud_tasks(treebank, seed=0)
    assert set(suite.tasks) | set(suite.skipped) == set(ud.UD_TASKS)
    assert "ud-wc" in suite.skipped and "class" in suite.skipped["ud-wc"]  # five nouns: no mid-frequency word
    for name in ("ud-tense", "ud-subjnum", "ud-objnum", "ud-bshift", "ud-coordinv", "ud-treedepth"):
        task = suite.tasks[name]
        assert task.protocol == "split" and task.headline == "test" and task.eval_splits == ["dev", "test"]
        for split, examples in task.splits.items():
            counts = Counter(e.label for e in examples)
            assert set(counts) == set(task.label_names or []) and len(set(counts.values())) == 1, (name, split)
            assert min(counts.values()) >= ud.MIN_PER_CLASS[split]
    again, other = ud.build_ud_tasks(treebank, seed=0), ud.build_ud_tasks(treebank, seed=1)
    assert all(again.tasks[n].splits == t.splits for n, t in suite.tasks.items())
    assert any(other.tasks[n].splits != t.splits for n, t in suite.tasks.items())
    tense = load_probe_task("ud-tense", treebank=str(treebank))
    assert tense.splits == suite.tasks["ud-tense"].splits and tense.files["dev"].endswith("xx_test-ud-dev.conllu")
    # the label is what the sentence says: a past verb form in every Past example's main clause
    assert all(any(v in e.text_a.split()[:3] for v in ("chased", "saw", "liked"))
               for e in tense.splits["train"] if e.label == "Past")


def test_a_treebank_without_features_skips_the_tasks_that_need_them(tmp_path: Path) -> None:
    synthetic_treebank(tmp_path, "yy_nofeats", sizes=(300, 60, 60), feats=False)
    suite = ud.build_ud_tasks(tmp_path, seed=0)
    for name in ("ud-tense", "ud-subjnum", "ud-objnum"):
        assert "no morphological features" in suite.skipped[name]
    assert "ud-bshift" in suite.tasks
    with pytest.raises(ud.DataError, match=r"^--task ud-tense: skipped: .*yy_nofeats-ud-train.conllu: no morph"):
        load_probe_task("ud-tense", treebank=str(tmp_path))
    text = ud.describe(suite)
    assert "## ud-tense (SentEval Tense, semantic)" in text and "Skipped: " in text


@pytest.fixture
def _one_thread(single_thread: None) -> Iterator[None]:
    with threadpool_limits(1):
        yield


def test_ud_tasks_command_and_hire_probe_end_to_end(treebank: Path, tmp_path: Path, _one_thread: None,
                                                    capsys: pytest.CaptureFixture) -> None:
    assert main(["ud-tasks", "--treebank", str(treebank), "--output_dir", str(tmp_path / "tasks")]) == 0
    printed = capsys.readouterr().out
    assert "## ud-tense (SentEval Tense, semantic)" in printed and "| Past |" in printed
    header, *rows = (tmp_path / "tasks" / "Tense" / "dev.tsv").read_text().splitlines()
    assert header == "label\tsentence" and Counter(r.split("\t")[0] for r in rows) == {"Pres": len(rows) // 2,
                                                                                        "Past": len(rows) // 2}

    texts = [" ".join(w.form for w in x.words) for x in read_conllu(next(treebank.glob("*-ud-train.conllu")))]
    encoder = save_tiny_encoder(tmp_path / "encoder", texts)
    out = tmp_path / "probe"
    argv = ["probe", "--encoder", str(encoder), "--task", "ud-probes", "--treebank", str(treebank),
            "--max_train_examples", "40", "--max_eval_examples", "20", "--c_grid", "1", "--cache_dir",
            str(tmp_path / "cache"), "--output_dir", str(out), "--mixed_precision", "no", "--device", "cpu",
            "--max_length", "48"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "ud-wc skipped: " in err
    results = json.loads((out / "results.json").read_text())
    assert "ud-wc" not in results["tasks"] and {"ud-tense", "ud-coordinv", "ud-bshift"} <= set(results["tasks"])
    tense = results["tasks"]["ud-tense"]
    assert tense["protocol"] == "split" and tense["headline"] == "test" and tense["labels"] == ["Pres", "Past"]
    assert set(tense["results"][str(encoder)]["rows"][0]["splits"]) == {"dev", "test"}

    assert results["config"]["treebank"] == str(treebank) and results["config"]["probe"]["probe"] == "linear"

    # UD tasks mix with other tasks, and the treebank is not --data_dir
    custom = tmp_path / "custom.csv"
    lines = [f"{t.replace(',', ' ')},{i % 2}\n" for i, t in enumerate(texts[:60])]
    custom.write_text("sentence,label\n" + "".join(lines))
    mixed = [*argv[:3], "--task", "ud-tense,custom", "--train_file", str(custom), "--folds", "2", *argv[5:]]
    mixed[mixed.index("--output_dir") + 1] = str(tmp_path / "mixed")
    assert main([*mixed, "--data_dir", str(tmp_path)]) == 0
    capsys.readouterr()
    mixed_results = json.loads((tmp_path / "mixed" / "results.json").read_text())
    assert list(mixed_results["tasks"]) == ["ud-tense", "custom"]
    assert mixed_results["tasks"]["ud-tense"]["results"][str(encoder)]["rows"] == tense["results"][str(encoder)][
        "rows"]  # the same task and probes as in the UD-only run
    nowhere = argv[:-2]  # a treebank folder that is not there
    nowhere[nowhere.index("--treebank") + 1] = str(tmp_path / "nowhere")
    assert main(nowhere) == 2
    assert "nowhere: no such folder" in capsys.readouterr().err
