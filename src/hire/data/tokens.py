"""Token tasks' encoding: words to sub-tokens, one scored sub-token per word, windows over long sentences,
document context, padding, and per-word logits merged back from windows.

A word's label and prediction sit on one of its sub-tokens (``subword``: its first, as BERT; its last; or
``mean``, scored at the first sub-token where the model averages the word's sub-tokens, found by ``word_ids``).
A sentence longer than ``max_length`` is cut on word boundaries into overlapping windows, and each word is
scored in exactly one of them: the one where it has the most context, so that no word is ever dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np
from torch.utils.data import Dataset
from transformers import PreTrainedTokenizerBase

from hire.data.batching import Collator
from hire.data.examples import DataError, TokenExample

SUBWORD_MODES = ("first", "last", "mean")
CONTEXT_MODES = ("sentence", "document")
IGNORE = -100  # the label of every position that is not scored (torch's cross-entropy ignore_index)


@dataclass
class TokenSplit(Dataset):
    """Encoded token examples: one item per window (most sentences are one window), a dict of ``input_ids``,
    ``token_type_ids`` (where the tokenizer makes them), ``word_ids`` (each position's word in the item's own
    sentence, -1 for special tokens and context), ``scored`` (1 where a word is scored), ``labels`` (its tag id
    there, -100 elsewhere; labelled data only) and ``index``.

    ``item_example[i]`` is the example item ``i`` belongs to and ``item_words[i]`` the words (indices in that
    example's sentence) its scored positions score, in position order; ``num_words[e]`` is example ``e``'s
    number of words. Every word of every example is scored by exactly one item.
    """

    items: list[dict[str, list[int] | int]]
    item_example: list[int]
    item_words: list[list[int]]
    num_words: list[int]
    examples: Sequence[TokenExample]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return dict(self.items[i])

    @property
    def lengths(self) -> list[int]:
        return [len(it["input_ids"]) for it in self.items]  # type: ignore[arg-type]

    def merge(self, scored_logits: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per-example ``(num_words, m)`` arrays from each item's ``(k_i, m)`` logits at its scored positions
        (in position order); every word is filled exactly once (anything else is a bug, and raises)."""
        if len(scored_logits) != len(self.items):
            raise ValueError(f"merge: {len(scored_logits)} arrays of logits for {len(self.items)} items")
        if not self.items:
            return []
        first = np.asarray(scored_logits[0])
        out = [np.zeros((n, first.shape[-1]), dtype=first.dtype) for n in self.num_words]
        filled = [np.zeros(n, dtype=np.int64) for n in self.num_words]
        for i, logits in enumerate(scored_logits):
            logits = np.asarray(logits)
            words, e = self.item_words[i], self.item_example[i]
            if logits.ndim != 2 or logits.shape[0] != len(words):
                raise ValueError(f"merge: item {i} scores {len(words)} words, but its logits have shape "
                                 f"{logits.shape} (expected ({len(words)}, m))")
            out[e][words] = logits
            filled[e][words] += 1
        for e, counts in enumerate(filled):
            if (counts != 1).any():
                bad = np.flatnonzero(counts != 1).tolist()
                raise RuntimeError(f"merge: example {e}: words {bad[:10]} were scored {counts[bad[0]]} times, "
                                   "not once (a bug in encode_tokens)")
        return out


def encode_tokens(examples: Sequence[TokenExample], tokenizer: PreTrainedTokenizerBase, max_length: int,
                  tag_names: Sequence[str] | None, labelled: bool = True, *, subword: str = "first",
                  context: str = "sentence", stride: int | None = None) -> TokenSplit:
    """Tokenize sentences word by word (one batched call of a fast tokenizer) into items of at most
    ``max_length`` sub-tokens, special tokens included, scoring every word exactly once.

    - A word that tokenizes to nothing (a control character) becomes the tokenizer's unknown token; a word
      longer than a window keeps its first sub-tokens.
    - A sentence that does not fit is cut on word boundaries into windows that overlap by up to ``stride``
      sub-tokens (default: a quarter of the room left by the special tokens), and each word is scored in the
      window where its distance (in sub-tokens) to the nearer cut edge is largest (ties: the earlier window).
    - ``context="document"``: a sentence that fits is surrounded by the words of its neighbours in the list
      with the same ``document`` number (half the free room on each side, whole words, the rest to the other
      side where one runs out); only its own words are scored. Sentences with ``document`` None get none.
    """
    if subword not in SUBWORD_MODES:
        raise ValueError(f"subword must be one of {list(SUBWORD_MODES)}, not {subword!r}")
    if context not in CONTEXT_MODES:
        raise ValueError(f"context must be one of {list(CONTEXT_MODES)}, not {context!r}")
    if not examples:
        raise ValueError("no examples to encode (an empty split)")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"token tasks need a fast tokenizer (one with word_ids()), and "
                         f"{type(tokenizer).__name__} is not one")
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < specials + 1:
        raise ValueError(f"max_length must be an integer >= {specials + 1} (the special tokens and one sub-token), "
                         f"not {max_length!r}")
    room = max_length - specials
    if stride is None:
        stride = room // 4
    if isinstance(stride, bool) or not isinstance(stride, int) or not 0 <= stride < room:
        raise ValueError(f"stride must be an integer from 0 to {room - 1} (max_length less the special tokens, "
                         f"less 1), not {stride!r}")
    tags = _tag_ids(examples, tag_names) if labelled else None
    pieces = _word_pieces(examples, tokenizer, room)
    prefix, suffix, types = _template(tokenizer)
    split = TokenSplit([], [], [], [len(e.tokens) for e in examples], examples)
    for e, words in enumerate(pieces):
        lengths = [len(p) for p in words]
        windows = _windows(lengths, room, stride)
        owner = _owners(windows, lengths)
        left: list[int] = []
        right: list[int] = []
        if context == "document" and len(windows) == 1 and examples[e].document is not None:
            left, right = _document_context(examples, pieces, e, room - sum(lengths))
        for k, (start, end) in enumerate(windows):
            scored = [w for w in range(start, end) if owner[w] == k]
            if not scored:  # every word of this window has more context in another: nothing to learn here
                continue
            item = _item(words, start, end, set(scored), left, right, prefix, suffix, types, subword,
                         tags[e] if tags is not None else None)
            item["index"] = len(split.items)
            split.items.append(item)
            split.item_example.append(e)
            split.item_words.append(scored)
    return split


