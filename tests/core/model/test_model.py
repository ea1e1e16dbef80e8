"""The model around the heads: losses, save/load, a new label set, the paper's parameter counts, errors."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from conftest import bert_config
from transformers import RobertaConfig

from hire import HireModel, build_model, head_names
from hire.model.heads import head_options

pytestmark = pytest.mark.usefixtures("single_thread")

HEADS = head_names()

# (head, options): every head with its defaults, and some with options that differ from the defaults.
SAVE_CASES = [(name, {}) for name in HEADS] + [
    ("hire", {"fusion_layers": 1}),
    ("hire", {"fusion_layers": 0, "dropout": 0.2}),
    ("hire-lite", {"extractor_stride": 2}),
    ("hire-random-last", {"k": 2, "seed": 3}),
    ("pool-mean", {"layer": 1}),
    ("concat-last-4", {"k": 2}),
]


def case_id(case: tuple[str, dict]) -> str:
    name, options = case
    return name + "".join(f"-{k}={v}" for k, v in options.items())


# ---------------------------------------------------------------------------------------------------
# Losses (eq. 10-11)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hire", "last-layer"])
def test_losses_are_cross_entropy_and_mse(name, make_model, make_batch):
    ids, mask = make_batch()
    cls = make_model(name, num_labels=3)
    labels = torch.tensor([2, 0, 1])
    out = cls(ids, mask, labels=labels)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))
    reg = make_model(name, num_labels=1)
    targets = torch.tensor([0.5, -1.0, 3.0])
    out = reg(ids, mask, labels=targets)
    assert out.logits.shape == (3,)
    torch.testing.assert_close(out.loss, ((out.logits - targets) ** 2).mean())
    out.loss.backward()


def test_token_type_ids_reach_the_encoder(make_model, make_batch):
    model = make_model("last-layer")
    ids, mask = make_batch()
    with torch.no_grad():
        zeros = model(ids, mask, token_type_ids=torch.zeros_like(ids)).logits
        assert torch.equal(model(ids, mask).logits, zeros)
        ones = model(ids, mask, token_type_ids=(torch.arange(ids.shape[1]) > 1).long().expand_as(ids)).logits
    assert not torch.allclose(zeros, ones)


# ---------------------------------------------------------------------------------------------------
# 5. Save and load
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", SAVE_CASES, ids=[case_id(c) for c in SAVE_CASES])
def test_save_and_load_round_trip(case, tmp_path, make_model, make_batch):
    name, options = case
    model = make_model(name, head_options=options)
    ids, mask = make_batch(extra_pad=1)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "config.json").is_file() and (tmp_path / "model.safetensors").is_file()
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["head"] == name and saved["head_options"] == options
    loaded = HireModel.from_pretrained(tmp_path).eval()
    assert loaded.config.head == name
    assert loaded.config.head_options == options
    assert loaded.config.num_labels == 3
    with torch.no_grad():
        a, b = model(ids, mask), loaded(ids, mask)
    assert torch.equal(a.logits, b.logits)
    if a.layer_weights is None:
        assert b.layer_weights is None
    else:
        assert torch.equal(a.layer_weights, b.layer_weights)
    # Everything, buffers (the fixed scores) included, came back.
    state_a, state_b = model.state_dict(), loaded.state_dict()
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)


def test_options_change_the_model_and_survive_loading(tmp_path, make_model, make_batch):
    """A non-default option is not silently dropped: it changes the model, before and after loading."""
    ids, mask = make_batch()
    default = make_model("pool-mean")
    layer1 = make_model("pool-mean", head_options={"layer": 1})
    layer1.save_pretrained(tmp_path / "pool")
    with torch.no_grad():
        hs = layer1.encoder(ids, mask).hidden_states
        rep = HireModel.from_pretrained(tmp_path / "pool").head(hs, mask).representation
        assert torch.equal(rep, layer1.head(hs, mask).representation)
        real = mask.unsqueeze(-1).float()
        torch.testing.assert_close(rep, (hs[1] * real).sum(1) / real.sum(1))
        assert not torch.allclose(rep, default.head(hs, mask).representation)
    fusion1 = make_model("hire", head_options={"fusion_layers": 1})
    fusion1.save_pretrained(tmp_path / "hire")
    assert HireModel.from_pretrained(tmp_path / "hire").head.fusion.gru.num_layers == 1


def test_save_and_load_roberta(tmp_path, make_model, make_batch):
    model = make_model("hire", arch="roberta", num_labels=2)
    ids, mask = make_batch(arch="roberta", extra_pad=2)
    model.save_pretrained(tmp_path)
    loaded = HireModel.from_pretrained(tmp_path).eval()
    assert loaded.encoder.config.model_type == "roberta"
    with torch.no_grad():
        a, b = model(ids, mask), loaded(ids, mask)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.layer_weights, b.layer_weights)


@pytest.mark.parametrize("new_labels", [5, 1])
def test_load_with_another_label_set(new_labels, tmp_path, make_model, make_batch):
    """A new output projection of the right size; the encoder, head and W1 are kept (MNLI -> RTE)."""
    model = make_model("hire", num_labels=3)
    model.save_pretrained(tmp_path / "mnli")
    loaded = HireModel.from_pretrained(tmp_path / "mnli", num_labels=new_labels).eval()
    assert loaded.config.num_labels == new_labels
    assert loaded.output.out.out_features == new_labels and loaded.output.out.in_features == 32
    for part in ("encoder", "head"):
        a, b = getattr(model, part).state_dict(), getattr(loaded, part).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), part
    assert torch.equal(model.output.dense.weight, loaded.output.dense.weight)
    ids, mask = make_batch()
    labels = torch.tensor([4, 0, 1]) if new_labels > 1 else torch.tensor([0.1, 0.2, 0.3])
    out = loaded(ids, mask, labels=labels)
    assert out.logits.shape == ((3, new_labels) if new_labels > 1 else (3,))
    assert torch.isfinite(out.loss)
    # The new model saves and loads as a model of its own label set.
    loaded.save_pretrained(tmp_path / "rte")
    again = HireModel.from_pretrained(tmp_path / "rte").eval()
    assert again.config.num_labels == new_labels
    with torch.no_grad():
        assert torch.equal(again(ids, mask).logits, loaded(ids, mask).logits)


def test_load_with_the_same_label_set_keeps_the_output_layer(tmp_path, make_model):
    model = make_model("last-layer", num_labels=3)
    model.save_pretrained(tmp_path)
    loaded = HireModel.from_pretrained(tmp_path, num_labels=3)
    assert torch.equal(loaded.output.out.weight, model.output.out.weight)


# ---------------------------------------------------------------------------------------------------
# 8. Parameter counts (paper Table 2)
# ---------------------------------------------------------------------------------------------------


def roberta_large_config() -> RobertaConfig:
    return RobertaConfig(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                         intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1,
                         pad_token_id=1)


def count_on_meta(head: str) -> int:
    with torch.device("meta"):
        model = build_model(roberta_large_config(), head=head, num_labels=2)
    assert all(p.is_meta for p in model.parameters())  # nothing was allocated
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_match_table_2():
    """RoBERTa-large: 355M; RoBERTa-large + HIRE: 437M (within 1%)."""
    last, hire = count_on_meta("last-layer"), count_on_meta("hire")
    print(f"\nlast-layer: {last:,} parameters; hire: {hire:,} parameters")
    assert last == pytest.approx(355e6, rel=0.01)
    assert hire == pytest.approx(437e6, rel=0.01)
    # What HIRE adds, from the equations (d = 1024): extractor 2-layer Bi-GRU d -> d, score 4d -> 1,
    # fusion 2-layer Bi-GRU 4d -> d, and W1 reading 2d instead of d.
    d = 1024

    def bigru(inp: int, h: int, layers: int) -> int:
        return sum(2 * (3 * h * (i + h) + 6 * h) for i in [inp] + [2 * h] * (layers - 1))

    added = bigru(d, d, 2) + (4 * d + 1) + bigru(4 * d, d, 2) + d * d
    assert hire - last == added


# ---------------------------------------------------------------------------------------------------
# 9. Errors
# ---------------------------------------------------------------------------------------------------


def test_unknown_head_lists_the_heads(make_config):
    with pytest.raises(ValueError, match="no-such-head") as err:
        build_model(make_config("bert"), head="no-such-head")
    assert all(name in str(err.value) for name in HEADS)


@pytest.mark.parametrize("name", ["hire", "pool-mean", "last-layer"])
def test_unknown_option_lists_the_options(name, make_config):
    with pytest.raises(ValueError, match="bogus") as err:
        build_model(make_config("bert"), head=name, head_options={"bogus": 1})
    assert all(option in str(err.value) for option in head_options(name))


def test_preset_options_cannot_be_overridden(make_config):
    """hire-no-fusion fixes fusion=False: it is not an option of that name."""
    assert "fusion" not in head_options("hire-no-fusion")
    with pytest.raises(ValueError, match="fusion"):
        build_model(make_config("bert"), head="hire-no-fusion", head_options={"fusion": True})


@pytest.mark.parametrize(("name", "options"), [
    ("hire", {"fusion_layers": 4}),
    ("hire", {"fusion_layers": -1}),
    ("hire-mean-last", {"k": 5}),
    ("hire-mean-first", {"k": 0}),
    ("concat-last-4", {"k": 5}),
    ("pool-cls", {"layer": 4}),
    ("hire-lite", {"extractor_stride": 0}),
])
def test_invalid_option_values_raise(name, options, make_config):
    with pytest.raises(ValueError, match=next(iter(options)).split("_")[0]):
        build_model(make_config("bert"), head=name, head_options=options)


def test_label_names_must_match_num_labels(make_config):
    with pytest.raises(ValueError):
        build_model(make_config("bert"), head="last-layer", num_labels=3, label_names=["a", "b"])


@pytest.mark.parametrize(("name", "option"), [
    ("hire-mean-all", "k"), ("hire-random-all", "k"), ("hire", "k"),  # k picks the first or last k states
    ("hire-no-fusion", "fusion_layers"), ("hire-no-fusion", "fusion_hidden"),  # no fusion network
    ("hire-mean-last", "extractor_hidden"), ("hire-random-last", "extractor_layers"),  # fixed scores: no extractor
    ("hire-mean-first", "extractor_stride"), ("hire-no-extractor", "extractor_hidden"),
    ("hire", "seed"), ("hire-mean-last", "seed"), ("hire-no-fusion", "seed"), ("hire-lite", "seed"),  # not random
    ("hire", "weighting"), ("hire-no-extractor", "fusion"),  # variants are heads of their own
])
def test_options_that_do_not_apply_are_errors(name, option, make_config):
    from hire.config import ConfigError, check_head

    assert option not in head_options(name)
    with pytest.raises(ValueError, match=f"has no option '{option}'; its options are: ") as err:
        build_model(make_config("bert"), head=name, head_options={option: 1})
    assert all(valid in str(err.value) for valid in head_options(name))
    with pytest.raises(ConfigError, match=f"head '{name}' has no option '{option}'"):
        check_head(name, {option: 1})


def test_each_option_where_it_applies(capsys):
    """seed only where scores are random (training then draws them from the run's seed), k only where some
    states are chosen; ``hire heads`` lists exactly the options each head takes."""
    from hire import cli
    from hire.model.heads import head_option_types

    assert [n for n in HEADS if "seed" in head_options(n)] == ["hire-random-all", "hire-random-last"]
    assert [n for n in HEADS if "k" in head_options(n)] == ["concat-last-4", "hire-mean-first", "hire-mean-last",
                                                            "hire-random-last"]
    assert head_options("hire-no-extractor") == ["fusion_layers", "fusion_hidden", "dropout"]
    assert head_option_types("hire-random-last") == {"k": int | None, "seed": int, "fusion_layers": int,
                                                     "fusion_hidden": int | None, "dropout": float}
    assert cli.main(["heads"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {lines[i].split()[0]: lines[i + 1].split("options: ")[1].split(", ")
              for i in range(len(lines) - 1) if "options: " in lines[i + 1]}
    assert listed == {name: head_options(name) for name in HEADS if head_options(name)}


def test_hire_without_extractor_and_fusion_is_refused():
    """c would be R[:, 0] (width d) from a head that said 4d: refused, naming the head that is that."""
    from hire.model.heads import HIRE

    with pytest.raises(ValueError, match="'last-layer'"):
        HIRE(32, 4, extractor=False, fusion=False)


def test_random_scores_are_drawn_from_the_run_seed(tmp_path) -> None:
    """Table 5: five seeds of `hire-random-*` are five draws, not one (the run's seed reaches the head)."""
    from tiny import save_tiny_encoder

    from hire.config import DataConfig, ModelArgs, RunConfig, TrainConfig
    from hire.tasks.sequence.tasktype import SEQUENCE
    from hire.tasktype import TaskData

    encoder = save_tiny_encoder(tmp_path / "encoder", ["a fine film"])
    task = TaskData("t", ["a", "b"], ("accuracy",), [], {}, type=SEQUENCE)
    scores = []
    for seed in (1, 2, 1):
        cfg = RunConfig(data=DataConfig(task="custom"), model=ModelArgs(encoder=str(encoder),
                        head="hire-random-all"), train=TrainConfig(seed=seed))
        model, _ = SEQUENCE.build(cfg, task)
        scores.append(model.head.fixed_scores.clone())
    assert not torch.equal(scores[0], scores[1]) and torch.equal(scores[0], scores[2])
    assert abs(float(scores[0].sum()) - 1) < 1e-6


def test_a_left_padded_batch_is_refused(make_model, make_batch):
    """The Bi-GRUs run over each sequence's first `length` positions and the heads read the first token:
    a left-padded mask would silently give wrong importance scores, so it is an error."""
    model = make_model("hire")
    ids, mask = make_batch()
    assert model(ids, mask).logits.shape[0] == len(mask)  # right padding: fine
    left_ids, left_mask = ids.flip(1), mask.flip(1)  # the same examples, padded on the left
    with pytest.raises(ValueError, match="right-padded"):
        model(left_ids, left_mask)


@pytest.mark.parametrize("head", ["hire", "last-layer", "scalar-mix", "concat-last-4"])
def test_a_frozen_encoder_is_not_trained_and_runs_without_dropout(head, tmp_path, make_batch):
    """Feature-based use: a step changes the head and output layer only, the encoder's hidden states are the
    same in training mode as at inference (no dropout), and the setting survives saving."""
    torch.manual_seed(0)
    model = build_model(bert_config(), head=head, num_labels=3, freeze_encoder=True).train()
    ids, mask = make_batch()
    encoder_before = {k: v.clone() for k, v in model.encoder.state_dict().items()}
    rest_before = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("encoder.")}
    assert not model.encoder.training and model.head.training
    assert all(not p.requires_grad for p in model.encoder.parameters())
    trained = [p for p in model.parameters() if p.requires_grad]
    assert trained and all(p.requires_grad for p in [*model.head.parameters(), *model.output.parameters()])
    optimizer = torch.optim.AdamW(trained, lr=1e-2)
    model(ids, mask, labels=torch.tensor([0, 1, 2])).loss.backward()
    assert all(p.grad is None for p in model.encoder.parameters())
    optimizer.step()
    assert all(torch.equal(v, encoder_before[k]) for k, v in model.encoder.state_dict().items())
    assert any(not torch.equal(v, rest_before[k]) for k, v in model.state_dict().items() if k in rest_before)
    first, second = (model.encoder(ids, mask).hidden_states for _ in range(2))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))  # dropout off in training mode
    model.save_pretrained(tmp_path / "frozen")
    loaded = HireModel.from_pretrained(tmp_path / "frozen").train()
    assert loaded.config.freeze_encoder and not loaded.encoder.training
    assert build_model(bert_config(), head=head, num_labels=3).train().encoder.training  # unfrozen: dropout on
