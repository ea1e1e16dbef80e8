"""Heads by name: every variant and baseline of the paper is one word of configuration.

``build_head("hire", hidden_size, num_hidden_states, {"fusion_layers": 1})``; ``head_names()`` lists them.
"""

from hire.heads.base import (
    Head,
    HeadOutput,
    build_head,
    describe_heads,
    head_names,
    head_options,
    register_head,
)
from hire.heads.baselines import ConcatLast, LastLayer, Pooling, ScalarMix, pool
from hire.heads.hire import HIRE, hire_lite

register_head("hire", HIRE, "HIRE + fusion network, the full model (paper §2, Table 1)")
register_head("hire-no-extractor", HIRE, "w/o HIRE: the fusion network fed with R only (Table 4)",
              extractor=False)
register_head("hire-no-fusion", HIRE, "w/o fusion: A[:, 0] straight to the output layer (Table 4)",
              fusion=False)
for _weighting in ("mean", "random"):
    for _layers in ("all", "last", "first"):
        if (_weighting, _layers) == ("random", "first"):
            continue  # not in Table 5
        register_head(f"hire-{_weighting}-{_layers}", HIRE,
                      f"HIRE with fixed {_weighting} scores over {_layers} "
                      f"{'' if _layers == 'all' else 'k '}hidden states (Table 5)",
                      weighting=_weighting, layers=_layers)
register_head("hire-lite", hire_lite, "a cheaper HIRE: small extractor over token windows, 1-layer fusion")
register_head("last-layer", LastLayer, "baseline: the last layer's first token (BERT/RoBERTa head)")
register_head("scalar-mix", ScalarMix, "ELMo scalar mix of all hidden states, one weight per layer per task")
register_head("concat-last-4", ConcatLast, "first tokens of the last 4 (k) hidden states, concatenated")
for _mode in ("cls", "sep", "mean", "max"):
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
    "describe_heads",
    "head_names",
    "head_options",
    "hire_lite",
    "pool",
    "register_head",
]
