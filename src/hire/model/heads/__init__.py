"""Heads by name: every variant and baseline of the paper is one word of configuration.

``build_head("hire", hidden_size, num_hidden_states, {"fusion_layers": 1})``; ``head_names()`` lists them and
``head_options(name)`` the options each one takes (only those that apply to it).
"""

from hire.model.heads.base import (
    Head,
    HeadOutput,
    build_head,
    check_head_options,
    describe_heads,
    head_names,
    head_option_defaults,
    head_option_types,
    head_options,
    register_head,
)
from hire.model.heads.baselines import POOLINGS, ConcatLast, LastLayer, Pooling, ScalarMix, pool
from hire.model.heads.hire import HIRE, hire_lite

# What each part of HIRE takes: the extractor Bi-GRU (eq. 2) exists only with dynamic scores, the fusion Bi-GRU
# (eq. 7) only with fusion; dropout acts between the layers of either.
_EXTRACTOR = ("extractor_hidden", "extractor_layers", "extractor_stride", "score_activation")
_FUSION = ("fusion_layers", "fusion_hidden")

register_head("hire", HIRE, "HIRE + fusion network, the full model (paper §2, Table 1)",
              options=(*_EXTRACTOR, *_FUSION, "dropout"))
register_head("hire-no-extractor", HIRE, "w/o HIRE: the fusion network fed with R only (Table 4)",
              options=(*_FUSION, "dropout"), extractor=False)
register_head("hire-no-fusion", HIRE, "w/o fusion: A[:, 0] straight to the output layer (Table 4)",
              options=(*_EXTRACTOR, "dropout"), fusion=False)
for _weighting in ("mean", "random"):
    for _layers in ("all", "last", "first"):
        if (_weighting, _layers) == ("random", "first"):
            continue  # not in Table 5
        _k = () if _layers == "all" else ("k",)  # how many of the first or last states
        _seed = ("seed",) if _weighting == "random" else ()  # the draw of the random scores
        register_head(f"hire-{_weighting}-{_layers}", HIRE,
                      f"HIRE with fixed {_weighting} scores over {_layers} "
                      f"{'' if _layers == 'all' else 'k '}hidden states (Table 5)",
                      options=(*_k, *_seed, *_FUSION, "dropout"), weighting=_weighting, layers=_layers)
register_head("hire-lite", hire_lite, "a cheaper HIRE: small extractor over token windows, 1-layer fusion")
register_head("last-layer", LastLayer, "baseline: the last layer's first token (BERT/RoBERTa head)")
register_head("scalar-mix", ScalarMix, "ELMo scalar mix of all hidden states, one weight per layer per task")
register_head("concat-last-4", ConcatLast, "first tokens of the last 4 (k) hidden states, concatenated")
for _mode in POOLINGS:
    register_head(f"pool-{_mode}", Pooling, f"{_mode} pooling of one hidden state (option layer, default -1)",
                  mode=_mode)

__all__ = [
    "HIRE",
    "ConcatLast",
    "Head",
    "HeadOutput",
    "LastLayer",
    "Pooling",
    "ScalarMix",
    "build_head",
    "check_head_options",
    "describe_heads",
    "head_names",
    "head_option_defaults",
    "head_option_types",
    "head_options",
    "hire_lite",
    "pool",
    "register_head",
]
