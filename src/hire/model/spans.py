"""The span-extraction model (:class:`HireForQuestionAnswering`): a head's per-token form and the output layer at
every token, two outputs each, the start and end scores of an answer span (BERT §4.2)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers.modeling_outputs import QuestionAnsweringModelOutput

from hire.model.batch import check_batch, describe
from hire.model.config import HireConfig
from hire.model.encoder import Encoder
from hire.model.registry import register_model_class
from hire.model.sequence import HireModel


@dataclass
class SpanOutput(QuestionAnsweringModelOutput):
    """``transformers``' question-answering output (``loss``, ``start_logits`` and ``end_logits``: (B, n)), plus
    ``layer_weights`` (B, l + 1) for heads that weight hidden states."""

    layer_weights: Tensor | None = None


class HireForQuestionAnswering(HireModel):
    """Extractive question answering: the encoder reads a question and a window of its passage together; a head's
    per-token form gives a representation at every token, and the output layer (eq. 8) two scores, that the answer
    starts there and that it ends there. A span (i, j) scores ``start[i] + end[j]``; the first token ([CLS]) stands
    for "no answer in this window" (SQuAD v2.0, and a window that does not hold the answer).

    Padding never scores: its logits are the float32 minimum / 2, so the softmax of the loss, and any reader of the
    logits, sees the real tokens alone. ``start_positions`` / ``end_positions`` (B,): token indices of the answer;
    the loss is the mean of the two cross-entropies, as BERT's."""

    auto_class_name = "AutoModelForQuestionAnswering"  # the transformers Auto class that loads it

    def __init__(self, config: HireConfig, encoder: Encoder | None = None):
        super().__init__(config, encoder)
        self.head.check_tokens()  # a head without a per-token form says so now, not at the first batch

    @classmethod
    def check_config(cls, config: HireConfig) -> None:
        if config.num_labels != 2:
            raise ValueError(f"a span model has two outputs per token (start and end), not num_labels="
                             f"{config.num_labels}")

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,  # type: ignore[override]
                token_type_ids: Tensor | None = None, start_positions: Tensor | None = None,
                end_positions: Tensor | None = None) -> SpanOutput:
        attention_mask = check_batch(input_ids, attention_mask, token_type_ids, None, 2,
                                     self.get_input_embeddings().num_embeddings)
        B, n = input_ids.shape
        for name, value in (("start_positions", start_positions), ("end_positions", end_positions)):
            if value is not None and (not isinstance(value, Tensor) or tuple(value.shape) != (B,)
                                      or value.is_floating_point() or value.dtype == torch.bool
                                      or bool(((value < 0) | (value >= n)).any())):
                raise ValueError(f"{name} must be an integer tensor of shape ({B},), a token index below {n} per "
                                 f"example, not {describe(value)}")
        if (start_positions is None) != (end_positions is None):
            raise ValueError("give start_positions and end_positions together, or neither")
        with torch.no_grad() if self.config.freeze_encoder else contextlib.nullcontext():
            enc = self.encoder(input_ids, attention_mask, token_type_ids)
        head = self.head.tokens(enc.hidden_states, enc.mask)
        q = self.output(head.representation)  # eq. 8 at every token: (B, n, 2)
        q = q.to(torch.promote_types(q.dtype, torch.float32))
        q = q.masked_fill(~attention_mask.bool().unsqueeze(-1), torch.finfo(q.dtype).min / 2)
        start, end = q[..., 0], q[..., 1]
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = (F.cross_entropy(start, start_positions.long()) + F.cross_entropy(end, end_positions.long())) / 2
        return SpanOutput(loss=loss, start_logits=start, end_logits=end, layer_weights=head.layer_weights)


register_model_class("span", HireForQuestionAnswering)  # an answer span per question
