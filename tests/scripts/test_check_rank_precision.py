"""scripts/check_rank_precision.py: its tie counts on a hand-made case, and a bad --model or OUT is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from paths import REPO

ROOT = REPO
sys.path.insert(0, str(ROOT / "scripts"))

from check_rank_precision import ties  # noqa: E402

from hire.data.ranking import RankingExample  # noqa: E402


def test_ties_count_candidates_that_share_a_score_within_their_question() -> None:
    ex = [RankingExample(q, "q", p, "x", 0.0) for q, p in [("a", "1"), ("a", "2"), ("a", "3"), ("b", "1"), ("b", "2")]]
    # question a: two candidates at 0.5 (a tie); b: 0.5 and 0.5 (a tie), across questions no tie is counted twice
    assert ties(ex, [0.5, 0.5, 0.1, 0.5, 0.5]) == {"distinct": 2, "candidates": 5, "tied": 4,
                                                    "questions_with_a_tie": 2, "questions": 2}
    assert ties(ex, [0.5, 0.4, 0.1, 0.5, 0.3])["tied"] == 0  # the same score in two questions is no tie


def test_a_missing_model_or_an_out_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    script = str(ROOT / "scripts" / "check_rank_precision.py")
    (tmp_path / "file").write_text("mine")
    for argv in ([str(tmp_path / "out"), "--model", str(tmp_path / "nowhere")],
                 [str(tmp_path / "file"), "--model", str(tmp_path)]):
        done = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("usage:") is False
    assert (tmp_path / "file").read_text() == "mine" and not (tmp_path / "out").exists()
