"""Tests for the token-task readers (hire.data.conll): CoNLL column files, token JSON lines, tag schemes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from badinput import one_line_error as error

from hire.data.conll import check_tags, default_conll2003_dir, read_conll2003, read_token_file, tag_names
from hire.data.examples import TokenExample

CONLL_DIR = default_conll2003_dir()
needs_conll = pytest.mark.skipif(
    not (CONLL_DIR / "original_iob1").is_dir() or not (CONLL_DIR / "iob2").is_dir(),
    reason=f"shared CoNLL-2003 data not found at {CONLL_DIR} (set HIRE_CONLL2003_DIR)",
)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path




def conll(path: Path, rows: list[list[str] | None]) -> Path:
    """A space-separated CoNLL file: a row's fields on one line, None a blank line."""
    return write(path, "".join(("" if row is None else " ".join(row)) + "\n" for row in rows))


def test_conll_blank_line_variants_documents_and_lines(tmp_path: Path) -> None:
    text = ("-DOCSTART-\t-X-\t-X-\tO\r\n\t\r\n"
            "EU\tNNP\tB-NP\tB-ORG\r\nNew York\tNNP\tI-NP\tB-LOC\r\n  \r\n\r\n\t\n"
            "Peter\tNNP\tB-NP\tB-PER\r\n"
            "-DOCSTART-\t-X-\t-X-\tO\n\n"
            "Blackburn\tNNP\tB-NP\tB-PER\n")  # no final blank line
    result = read_token_file(write(tmp_path / "a.txt", text))
    assert result.scheme == "iob2"
    assert result.examples == [
        TokenExample("0", ("EU", "New York"), ("B-ORG", "B-LOC"), document=0, line=3),
        TokenExample("1", ("Peter",), ("B-PER",), document=0, line=8),
        TokenExample("2", ("Blackburn",), ("B-PER",), document=1, line=11),
    ]
    chunks = read_token_file(result.path, tag_column=2)
    assert [example.tags for example in chunks.examples] == [("B-NP", "I-NP"), ("B-NP",), ("B-NP",)]


