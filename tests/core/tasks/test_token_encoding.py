"""Token tasks' encoding (hire.data.tokens): every word scored exactly once, windows, document context, merge,
padding, bad tags. A tiny WordPiece tokenizer whose vocabulary is the letters: a word not in it is one sub-token
per letter, so sub-token counts are known."""

from __future__ import annotations

import string
from itertools import pairwise

import numpy as np
import pytest
from tiny import SPECIALS
from tokenizers import ByteLevelBPETokenizer
from torch.utils.data import DataLoader
from transformers import BertTokenizerFast, RobertaTokenizerFast

from hire.data.batching import LengthGroupedBatches
from hire.data.examples import DataError, TokenExample
from hire.data.tokens import TokenCollator, encode_tokens

TAGS = ["O", "B-PER", "I-PER"]
WHOLE = ["the", "cat", "sat"]  # whole words: one sub-token each


@pytest.fixture(scope="module", name="tok")
def _tokenizer(tmp_path_factory: pytest.TempPathFactory) -> BertTokenizerFast:
    vocab = SPECIALS + list(string.ascii_lowercase) + [f"##{c}" for c in string.ascii_lowercase] + WHOLE
    path = tmp_path_factory.mktemp("tok") / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n")
    return BertTokenizerFast(str(path), do_lower_case=True)


def sentence(words: list[str], document: int | None = None, line: int = 1, tags: list[str] | None = None):
    tags = tags if tags is not None else [TAGS[i % 3] for i in range(len(words))]
    return TokenExample(f"s{line}", tuple(words), tuple(tags), document, line)


def pieces(tok, word: str, room: int) -> list[int]:
    """The reference: a word's sub-tokens tokenized alone, [UNK] for none, clipped to the room."""
    ids = tok(word, add_special_tokens=False)["input_ids"] or [tok.unk_token_id]
    return ids[:room]


