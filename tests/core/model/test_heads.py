"""Every head by name: shapes, losses, gradients, dropout, padding and batch invariance, layer weights,
and HIRE (with its variants) against the slow per-example reference in ``reference.py``."""

from __future__ import annotations

import math

import pytest
import torch
from reference import reference_hire, reference_output_layer

from hire import head_names
from hire.model.heads import HIRE
from hire.model.heads.baselines import POOLINGS, pool

pytestmark = pytest.mark.usefixtures("single_thread")

HEADS = head_names()
WEIGHTING_HEADS = [n for n in HEADS if n.startswith("hire") and n != "hire-no-extractor"] + ["scalar-mix"]
FIXED_HEADS = [n for n in HEADS if n.startswith(("hire-mean-", "hire-random-"))]
NUM_STATES = 4  # the tiny encoders have 3 layers: H_0 .. H_3
B = 3


def expects_layer_weights(name: str) -> bool:
    return name in WEIGHTING_HEADS


def test_head_lists_are_complete():
    """The registry holds every variant of SPEC §2; the lists below are what the other tests cover."""
    expected = {"hire", "hire-no-extractor", "hire-no-fusion", "hire-mean-all", "hire-mean-last",
                "hire-mean-first", "hire-random-all", "hire-random-last", "last-layer", "scalar-mix",
                "concat-last-4", "pool-cls", "pool-sep", "pool-mean", "pool-max"}
    assert expected <= set(HEADS)
    assert set(FIXED_HEADS) == {"hire-mean-all", "hire-mean-last", "hire-mean-first", "hire-random-all",
                                "hire-random-last"}


# ---------------------------------------------------------------------------------------------------
# 1. Shapes, losses, gradients, determinism, dropout
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_labels", [3, 1], ids=["classification", "regression"])
@pytest.mark.parametrize("name", HEADS)
def test_shapes_and_loss(name, num_labels, make_model, make_batch):
    model = make_model(name, num_labels=num_labels)
    ids, mask = make_batch()
    labels = torch.tensor([0, 2, 1]) if num_labels > 1 else torch.tensor([0.5, -1.0, 2.0])
    out = model(ids, mask, labels=labels)
    assert out.logits.shape == ((B, num_labels) if num_labels > 1 else (B,))
    assert out.logits.dtype == torch.float32
    if expects_layer_weights(name):
        assert out.layer_weights is not None and out.layer_weights.shape == (B, NUM_STATES)
    else:
        assert out.layer_weights is None
    assert out.loss is not None and out.loss.shape == () and torch.isfinite(out.loss)
    assert model(ids, mask).loss is None  # no labels, no loss
    rep = model.head(model.encoder(ids, mask).hidden_states, mask).representation
    assert rep.shape == (B, model.head.output_dim)


def unused_by_the_math(name: str, head: torch.nn.Module) -> set[str]:
    """Parameters whose gradient is zero by the equations themselves, not by a bug.

    c = F[:, 0] reads the fusion GRU's last forward layer at its first step only, from the zero initial
    state, so that layer's W_hh multiplies h_0 = 0 and can never get a gradient (nn.GRU gives exactly 0).
    """
    fusion = getattr(head, "fusion", None)
    if fusion is None:
        return set()
    return {f"fusion.gru.weight_hh_l{fusion.gru.num_layers - 1}"}


@pytest.mark.parametrize("name", HEADS)
def test_gradients_reach_encoder_and_every_head_parameter(name, make_model, make_batch):
    model = make_model(name)
    ids, mask = make_batch()
    model(ids, mask, labels=torch.tensor([0, 2, 1])).loss.backward()
    emb = model.encoder.model.embeddings.word_embeddings.weight.grad
    assert emb is not None and emb.abs().sum() > 0
    for pname, p in model.output.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname
    skip = unused_by_the_math(name, model.head)
    params = dict(model.head.named_parameters())
    assert skip <= set(params)
    for pname, p in params.items():
        if pname in skip or not p.requires_grad:
            continue
        assert p.grad is not None, f"{name}: {pname} gets no gradient"
        assert p.grad.abs().sum() > 0, f"{name}: {pname} gets a zero gradient"
        assert torch.isfinite(p.grad).all(), pname
    # The head's structure matches its variant.
    if name.startswith("hire"):
        head = model.head
        assert isinstance(head, HIRE)
        has_extractor = name in ("hire", "hire-no-fusion", "hire-lite")
        assert (head.extractor is not None) == has_extractor
        assert (head.fusion is not None) == (name != "hire-no-fusion")
        if name in FIXED_HEADS:
            assert "fixed_scores" in dict(head.named_buffers())
    elif name in ("last-layer", "concat-last-4") or name.startswith("pool-"):
        assert not params
    else:
        assert set(params) == {"weights", "gamma"}


