"""Several processes through the real launcher (``torchrun``, gloo on CPU) train every head to the same
weights as one process with the same global batch, checkpoints and resume included.

The fast run trains two heads (HIRE, and one that leaves the encoder's top layer without gradients); the slow run
(``HIRE_SLOW_TESTS=1``) every head."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import TESTS
from safetensors.torch import load_file
from tiny import save_tiny_encoder

from hire.data import default_glue_dir, read_glue_split
from hire.model.heads import head_names

GLUE = default_glue_dir()
TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
pytestmark = pytest.mark.skipif(not (GLUE / "STS-B").is_dir(), reason=f"no GLUE data at {GLUE}")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(TESTS), "OMP_NUM_THREADS": "1"}


def launch(*cmd: str, processes: int = 1) -> subprocess.CompletedProcess:
    prefix = [TORCHRUN, "--nproc_per_node", str(processes)] if processes > 1 else [sys.executable]
    return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=900, env=ENV)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No dropout: 1 and 2 processes then compute the same gradients for the same global batch."""
    texts = [t for split in ("train", "dev") for e in read_glue_split("STS-B", split)[:32]
             for t in (e.text_a, e.text_b or "")]
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder", texts, layers=3, dropout=0.0)


FEW = ["hire", "pool-cls@layer=1"]


# Two processes of torchrun, each run twice (half a minute): in CI's slow run. One process's training of every head
# is covered fast (test_e2e, test_heads); what only two processes show is here.
@pytest.fixture(scope="module", params=[pytest.param(p, marks=pytest.mark.slow) for p in ("few", "every")])
def runs(encoder: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> tuple[Path, Path]:
    one, two = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("two")
    heads = FEW if request.param == "few" else []  # none named: ddp_heads.py trains every head
    for out, n in ((one, 1), (two, 2)):
        result = launch(str(TESTS / "ddp_heads.py"), str(out), str(encoder), *heads, processes=n)
        assert result.returncode == 0, result.stderr[-4000:]
    return one, two


def same_weights(a: Path, b: Path, atol: float = 1e-5) -> None:
    wa, wb = load_file(a / "best" / "model.safetensors"), load_file(b / "best" / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_allclose(wa[k].numpy(), wb[k].numpy(), atol=atol, rtol=0, err_msg=f"{a.name}: {k}")


def test_two_processes_really_ran(runs: tuple[Path, Path]) -> None:
    ranks = [json.loads((runs[1] / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["processes"] == 2 for r in ranks)
    assert ranks[0]["pid"] != ranks[1]["pid"]
    assert json.loads((runs[1] / "hire" / "metrics.json").read_text())["processes"] == 2


def test_every_head_trains_to_the_same_weights_on_two_processes(runs: tuple[Path, Path],
                                                               request: pytest.FixtureRequest) -> None:
    one, two = runs
    heads = sorted(p.name for p in one.iterdir() if p.is_dir())
    every = [*head_names(), "pool-cls@layer=1"]
    assert heads == sorted(FEW if request.node.callspec.params["runs"] == "few" else every)
    for head in heads:
        a, b = (json.loads((d / head / "metrics.json").read_text()) for d in (one, two))
        assert a["steps"] == b["steps"] == 8 and a["best_step"] == b["best_step"] == 8, head
        same_weights(one / head, two / head)
        pa, pb = ([json.loads(line)["prediction"] for line in (d / head / "predictions" / "dev.jsonl").open()]
                  for d in (one, two))
        np.testing.assert_allclose(pa, pb, atol=1e-4, err_msg=head)


def test_two_processes_killed_and_resumed(runs: tuple[Path, Path], encoder: Path, tmp_path: Path) -> None:
    """`hire train` under torchrun, killed after step 5 (checkpoint at 3), resumed under torchrun."""
    out = tmp_path / "hire"
    args = ["--", "train", "--output_dir", str(out), "--data.task", "STS-B", "--model.encoder", str(encoder),
            "--model.head", "hire", "--model.head_options", "dropout=0.0", "--model.classifier_dropout", "0",
            "--data.max_train_examples", "32", "--data.max_eval_examples", "16", "--train.epochs", "2",
            "--train.batch_size", "8", "--train.lr", "1e-3", "--train.checkpoint_every", "3",
            "--train.eval_every", "8", "--train.mixed_precision", "no"]
    killed = launch(str(TESTS / "killer.py"), "step:5", *args, processes=2)
    assert killed.returncode != 0
    assert json.loads((out / "checkpoint" / "trainer_state.json").read_text())["step"] == 3
    resumed = launch(str(TESTS / "killer.py"), "step:999", *args, processes=2)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "Resuming" in resumed.stdout + resumed.stderr
    assert json.loads((out / "metrics.json").read_text())["processes"] == 2
    same_weights(out, runs[0] / "hire")
