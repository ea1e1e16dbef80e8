"""Bad input for token tasks (issue 46), through the real `hire train`: each a one-line error naming the file and
line (or the option), exit status 2, nothing on disk changed (tests/badinput.py's harness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from badinput import check_fails_cleanly

GOOD = "Anna B-PER\nlives O\nin O\nParis B-LOC\n\nBob B-PER\nruns O\n"
CASES = {
    "a line with another column count": ("Anna X B-PER\nlives O\n", GOOD,
                                         "train.conll, line 2: found 2 column(s), but line 1 has 3"),
    "an empty file": ("", GOOD, "train.conll, line 1: the file is empty"),
    "bytes that are not UTF-8": (b"Anna B-PER\nl\xffves O\n", GOOD, "train.conll, line 2: not valid UTF-8"),
    "mixed tag schemes": ("Anna I-PER\nlives O\n\nBob O\nSmith B-PER\n", GOOD, "train.conll, line 5: tag 'B-PER'"),
    "a dev tag training never saw": (GOOD, "Oslo B-LOC\nwins B-MISC\n", "dev.conll, line 2"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_token_files_fail_cleanly(case: str, shared: dict[str, Path], tmp_path: Path, via: str) -> None:
    train, dev, message = CASES[case]
    for name, text in (("train.conll", train), ("dev.conll", dev)):
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    args = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format", "conll",
            "--data.train_file", "{tmp}/train.conll", "--data.dev_file", "{tmp}/dev.conll", "--model.encoder", "{enc}"]
    check_fails_cleanly(args, message, shared, tmp_path, via)


@pytest.mark.parametrize("extra, message", [
    (["--data.tag_column", "5"], "train.conll, line 1: tag column 5 is out of range"),
    (["--data.tag_column", "ner"], "--data.tag_column ner: names are for conll2003"),
    (["--data.text_columns", "a"], "--data.text_columns: only for --data.format table"),
    (["--model.head", "pool-mean"], "pool-mean pools a sentence's tokens"),
])
def test_bad_token_options_fail_cleanly(extra: list[str], message: str, shared: dict[str, Path],
                                        tmp_path: Path, via: str) -> None:
    (tmp_path / "train.conll").write_text(GOOD)
    (tmp_path / "dev.conll").write_text(GOOD.replace("Paris", "Oslo"))
    args = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format", "conll",
            "--data.train_file", "{tmp}/train.conll", "--data.dev_file", "{tmp}/dev.conll", "--model.encoder", "{enc}",
            *extra]
    check_fails_cleanly(args, message, shared, tmp_path, via)
