"""``scripts/check_ranking_custom.py``: a QNLI-layout file split by question into the generic ranking layout, then
BM25, the frozen grid and a fine-tuned cross-encoder through the custom-file path, each test run file rescored by
pytrec_eval; on a tiny made-up file and a tiny encoder."""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO
from tiny import save_tiny_encoder

ROOT = REPO
SCRIPT = ROOT / "scripts" / "check_ranking_custom.py"
THINGS = ["river", "tower", "bridge", "castle", "garden", "market", "church", "harbour", "school", "station"]
PLACES = ["paris", "rome", "lima", "oslo", "cairo", "delhi", "tokyo", "quito"]


def qnli_file(path: Path, questions: int, seed: int = 0) -> Path:
    """QNLI's layout: each question with one to three sentences, all with the question's words, the one that
    names its place labelled entailment; every third question also has a wrong sentence that is the question's words
    alone, shorter than the right one, which BM25 (its length normalisation) therefore ranks first. So BM25 ranks
    some test questions wrong on any machine, whatever the trained systems learn."""
    rng = random.Random(seed)
    with path.open("w") as f:
        f.write("index\tquestion\tsentence\tlabel\n")
        row = 0
        for q in range(questions):
            thing, place = rng.choice(THINGS), rng.choice(PLACES)
            question = f"where is the {thing} number {q}"
            sentences = [(f"the {thing} number {q} stands in {place} .", "entailment")]
            sentences += [(f"the {thing} number {q} was built long ago by {rng.choice(PLACES)} people .",
                           "not_entailment") for _ in range(rng.choice([0, 1, 2]))]  # the same words as the question
            if q % 3 == 0:
                sentences.append((f"the {thing} number {q} .", "not_entailment"))
            rng.shuffle(sentences)
            for sentence, label in sentences:
                f.write(f"{row}\t{question}\t{sentence}\t{label}\n")
                row += 1
    return path


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}, timeout=900)


@pytest.mark.slow  # CI's slow run (about a minute: three hire processes); fast: tests/core/tasks/test_ranking_tasks.py
def test_bm25_frozen_grid_and_cross_encoder_agree_with_pytrec_eval_from_their_run_files(tmp_path: Path) -> None:
    source = qnli_file(tmp_path / "qnli.tsv", 90)
    texts = [r[1] + " " + r[2] for r in csv.reader(source.open(), delimiter="\t")]
    encoder = save_tiny_encoder(tmp_path / "encoder", texts)
    out, work = tmp_path / "out", tmp_path / "work"
    run = _script(str(out), "--source", str(source), "--encoder", str(encoder), "--epochs", "1", "--work", str(work))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    result = json.loads((out / "results.json").read_text())
    assert result["passed"] and len(result["systems"]) == 3
    assert {s: c["questions"] for s, c in result["splits"].items()} == {"train": 63, "dev": 13, "test": 14}
    for system in result["systems"]:
        assert system["agree"] and system["pytrec_eval"]["questions"] == 14  # every test question has a positive
    maps = {s["system"]: s["pytrec_eval"]["map"] for s in result["systems"]}
    assert maps["BM25"] < 1, maps  # agreement on an imperfect ranking, not only on perfect ones
    lines = (work / "data" / "test.tsv").read_text().splitlines()
    assert lines[0] == "qid\tquestion\tpid\tpassage\tlabel" and lines[1].startswith("te0\twhere is the ")
    assert "**Passed.**" in (out / "report.md").read_text()


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    from check_ranking_custom import main

    out = tmp_path / "out"
    bad_header = tmp_path / "bad.tsv"
    bad_header.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    bad_label = tmp_path / "label.tsv"
    bad_label.write_text("index\tquestion\tsentence\tlabel\n0\twhere\tthere\tmaybe\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "old").write_text("")
    for args, message in (([str(tmp_path / "none.tsv")], "file not found"),
                          ([str(bad_header)], "bad.tsv: line 1: expected the columns"),
                          ([str(bad_label)], "label.tsv: line 2: expected 4 columns"),
                          ([str(bad_label), "--epochs", "0"], "--epochs 0"),
                          ([str(bad_label), "--work", str(tmp_path / "work")], "is not empty")):
        assert main([str(out), "--source", *args]) == 2
        assert message in capsys.readouterr().err and not out.exists()
    other = tmp_path / "other"  # another report's folder: never written over
    other.mkdir()
    (other / "report.md").write_text("theirs")
    assert main([str(other), "--source", str(bad_label)]) == 2
    assert "did not write" in capsys.readouterr().err and (other / "report.md").read_text() == "theirs"
