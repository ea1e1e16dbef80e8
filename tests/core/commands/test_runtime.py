"""Process settings the ``hire`` command applies before torch runs (hire.runtime)."""

from __future__ import annotations

import os

import pytest

from hire import cli
from hire.runtime import KERNEL_CACHE_VAR


@pytest.mark.parametrize(("user_value", "expected"), [(None, "0"), ("256", "256")])
def test_the_command_bounds_onednn_kernel_cache_unless_the_user_set_it(user_value: str | None, expected: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Length-grouped bf16 batches grow oneDNN's kernel cache by a new shape almost every step (11.7 GiB for a
    12-layer encoder); the command turns it off before any kernel is built, and a user's own size wins."""
    seen = {}

    def command(args: object) -> int:
        seen["value"] = os.environ.get(KERNEL_CACHE_VAR)
        return 0

    monkeypatch.setenv(KERNEL_CACHE_VAR, user_value or "")  # so that the test leaves the variable as it found it
    if user_value is None:
        monkeypatch.delenv(KERNEL_CACHE_VAR)
    monkeypatch.setattr(cli, "_cmd_train", command)
    assert cli.main(["train"]) == 0
    assert seen["value"] == expected
