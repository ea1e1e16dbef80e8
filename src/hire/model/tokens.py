"""The token model (:class:`HireForTokenClassification`): a head's per-token form and the output layer at every
token, a tag per word."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import PreTrainedTokenizerBase
from transformers.modeling_outputs import TokenClassifierOutput

from hire.model.batch import check_batch, describe
from hire.model.config import HireConfig
from hire.model.encoder import Encoder
from hire.model.registry import register_model_class
from hire.model.sequence import HireModel


@dataclass
class TokenOutput(TokenClassifierOutput):
    """``transformers``' token classifier output (``loss``, ``logits``: (B, n, m)), plus ``layer_weights``
    (B, l + 1) for heads that weight hidden states."""

    layer_weights: Tensor | None = None


class HireForTokenClassification(HireModel):
    """The encoder, a head's per-token form and the output layer (eq. 8) at every token: token tasks (named
    entities, chunks, parts of speech).

    ``Head.tokens`` gives a representation at every token, the output layer classifies each. A word's tag is read
    at one of its sub-tokens, the one its ``labels`` mark (``config.subword``: its first, as BERT does, or its
    last); with ``mean``, the representations of the word's sub-tokens (``word_ids``: the word each token
    belongs to, -1 for none) are averaged first. ``labels`` (B, n) hold a tag index at each word's scored
    sub-token and -100 elsewhere: the loss is the mean cross-entropy over words.
    """

    auto_class_name = "AutoModelForTokenClassification"  # the transformers Auto class that loads it

    def __init__(self, config: HireConfig, encoder: Encoder | None = None):
        if config.regression:
            raise ValueError("a token model needs at least two tags (num_labels >= 2), not regression")
        super().__init__(config, encoder)
        self.head.check_tokens()  # a head without a per-token form says so now, not at the first batch
        # Which vocabulary entries continue a word (WordPiece's "##" pieces; see set_word_pieces): where no
        # word_ids are given (transformers' token-classification pipeline), words are found from them.
        vocab = self.get_input_embeddings().num_embeddings
        self.register_buffer("continues_word", torch.zeros(vocab, dtype=torch.bool))

    def set_word_pieces(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Mark the tokenizer's word-continuing pieces (WordPiece's ``##`` prefix), so that the model reads each
        word at one of its sub-tokens, as with ``word_ids``, also where it is given token ids alone (transformers'
        ``pipeline("token-classification")``), and every sub-token of a word carries the word's tag (B-X on its
        first, I-X on the rest). Tokenizers without such a prefix (byte-level BPE, SentencePiece) leave it unset:
        without ``word_ids`` each sub-token is then read on its own."""
        prefix = getattr(getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None),
                         "continuing_subword_prefix", None)
        marks = torch.zeros_like(self.continues_word)
        if prefix:
            ids = [i for token, i in tokenizer.get_vocab().items() if token.startswith(prefix) and i < len(marks)]
            marks[ids] = True
        self.continues_word.copy_(marks)

    def _words_from_pieces(self, input_ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Which tokens continue a word (B, n), and the word each real token belongs to (B, n; -1 at padding)."""
        inside = self.continues_word[input_ids] & mask.bool()
        inside[:, 0] = False
        return inside, torch.where(mask.bool(), (~inside).long().cumsum(1) - 1, -1)

    def _read_words(self, q: Tensor, inside: Tensor, word: Tensor) -> Tensor:
        """Without ``word_ids``: every sub-token of a word gets the logits of the sub-token the word is read at
        (``config.subword``; ``mean`` has averaged them already), with B-X moved to I-X after the word's first."""
        B, n, m = q.shape
        word = word.clamp(min=0)  # padding reads the first word: never looked at
        positions = torch.arange(n, device=q.device).expand(B, n)
        reduce = "amax" if self.config.subword == "last" else "amin"
        read = torch.zeros_like(positions).scatter_reduce(1, word, positions, reduce, include_self=False)
        q = q.gather(1, read.gather(1, word).unsqueeze(-1).expand(B, n, m))
        moves = [(b, names.index("I-" + name[2:])) for names in [self.config.label_names or []]
                 for b, name in enumerate(names) if name.startswith("B-") and "I-" + name[2:] in names]
        if moves:
            later = q.clone()
            for b, i in moves:
                later[..., i] = torch.maximum(q[..., b], q[..., i])
                later[..., b] = torch.finfo(q.dtype).min / 2
            q = torch.where(inside.unsqueeze(-1), later, q)
        return q

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,  # type: ignore[override]
                token_type_ids: Tensor | None = None, labels: Tensor | None = None,
                word_ids: Tensor | None = None) -> TokenOutput:
        attention_mask = check_batch(input_ids, attention_mask, token_type_ids, None, self.config.num_labels,
                                     self.get_input_embeddings().num_embeddings)
        shape = tuple(input_ids.shape)
        for name, value in (("labels", labels), ("word_ids", word_ids)):
            if value is not None and (not isinstance(value, Tensor) or tuple(value.shape) != shape
                                      or value.is_floating_point() or value.dtype == torch.bool):
                raise ValueError(f"{name} must be an integer tensor of the shape of input_ids {shape}, one per "
                                 f"token, not {describe(value)}")
        m = self.config.num_labels
        if labels is not None and bool(((labels != -100) & ((labels < 0) | (labels >= m))).any()):
            raise ValueError(f"labels must be tag indices 0 to {m - 1} (or -100, ignored); got "
                             f"{sorted(set(labels.flatten().tolist()))[:10]}")
        with torch.no_grad() if self.config.freeze_encoder else contextlib.nullcontext():
            enc = self.encoder(input_ids, attention_mask, token_type_ids)
        head = self.head.tokens(enc.hidden_states, enc.mask)
        T = head.representation  # (B, n, d')
        from_pieces = word_ids is None and bool(self.continues_word.any())
        if from_pieces:  # token ids alone: words from the word pieces
            inside, word_ids = self._words_from_pieces(input_ids, attention_mask)
        if self.config.subword == "mean" and word_ids is not None:
            T = word_means(T, word_ids)
        q = self.output(T)  # eq. 8 at every token: (B, n, m)
        q = q.to(torch.promote_types(q.dtype, torch.float32))
        if from_pieces:
            q = self._read_words(q, inside, word_ids)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(q.reshape(-1, m), labels.reshape(-1).long(), ignore_index=-100)
        return TokenOutput(loss=loss, logits=q, layer_weights=head.layer_weights)


def word_means(T: Tensor, word_ids: Tensor) -> Tensor:
    """At every token of a word (``word_ids`` (B, n): the word's index, -1 for no word), the mean of that word's
    token representations ``T`` (B, n, d); other tokens unchanged. Padding (-1) never changes a word."""
    B, n, d = T.shape
    words = int(word_ids.max().item()) + 1 if word_ids.numel() else 0
    if words <= 0:
        return T
    real = word_ids >= 0
    index = word_ids.clamp(min=0)  # (B, n)
    where = (torch.arange(B, device=T.device).unsqueeze(1).expand(B, n)[real], index[real])  # (example, word)
    sums = T.new_zeros(B, words, d).index_put_(where, T[real], accumulate=True)
    counts = T.new_zeros(B, words).index_put_(where, T.new_ones(()).expand(int(real.sum())), accumulate=True)
    means = sums / counts.clamp(min=1).unsqueeze(-1)  # (B, words, d)
    gathered = means.gather(1, index.unsqueeze(-1).expand(B, n, d))
    return torch.where(real.unsqueeze(-1), gathered, T)


register_model_class("token", HireForTokenClassification)  # a tag per word
