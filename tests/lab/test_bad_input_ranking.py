"""Bad input to ``hire rank-probe`` and ``hire rank-probe-report``, table-driven through the real command: exit
status 2, one line ``hire <command>: error: ...`` naming the option, or the file and line, at fault, no traceback,
and nothing created, changed or removed (tests/badinput.py's ``check_fails_cleanly``): options, files and data are
checked before anything is encoded or written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from badinput import check_fails_cleanly, given_once, write_case_files

HEADER = "qid\tquestion\tpid\tpassage\tlabel\n"
GOOD = HEADER + "q1\twho wrote it?\tp1\tshe wrote it .\t1\nq1\twho wrote it?\tp2\tit rained .\t0\n" \
    "q2\twhere is it?\tp1\tit is here .\t1\nq2\twhere is it?\tp2\tnobody knows .\t0\n"
FILES = {"{tmp}/r/train.tsv": GOOD, "{tmp}/r/dev.tsv": GOOD}
RP = ["rank-probe", "--encoders", "{enc}", "--task", "custom", "--train_file", "{tmp}/r/train.tsv", "--dev_file",
      "{tmp}/r/dev.tsv", "--output_dir", "{tmp}/rp", "--cache_dir", "{tmp}/cache", "--device", "cpu",
      "--mixed_precision", "no"]
RESULTS = "{tmp}/rp/results.json"
MARKED = {"{tmp}/rp/.hire-output": '{"command": "rank-probe"}\n'}  # a folder rank-probe wrote (its marker)
OTHER = '{"format": "hire-rank-probe/1", "config": {"encoders": [], "labels": [], "scorers": [], "losses": [], ' \
    '"task": "wikiqa"}, "encoders": [], "data": {}, "results": {}, "machine": {}}'


def with_dev(text: str) -> dict[str, str]:
    return {**FILES, "{tmp}/r/dev.tsv": text}


# (id, files to write first {path: text}, command line, what the error line must contain)
CASES: list[tuple[str, dict[str, str], list[str], str]] = [
    # -- options
    ("unknown-scorer", FILES, [*RP, "--scorers", "cosine,dot"],
     "--scorers: unknown name 'dot'; choose from cosine, bilinear, logistic, mlp"),
    ("unknown-loss", FILES, [*RP, "--losses", "listwise"], "--losses: unknown name 'listwise'; choose from hinge"),
    ("epochs-zero", FILES, [*RP, "--epochs", "0"], "--epochs: must be >= 1, not 0"),
    ("lr-negative", FILES, [*RP, "--lr", "-1"], "--lr: must be > 0"),
    ("unknown-keep", FILES, [*RP, "--keep", "some"], "--keep: expected"),
    ("unknown-column-field", FILES, [*RP, "--columns", "answer=Sentence"], "--columns: unknown field 'answer'"),
    ("labels-count", FILES, [*RP, "--labels", "a,b"], "--labels: 2 names for 1 encoders"),
    ("no-encoder", FILES, [w for w in RP if w not in ("--encoders", "{enc}")], "--encoders: give at least one"),
    ("unknown-encoder", FILES, ["rank-probe", "--encoders", "no-such-encoder", *RP[3:]],
     "--encoders no-such-encoder: no such folder"),
    # -- files and folders
    ("missing-train-file", FILES, [*RP[:6], "{tmp}/r/nope.tsv", *RP[7:]],
     "--train_file {tmp}/r/nope.tsv: no such file"),
    ("train-file-a-folder", FILES, [*RP[:6], "{tmp}/r", *RP[7:]], "--train_file {tmp}/r: a folder, not a file"),
    ("custom-without-dev", FILES, [*RP[:7], *RP[9:]], "--dev_file: --task custom needs a dev file"),
    ("file-without-custom", FILES, ["rank-probe", "--encoders", "{enc}", "--train_file", "{tmp}/r/train.tsv"],
     "--train_file: only with --task custom"),
    ("wikiqa-folder-missing", {}, ["rank-probe", "--encoders", "{enc}", "--data_dir", "{tmp}/nowhere", "--output_dir",
                                   "{tmp}/rp", "--cache_dir", "{tmp}/cache"],
     "{tmp}/nowhere/WikiQA-train.tsv: file not found"),
    ("output-dir-a-file", FILES, [*RP, "--output_dir", "{tmp}/notes.txt"], "--output_dir {tmp}/notes.txt: a file"),
    ("output-dir-a-run", FILES, [*RP, "--output_dir", "{tmp}/done"], "--output_dir {tmp}/done: is the run"),
    ("cache-dir-a-file", FILES, [*RP, "--cache_dir", "{tmp}/notes.txt"], "--cache_dir {tmp}/notes.txt: a file"),
    # -- data: one line naming the file and line
    ("empty-question", with_dev(HEADER + "q1\t \tp1\tsome text .\t1\n"), RP,
     "{tmp}/r/dev.tsv, line 2: the text in column 'question' is empty"),
    ("empty-passage", with_dev(HEADER + "q1\twho?\tp1\tfine .\t1\nq1\twho?\tp2\t\t0\n"), RP,
     "{tmp}/r/dev.tsv, line 3: the text in column 'passage' is empty"),
    ("label-not-a-number", with_dev(GOOD + "q3\twhy?\tp1\tbecause .\tyes\n"), RP,
     "{tmp}/r/dev.tsv, line 6: the label 'yes' in column 'label' is not a number"),
    ("label-not-whole", with_dev(HEADER + "q1\twho?\tp1\tshe .\t0.5\n"), RP,
     "{tmp}/r/dev.tsv, line 2: the label 0.5 is not a whole number"),
    ("duplicate-candidate", with_dev(GOOD + "q1\twho wrote it?\tp1\tshe wrote it .\t1\n"), RP,
     "{tmp}/r/dev.tsv, line 6: duplicate candidate: qid 'q1' pid 'p1' is on line 2 too"),
    ("missing-column", with_dev("qid\tquestion\tpid\ttext\tlabel\nq1\twho?\tp1\tshe .\t1\n"), RP,
     "{tmp}/r/dev.tsv, line 1: no column 'passage'"),
    ("all-negative-dev", with_dev(HEADER + "q1\twho?\tp1\tshe .\t0\nq1\twho?\tp2\the .\t0\n"), RP,
     "{tmp}/r/dev.tsv: no question left to rank (--keep has-positive dropped 1"),
    ("all-negative-dev-keep-all", with_dev(HEADER + "q1\twho?\tp1\tshe .\t0\n"), [*RP, "--keep", "all"],
     "{tmp}/r/dev.tsv: no candidate is relevant"),
    ("unlabelled-dev", with_dev("qid\tquestion\tpid\tpassage\nq1\twho?\tp1\tshe .\n"), [*RP, "--keep", "all"],
     "{tmp}/r/dev.tsv: the candidates have no labels"),
    ("hinge-without-pairs", {**FILES, "{tmp}/r/train.tsv": HEADER + "q1\twho?\tp1\tshe .\t1\n"},
     [*RP, "--scorers", "logistic", "--losses", "hinge"], "{tmp}/r/train.tsv: no question has both"),
    ("wrong-format", FILES, [*RP, "--format", "jsonl"], "{tmp}/r/train.tsv, line 1"),
    # -- results files: named, with what repairs them
    ("results-a-list", {**MARKED, RESULTS: "[]\n"}, ["rank-probe-report", "{tmp}/rp"],
     f"{RESULTS}: a JSON list, not `hire rank-probe` results (an object); run the `hire rank-probe` command"),
    ("results-cut-short", {**MARKED, RESULTS: '{"format": "hire-rank'}, ["rank-probe-report", "{tmp}/rp"],
     f"{RESULTS}: not valid JSON"),
    ("results-missing", {**MARKED, "{tmp}/rp/notes.md": "x\n"}, ["rank-probe-report", "{tmp}/rp"],
     "{tmp}/rp: no results.json (run `hire rank-probe --output_dir {tmp}/rp` first)"),
    ("results-a-list-resume", {**FILES, **MARKED, RESULTS: "[]\n"}, RP,
     f"{RESULTS}: a JSON list, not `hire rank-probe` results (an object); pass --overwrite"),
    ("results-of-other-options", {**FILES, RESULTS: OTHER}, RP,
     "--output_dir {tmp}/rp holds rank-probe results of other options"),
    ("report-in-a-run", {}, ["rank-probe-report", "{tmp}/done"], "output_dir {tmp}/done: is the run folder"),
]
if not torch.cuda.is_available():
    CASES.append(("cuda-without-gpu", FILES, [*RP, "--device", "cuda"], "--device cuda: no CUDA device here"))


@pytest.mark.parametrize(("files", "args", "message"), [(c[1], given_once(c[2]), c[3]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_fails_cleanly(files: dict[str, str], args: list[str], message: str, shared: dict[str, Path],
                                 tmp_path: Path, via: str) -> None:
    places = {"tmp": str(tmp_path), "enc": str(shared["enc"])}
    write_case_files(files, places)
    check_fails_cleanly(args, message, shared, tmp_path, via)
