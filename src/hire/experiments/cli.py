"""``hire experiment run|status|collect|adopt|report EXPERIMENT.yaml``: multi-seed grids and the paper's tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hire.experiments.experiment import Experiment

EPILOG = """\
The experiment file declares a grid of runs (see configs/experiments/ and hire.experiments.spec):
a base run configuration, axes to cross (any run option: data.task, model.head, train.seed, ...),
per-task options, extra cells, the baseline head, and which heads and tasks go in which table.
Every cell is an ordinary run folder, <runs_dir>/<name>/<cell-id>/; its record (configuration,
metrics, dev curve, layer weights) goes to <experiments_dir>/<name>/records/, from which `report`
makes every table and figure.

examples:
  hire experiment status configs/experiments/table1-minilm.yaml
  hire experiment run configs/experiments/table1-minilm.yaml --only data.task=RTE --max_runs 2
  hire experiment run configs/experiments/table1-minilm.yaml --time_budget 120
  hire experiment run configs/experiments/table1-minilm.yaml --executor slurm --slurm_partition gpu
  hire experiment adopt configs/experiments/table1-minilm.yaml --from experiments/lr-sweep-minilm
  hire experiment report configs/experiments/table1-minilm.yaml
"""


def _load(args: argparse.Namespace) -> tuple[Experiment, Path, Path]:
    """The experiment, its runs folder and its results folder (experiments_dir/name)."""
    from hire.experiments.experiment import load_experiment

    exp = load_experiment(args.experiment)
    return exp, Path(args.runs_dir), Path(args.experiments_dir) / exp.name


CLUSTER_OPTIONS = ("wait", "timeout_min", "gpus_per_job", "cpus_per_job", "mem_gb", "slurm_partition",
                   "slurm_array_parallelism", "slurm_option")
LOOP_OPTIONS = {"jobs": 1, "time_budget": None, "stop_on_error": False}  # the plain loop's own, with their defaults


def _cluster_options(args: argparse.Namespace) -> Any:
    """The scheduler's options (:class:`hire.experiments.cluster.ClusterOptions`), checked; an option of the
    plain loop with ``--executor`` (or one of the scheduler's without it) is an error naming it."""
    if args.executor is None:
        given = [name for name in CLUSTER_OPTIONS if getattr(args, name) not in (None, False)]
        if given:
            which = "slurm" if given[0].startswith("slurm_") else "slurm or --executor local"
            raise ValueError(f"--{given[0]}: only with --executor {which}")
        return None
    for name, default in LOOP_OPTIONS.items():
        if getattr(args, name) != default:
            raise ValueError(f"--{name}: not with --executor (the scheduler runs each cell as its own job)")
    try:
        from hire.experiments.cluster import ClusterOptions, parse_slurm_options
    except ImportError as err:
        raise ValueError(f"--executor {args.executor}: needs the submitit package ({err}); pip install submitit") \
            from None
    options = ClusterOptions(args.executor, timeout_min=240 if args.timeout_min is None else args.timeout_min,
                             gpus_per_job=1 if args.gpus_per_job is None else args.gpus_per_job,
                             cpus_per_job=args.cpus_per_job, mem_gb=args.mem_gb, partition=args.slurm_partition,
                             array_parallelism=args.slurm_array_parallelism,
                             slurm_options=parse_slurm_options(args.slurm_option))
    options.check(submitting=not args.dry_run)
    return options


def _cmd_run(args: argparse.Namespace) -> int:
    from hire.experiments.runner import run_experiment
    from hire.experiments.status import parse_only

    if args.max_runs is not None and args.max_runs < 0:
        raise ValueError("--max_runs: expected 0 or more")
    if args.jobs < 1:
        raise ValueError("--jobs: expected 1 or more")
    cluster = _cluster_options(args)
    exp, runs_dir, exp_dir = _load(args)
    if cluster is not None:
        from hire.experiments.cluster import submit_experiment

        return submit_experiment(exp, runs_dir, exp_dir, cluster, max_runs=args.max_runs,
                                 only=parse_only(exp, args.only), wait=args.wait, dry_run=args.dry_run,
                                 experiment_file=args.experiment)
    try:
        return run_experiment(exp, runs_dir, exp_dir, max_runs=args.max_runs, time_budget=args.time_budget,
                              only=parse_only(exp, args.only), stop_on_error=args.stop_on_error,
                              default_minutes=args.default_minutes, dry_run=args.dry_run, jobs=args.jobs)
    except KeyboardInterrupt:
        print(f"\nhire experiment run: interrupted; run the same command again to resume ({args.experiment})")
        return 130


def _cmd_status(args: argparse.Namespace) -> int:
    from hire.experiments.records import records_dir
    from hire.experiments.status import parse_only, print_status

    exp, runs_dir, exp_dir = _load(args)
    return print_status(exp, runs_dir, records_dir(exp_dir), args.default_minutes, parse_only(exp, args.only),
                        args.list)


def _cmd_collect(args: argparse.Namespace) -> int:
    from hire.experiments.records import collect

    exp, runs_dir, exp_dir = _load(args)
    result = collect(exp, runs_dir, exp_dir)
    print(f"{exp.name}: records in {exp_dir / 'records'}: {len(result['written'])} written, "
          f"{len(result['unchanged'])} unchanged, {len(result['unfinished'])} cells unfinished")
    for cid in result["changed_config"]:
        print(f"  {cid}: its run folder holds another configuration than the file declares; no record")
    return 0


def _cmd_adopt(args: argparse.Namespace) -> int:
    from hire.experiments.adopt import adopt
    from hire.experiments.experiment import load_experiment
    from hire.experiments.status import matches_only, parse_only

    exp, runs_dir, exp_dir = _load(args)
    sources = [Path(args.experiments_dir) / load_experiment(s).name if s.endswith((".yaml", ".yml")) else Path(s)
               for s in args.sources]
    for source in sources:
        if not (source / "records").is_dir():
            raise ValueError(f"--from {source}: no records/ folder there (give an experiment file or its "
                             "results folder, e.g. experiments/lr-sweep-minilm)")
    only = parse_only(exp, args.only)
    adopted = adopt(exp, runs_dir, exp_dir, sources, only=lambda cell: matches_only(cell, only),
                    dry_run=args.dry_run)
    print(f"{exp.name}: {len(adopted)} cells {'would adopt' if args.dry_run else 'adopted'} a record from "
          f"{', '.join(map(str, sources))}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from hire.experiments.report import write_report

    exp, _, exp_dir = _load(args)
    result = write_report(exp, exp_dir)
    if not args.quiet:
        from hire.experiments.tables import markdown

        for data in result["tables"]:
            print(markdown(data))
    s = result["summary"]
    print(f"{exp.name}: {s['with_records']} of {s['cells']} cells recorded; {len(result['changed'])} of "
          f"{len(result['files'])} files changed in {exp_dir} (open {exp_dir / 'report.html'})")
    for cid, keys in s["records_with_changed_config"].items():
        print(f"  left out {cid}: trained with another {', '.join(keys)} than the file now says")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``hire experiment`` and its sub-commands on the ``hire`` parser."""
    exp = sub.add_parser("experiment", help="run a multi-seed grid of runs and make the paper's tables from it",
                         description="Run a grid of runs (tasks x heads x seeds x any option) one at a time, "
                         "and make the paper's tables and figures from their records.", epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = exp.add_subparsers(dest="experiment_command", required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help, description=description, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("experiment", help="the experiment file (e.g. configs/experiments/table1-minilm.yaml)")
        p.add_argument("--runs_dir", default="runs/experiments",
                       help="where run folders go: RUNS_DIR/<name>/<cell-id>/ (default: runs/experiments)")
        p.add_argument("--experiments_dir", default="experiments",
                       help="where records, tables, figures and the report go: EXPERIMENTS_DIR/<name>/ "
                       "(default: experiments)")
        return p

    def selection(p: argparse.ArgumentParser) -> None:
        p.add_argument("--only", action="append", metavar="KEY=VALUE",
                       help="only cells with this option value (e.g. data.task=RTE, model.head=hire, "
                       "train.seed=1, cell=<cell-id>); repeat a key for either value, give several keys for all")
        p.add_argument("--default_minutes", type=float, default=30.0, metavar="MINUTES",
                       help="estimated minutes per cell where no finished record of its task and head "
                       "exists yet (default: 30)")

    run = command("run", "train the cells not done yet, one at a time (or --jobs N at once, or as a scheduler's "
                  "jobs)",
                  "Train every cell not done yet, one at a time (or --jobs N at once), each an ordinary "
                  "`hire train` run streaming its progress here (with --jobs, to its log). Finished cells are "
                  "skipped, unfinished ones resume; each finished cell gets its record. Exit status 1 if a cell "
                  "failed. With --executor, the cells go to a scheduler instead, one job each.")
    selection(run)
    run.add_argument("--max_runs", type=int, metavar="N", help="train at most N cells, then stop")
    run.add_argument("--time_budget", type=float, metavar="MINUTES",
                     help="do not start a cell whose estimated time exceeds what is left of MINUTES")
    run.add_argument("--stop_on_error", action="store_true", help="stop at the first failing cell")
    run.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="train up to N cells at once (default 1), for a GPU that one small run leaves mostly "
                     "idle; each cell's output then goes to its log only. Keep 1 on a CPU: parallel torch "
                     "processes on a few cores slow each other down many times over")
    run.add_argument("--dry_run", action="store_true",
                     help="print the `hire train` command of each cell that would run (with the other "
                     "options), run nothing")
    cluster = run.add_argument_group(
        "a scheduler", "With --executor, every cell not done, queued or running is submitted as one job of a "
        "scheduler (through submitit) and the command returns; a preempted or timed-out job is requeued and its "
        "run resumes. Follow the jobs with `hire experiment status --list`; run the same command again to submit "
        "the cells whose jobs failed.")
    cluster.add_argument("--executor", choices=("slurm", "local"),
                         help="slurm: one job array on a SLURM cluster (submit from a login node; runs_dir and "
                         "experiments_dir on a file system every node shares); local: every cell at once as a "
                         "background job on this machine (to try the scheduler's path)")
    cluster.add_argument("--wait", action="store_true", help="wait for the jobs and report each as it ends")
    cluster.add_argument("--timeout_min", type=int, metavar="MINUTES",
                         help="each job's time limit (default 240); a cell that needs longer is requeued and "
                         "resumes, up to 3 times")
    cluster.add_argument("--gpus_per_job", type=int, metavar="N",
                         help="GPUs per job (default 1; 0 for CPU-only cells). Local: the machine's GPUs are "
                         "handed out round robin")
    cluster.add_argument("--cpus_per_job", type=int, metavar="N", help="CPU cores per job (default: the scheduler's)")
    cluster.add_argument("--mem_gb", type=float, metavar="GB", help="memory per job (default: the scheduler's)")
    cluster.add_argument("--slurm_partition", metavar="NAME", help="the SLURM partition to submit to")
    cluster.add_argument("--slurm_array_parallelism", type=int, metavar="N",
                         help="at most N cells of the array run at once (default: as many as SLURM allows)")
    cluster.add_argument("--slurm_option", action="append", metavar="KEY=VALUE",
                         help="any other sbatch option, e.g. account=my-project, qos=normal, constraint=a100; "
                         "repeatable")
    run.set_defaults(func=_cmd_run)

    status = command("status", "count the cells done, running, started and left, with the time left",
                     "Count the cells done, running (their folder is locked by a training process, or the "
                     "scheduler runs their job), queued (their job waits in the scheduler's queue; shown where "
                     "there are such cells), started (unfinished: they resume), left, and changed (their folder "
                     "holds another configuration); estimate the time left from finished records.")
    selection(status)
    status.add_argument("--list", action="store_true", help="also list every cell with its state")
    status.set_defaults(func=_cmd_status)

    collect = command("collect", "(re)write the records of finished cells from their run folders",
                      "(Re)write experiments/<name>/records/ from the finished run folders (`run` does this "
                      "after each cell; use it after training cells by hand or changing figure2).")
    collect.set_defaults(func=_cmd_collect)

    adopt = command("adopt", "take the records of identical cells from other experiments instead of training",
                    "A cell with no run folder and no record here takes the record of a cell of another "
                    "experiment whose configuration is the same in every run option (e.g. the learning-rate "
                    "sweep's cell at the chosen rate is Table 1's last-layer cell of seed 1). The copy says "
                    "where it came from (adopted_from); nothing is adopted across any difference.")
    adopt.add_argument("--from", dest="sources", action="append", required=True, metavar="EXPERIMENT",
                       help="an experiment file or its results folder (experiments/<name>) to take records "
                       "from; repeatable")
    selection(adopt)
    adopt.add_argument("--dry_run", action="store_true", help="say what would be adopted, write nothing")
    adopt.set_defaults(func=_cmd_adopt)

    report = command("report", "make the tables, figures and HTML page from the records",
                     "Make tables (Markdown, CSV, JSON), figures (Figure 2, seed spread) and a self-contained "
                     "report.html from the records alone (no run folders needed).")
    report.add_argument("--quiet", action="store_true", help="do not print the tables")
    report.set_defaults(func=_cmd_report)