def test_space_separated_columns_and_no_documents(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", "EU  NNP   B-ORG\nrejects NNP O  \n\n\n\nPeter NNP B-PER\n")
    result = read_token_file(path, token_column=-3, tag_column=1, scheme="none")
    assert [(e.tokens, e.tags, e.document, e.line) for e in result.examples] == [
        (("EU", "rejects"), ("NNP", "NNP"), None, 1), (("Peter",), ("NNP",), None, 6)]
    assert read_token_file(path, scheme="auto").examples[0].tags == ("B-ORG", "O")
    # A given separator is used as it is: here a comma.
    assert read_token_file(write(tmp_path / "b.txt", "a b,B-X\n"), separator=",").examples[0].tokens == ("a b",)


def test_docstart_ends_a_sentence_and_empty_documents_are_not_counted(tmp_path: Path) -> None:
    path = conll(tmp_path / "a.txt", [["a", "O"], ["-DOCSTART-", "O"], ["b", "O"], None, ["-DOCSTART-", "O"],
                                      ["-DOCSTART-", "O"], None, ["c", "O"], ["-DOCSTART-", "O"]])
    examples = read_token_file(path).examples
    assert [(e.tokens, e.document) for e in examples] == [(("a",), 0), (("b",), 1), (("c",), 2)]


def test_untagged_file(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", "EU\nrejects\n\nPeter\n")
    result = read_token_file(path, require_tags=False)
    assert [(e.tokens, e.tags) for e in result.examples] == [(("EU", "rejects"), None), (("Peter",), None)]
    error(lambda: read_token_file(path), "a.txt, line 1:", "tag column -1 is out of range", "1 column")


def test_long_sentence_reads(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", "".join(f"w{i} {'B-X' if i % 3 == 0 else 'I-X'}\n" for i in range(2000)))
    (example,) = read_token_file(path).examples
    assert len(example.tokens) == len(example.tags) == 2000


# Tag schemes: the same chunks written in IOB1, IOB2 and BIOES.
SENTENCES = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "B-ORG", "I-ORG", "O"], ["O", "B-MISC", "B-LOC", "I-LOC"]]


def from_iob2(tags: list[str], scheme: str) -> list[str]:
    """IOB2 tags in ``scheme``, converted word by word from the definitions."""
    out = []
    for i, tag in enumerate(tags):
        prefix, kind = tag[:1], tag[2:]
        follows = i + 1 < len(tags) and tags[i + 1] == f"I-{kind}"
        if scheme == "iob1" and prefix == "B":
            previous = tags[i - 1][2:] if i and tags[i - 1] != "O" else None
            prefix = "B" if previous == kind else "I"  # B- only right after a chunk of the same type
        if scheme == "bioes" and prefix in "BI" and not follows:
            prefix = "S" if prefix == "B" else "E"
        out.append("O" if tag == "O" else f"{prefix}-{kind}")
    return out


@pytest.mark.parametrize("scheme", ["iob1", "iob2", "bioes"])
def test_schemes_are_detected_and_converted_to_iob2(tmp_path: Path, scheme: str) -> None:
    rng = random.Random(scheme)
    sentences = [*SENTENCES, *([rng.choice(["O", "B-A", "I-A", "B-B"]) for _ in range(rng.randint(1, 12))]
                               for _ in range(200))]
    sentences = [["B" + tag[1:] if tag.startswith("I") and (i == 0 or tags[i - 1][2:] != tag[2:]) else tag
                  for i, tag in enumerate(tags)] for tags in sentences]  # valid IOB2 to start from
    rows: list[list[str] | None] = []
    for number, tags in enumerate(sentences):
        rows += [[f"w{number}", tag] for tag in from_iob2(tags, scheme)] + [None]
    path = conll(tmp_path / "a.txt", rows)
    if scheme == "iob1":
        assert "I-PER" in path.read_text().split("\n")[0] and "B-ORG" in path.read_text()
    for given in ("auto", scheme):
        result = read_token_file(path, scheme=given)
        assert result.scheme == scheme
        assert [list(example.tags) for example in result.examples] == sentences


def test_plain_tags_are_kept(tmp_path: Path) -> None:
    path = conll(tmp_path / "a.txt", [["The", "DT"], ["I", "I-X"], ["O", "O"]])
    result = read_token_file(path)
    assert (result.scheme, result.examples[0].tags) == ("none", ("DT", "I-X", "O"))
    error(lambda: read_token_file(path, scheme="iob2"), "a.txt, line 1:", "'DT'", "IOB2")


@pytest.mark.parametrize(("rows", "line", "words"), [
    # An I- that begins a chunk (IOB1), then a B- after O (IOB1 has none): the second is where they conflict.
    ([["a", "I-PER"], None, ["b", "O"], ["c", "B-LOC"]], 4, ["'B-LOC' begins a chunk with B-", "line 1", "'I-PER'"]),
    ([["a", "B-PER"], None, ["b", "O"], ["c", "I-LOC"]], 4, ["'I-LOC' begins a chunk with I-", "line 1", "'B-PER'"]),
    # An I- after a chunk of another type begins a chunk too.
    ([["a", "B-LOC"], ["b", "I-PER"]], 2, ["'I-PER' begins a chunk with I-", "line 1", "'B-LOC'"]),
    # BIOES prefixes with an IOB1 start.
    ([["a", "S-PER"], ["b", "O"], ["c", "I-LOC"], ["d", "E-LOC"]], 3, ["'I-LOC'", "line 1", "'S-PER'", "mix"]),
    # A BIOES file whose chunk ends without E-.
    ([["a", "B-PER"], ["b", "E-PER"], ["c", "B-LOC"], ["d", "O"]], 3, ["'B-LOC' ends a chunk without E-", "line 2"]),
    ([["a", "O"], ["b", "E-PER"]], 2, ["'E-PER' ends a chunk (E-) that never began"]),
])
def test_mixed_schemes_are_an_error_at_the_first_conflicting_tag(tmp_path: Path, rows, line: int, words) -> None:
    path = conll(tmp_path / "a.txt", rows)
    error(lambda: read_token_file(path), f"a.txt, line {line}:", *words)


def test_a_given_scheme_is_checked(tmp_path: Path) -> None:
    path = conll(tmp_path / "a.txt", [["a", "O"], ["b", "I-PER"]])
    assert read_token_file(path, scheme="iob1").examples[0].tags == ("O", "B-PER")
    error(lambda: read_token_file(path, scheme="iob2"), "a.txt, line 2:", "'I-PER' begins a chunk with I-",
          "IOB2 does not allow")
    assert read_token_file(path, scheme="none").examples[0].tags == ("O", "I-PER")


def test_jsonl(tmp_path: Path) -> None:
    lines = [{"tokens": ["EU", "rejects"], "tags": ["I-ORG", "O"], "id": "s1", "document": "d7"},
             {"tokens": ["Peter"], "tags": ["I-PER"], "id": 5, "document": "d9"},
             {"tokens": ["Blackburn"], "tags": ["O"], "id": "x", "document": "d7"}]
    path = write(tmp_path / "a.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n\n")
    result = read_token_file(path, format="tokens")
    assert (result.scheme, result.format) == ("iob1", "tokens")
    assert result.examples == [TokenExample("s1", ("EU", "rejects"), ("B-ORG", "O"), 0, 1),
                               TokenExample("5", ("Peter",), ("B-PER",), 1, 2),
                               TokenExample("x", ("Blackburn",), ("O",), 0, 3)]
    plain = write(tmp_path / "b.jsonl", '{"tokens": ["a", "b"]}\n{"tokens": ["c"]}\n')
    examples = read_token_file(plain, format="tokens", require_tags=False).examples
    assert [(e.guid, e.tags, e.document) for e in examples] == [("0", None, None), ("1", None, None)]


@pytest.mark.parametrize(("text", "line", "words"), [
    ('{"tokens": ["a"], "tags": ["O"]}\n[1, 2]\n', 2, ["expected a JSON object", "list"]),
    ('{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["a"], "tags"\n', 2, ["invalid JSON"]),
    ('{"tokens": ["a", "b"], "tags": ["O"]}\n', 1, ["2 tokens but 1 tags"]),
    ('{"tokens": ["a", 3], "tags": ["O", "O"]}\n', 1, ["token 1", "3, not a string"]),
    ('{"tokens": "a b", "tags": ["O"]}\n', 1, ["'tokens' must be a list"]),
    ('{"tokens": [], "tags": []}\n', 1, ["'tokens' is empty"]),
    ('{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["a"]}\n', 2, ['no "tags"']),
    ('{"tokens": ["a"], "tags": ["O"], "id": 1}\n{"tokens": ["b"], "tags": ["O"], "id": "1"}\n', 2,
     ["'1' is also the id of line 1"]),
    ('{"tokens": ["a"], "tags": ["O"], "document": [1]}\n', 1, ["'document' must be a string or an integer"]),
])
def test_bad_jsonl(tmp_path: Path, text: str, line: int, words) -> None:
    path = write(tmp_path / "a.jsonl", text)
    error(lambda: read_token_file(path, format="tokens"), f"a.jsonl, line {line}:", *words)


@pytest.mark.parametrize(("text", "options", "line", "words"), [
    ("a B-X O\nb O\n", {}, 2, ["found 2 column(s), but line 1 has 3"]),
    ("a B-X\nb O O\n", {}, 2, ["found 3 column(s), but line 1 has 2"]),
    ("a B-X\n", {"tag_column": 2}, 1, ["tag column 2 is out of range", "2 column(s)"]),
    ("a B-X\n", {"tag_column": -3}, 1, ["tag column -3 is out of range"]),
    ("a B-X\n", {"token_column": 5}, 1, ["token column 5 is out of range"]),
    ("a B-X\n", {"tag_column": 0}, 1, ["tag column 0 is the token column"]),
    ("a\tB-X\n\tO\n", {}, 2, ["the token is empty"]),
    ("", {}, 1, ["the file is empty"]),
    ("\n\t\n-DOCSTART- -X- O\n\n", {}, 4, ["no sentences"]),
])
def test_bad_conll(tmp_path: Path, text: str, options: dict, line: int, words) -> None:
    path = write(tmp_path / "a.txt", text)
    error(lambda: read_token_file(path, **options), f"a.txt, line {line}:", *words)


def test_non_utf8_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", b"a O\n\nb O\nc\xff O\n")
    error(lambda: read_token_file(path), "a.txt, line 4:", "not valid UTF-8")
    jsonl = write(tmp_path / "a.jsonl", b'{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["\xe9"], "tags": ["O"]}\n')
    error(lambda: read_token_file(jsonl, format="tokens"), "a.jsonl, line 2:", "not valid UTF-8")


def test_missing_file_names_the_option(tmp_path: Path) -> None:
    error(lambda: read_token_file(tmp_path / "no.txt", option="--data.dev_file"), "no.txt", "file not found",
          "--data.dev_file")


def test_check_tags_and_tag_names(tmp_path: Path) -> None:
    train = read_token_file(conll(tmp_path / "train.txt", [["a", "B-PER"], ["b", "I-PER"], None, ["c", "O"]]))
    known = tag_names(train.examples)
    assert known == ["O", "B-PER", "I-PER"]
    dev = read_token_file(conll(tmp_path / "dev.txt", [["a", "O"], None, ["b", "O"], ["c", "B-LOC"], ["d", "I-LOC"]]))
    error(lambda: check_tags(dev.examples, known, dev.path), "dev.txt, line 4:", "'B-LOC'",
          "--data.unknown_tags o")
    mapped = check_tags(dev.examples, known, dev.path, unknown="o")
    assert [e.tags for e in mapped] == [("O",), ("O", "O", "O")]
    assert [e.tags for e in dev.examples] == [("O",), ("O", "B-LOC", "I-LOC")]  # the input is left as it was
    assert check_tags(dev.examples, [*known, "B-LOC", "I-LOC"], dev.path) == dev.examples
    jsonl = read_token_file(write(tmp_path / "dev.jsonl", '{"tokens": ["a"], "tags": ["O"]}\n'
                                  '{"tokens": ["b", "c"], "tags": ["O", "B-LOC"]}\n'), format="tokens")
    error(lambda: check_tags(jsonl.examples, known, jsonl.path, format=jsonl.format), "dev.jsonl, line 2:")


def small_conll2003(root: Path) -> Path:
    """A CoNLL-2003 folder with only the IOB1 release, one sentence per split."""
    for name in ("eng.train", "eng.testa", "eng.testb"):
        conll(root / "original_iob1" / name, [["-DOCSTART-", "-X-", "O", "O"], None,
                                              [name, "NNP", "I-NP", "I-ORG"], ["x", "NNP", "I-NP", "I-ORG"]])
    return root


def test_read_conll2003_falls_back_to_iob1_and_names_what_is_missing(tmp_path: Path, monkeypatch) -> None:
    root = small_conll2003(tmp_path / "conll")
    for split, name in [("train", "eng.train"), ("dev", "eng.testa"), ("valid", "eng.testa"), ("testb", "eng.testb")]:
        result = read_conll2003(root, split)
        assert (result.path.name, result.scheme) == (name, "iob1")
        assert result.examples == [TokenExample("0", (name, "x"), ("B-ORG", "I-ORG"), 0, 3)]
    assert read_conll2003(root, "test", "chunk").examples[0].tags == ("B-NP", "I-NP")
    assert read_conll2003(root, "test", "pos").examples[0].tags == ("NNP", "NNP")
    assert read_conll2003(root, "test", 2).scheme == "iob1"
    write(root / "iob2" / "test.txt", "a NNP B-NP B-ORG\n")
    assert read_conll2003(root, "test").path == root / "iob2" / "test.txt"
    (root / "original_iob1" / "eng.testa").unlink()
    error(lambda: read_conll2003(root, "dev"), str(root / "iob2" / "valid.txt"), str(root / "original_iob1"),
          "HIRE_CONLL2003_DIR")
    error(lambda: read_conll2003(tmp_path / "none", "dev"), f"there is no folder {tmp_path / 'none'}")
    error(lambda: read_conll2003(root, "validation"), "unknown CoNLL-2003 split")
    error(lambda: read_conll2003(root, "dev", "lemma"), "unknown CoNLL-2003 tag column")
    monkeypatch.setenv("HIRE_CONLL2003_DIR", str(root))
    assert default_conll2003_dir() == root
    assert read_conll2003(None, "test").path.parent == root / "iob2"


@needs_conll
@pytest.mark.parametrize("column", [3, 2])  # NER, chunks
def test_shared_iob1_converts_to_the_shared_iob2(column: int) -> None:
    iob1 = read_token_file(CONLL_DIR / "original_iob1" / "eng.train", tag_column=column)
    iob2 = read_token_file(CONLL_DIR / "iob2" / "train.txt", tag_column=column)
    assert (iob1.scheme, iob2.scheme, len(iob1.examples)) == ("iob1", "iob2", 14041)  # both detected
    assert [(e.tokens, e.tags, e.document) for e in iob1.examples] == \
        [(e.tokens, e.tags, e.document) for e in iob2.examples]
