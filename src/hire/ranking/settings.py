"""What ``hire rank-probe`` was asked (:class:`RankProbeOptions`, saved in ``results.json``) and how its learned
scorers are trained (:class:`FitSettings`). Light: no torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hire.ranking import LOSSES, SCORERS

LEARNED = SCORERS[1:]
NO_LOSS = "none"  # the loss of a scorer that is not trained (cosine)


@dataclass(frozen=True)
class FitSettings:
    """How the learned scorers are trained (the same for every feature set)."""

    epochs: int = 10  # at most; early stopping on dev MAP usually ends sooner
    patience: int = 2  # epochs without a better dev MAP before a feature set stops
    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_questions: int = 16  # questions per step (all their candidates)
    margin: float = 1.0  # of the hinge loss
    mlp_hidden: int = 128
    seed: int = 0
    device: str = "cpu"



@dataclass
class RankProbeOptions:
    """What ``hire rank-probe`` was asked; saved in ``results.json`` (a resumed run must ask the same)."""

    encoders: list[str]
    output_dir: str
    labels: list[str] = field(default_factory=list)
    task: str = "wikiqa"  # or "custom" (files)
    data_dir: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # custom: split -> file
    format: str = "auto"
    columns: dict[str, str | int] | None = None
    keep: str = "has-positive"
    scorers: list[str] = field(default_factory=lambda: list(SCORERS))
    losses: list[str] = field(default_factory=lambda: list(LOSSES))
    max_train_questions: int | None = None
    cache_dir: str = ""
    max_length: int = 128
    batch_size: int = 64
    mixed_precision: str = "no"  # resolved
    cache_dtype: str = "float16"
    fit: FitSettings = field(default_factory=FitSettings)
    overwrite: bool = False

    def blocks(self) -> list[tuple[str, str]]:
        """The (scorer, loss) blocks asked for: cosine once (untrained), each learned scorer with each loss."""
        return [(s, NO_LOSS) if s == "cosine" else (s, loss) for s in self.scorers
                for loss in ([NO_LOSS] if s == "cosine" else self.losses)]

    def comparable(self) -> dict[str, Any]:
        """The options that change a result (not where files go, batch size or device)."""
        values = asdict(self)
        for key in ("output_dir", "cache_dir", "batch_size", "overwrite"):
            values.pop(key)
        values["fit"].pop("device")
        return values


def block_key(scorer: str, loss: str) -> str:
    return f"{scorer}/{loss}"
