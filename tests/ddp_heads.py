"""Train every head (``HEAD@option=value`` sets an option) a few steps through the Python API, in one
process or under ``torchrun``.

    python tests/ddp_heads.py OUT ENCODER [HEAD ...]                          # one process
    torchrun --nproc_per_node 2 tests/ddp_heads.py OUT ENCODER [HEAD ...]     # two (gloo on CPU)

Each head's run lands in ``OUT/<head>``; each process writes ``OUT/rank<r>.json`` (its rank, the size of
the process group Accelerate formed, its pid), so the test can check that two processes really trained.
Dropout is 0 everywhere, so that 1 and 2 processes compute the same gradients for the same global batch;
the one evaluation comes at the last step (8), so the best model is the final one whatever the scores.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hire.config import DataConfig, ModelArgs, RunConfig, TrainConfig
from hire.model.heads import head_names, head_options
from hire.training import Trainer


def main() -> int:
    out, encoder, *heads = sys.argv[1:]
    # pool-cls of a middle layer leaves the encoder's top layer without gradients (unused parameters).
    for spec in heads or [*head_names(), "pool-cls@layer=1"]:
        head, _, option = spec.partition("@")
        options = {"dropout": 0.0} if "dropout" in head_options(head) else {}
        if option:
            key, value = option.split("=")
            options[key] = int(value)
        cfg = RunConfig(
            output_dir=str(Path(out) / spec),
            data=DataConfig(task="STS-B", max_train_examples=32, max_eval_examples=16),
            model=ModelArgs(encoder=encoder, head=head, head_options=options, classifier_dropout=0.0),
            train=TrainConfig(epochs=2, batch_size=8, lr=1e-3, checkpoint_every=3, eval_every=8,
                              mixed_precision="no"),
        )
        trainer = Trainer(cfg)
        trainer.train()
    acc = trainer.accelerator
    Path(out, f"rank{acc.process_index}.json").write_text(json.dumps(
        {"rank": acc.process_index, "processes": acc.num_processes, "pid": os.getpid(),
         "world_size_env": os.environ.get("WORLD_SIZE")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
