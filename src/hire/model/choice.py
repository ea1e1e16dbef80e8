"""The multiple-choice model (:class:`HireForMultipleChoice`): each (context, choice) pair read together, the head's
pooled vector and the output layer give one score per choice, a softmax across the choices (BERT's SWAG model)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers.modeling_outputs import MultipleChoiceModelOutput

from hire.model.batch import check_batch, describe
from hire.model.config import HireConfig
from hire.model.registry import register_model_class
from hire.model.sequence import HireModel


@dataclass
class ChoiceOutput(MultipleChoiceModelOutput):
    """``transformers``' multiple-choice output (``loss``, ``logits``: (B, C)), plus ``layer_weights`` (B, C, l + 1)
    for heads that weight hidden states."""

    layer_weights: Tensor | None = None


class HireForMultipleChoice(HireModel):
    """Multiple choice: ``input_ids`` (B, C, n) hold C (context, choice) pairs per question; each pair is encoded
    and read by the head as a sentence pair is, and the output layer (eq. 8) gives it one score; the loss is the
    cross-entropy of the softmax across a question's choices (``labels`` (B,): the right choice's index).

    Questions with fewer choices are padded to C with ``choice_mask`` (B, C) 0: a padded choice is never encoded, its
    score is the float32 minimum / 2 (so it takes no probability), and the padding never changes a real choice's
    score. Without ``choice_mask`` every choice is real (``transformers``' ``AutoModelForMultipleChoice`` input)."""

    auto_class_name = "AutoModelForMultipleChoice"  # the transformers Auto class that loads it

    @classmethod
    def check_config(cls, config: HireConfig) -> None:
        if config.num_labels != 1:
            raise ValueError(f"a multiple-choice model has one output per choice, not num_labels={config.num_labels}")

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,  # type: ignore[override]
                token_type_ids: Tensor | None = None, labels: Tensor | None = None,
                choice_mask: Tensor | None = None) -> ChoiceOutput:
        if not isinstance(input_ids, Tensor) or input_ids.dim() != 3:
            raise ValueError(f"input_ids must be a tensor of shape (questions, choices, tokens), not "
                             f"{describe(input_ids)}")
        B, C = input_ids.shape[:2]
        if choice_mask is None:
            choice_mask = torch.ones(B, C, dtype=torch.bool, device=input_ids.device)
        if not isinstance(choice_mask, Tensor) or tuple(choice_mask.shape) != (B, C):
            raise ValueError(f"choice_mask must be a tensor of shape ({B}, {C}), not {describe(choice_mask)}")
        real = choice_mask.bool()
        if bool((real.sum(-1) < 2).any()):
            raise ValueError("every question needs at least two real choices (choice_mask)")
        if labels is not None and (not isinstance(labels, Tensor) or tuple(labels.shape) != (B,)
                                   or labels.is_floating_point() or bool(((labels < 0) | (labels >= C)).any())
                                   or not bool(real.gather(1, labels.long().clamp(0, C - 1).unsqueeze(1)).all())):
            raise ValueError(f"labels must be an integer tensor of shape ({B},), each a real choice's index below "
                             f"{C}, not {describe(labels)}")

        def rows(value: Tensor | None) -> Tensor | None:
            return None if value is None else value.reshape(B * C, -1)[real.flatten()]

        ids, mask, types = rows(input_ids), rows(attention_mask), rows(token_type_ids)
        mask = check_batch(ids, mask, types, None, 1, self.get_input_embeddings().num_embeddings)
        with torch.no_grad() if self.config.freeze_encoder else contextlib.nullcontext():
            enc = self.encoder(ids, mask, types)
        head = self.head(enc.hidden_states, enc.mask)
        q = self.output(head.representation).squeeze(-1)  # eq. 8: one score per real choice
        q = q.to(torch.promote_types(q.dtype, torch.float32))
        logits = q.new_full((B * C,), torch.finfo(q.dtype).min / 2)
        logits[real.flatten()] = q
        logits = logits.reshape(B, C)
        weights = None
        if head.layer_weights is not None:
            weights = head.layer_weights.new_zeros(B * C, head.layer_weights.shape[-1])
            weights[real.flatten()] = head.layer_weights
            weights = weights.reshape(B, C, -1)
        loss = None if labels is None else F.cross_entropy(logits, labels.long())
        return ChoiceOutput(loss=loss, logits=logits, layer_weights=weights)


register_model_class("choice", HireForMultipleChoice)  # one of several answers per question