def _where(ex: TokenExample) -> str:
    return f"line {ex.line} (example {ex.guid})" if ex.line else f"example {ex.guid}"


def _tag_ids(examples: Sequence[TokenExample], tag_names: Sequence[str] | None) -> list[list[int]]:
    if tag_names is None:
        raise ValueError("labelled token examples need tag_names (the model's tag set)")
    ids = {name: i for i, name in enumerate(tag_names)}
    out = []
    for ex in examples:
        where = _where(ex)
        if ex.tags is None:
            raise DataError(f"{where}: the sentence has no tags, and labelled data needs one per word")
        if len(ex.tags) != len(ex.tokens):
            raise DataError(f"{where}: {len(ex.tokens)} words but {len(ex.tags)} tags")
        unknown = [t for t in ex.tags if t not in ids]
        if unknown:
            raise DataError(f"{where}: tag {unknown[0]!r} is not in the tag set {list(tag_names)}")
        out.append([ids[t] for t in ex.tags])
    return out


def _word_pieces(examples: Sequence[TokenExample], tokenizer: PreTrainedTokenizerBase,
                 room: int) -> list[list[list[int]]]:
    """Each example's words as sub-token id lists (one batched tokenizer call): at least one id (the unknown
    token), at most ``room``."""
    for ex in examples:
        if not ex.tokens:
            raise DataError(f"{_where(ex)}: a sentence with no words")
    enc = tokenizer([list(ex.tokens) for ex in examples], is_split_into_words=True, add_special_tokens=False)
    unk = tokenizer.unk_token_id
    out = []
    for i, ex in enumerate(examples):
        words: list[list[int]] = [[] for _ in ex.tokens]
        for token, w in zip(enc["input_ids"][i], enc.word_ids(i), strict=True):
            if w is not None:
                words[w].append(token)
        for w, p in enumerate(words):
            if not p:
                if unk is None:
                    raise DataError(f"{_where(ex)}: word {w} ({ex.tokens[w]!r}) has no "
                                    "sub-tokens, and the tokenizer has no unknown token to stand for it")
                p.append(unk)
            elif len(p) > room:
                del p[room:]
        out.append(words)
    return out


