"""Deepening plans: the list of source layers a deeper encoder is made of, and the supported families.

A plan is a list of 0-based indices into the source encoder's layers, one per layer of the new encoder,
in order: ``[0, 1, 2, 3, 4, 4, 5, 5]`` is a 6-layer encoder whose layers 4 and 5 each run twice. Kao et
al. make BERT deeper this way (each duplicate right after its source) with no training, then fine-tune.

Pure Python (no torch), so the command line checks a plan before anything heavy is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

from hire.config import ConfigError

# model_type -> how its layers are held and what, beside the layer list, the copies share.
# Every family keeps its layers in ``<base model>.encoder.layer`` (an nn.ModuleList).
FAMILIES: dict[str, str] = {
    "bert": "encoder.layer; attention modules carry layer_idx (renumbered)",
    "roberta": "encoder.layer; attention modules carry layer_idx (renumbered)",
    "xlm-roberta": "encoder.layer; attention modules carry layer_idx (renumbered)",
    "electra": "encoder.layer; attention modules carry layer_idx (renumbered)",
    "mpnet": "encoder.layer; the relative attention bias (encoder.relative_attention_bias) is one table "
             "shared by every layer, new ones included",
    "deberta": "encoder.layer; the relative position embeddings (encoder.rel_embeddings) are shared by "
               "every layer, new ones included",
    "deberta-v2": "encoder.layer (DeBERTa v2 and v3); encoder.rel_embeddings and its LayerNorm are shared; "
                  "the optional convolution (conv_kernel_size > 0) follows the first layer of the new list",
}

FAMILY_NAMES = "BERT (and MiniLM), RoBERTa, XLM-RoBERTa, ELECTRA, MPNet, DeBERTa, DeBERTa-v2/v3"


def check_family(model_type: str | None, where: str) -> None:
    """Raise :class:`ConfigError` unless ``model_type`` is a family whose layer list we can rearrange."""
    if model_type not in FAMILIES:
        raise ConfigError(f"{where}: model type {model_type!r} is not supported for deepening; supported: "
                          f"{FAMILY_NAMES} (model types {', '.join(FAMILIES)})")


def parse_indices(text: str, option: str, allow_all: bool = False) -> list[int] | None:
    """``"4,5"`` -> ``[4, 5]``; ``"all"`` -> None where ``allow_all``. Order and repeats are kept."""
    if allow_all and text.strip().lower() == "all":
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ConfigError(f"{option}: give layer indices separated by commas (e.g. 4,5), not {text!r}")
    indices = []
    for item in items:
        if not item.lstrip("-").isdigit():
            raise ConfigError(f"{option}: {item!r} is not a layer index (0-based integers separated by commas)")
        if int(item) < 0:
            raise ConfigError(f"{option}: {item} is negative; layers are numbered from 0 (the lowest)")
        indices.append(int(item))
    return indices


def duplicate_plan(num_layers: int, duplicate: Sequence[int] | None) -> list[int]:
    """Every source layer in order, each index of ``duplicate`` repeated right after itself (once per time
    it is listed, so ``4,4`` runs layer 4 three times); ``None`` duplicates every layer."""
    extra = list(range(num_layers)) if duplicate is None else list(duplicate)
    _check_range(extra, num_layers, "--duplicate")
    return [i for layer in range(num_layers) for i in [layer] * (1 + extra.count(layer))]


def explicit_plan(num_layers: int, layers: Sequence[int]) -> list[int]:
    """An explicit order of source layers, checked."""
    if not layers:
        raise ConfigError("--layers: the plan is empty; give at least one layer index")
    _check_range(layers, num_layers, "--layers")
    return list(layers)


def build_plan(num_layers: int, duplicate: Sequence[int] | None = None, layers: Sequence[int] | None = None,
               duplicate_all: bool = False) -> list[int]:
    """The plan from either ``duplicate`` (or ``duplicate_all``) or ``layers``, for a ``num_layers`` encoder."""
    if num_layers < 1:
        raise ConfigError(f"--encoder: the encoder has {num_layers} layers; nothing to duplicate")
    if (duplicate is not None or duplicate_all) == (layers is not None):
        raise ConfigError("--duplicate / --layers: give exactly one of them")
    if layers is not None:
        return explicit_plan(num_layers, layers)
    return duplicate_plan(num_layers, None if duplicate_all else duplicate)


def repeats(plan: Sequence[int]) -> list[bool]:
    """For each new layer, whether its source layer already ran earlier in the plan (a duplicate)."""
    return [source in plan[:position] for position, source in enumerate(plan)]


def describe_plan(plan: Sequence[int], num_layers: int) -> str:
    """One line: ``6 -> 8 layers: 0 1 2 3 4 4' 5 5'`` (a prime marks a duplicate)."""
    marks = [f"{s}'" if again else str(s) for s, again in zip(plan, repeats(plan), strict=True)]
    dropped = sorted(set(range(num_layers)) - set(plan))
    tail = f" (layers {','.join(map(str, dropped))} dropped)" if dropped else ""
    return f"{num_layers} -> {len(plan)} layers: {' '.join(marks)}{tail}"


def _check_range(indices: Sequence[int], num_layers: int, option: str) -> None:
    bad = [i for i in indices if not 0 <= i < num_layers]
    if bad:
        raise ConfigError(f"{option}: layer {bad[0]} does not exist; the encoder has {num_layers} layers "
                          f"(0-{num_layers - 1})")
