"""``--treebank`` takes a folder with any subset of splits, or each split named (a file or a treebank folder, a split
named twice combining its files): a probe trains on one treebank and tests on another, a test-only one (UD's PUD)
included; what a command lacks is one line (issue 73)."""

from __future__ import annotations

from pathlib import Path

import pytest
from worlds import synthetic_treebank

from hire.cli import main
from hire.data.conllu import find_treebank
from hire.data.examples import DataError
from hire.probing import ud
from hire.probing.tokens import load_ud


@pytest.fixture(scope="module")
def banks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``full``: a treebank with all three splits; ``other``: another one (another seed); ``pud``: its test split
    alone, as UD's parallel treebanks are released."""
    root = tmp_path_factory.mktemp("banks")
    for name in ("xx_full", "yy_other", "zz_pud"):
        (root / name).mkdir()
    full = synthetic_treebank(root / "xx_full", "xx_full", sizes=(600, 120, 120))
    other = synthetic_treebank(root / "yy_other", "yy_other", sizes=(300, 120, 120), seed=1)
    pud = root / "zz_pud"
    (pud / "zz_pud-ud-test.conllu").write_text((other / "yy_other-ud-test.conllu").read_text())
    return {"full": full, "other": other, "pud": pud}


def test_a_folder_with_any_subset_of_splits_is_read_and_the_missing_split_is_named(banks: dict[str, Path]) -> None:
    found = find_treebank(banks["pud"], need=("test",))
    assert list(found) == ["test"] and found["test"].paths == (banks["pud"] / "zz_pud-ud-test.conllu",)
    with pytest.raises(DataError, match=r"^--treebank .*zz_pud: hire probe needs the train and dev split\(s\) as "
                                        r"well, and this holds test; name each split's file or treebank folder, e\.g\. "
                                        r"--treebank train=FILE_OR_FOLDER,dev=FILE_OR_FOLDER,test=.*zz_pud-ud-test"):
        find_treebank(banks["pud"], command="hire probe")


def test_splits_named_one_by_one_train_on_one_treebank_and_test_on_another(banks: dict[str, Path]) -> None:
    spec = f"train={banks['full']},dev={banks['full'] / 'xx_full-ud-dev.conllu'},test={banks['pud']}"
    found = find_treebank(spec)
    assert [f.paths for f in found.values()] == [(banks["full"] / "xx_full-ud-train.conllu",),
                                                 (banks["full"] / "xx_full-ud-dev.conllu",),
                                                 (banks["pud"] / "zz_pud-ud-test.conllu",)]
    suite = ud.build_ud_tasks(spec, ["ud-tense"], seed=0)
    tense = suite.tasks["ud-tense"]
    assert tense.files["train"].endswith("xx_full-ud-train.conllu")
    assert tense.files["test"].endswith("zz_pud-ud-test.conllu")
    # the test sentences are the other treebank's
    other_texts = {" ".join(w.form for w in x.words) for x in ud.read_conllu(banks["pud"] / "zz_pud-ud-test.conllu")}
    assert all(e.text_a in other_texts for e in tense.splits["test"])
    words = load_ud(spec, max_sentences={"train": 5, "dev": 5, "test": 5})
    assert words["test"].path.endswith("zz_pud-ud-test.conllu") and len(words["train"].sentences) == 5


def test_a_split_named_twice_combines_the_treebanks(banks: dict[str, Path]) -> None:
    spec = f"train={banks['full']},train={banks['other']},dev={banks['full']},test={banks['full']}"
    found = find_treebank(spec)
    assert len(found["train"].paths) == 2 and " + " in str(found["train"])
    combined = ud.read_treebank(spec)[1]["train"]
    alone = ud.read_treebank(banks["full"])[1]["train"]
    assert len(combined) > len(alone)
    assert len(load_ud(spec)["train"].sentences) == 600 + 300


@pytest.mark.parametrize(("spec", "message"), [
    ("train={full},dev={full},tset={pud}", r"'tset=.*' is not SPLIT=PATH with SPLIT one of train, dev, test"),
    ("train={full},dev={full},test={full}/nothing.conllu", r"test=.*nothing\.conllu: no such file or folder"),
    ("train={pud},dev={full},test={full}", r"zz_pud holds no \*-ud-train\.conllu for train="),
    ("train={full},train={full},dev={full},test={full}", r"xx_full-ud-train\.conllu is named twice for train"),
    ("{full}/xx_full-ud-train.conllu", r"a file, not a folder"),
    ("dev={full},test={full}", r"needs the train split\(s\) as well, and this holds dev, test"),
    ("train=,dev={full},test={full}", r"train= names no file or folder"),
    ("train={full},dev={full},test={full},", r"needs"),  # a trailing comma is nothing: this one is fine (below)
    ("{full}/nowhere", r"nowhere: no such folder"),
])
def test_a_bad_treebank_spec_is_one_line_naming_the_option(spec: str, message: str, banks: dict[str, Path]) -> None:
    if spec.endswith(","):
        assert list(find_treebank(spec.format(**banks))) == ["train", "dev", "test"]
        return
    with pytest.raises(DataError, match=r"^--treebank .*" + message):
        find_treebank(spec.format(**banks))


def test_a_test_only_treebank_through_the_commands_is_one_line_and_writes_nothing(
        banks: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], shared: dict[str, Path]) -> None:
    for argv in (["ud-tasks", "--treebank", str(banks["pud"]), "--output_dir", str(tmp_path / "tasks")],
                 ["probe-tokens", "--encoders", str(shared["enc"]), "--tasks", "ud-upos", "--treebank",
                  str(banks["pud"]), "--output_dir", str(tmp_path / "tokens")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--treebank" in err[0] and "needs the train and dev split(s) as well" in err[0], err
    assert not any(tmp_path.iterdir())