def _template(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int], list[int] | None]:
    """The special tokens before and after a sentence, and the token type ids of (prefix, one word, suffix)
    (None: the tokenizer makes none), read from the tokenizer's encoding of one word.

    Refuses a tokenizer that reads given words unlike running text (RoBERTa's byte-level BPE without a space
    before each word: every word would look like the start of a sentence, as the encoder never saw it)."""
    words = tokenizer(["a", "a"], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    if words != tokenizer("a a", add_special_tokens=False)["input_ids"]:
        raise ValueError(f"{type(tokenizer).__name__} tokenizes given words unlike running text ('a a'): load it "
                         "with add_prefix_space=True (AutoTokenizer.from_pretrained(path, add_prefix_space=True))")
    enc = tokenizer(["a"], is_split_into_words=True)
    ids, wids = enc["input_ids"], enc.word_ids()
    inside = [i for i, w in enumerate(wids) if w is not None]
    if not inside:
        raise ValueError(f"{type(tokenizer).__name__}: could not find the word in its encoding of 'a'")
    first, last = inside[0], inside[-1]
    types = None
    if "token_type_ids" in enc:
        tt = enc["token_type_ids"]
        types = [*tt[:first], tt[first], *tt[last + 1 :]]
    return ids[:first], ids[last + 1 :], types


def _windows(lengths: Sequence[int], room: int, stride: int) -> list[tuple[int, int]]:
    """Word ranges ``[start, end)`` of at most ``room`` sub-tokens covering every word; each window after the
    first starts as far back as an overlap of at most ``stride`` sub-tokens allows while it still reaches a new
    word. Every length must be <= room."""
    n, start, out = len(lengths), 0, []
    while True:
        end, size = start, 0
        while end < n and size + lengths[end] <= room:
            size += lengths[end]
            end += 1
        out.append((start, end))
        if end == n:
            return out
        nxt, overlap, limit = end, 0, min(stride, room - lengths[end])
        while nxt - 1 > start and overlap + lengths[nxt - 1] <= limit:
            nxt -= 1
            overlap += lengths[nxt]
        start = nxt


def _owners(windows: list[tuple[int, int]], lengths: Sequence[int]) -> list[int]:
    """For each word, the window that scores it: where its distance in sub-tokens to the nearer cut edge is
    largest (a sentence's own start and end are not cuts); ties go to the earlier window."""
    n = len(lengths)
    if len(windows) == 1:
        return [0] * n
    cum = list(accumulate(lengths, initial=0))
    best, owner = [-1.0] * n, [-1] * n
    for k, (start, end) in enumerate(windows):
        for w in range(start, end):
            left = cum[w] - cum[start] if start > 0 else float("inf")
            right = cum[end] - cum[w + 1] if end < n else float("inf")
            if min(left, right) > best[w]:
                best[w], owner[w] = min(left, right), k
    return owner


def _document_context(examples: Sequence[TokenExample], pieces: list[list[list[int]]], e: int,
                      free: int) -> tuple[list[int], list[int]]:
    """Sub-token ids of whole words from example ``e``'s neighbours in its document, before and after it, at
    most ``free`` in all: half on each side, and what one side cannot use goes to the other."""
    doc = examples[e].document

    def side(step: int) -> list[list[int]]:  # the neighbours' words, nearest first
        j, words, size = e + step, [], 0
        while 0 <= j < len(examples) and examples[j].document == doc and size < free:
            words.extend(pieces[j][::step])
            size += sum(map(len, pieces[j]))
            j += step
        return words

    def take(words: list[list[int]], budget: int) -> list[list[int]]:
        kept, size = [], 0
        for p in words:
            if size + len(p) > budget:
                break
            kept.append(p)
            size += len(p)
        return kept

    before, after = side(-1), side(1)
    after_size = sum(map(len, take(after, free)))
    left = take(before, max(free // 2, free - after_size))
    right = take(after, free - sum(map(len, left)))
    left = take(before, free - sum(map(len, right)))  # room the right side's whole words left unused
    return [t for p in reversed(left) for t in p], [t for p in right for t in p]


def _item(words: list[list[int]], start: int, end: int, scored: set[int], left: list[int], right: list[int],
          prefix: list[int], suffix: list[int], types: list[int] | None, subword: str,
          tags: list[int] | None) -> dict[str, Any]:
    """One window: special tokens, left context, words ``[start, end)`` of the sentence, right context."""
    ids, word_ids, marks = [*prefix, *left], [-1] * (len(prefix) + len(left)), [0] * (len(prefix) + len(left))
    for w in range(start, end):
        p = words[w]
        marks.extend([0] * len(p))
        if w in scored:
            marks[len(ids) + (len(p) - 1 if subword == "last" else 0)] = 1
        ids.extend(p)
        word_ids.extend([w] * len(p))
    tail = len(right) + len(suffix)
    ids += [*right, *suffix]
    word_ids += [-1] * tail
    marks += [0] * tail
    item: dict[str, Any] = {"input_ids": ids}
    if types is not None:
        n = len(ids) - len(prefix) - len(suffix)
        item["token_type_ids"] = [*types[: len(prefix)], *[types[len(prefix)]] * n, *types[len(prefix) + 1 :]]
    item["word_ids"], item["scored"] = word_ids, marks
    if tags is not None:
        item["labels"] = [tags[w] if m else IGNORE for w, m in zip(word_ids, marks, strict=True)]
    return item


class TokenCollator(Collator):
    """Pads token items to the batch's longest (right padding): input ids with the pad id, token types 0,
    attention mask 0, word ids -1, scored 0, labels -100."""

    PADS = (("token_type_ids", 0), ("word_ids", -1), ("scored", 0), ("labels", IGNORE))
