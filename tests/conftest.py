"""Shared fixtures for the model-library tests: tiny random encoders, mixed-length batches, models.

Tests marked ``slow`` (pyproject's marker) run only with ``HIRE_SLOW_TESTS=1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from badinput import shared, via  # noqa: F401 (the bad-input tests' fixtures: a tiny encoder and saved models; how a case runs hire)
from tiny import tiny_bert_config
from transformers import BertConfig, PretrainedConfig, RobertaConfig

from hire import HireModel, build_model

VOCAB = 99
# Mixed lengths: the batch is padded to 11 tokens, so two of the three examples carry padding.
LENGTHS = (3, 7, 11)


# With the default initializer_range (0.02) a random encoder's layers barely change their input, so its
# hidden states are nearly equal and every layer weighting looks uniform; 0.5 makes them differ.
INIT_RANGE = 0.5


def bert_config() -> BertConfig:
    """3 layers (4 hidden states, so that concat-last-4 has all it needs), hidden size 32, BERT's 512 positions."""
    return tiny_bert_config(VOCAB, layers=3, max_positions=512, initializer_range=INIT_RANGE)


def tiny_roberta_config() -> RobertaConfig:
    """RoBERTa: pad id 1, position ids start at pad + 1, so max positions must exceed length + 2."""
    return RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=40, type_vocab_size=1,
                         pad_token_id=1, bos_token_id=0, eos_token_id=2, initializer_range=INIT_RANGE)


CONFIGS: dict[str, Callable[[], PretrainedConfig]] = {"bert": bert_config, "roberta": tiny_roberta_config}


def make_batch(lengths: Sequence[int] = LENGTHS, extra_pad: int = 0, arch: str = "bert",
               seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(input_ids, attention_mask)``: random real tokens (never a special id below 3),
    padded with ``arch``'s pad id to the longest length plus ``extra_pad``. The same seed gives the same
    tokens whatever ``extra_pad`` is."""
    pad_id = CONFIGS[arch]().pad_token_id
    g = torch.Generator().manual_seed(seed)
    n = max(lengths) + extra_pad
    ids = torch.full((len(lengths), n), pad_id, dtype=torch.long)
    mask = torch.zeros(len(lengths), n, dtype=torch.long)
    for i, length in enumerate(lengths):
        ids[i, :length] = torch.randint(3, VOCAB, (length,), generator=g)
        mask[i, :length] = 1
    return ids, mask


def make_config(arch: str = "bert") -> PretrainedConfig:
    return CONFIGS[arch]()


def make_model(head: str, arch: str = "bert", num_labels: int = 3, head_options: dict[str, Any] | None = None,
               seed: int = 0) -> HireModel:
    """A model over the tiny ``arch`` encoder with random weights drawn from ``seed``, in eval mode."""
    torch.manual_seed(seed)
    model = build_model(make_config(arch), head=head, num_labels=num_labels, head_options=head_options)
    return model.eval()


@pytest.fixture(name="make_batch")
def _make_batch_fixture() -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    return make_batch


@pytest.fixture(name="make_model")
def _make_model_fixture() -> Callable[..., HireModel]:
    return make_model


@pytest.fixture(name="make_config")
def _make_config_fixture() -> Callable[[str], PretrainedConfig]:
    return make_config


@pytest.fixture(name="single_thread")
def _single_thread_fixture():
    """Run torch on one thread: the model tests use tiny tensors, and on a busy 2-core machine a second
    intra-op thread only spins waiting for the first (tests become 100x slower). Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread in the tests and in every process they start (``hire`` commands, ``torchrun``), unless
    ``OMP_NUM_THREADS`` is set: the tensors are tiny, and a second intra-op thread only spins waiting for the first
    (on a busy 2-core machine a tiny run became ten times slower)."""
    if "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``slow`` unless ``HIRE_SLOW_TESTS=1``."""
    if os.environ.get("HIRE_SLOW_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="slow; run with HIRE_SLOW_TESTS=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# Where a skip means that the shared data is missing (its reason names the data: GLUE, CoNLL-2003, WikiQA, MR ...).
_DATA_SKIP = ("data", "GLUE", "CoNLL", "WikiQA", "MR / MRPC", "treebank")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """With ``HIRE_REQUIRE_DATA=1`` (CI sets it: it has ``../shared``), a test skipped because shared data is missing
    fails instead, naming what is missing: an end-to-end path never passes green untested. A user's clone without
    the data still skips, with a reason that says what is missing."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("HIRE_REQUIRE_DATA") != "1" or not report.skipped or "slow; run with" in str(report.longrepr):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if any(word in reason for word in _DATA_SKIP):
        report.outcome = "failed"
        report.longrepr = f"HIRE_REQUIRE_DATA=1, but the test was skipped: {reason}"