@pytest.mark.parametrize("name", HEADS)
def test_eval_is_deterministic_and_train_uses_dropout(name, make_model, make_batch):
    model = make_model(name)
    ids, mask = make_batch()
    with torch.no_grad():
        a, b = model(ids, mask), model(ids, mask)
        assert torch.equal(a.logits, b.logits)
        if a.layer_weights is not None:
            assert torch.equal(a.layer_weights, b.layer_weights)
        model.train()
        torch.manual_seed(1)
        c = model(ids, mask)
        d = model(ids, mask)
    assert not torch.allclose(c.logits, d.logits)
    assert not torch.allclose(c.logits, a.logits)


@pytest.mark.parametrize("name", ["hire", "hire-lite", "hire-no-extractor", "hire-mean-all"])
def test_head_dropout_follows_its_option(name, make_model, make_batch):
    """The head's own dropout (nn.GRU's: between the layers of a multi-layer Bi-GRU): in train mode a head
    with a multi-layer GRU and dropout 0.1 is random (hire-lite's GRUs have one layer each: never); with the
    option dropout=0 it never is; in eval mode both heads agree."""
    model = make_model(name)
    ids, mask = make_batch()
    with torch.no_grad():
        hs = model.encoder(ids, mask).hidden_states
        model.head.train()
        torch.manual_seed(0)
        a, b = model.head(hs, mask).representation, model.head(hs, mask).representation
        multi_layer = any(m.num_layers > 1 for m in (model.head.extractor, model.head.fusion) if m is not None)
        assert torch.allclose(a, b) != multi_layer
        quiet = make_model(name, head_options={"dropout": 0.0}).head.train()
        quiet.load_state_dict(model.head.state_dict())
        assert torch.equal(quiet(hs, mask).representation, quiet(hs, mask).representation)
        model.head.eval()
        assert torch.allclose(quiet.eval()(hs, mask).representation, model.head(hs, mask).representation)


