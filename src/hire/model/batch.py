"""What a model's ``forward`` checks of a batch before it runs (:func:`check_batch`): each wrong argument is a
ValueError naming it."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def describe(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a tensor of dtype {str(value.dtype).removeprefix('torch.')} and shape {tuple(value.shape)}"
    return f"{type(value).__name__} {value!r}"[:120]


def check_batch(input_ids: Any, attention_mask: Any, token_type_ids: Any, labels: Any, num_labels: int,
                vocab_size: int) -> Tensor:
    """Check a batch for :meth:`HireModel.forward`; return its attention mask as integers (all ones if None).

    The shapes and dtypes are checked first, then every value at once (one read back from the device): the mask
    holds only 0 and 1, is right-padded, and gives each example at least one real token; token ids lie in the
    vocabulary; class labels are indices below ``num_labels`` (or -100, ignored); regression targets are finite.
    Each failure is a ValueError naming the argument.
    """
    integer = (torch.int64, torch.int32)
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or input_ids.dtype not in integer:
        raise ValueError(f"input_ids must be an int64 (or int32) tensor of token ids of shape (batch, tokens), "
                         f"not {describe(input_ids)}")
    shape = tuple(input_ids.shape)
    if 0 in shape:
        raise ValueError(f"input_ids of shape {shape}: an empty batch ({shape[0]} examples of {shape[1]} tokens); "
                         "give at least one example of at least one token")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if not isinstance(attention_mask, Tensor) or tuple(attention_mask.shape) != shape or attention_mask.is_complex():
        raise ValueError(f"attention_mask must be a tensor of the shape of input_ids {shape} (1 at real tokens, "
                         f"0 at padding), not {describe(attention_mask)}")
    if token_type_ids is not None and (not isinstance(token_type_ids, Tensor) or tuple(token_type_ids.shape) != shape
                                       or token_type_ids.dtype not in integer):
        raise ValueError(f"token_type_ids must be an integer tensor of the shape of input_ids {shape}, not "
                         f"{describe(token_type_ids)}")
    regression = num_labels == 1
    if labels is not None:
        kind = "a real-valued tensor" if regression else "an integer tensor of class indices"
        dtype_ok = isinstance(labels, Tensor) and labels.dtype != torch.bool and not labels.is_complex() and (
            regression or not labels.is_floating_point())
        if not dtype_ok or tuple(labels.shape) != shape[:1]:
            raise ValueError(f"labels must be {kind} of shape ({shape[0]},), one per example, not {describe(labels)}")
    mask = attention_mask.to(torch.long)
    problems = {  # each a 0-dim boolean tensor, read back together
        "mask": ((attention_mask != 0) & (attention_mask != 1)).any(),
        "left": (mask[:, 1:] > mask[:, :-1]).any(),
        "empty": (mask[:, 0] == 0).any(),  # right-padded: an example without a first real token has none
        "ids": ((input_ids < 0) | (input_ids >= vocab_size)).any(),
    }
    if labels is not None and regression:
        problems["labels"] = ~torch.isfinite(labels).all()
    elif labels is not None:
        problems["labels"] = ((labels != -100) & ((labels < 0) | (labels >= num_labels))).any()
    found = dict(zip(problems, torch.stack(list(problems.values())).tolist(), strict=True))
    if found["mask"]:
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
    if found["left"]:
        raise ValueError("attention_mask is not right-padded (padding before real tokens): hire's heads read "
                         "the first token and run over the first `length` positions; pad on the right "
                         "(tokenizer.padding_side = 'right')")
    if found["empty"]:
        rows = torch.nonzero(mask.sum(-1) == 0).flatten().tolist()
        raise ValueError(f"attention_mask: example(s) {rows[:10]} of the batch have no real token (all 0): every "
                         "example needs at least one")
    if found["ids"]:
        raise ValueError(f"input_ids: token ids from {int(input_ids.min())} to {int(input_ids.max())}, outside "
                         f"the encoder's vocabulary (0 to {vocab_size - 1})")
    if found.get("labels"):
        what = "finite numbers" if regression else f"class indices 0 to {num_labels - 1} (or -100, ignored)"
        raise ValueError(f"labels must be {what}; got {labels.tolist()[:10]}")
    return mask
