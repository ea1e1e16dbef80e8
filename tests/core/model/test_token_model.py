"""The tagger (HireForTokenClassification) and every head's per-token form: each head's output at every token
equals an unpadded per-example reference (HIRE against tests/reference.py's plain-GRU HIRE), padding never
changes a word's logits, sub-word means, the loss over scored words only, saving and loading through the Auto
classes, and the heads that have no per-token form refused by name."""

from __future__ import annotations

import pytest
import torch
from conftest import make_batch, make_config
from reference import reference_hire
from transformers import AutoModelForTokenClassification

from hire.model import HireForTokenClassification, HireModel, build_model, word_means

LENGTHS = (7, 3, 5)


def tagger(head: str, seed: int = 0, subword: str = "first", num_labels: int = 5,
           **options) -> HireForTokenClassification:
    torch.manual_seed(seed)
    return build_model(make_config("bert"), head, num_labels, options, task_type="token", subword=subword).eval()


def hidden_states(model: HireModel, ids: torch.Tensor, mask: torch.Tensor):
    with torch.no_grad():
        return model.encoder(ids, mask, None)


@pytest.mark.parametrize("head, reference", [
    ("last-layer", lambda H, s: H[-1]),
    ("concat-last-4", lambda H, s: torch.cat(H[-4:], -1)),
    ("pool-cls", lambda H, s: H[-1]),
])
def test_baseline_heads_read_every_token(head, reference, single_thread):
    model = tagger(head)
    ids, mask = make_batch(LENGTHS)
    enc = hidden_states(model, ids, mask)
    out = model.head.tokens(enc.hidden_states, enc.mask).representation
    expected = reference(list(enc.hidden_states), None)
    for b, n in enumerate(LENGTHS):
        torch.testing.assert_close(out[b, :n], expected[b, :n])


def test_scalar_mix_per_token_is_the_softmax_mix(single_thread):
    model = tagger("scalar-mix")
    with torch.no_grad():
        model.head.weights.copy_(torch.tensor([0.3, -1.0, 2.0, 0.5]))
        model.head.gamma.fill_(1.7)
    ids, mask = make_batch(LENGTHS)
    enc = hidden_states(model, ids, mask)
    out = model.head.tokens(enc.hidden_states, enc.mask)
    s = torch.softmax(torch.tensor([0.3, -1.0, 2.0, 0.5]), 0)
    expected = 1.7 * sum(s[i] * h for i, h in enumerate(enc.hidden_states))
    torch.testing.assert_close(out.representation, expected)
    torch.testing.assert_close(out.layer_weights, s.expand(len(LENGTHS), -1))


@pytest.mark.parametrize("head, variant", [
    ("hire", {}),
    ("hire-no-fusion", {"fusion": False}),
    ("hire-no-extractor", {"extractor": False}),
    ("hire-mean-all", {"dynamic": False}),
    ("hire-lite", {"stride": 4}),
])
def test_hire_per_token_matches_the_reference(head, variant, single_thread):
    """eq. 2-7 at every token, against the plain-GRU reference run on each example alone, unpadded."""
    model = tagger(head, seed=3)
    ids, mask = make_batch(LENGTHS, extra_pad=2)
    enc = hidden_states(model, ids, mask)
    out = model.head.tokens(enc.hidden_states, enc.mask)
    expected, s = reference_hire(model.head, enc.hidden_states, mask, per_token=True, **variant)
    for b, n in enumerate(LENGTHS):
        torch.testing.assert_close(out.representation[b, :n].float(), expected[b], atol=2e-5, rtol=1e-4)
    if s is not None:
        torch.testing.assert_close(out.layer_weights.float(), s, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("head", ["hire", "last-layer", "scalar-mix", "concat-last-4", "hire-lite"])
@pytest.mark.parametrize("subword", ["first", "mean"])
def test_padding_never_changes_a_word(head, subword, single_thread):
    model = tagger(head, seed=1, subword=subword)
    ids, mask = make_batch(LENGTHS, extra_pad=3)
    words = torch.full(ids.shape, -1)
    for b, n in enumerate(LENGTHS):  # words of one or two tokens between [CLS] and [SEP]-like ends
        words[b, 1:n - 1] = torch.arange(n - 2) // 2
    with torch.no_grad():
        batched = model(ids, mask, word_ids=words).logits
        for b, n in enumerate(LENGTHS):
            alone = model(ids[b:b + 1, :n], mask[b:b + 1, :n], word_ids=words[b:b + 1, :n]).logits
            torch.testing.assert_close(batched[b, :n], alone[0], atol=2e-5, rtol=1e-4)


def test_word_means_average_each_words_tokens():
    T = torch.arange(2 * 5 * 2, dtype=torch.float32).reshape(2, 5, 2)
    words = torch.tensor([[-1, 0, 0, 1, -1], [-1, 0, 1, 1, 1]])
    out = word_means(T, words)
    torch.testing.assert_close(out[0, 1], T[0, 1:3].mean(0))
    torch.testing.assert_close(out[0, 2], T[0, 1:3].mean(0))
    torch.testing.assert_close(out[0, 3], T[0, 3])
    torch.testing.assert_close(out[1, 4], T[1, 2:5].mean(0))
    torch.testing.assert_close(out[:, 0], T[:, 0])  # not a word: unchanged
    torch.testing.assert_close(out[0, 4], T[0, 4])


def test_loss_is_the_mean_cross_entropy_over_scored_words(single_thread):
    model = tagger("last-layer")
    ids, mask = make_batch(LENGTHS)
    labels = torch.full(ids.shape, -100)
    labels[0, 1], labels[0, 4], labels[2, 2] = 1, 3, 0
    with torch.no_grad():
        out = model(ids, mask, labels=labels)
    picked = out.logits[labels != -100]
    expected = torch.nn.functional.cross_entropy(picked, labels[labels != -100])
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("head", ["pool-mean", "pool-max", "pool-sep"])
def test_heads_without_a_per_token_form_are_refused(head):
    with pytest.raises(ValueError, match="pools a sentence's tokens"):
        tagger(head)


def test_bad_labels_name_the_argument():
    model = tagger("last-layer")
    ids, mask = make_batch(LENGTHS)
    with pytest.raises(ValueError, match="labels must be an integer tensor of the shape of input_ids"):
        model(ids, mask, labels=torch.zeros(len(LENGTHS), dtype=torch.long))
    with pytest.raises(ValueError, match="tag indices 0 to 4"):
        model(ids, mask, labels=torch.full(ids.shape, 7))


def test_a_token_model_saves_and_loads_through_the_auto_class(tmp_path, single_thread):
    model = tagger("hire", seed=2, subword="mean", num_labels=3)
    model.config.set_labels(3, ["B-PER", "I-PER", "O"])
    model.save_pretrained(tmp_path)
    ids, mask = make_batch(LENGTHS)
    for loaded in (HireModel.from_pretrained(tmp_path), AutoModelForTokenClassification.from_pretrained(tmp_path)):
        assert isinstance(loaded, HireForTokenClassification)
        assert loaded.config.subword == "mean" and loaded.config.label_names == ["B-PER", "I-PER", "O"]
        with torch.no_grad():
            torch.testing.assert_close(loaded.eval()(ids, mask).logits, model(ids, mask).logits)