# ---------------------------------------------------------------------------------------------------
# 2-3. Padding and batch invariance
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["bert", "roberta"])
@pytest.mark.parametrize("name", HEADS)
def test_padding_invariance(name, arch, make_model, make_batch):
    """Five more pad tokens (mask 0, pad id) change nothing."""
    model = make_model(name, arch=arch)
    with torch.no_grad():
        tight = model(*make_batch(arch=arch))
        loose = model(*make_batch(extra_pad=5, arch=arch))
    torch.testing.assert_close(loose.logits, tight.logits, atol=1e-5, rtol=0)
    if tight.layer_weights is None:
        assert loose.layer_weights is None
    else:
        torch.testing.assert_close(loose.layer_weights, tight.layer_weights, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", HEADS)
def test_padding_content_never_leaks(name, make_model, make_batch):
    """Whatever the hidden states hold at padded positions, a head's output is the same."""
    model = make_model(name)
    ids, mask = make_batch(extra_pad=2)
    with torch.no_grad():
        hs = model.encoder(ids, mask).hidden_states
        g = torch.Generator().manual_seed(3)
        pad = (mask == 0).unsqueeze(-1)
        garbage = [torch.where(pad, 50 * torch.randn(h.shape, generator=g), h) for h in hs]
        clean, dirty = model.head(hs, mask), model.head(garbage, mask)
    torch.testing.assert_close(dirty.representation, clean.representation, atol=1e-5, rtol=0)
    if clean.layer_weights is not None:
        torch.testing.assert_close(dirty.layer_weights, clean.layer_weights, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", HEADS)
def test_batch_invariance(name, make_model, make_batch):
    """An example's logits alone (unpadded) equal its logits inside a batch of other lengths."""
    model = make_model(name)
    lengths = (5, 2, 9, 4)
    ids, mask = make_batch(lengths)
    with torch.no_grad():
        batched = model(ids, mask)
        for i, length in enumerate(lengths):
            alone = model(ids[i : i + 1, :length], mask[i : i + 1, :length])
            torch.testing.assert_close(alone.logits, batched.logits[i : i + 1], atol=1e-5, rtol=0)
            if batched.layer_weights is not None:
                torch.testing.assert_close(alone.layer_weights, batched.layer_weights[i : i + 1],
                                           atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------------------------
# 4. Layer weights
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", WEIGHTING_HEADS)
def test_layer_weights_are_distributions(name, make_model, make_batch):
    model = make_model(name)
    with torch.no_grad():
        w = model(*make_batch()).layer_weights
    assert w.shape == (B, NUM_STATES)
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(B), atol=1e-6, rtol=0)
    if name in FIXED_HEADS or name == "scalar-mix":  # one row for the task, not per example
        assert torch.equal(w, w[:1].expand_as(w))


@pytest.mark.parametrize(("name", "k", "expected"), [
    ("hire-mean-last", 2, [0, 0, 0.5, 0.5]),
    ("hire-mean-first", 2, [0.5, 0.5, 0, 0]),
    ("hire-mean-last", 1, [0, 0, 0, 1]),
    ("hire-mean-first", 3, [1 / 3, 1 / 3, 1 / 3, 0]),
    ("hire-mean-all", None, [0.25] * 4),
])
def test_fixed_mean_weights(name, k, expected, make_model, make_batch):
    model = make_model(name, head_options={} if k is None else {"k": k})
    with torch.no_grad():
        w = model(*make_batch()).layer_weights
    torch.testing.assert_close(w, torch.tensor([expected] * B, dtype=torch.float32), atol=1e-7, rtol=0)


def test_fixed_random_weights(make_model, make_batch):
    """Drawn once from the seed: positive on the chosen states only, different for another seed."""
    ids, mask = make_batch()
    with torch.no_grad():
        w_all = make_model("hire-random-all").eval()(ids, mask).layer_weights[0]
        w_last = make_model("hire-random-last", head_options={"k": 2})(ids, mask).layer_weights[0]
        w_other = make_model("hire-random-all", head_options={"seed": 1})(ids, mask).layer_weights[0]
        w_same = make_model("hire-random-all", seed=5)(ids, mask).layer_weights[0]
    assert (w_all > 0).all() and not torch.allclose(w_all, torch.full((4,), 0.25))
    assert torch.equal(w_last[:2], torch.zeros(2)) and (w_last[2:] > 0).all()
    assert not torch.allclose(w_all, w_other)
    assert torch.equal(w_all, w_same)  # the scores come from the option's seed, not the global one


@pytest.mark.parametrize("name", ["hire", "hire-no-fusion", "hire-lite"])
def test_dynamic_weights_differ_between_examples(name, make_model, make_batch):
    model = make_model(name)
    with torch.no_grad():
        w = model(*make_batch()).layer_weights
    for i in range(B):
        for j in range(i + 1, B):
            assert (w[i] - w[j]).abs().max() > 1e-4, (i, j, w)


# ---------------------------------------------------------------------------------------------------
# 6. HIRE against the slow per-example, per-hidden-state reference
# ---------------------------------------------------------------------------------------------------

REFERENCE_CASES = {
    "hire": ("hire", {}, {}),
    "hire-fusion-1": ("hire", {"fusion_layers": 1}, {}),
    "hire-fusion-3": ("hire", {"fusion_layers": 3}, {}),
    "hire-fusion-0": ("hire", {"fusion_layers": 0}, {}),
    "hire-no-fusion": ("hire-no-fusion", {}, {"fusion": False}),
    "hire-no-extractor": ("hire-no-extractor", {}, {"extractor": False}),
    "hire-lite": ("hire-lite", {}, {"stride": 4}),
    "hire-lite-stride-3": ("hire-lite", {"extractor_stride": 3, "extractor_hidden": 5}, {"stride": 3}),
    "hire-extractor-3-layers": ("hire", {"extractor_layers": 3, "extractor_hidden": 6}, {}),
    "hire-mean-last": ("hire-mean-last", {"k": 2}, {"dynamic": False}),
    "hire-random-all": ("hire-random-all", {}, {"dynamic": False}),
}


def sharpen_scores(head: HIRE) -> None:
    """Make the score layer's output spread widely, so that s is far from uniform and ReLU is active for
    some states and not others: a wrong u_i then shows in s."""
    if getattr(head, "extractor", None) is not None:
        with torch.no_grad():
            g = torch.Generator().manual_seed(7)
            head.score.weight.copy_(torch.randn(head.score.weight.shape, generator=g))
            head.score.bias.fill_(0.3)


@pytest.mark.parametrize("case", list(REFERENCE_CASES))
def test_hire_matches_reference(case, make_model, make_batch):
    name, options, variant = REFERENCE_CASES[case]
    model = make_model(name, head_options=options)
    head = model.head
    sharpen_scores(head)
    # Random hidden states (distinct from layer to layer), random values at the padded positions too.
    _, mask = make_batch((3, 7, 11, 1, 8), extra_pad=2)
    g = torch.Generator().manual_seed(11)
    hs = [torch.randn(*mask.shape, 32, generator=g) for _ in range(NUM_STATES)]
    with torch.no_grad():
        out = head(hs, mask)
    c_ref, s_ref = reference_hire(head, hs, mask, **variant)
    torch.testing.assert_close(out.representation, c_ref, atol=1e-5, rtol=0)
    if s_ref is None:
        assert out.layer_weights is None
    else:
        torch.testing.assert_close(out.layer_weights, s_ref, atol=1e-5, rtol=0)
        if variant.get("dynamic", True):
            assert s_ref.max() - s_ref.min() > 0.05  # the comparison is not between two uniform rows


def test_hire_head_sizes_match_the_spec(make_model):
    """d = 32: extractor 2-layer Bi-GRU d -> d, score 4d -> 1, fusion 2-layer Bi-GRU 4d -> d, c of 2d;
    hire-lite: 1-layer extractor of ceil(d/4), 1-layer fusion of ceil(d/2); fusion depth 0: c = M[0], 4d."""
    d = 32
    head = make_model("hire").head
    assert (head.extractor.gru.input_size, head.extractor.gru.hidden_size, head.extractor.gru.num_layers) == (
        d, d, 2)
    assert head.score.in_features == 4 * d and head.score.out_features == 1
    assert (head.fusion.gru.input_size, head.fusion.gru.hidden_size, head.fusion.gru.num_layers) == (4 * d, d, 2)
    assert head.output_dim == 2 * d
    assert make_model("hire", head_options={"fusion_layers": 1}).head.fusion.gru.num_layers == 1
    assert make_model("hire", head_options={"fusion_layers": 3}).head.fusion.gru.num_layers == 3
    assert make_model("hire", head_options={"fusion_layers": 0}).head.output_dim == 4 * d
    assert make_model("hire-no-fusion").head.output_dim == d
    lite = make_model("hire-lite").head
    assert (lite.extractor.gru.hidden_size, lite.extractor.gru.num_layers) == (math.ceil(d / 4), 1)
    assert (lite.fusion.gru.hidden_size, lite.fusion.gru.num_layers) == (math.ceil(d / 2), 1)
    assert lite.score.in_features == 2 * math.ceil(d / 4)
    assert lite.output_dim == 2 * math.ceil(d / 2)


def test_output_layer_matches_equation_8(make_model, make_batch):
    """q = W2 tanh(W1 c + b1) + b2 on the reference c gives the model's logits (eval: no dropout)."""
    model = make_model("hire", num_labels=3)
    sharpen_scores(model.head)
    ids, mask = make_batch(extra_pad=1)
    with torch.no_grad():
        logits = model(ids, mask).logits
        hs = model.encoder(ids, mask).hidden_states
    c_ref, _ = reference_hire(model.head, hs, mask)
    assert model.output.dense.in_features == 64 and model.output.dense.out_features == 32
    torch.testing.assert_close(logits, reference_output_layer(model.output, c_ref), atol=1e-5, rtol=0)


def test_baseline_heads_match_their_formulas(make_model, make_batch):
    """last-layer, concat-last-4, scalar-mix and the four poolings, each written out per example."""
    _, mask = make_batch((3, 7, 11, 1), extra_pad=2)
    g = torch.Generator().manual_seed(5)
    hs = [torch.randn(*mask.shape, 32, generator=g) for _ in range(NUM_STATES)]
    lengths = mask.sum(-1).tolist()

    def run(name, **options):
        head = make_model(name, head_options=options).head
        if name == "scalar-mix":
            with torch.no_grad():
                head.weights.copy_(torch.tensor([0.5, -1.0, 2.0, 0.0]))
                head.gamma.fill_(1.7)
        with torch.no_grad():
            return head(hs, mask)

    def per_example(f):
        return torch.stack([f(b, n) for b, n in enumerate(lengths)])

    def close(name, expected, **options):
        torch.testing.assert_close(run(name, **options).representation, expected, atol=1e-6, rtol=1e-6)

    close("last-layer", per_example(lambda b, n: hs[3][b, 0]))
    close("pool-cls", per_example(lambda b, n: hs[3][b, 0]))
    close("pool-sep", per_example(lambda b, n: hs[3][b, n - 1]))
    close("pool-mean", per_example(lambda b, n: hs[3][b, :n].mean(0)))
    close("pool-max", per_example(lambda b, n: hs[3][b, :n].max(0).values))
    close("pool-max", per_example(lambda b, n: hs[0][b, :n].max(0).values), layer=0)
    close("pool-sep", per_example(lambda b, n: hs[2][b, n - 1]), layer=-2)
    close("concat-last-4", per_example(lambda b, n: torch.cat([h[b, 0] for h in hs])))
    close("concat-last-4", per_example(lambda b, n: torch.cat([hs[2][b, 0], hs[3][b, 0]])), k=2)
    s = torch.softmax(torch.tensor([0.5, -1.0, 2.0, 0.0]), 0)
    close("scalar-mix", per_example(lambda b, n: 1.7 * sum(s[i] * hs[i][b, 0] for i in range(NUM_STATES))))
    torch.testing.assert_close(run("scalar-mix").layer_weights, s.expand(len(lengths), -1))
    stacked = torch.stack(hs, dim=1)  # (B, l + 1, n, d): one call pools every state, as the probe does
    for mode in POOLINGS:
        assert torch.equal(pool(stacked, mask, mode), torch.stack([pool(h, mask, mode) for h in hs], dim=1))


@pytest.mark.parametrize("activation", ["relu", "none"])
def test_negative_scores_die_under_the_relu_of_eq_3_only(activation, make_model, make_batch):
    """eq. 3's ReLU: scores pushed below zero give uniform weights and no gradient to the score layer ever
    again; with ``score_activation="none"`` the same scores still rank the states and still learn."""
    model = make_model("hire", head_options={"score_activation": activation}).train()
    ids, mask = make_batch()
    with torch.no_grad():
        model.head.score.bias.fill_(-100.0)  # every w . u_i + b < 0
    out = model(ids, mask, labels=torch.tensor([0, 1, 2]))
    out.loss.backward()
    uniform = torch.full_like(out.layer_weights, 1 / out.layer_weights.shape[1])
    grad = model.head.score.weight.grad
    if activation == "relu":
        assert torch.equal(out.layer_weights, uniform) and torch.count_nonzero(grad) == 0
    else:
        assert not torch.allclose(out.layer_weights, uniform, atol=1e-4) and torch.count_nonzero(grad) > 0


def test_score_activation_is_checked(make_config):
    from hire.config import ConfigError, check_head

    with pytest.raises(ConfigError, match="score_activation: expected one of relu, none"):
        check_head("hire", {"score_activation": "sigmoid"})
    with pytest.raises(ConfigError, match="has no option 'score_activation'"):
        check_head("hire-mean-all", {"score_activation": "none"})
