"""The CoNLL-U reader: words, multi-word tokens and empty nodes read as the format defines them, treebank folders
found by UD's file names, and every kind of bad input a one-line DataError naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hire.data.conllu import find_treebank, parse_feats, read_conllu
from hire.data.examples import DataError

GOOD = """\
# newdoc id = d1
# sent_id = s1
# text = I don't like cats.
1\tI\tI\tPRON\tPRP\tCase=Nom|Number=Sing|Person=1\t4\tnsubj\t4:nsubj\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\tMood=Ind|Tense=Pres|VerbForm=Fin\t4\taux\t4:aux\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t4:advmod\t_
4\tlike\tlike\tVERB\tVB\tVerbForm=Inf\t0\troot\t0:root\t_
5\tcats\tcat\tNOUN\tNNS\tNumber=Plur\t4\tobj\t4:obj\tSpaceAfter=No
5.1\tlikes\tlike\tVERB\tVBZ\t_\t_\t_\t4:conj\tCopyOf=4
6\t.\t.\tPUNCT\t.\t_\t4\tpunct\t4:punct\t_

# sent_id = s2
1\tHello\thello\tINTJ\tUH\t_\t0\troot\t0:root\t_
"""


def test_words_multiword_tokens_and_empty_nodes(tmp_path: Path) -> None:
    path = tmp_path / "x.conllu"
    path.write_text(GOOD)
    first, second = read_conllu(path)
    assert first.sent_id == "s1" and first.text == "I don't like cats." and first.line == 1
    assert [w.form for w in first.words] == ["I", "do", "n't", "like", "cats", "."]
    assert [w.id for w in first.words] == [1, 2, 3, 4, 5, 6]  # the range and the empty node are not words
    assert first.words[1].feats == {"Mood": "Ind", "Tense": "Pres", "VerbForm": "Fin"}
    assert first.words[2].feats == {} and first.words[4].misc == "SpaceAfter=No"
    assert [(w.head, w.deprel) for w in first.words][:2] == [(4, "nsubj"), (4, "aux")]
    assert [(m.first, m.last, m.form) for m in first.multiword] == [(2, 3, "don't")]
    assert [(e.after, e.index, e.form) for e in first.empty] == [(5, 1, "likes")]
    assert first.tokens() == [("I", 1, 1), ("don't", 2, 3), ("like", 4, 4), ("cats", 5, 5), (".", 6, 6)]
    assert first.root.form == "like" and first.depths() == [2, 2, 2, 1, 2, 2]
    assert first.children()[4] == [1, 2, 3, 5, 6]
    assert second.sent_id == "s2" and second.text is None and second.line == 13 and len(second.words) == 1


def test_feats() -> None:
    assert parse_feats("Number=Sing|PronType=Prs,Rel") == {"Number": "Sing", "PronType": "Prs,Rel"}
    assert parse_feats("Number[psor]=Plur") == {"Number[psor]": "Plur"}
    assert parse_feats("_") == {}
    for bad in ("Number", "Number=", "=Sing", "Number=Sing|", "Number=Sing|Number=Plur", "Number=Sing Case=Nom"):
        assert parse_feats(bad) is None, bad


def _word(i: object, head: object = 0, feats: str = "_", deprel: str = "root", cols: int = 10) -> str:
    fields = [str(i), "w", "w", "NOUN", "NN", feats, str(head), deprel, "_", "_"]
    return "\t".join(fields[:cols] + ["_"] * (cols - 10))


BAD = {
    "columns": ([_word(1), _word(2, 1, deprel="dep", cols=9)], 3, "9 tab-separated columns"),
    "id": ([_word(1), _word("two", 1, deprel="dep")], 3, "ID 'two' is not an integer"),
    "sequence": ([_word(1), _word(3, 1, deprel="dep")], 3, "out of sequence"),
    "head": ([_word(1), _word(2, "x", deprel="dep")], 3, "HEAD 'x' is not an integer"),
    "range": ([_word(1), _word(2, 7, deprel="dep")], 3, "HEAD 7 of word 2 is out of range"),
    "cycle": ([_word(1), _word(2, 3, deprel="dep"), _word(3, 2, deprel="dep")], 3, "cycle through words 2, 3"),
    "no root": ([_word(1, 2, deprel="dep"), _word(2, 1, deprel="dep")], 2, "no root"),
    "two roots": ([_word(1), _word(2, 0)], 3, "a second root"),
    "feats": ([_word(1, feats="Number:Sing")], 2, "malformed FEATS"),
    "multiword": ([_word(1), "3-4\tdon't" + "\t_" * 8, _word(2, 1, deprel="dep")], 3, "multi-word token 3-4"),
    "multiword end": ([_word(1), "2-3\tdon't" + "\t_" * 8, _word(2, 1, deprel="dep")], 4, "runs past the last"),
    "deprel": ([_word(1, deprel="_")], 2, "no DEPREL"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_lines_name_file_and_line(tmp_path: Path, case: str) -> None:
    lines, line, message = BAD[case]
    path = tmp_path / "bad.conllu"
    path.write_text("# sent_id = a\n" + "\n".join(lines) + "\n\n")
    with pytest.raises(DataError) as caught:
        read_conllu(path)
    text = str(caught.value)
    assert text.startswith(f"{path}, line {line}: ") and message in text and "\n" not in text, text


def test_empty_and_undecodable_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.conllu"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(DataError, match=rf"^{empty}: no sentence"):
        read_conllu(empty)
    latin = tmp_path / "latin.conllu"
    latin.write_bytes(("# text = x\n" + _word(1) + "\n").encode() + b"1\tcaf\xe9" + b"\t_" * 8 + b"\n")
    with pytest.raises(DataError, match=rf"^{latin}, line 3: not valid UTF-8"):
        read_conllu(latin)


def test_find_treebank_by_ud_names(tmp_path: Path) -> None:
    for split in ("train", "dev", "test"):
        (tmp_path / f"xx_test-ud-{split}.conllu").write_text(GOOD)
    (tmp_path / "notes.conllu").write_text(GOOD)
    assert {s: f.paths for s, f in find_treebank(tmp_path).items()} == {
        s: (tmp_path / f"xx_test-ud-{s}.conllu",) for s in ("train", "dev", "test")}
    (tmp_path / "yy-ud-dev.conllu").write_text(GOOD)
    with pytest.raises(DataError, match="2 dev files"):
        find_treebank(tmp_path)
    with pytest.raises(DataError, match=r"^--treebank .*nowhere: no such folder"):
        find_treebank(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"^--treebank .*empty: no CoNLL-U file"):
        find_treebank(empty)
    (empty / "zz-ud-train.conllu").write_text(GOOD)
    with pytest.raises(DataError, match=r"needs the dev and test split\(s\) as well, and this holds train; name each"):
        find_treebank(empty)


def test_a_superscript_digit_id_is_a_one_line_error(tmp_path):
    """"²" is a digit to str.isdigit but not to int(): named as a bad ID, not a traceback."""
    from hire.data.conllu import read_conllu
    from hire.data.examples import DataError

    path = tmp_path / "x.conllu"
    path.write_text("# text = a\n²\ta\ta\tX\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"x.conllu.*line 2.*not an integer"):
        read_conllu(path)