def test_every_word_is_scored_exactly_once(tok: BertTokenizerFast) -> None:
    """Random sentences, tiny max_length, every mode: words in = words scored, at the right sub-token, with
    its label there and nowhere else, within max_length; merge gives each word the logits of its window."""
    rng = np.random.default_rng(0)
    for case in range(150):
        examples = []
        for j in range(int(rng.integers(1, 5))):
            words = [WHOLE[int(rng.integers(3))] if rng.random() < 0.2 else
                     "".join(rng.choice(list("abcdefgh"), int(rng.integers(1, 9)))) for _ in range(rng.integers(1, 16))]
            if rng.random() < 0.2:
                words[int(rng.integers(len(words)))] = "\x07"  # a control character: no sub-tokens of its own
            examples.append(sentence(words, document=[None, 0, 0, 1][int(rng.integers(4))], line=j + 1))
        max_length = int(rng.integers(3, 21))
        room = max_length - 2
        stride = None if rng.random() < 0.5 else int(rng.integers(0, room))
        subword = ["first", "last", "mean"][case % 3]
        context = ["sentence", "document"][case // 3 % 2]
        split = encode_tokens(examples, tok, max_length, TAGS, subword=subword, context=context, stride=stride)

        scored_by = [dict() for _ in examples]  # word -> item
        for i, item in enumerate(split.items):
            e, ids, wids = split.item_example[i], item["input_ids"], item["word_ids"]
            assert len(ids) <= max_length and item["index"] == i
            assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
            assert len(wids) == len(item["scored"]) == len(item["labels"]) == len(item["token_type_ids"]) == len(ids)
            positions = [p for p, s in enumerate(item["scored"]) if s]
            assert [wids[p] for p in positions] == split.item_words[i]
            assert [p for p, label in enumerate(item["labels"]) if label != -100] == positions
            for p in positions:
                w = wids[p]
                assert w not in scored_by[e], "a word scored twice"
                scored_by[e][w] = i
                assert item["labels"][p] == TAGS.index(examples[e].tags[w])
                ref = pieces(tok, examples[e].tokens[w], room)
                span = [q for q, v in enumerate(wids) if v == w]
                assert span == list(range(span[0], span[0] + len(ref))) and [ids[q] for q in span] == ref
                assert p == (span[-1] if subword == "last" else span[0])
        for e, ex in enumerate(examples):
            assert sorted(scored_by[e]) == list(range(len(ex.tokens))) == list(range(split.num_words[e]))
            windows = [(i, [w for w in split.items[i]["word_ids"] if w >= 0])
                       for i in range(len(split)) if split.item_example[i] == e]
            overlap = room // 4 if stride is None else stride
            for (_, a), (_, b) in pairwise(windows):  # each goes further, overlapping by at most the stride
                assert a[0] < b[0] and a[-1] < b[-1] and sum(w <= a[-1] for w in b) <= overlap
            for w, chosen in scored_by[e].items():  # the most context: to the nearer cut, ties to the earlier
                context = {i: context_around(ws, w, len(ex.tokens)) for i, ws in windows if w in ws}
                assert all(c < context[chosen] if i < chosen else c <= context[chosen] for i, c in context.items())

        logits = [np.array([[i, w] for w in words], dtype=np.float32).reshape(-1, 2)
                  for i, words in enumerate(split.item_words)]
        for e, merged in enumerate(split.merge(logits)):
            assert merged.tolist() == [[scored_by[e][w], w] for w in range(len(examples[e].tokens))]


def context_around(word_ids: list[int], w: int, n: int) -> float:
    """Sub-tokens between word ``w`` and the nearer edge of a window of a sentence of ``n`` words whose
    centre words' sub-tokens are ``word_ids``; the sentence's own start and end are not edges."""
    left = sum(v < w for v in word_ids) if word_ids[0] > 0 else float("inf")
    right = sum(v > w for v in word_ids) if word_ids[-1] < n - 1 else float("inf")
    return min(left, right)


def test_windows_overlap_and_each_word_is_scored_where_it_has_most_context(tok: BertTokenizerFast) -> None:
    """20 one-sub-token words, room 8, overlap 2: windows 0-7, 6-13, 12-19, cut in the middle of each overlap."""
    ex = sentence([WHOLE[i % 3] for i in range(20)])
    for stride in (2, None):  # None: a quarter of the room, 2
        split = encode_tokens([ex], tok, 10, TAGS, stride=stride)
        assert [sorted({w for w in it["word_ids"] if w >= 0}) for it in split.items] == [
            list(range(0, 8)), list(range(6, 14)), list(range(12, 20))]
        assert split.item_words == [list(range(0, 7)), list(range(7, 13)), list(range(13, 20))]
        assert split.lengths == [10, 10, 10] and split.item_example == [0, 0, 0]
    split = encode_tokens([ex], tok, 10, TAGS, stride=0)
    assert split.item_words == [list(range(0, 8)), list(range(8, 16)), list(range(16, 20))]
    # Overlap 7 of 8: the window of words 14-18 gives none of them more context than another: no item.
    lengths = [1, 3, 1, 1, 1, 2, 2, 1, 2, 2, 1, 3, 3, 2, 1, 3, 1, 1, 1, 2]
    split = encode_tokens([sentence(["a" * n for n in lengths])], tok, 10, TAGS, stride=7)
    assert len(split) == 11 and all(split.item_words) and sum(map(len, split.item_words)) == 20
    # merge takes word 6 from the first window and word 7 from the second
    split = encode_tokens([ex], tok, 10, TAGS)
    merged = split.merge([np.full((len(words), 3), i, dtype=np.float32) for i, words in enumerate(split.item_words)])[0]
    assert merged.shape == (20, 3) and merged[6, 0] == 0 and merged[7, 0] == 1 and merged[13, 0] == 2


def test_subword_modes_and_long_and_empty_words(tok: BertTokenizerFast) -> None:
    """first/mean score a word's first sub-token, last its last; a word longer than a window keeps its first
    sub-tokens; a word with no sub-tokens becomes [UNK] and is still scored."""
    ex = sentence(["abc", "\x07", "x" * 30, "the"])
    a, c = tok.convert_tokens_to_ids(["a", "##c"])
    for subword, want in (("first", a), ("mean", a), ("last", c)):
        item = encode_tokens([ex], tok, 64, TAGS, subword=subword).items[0]
        assert item["word_ids"][:5] == [-1, 0, 0, 0, 1] and item["input_ids"][item["scored"].index(1)] == want
        assert item["input_ids"][4] == tok.unk_token_id and item["scored"][4] == 1
    split = encode_tokens([ex], tok, 6, TAGS, subword="last")  # room 4: "x" * 30 keeps 4 sub-tokens
    (long,) = [it for it in split.items if 2 in it["word_ids"]]
    assert long["word_ids"] == [-1, 2, 2, 2, 2, -1] and long["scored"] == [0, 0, 0, 0, 1, 0]
    assert sorted(w for ws in split.item_words for w in ws) == [0, 1, 2, 3]


def test_document_context_adds_neighbours_but_scores_only_the_centre(tok: BertTokenizerFast) -> None:
    docs = [sentence(["the", "cat"], 0, 1), sentence(["sat"], 0, 2), sentence(["abc"], 0, 3),
            sentence(["cat", "cat"], 1, 4), sentence(["sat", "the"], None, 5)]
    the, cat, sat = tok.convert_tokens_to_ids(WHOLE)
    split = encode_tokens(docs, tok, 64, TAGS, context="document")
    middle = split.items[1]
    assert middle["input_ids"][1:-1] == [the, cat, sat, *pieces(tok, "abc", 62)]
    assert middle["word_ids"] == [-1, -1, -1, 0, -1, -1, -1, -1] and middle["scored"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert middle["labels"] == [-100, -100, -100, 0, -100, -100, -100, -100]
    assert split.items[3]["input_ids"][1:-1] == [cat, cat]  # document 1 alone: nothing from document 0
    assert split.items[4]["input_ids"][1:-1] == [sat, the]  # no document: no context
    assert split.item_words == [[0, 1], [0], [0], [0, 1], [0, 1]]
    # Little room: 5 free sub-tokens around "sat", whole words, half each side, the rest to the side with more.
    split = encode_tokens(docs, tok, 8, TAGS, context="document")
    assert split.items[1]["input_ids"][1:-1] == [the, cat, sat, *pieces(tok, "abc", 6)]
    split = encode_tokens(docs, tok, 6, TAGS, context="document")  # 3 free: "abc" does not fit after the half
    assert split.items[1]["input_ids"][1:-1] == [the, cat, sat]  # before went to the left: the left takes it
    assert encode_tokens(docs, tok, 64, TAGS).items[1]["input_ids"][1:-1] == [sat]  # sentence context: none


def test_byte_level_bpe_needs_a_space_before_each_word(tmp_path) -> None:
    """RoBERTa-style: <s> ... </s>, no token types; words read as in running text, else a clear error."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["the cat sat on the mat"], vocab_size=280, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    files = bpe.save_model(str(tmp_path))
    with pytest.raises(ValueError, match="add_prefix_space=True"):
        encode_tokens([sentence(["the"])], RobertaTokenizerFast(*files), 8, TAGS)
    tok = RobertaTokenizerFast(*files, add_prefix_space=True)
    words = ["the", "cats", "sat", "", "on", "mat"]
    split = encode_tokens([sentence(words)], tok, 6, TAGS, subword="last")  # room 4, "cats" is 2 sub-tokens
    assert all(it["input_ids"][0] == tok.bos_token_id and it["input_ids"][-1] == tok.eos_token_id
               and "token_type_ids" not in it for it in split.items)
    ids = [i for it in split.items for i, s in zip(it["input_ids"], it["scored"], strict=True) if s]
    assert ids == [tok(" " + w, add_special_tokens=False)["input_ids"][-1] if w else tok.unk_token_id for w in words]


def test_collator_pads_each_field_with_its_own_value(tok: BertTokenizerFast) -> None:
    split = encode_tokens([sentence(["abc", "the"]), sentence(["sat"])], tok, 16, TAGS)
    batch = TokenCollator(tok.pad_token_id)([split[0], split[1]])
    assert batch["input_ids"][1, 3:].tolist() == [tok.pad_token_id] * 3
    assert batch["attention_mask"].tolist() == [[1] * 6, [1, 1, 1, 0, 0, 0]]
    assert batch["word_ids"][1].tolist() == [-1, 0, -1, -1, -1, -1]
    assert batch["scored"][1].tolist() == [0, 1, 0, 0, 0, 0]
    assert batch["labels"][1].tolist() == [-100, 0, -100, -100, -100, -100]
    assert batch["token_type_ids"][1].tolist() == [0] * 6 and batch["index"].tolist() == [0, 1]
    with pytest.raises(ValueError, match="empty batch"):
        TokenCollator(0)([])
    with pytest.raises(ValueError, match=r"\[7\] have no tokens"):
        TokenCollator(0)([{"input_ids": [], "index": 7}])
    loader = DataLoader(split, batch_sampler=LengthGroupedBatches(split.lengths, 2, shuffle=False),
                        collate_fn=TokenCollator(tok.pad_token_id))
    assert [b["index"].tolist() for b in loader] == [[0, 1]]
    unlabelled = encode_tokens([TokenExample("u", ("abc",))], tok, 16, None, labelled=False)
    assert "labels" not in TokenCollator(0)([unlabelled[0]])


def test_bad_tags_and_options_are_one_line_errors(tok: BertTokenizerFast) -> None:
    with pytest.raises(DataError, match=r"^line 12 \(example s12\): tag 'B-LOC' is not in the tag set"):
        encode_tokens([sentence(["the"], line=3), sentence(["the", "cat"], line=12, tags=["O", "B-LOC"])],
                      tok, 16, TAGS)
    with pytest.raises(DataError, match=r"line 4 .*2 words but 1 tags"):
        encode_tokens([sentence(["the", "cat"], line=4, tags=["O"])], tok, 16, TAGS)
    with pytest.raises(DataError, match=r"line 5 .*no words"):
        encode_tokens([sentence([], line=5)], tok, 16, TAGS)
    with pytest.raises(DataError, match="no tags"):
        encode_tokens([TokenExample("u", ("abc",))], tok, 16, TAGS)
    ex = [sentence(["the"])]
    for kwargs, message in (({"subword": "middle"}, "subword must be one of"),
                            ({"context": "paragraph"}, "context must be one of"),
                            ({"stride": 8}, "stride must be an integer from 0 to 7"),
                            ({"max_length": 2}, "max_length must be an integer >= 3")):
        with pytest.raises(ValueError, match=message):
            encode_tokens(ex, tok, **{"max_length": 10, "tag_names": TAGS, **kwargs})

    class Slow:
        is_fast = False

    with pytest.raises(ValueError, match="need a fast tokenizer"):
        encode_tokens(ex, Slow(), 10, TAGS)  # type: ignore[arg-type]


def test_merge_refuses_missing_or_misshapen_logits(tok: BertTokenizerFast) -> None:
    split = encode_tokens([sentence([WHOLE[i % 3] for i in range(20)])], tok, 10, TAGS)
    good = [np.zeros((len(w), 2)) for w in split.item_words]
    with pytest.raises(ValueError, match="2 arrays of logits for 3 items"):
        split.merge(good[:2])
    with pytest.raises(ValueError, match="item 1 scores 6 words"):
        split.merge([good[0], np.zeros((5, 2)), good[2]])
    split.item_words[1] = split.item_words[1][:-1]  # a bug: word 12 scored by no window
    with pytest.raises(RuntimeError, match=r"words \[12\] were scored 0 times"):
        split.merge([good[0], np.zeros((5, 2)), good[2]])
