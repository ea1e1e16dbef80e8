"""``hire experiment run|status|collect|adopt|report EXPERIMENT.yaml``: multi-seed grids and the paper's tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from jsonargparse.typing import NonNegativeInt

from hire.config import AtLeast1, Positive
from hire.options import Command, command_group, option, typed_command

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


def _load(args: ExperimentOptions) -> tuple[Experiment, Path, Path]:
    """The experiment, its runs folder and its results folder (experiments_dir/name)."""
    from hire.experiments.experiment import load_experiment

    exp = load_experiment(args.experiment)
    return exp, Path(args.runs_dir), Path(args.experiments_dir) / exp.name


CLUSTER_OPTIONS = ("wait", "timeout_min", "gpus_per_job", "cpus_per_job", "mem_gb", "slurm_partition",
                   "slurm_array_parallelism", "slurm_option")
LOOP_OPTIONS = ("jobs", "time_budget", "stop_on_error")  # the plain loop's own


def _cluster_options(args: RunOptions) -> Any:
    """The scheduler's options (:class:`hire.experiments.cluster.ClusterOptions`), checked; an option of the
    plain loop with ``--executor`` (or one of the scheduler's without it) is an error naming it."""
    default = RunOptions(experiment=args.experiment)
    if args.executor is None:
        given = [name for name in CLUSTER_OPTIONS if getattr(args, name) != getattr(default, name)]
        if given:
            which = "slurm" if given[0].startswith("slurm_") else "slurm or --executor local"
            raise ValueError(f"--{given[0]}: only with --executor {which}")
        return None
    for name in LOOP_OPTIONS:
        if getattr(args, name) != getattr(default, name):
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


def _cmd_run(args: RunOptions) -> int:
    from hire.experiments.loop import run_experiment
    from hire.experiments.status import parse_only

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


def _cmd_status(args: StatusOptions) -> int:
    from hire.experiments.records import records_dir
    from hire.experiments.status import parse_only, print_status

    exp, runs_dir, exp_dir = _load(args)
    return print_status(exp, runs_dir, records_dir(exp_dir), args.default_minutes, parse_only(exp, args.only),
                        args.list)


def _cmd_collect(args: ExperimentOptions) -> int:
    from hire.experiments.records import collect

    exp, runs_dir, exp_dir = _load(args)
    result = collect(exp, runs_dir, exp_dir)
    print(f"{exp.name}: records in {exp_dir / 'records'}: {len(result['written'])} written, "
          f"{len(result['unchanged'])} unchanged, {len(result['unfinished'])} cells unfinished")
    for cid in result["changed_config"]:
        print(f"  {cid}: its run folder holds another configuration than the file declares; no record")
    return 0


def _cmd_adopt(args: AdoptOptions) -> int:
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


def _cmd_report(args: ReportOptions) -> int:
    from hire.experiments.publish import write_experiment_report

    exp, _, exp_dir = _load(args)
    result = write_experiment_report(exp, exp_dir)
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


# -- the options of each command: typed dataclasses, parsed by jsonargparse (hire.options) ------------------------
AtLeast0 = Annotated[int, NonNegativeInt]


@dataclass(kw_only=True)
class ExperimentOptions:
    experiment: str = option("the experiment file (e.g. configs/experiments/table1-minilm.yaml)", positional=True)
    runs_dir: str = option("where run folders go: RUNS_DIR/<name>/<cell-id>/", "runs/experiments")
    experiments_dir: str = option("where records, tables, figures and the report go: EXPERIMENTS_DIR/<name>/",
                                  "experiments")


@dataclass(kw_only=True)
class _Selection(ExperimentOptions):
    only: list[str] = option("only cells with this option value, KEY=VALUE (e.g. data.task=RTE, model.head=hire, "
                             "train.seed=1, cell=<cell-id>); give a key again for either value, several keys for "
                             "all", [])
    default_minutes: Positive = option("estimated minutes per cell where no finished record of its task and head "
                                       "exists yet", 30.0)


@dataclass(kw_only=True)
class StatusOptions(_Selection):
    list: bool = option("also list every cell with its state", False)


@dataclass(kw_only=True)
class RunOptions(_Selection):
    max_runs: AtLeast0 | None = option("train at most N cells, then stop", None)
    time_budget: Positive | None = option("do not start a cell whose estimated time exceeds what is left of these "
                                          "minutes", None)
    stop_on_error: bool = option("stop at the first failing cell", False)
    jobs: AtLeast1 = option("train up to N cells at once, for a GPU that one small run leaves mostly idle; each "
                            "cell's output then goes to its log only. Keep 1 on a CPU: parallel torch processes on "
                            "a few cores slow each other down many times over", 1)
    dry_run: bool = option("print the `hire train` command of each cell that would run (with the other options), "
                           "run nothing", False)
    # A scheduler: with --executor, every cell not done, queued or running is submitted as one job (submitit) and
    # the command returns; a preempted or timed-out job is requeued and its run resumes.
    executor: Literal["slurm", "local"] | None = option(
        "hand each cell to a scheduler as one job (through submitit), instead of the plain loop. slurm: one job "
        "array on a SLURM cluster (submit from a login node; runs_dir and experiments_dir on a file system every "
        "node shares); local: every cell at once as a background job on this machine (to try the scheduler's "
        "path). Follow the jobs with `hire experiment status --list`; run the same command again to submit the "
        "cells whose jobs failed", None)
    wait: bool = option("with --executor: wait for the jobs and report each as it ends", False)
    timeout_min: AtLeast1 | None = option("with --executor: each job's time limit in minutes (default 240); a cell "
                                          "that needs longer is requeued and resumes, up to 3 times", None)
    gpus_per_job: AtLeast0 | None = option("with --executor: GPUs per job (default 1; 0 for CPU-only cells). "
                                           "Local: the machine's GPUs are handed out round robin", None)
    cpus_per_job: AtLeast1 | None = option("with --executor: CPU cores per job (default: the scheduler's)", None)
    mem_gb: Positive | None = option("with --executor: memory per job in GB (default: the scheduler's)", None)
    slurm_partition: str | None = option("the SLURM partition to submit to", None)
    slurm_array_parallelism: AtLeast1 | None = option("at most N cells of the SLURM array run at once (default: as "
                                                      "many as SLURM allows)", None)
    slurm_option: list[str] = option("any other sbatch option, KEY=VALUE: e.g. account=my-project, qos=normal, "
                                     "constraint=a100", [])


@dataclass(kw_only=True)
class AdoptOptions(_Selection):
    sources: list[str] = option("an experiment file or its results folder (experiments/<name>) to take records from",
                                flag="from")
    dry_run: bool = option("say what would be adopted, write nothing", False)


@dataclass(kw_only=True)
class ReportOptions(ExperimentOptions):
    quiet: bool = option("do not print the tables", False)


def add_commands() -> list[Command]:
    """``hire experiment`` and its commands."""
    def command(name: str, options: type, run: Any, help: str, description: str, config: bool = False) -> Command:
        return typed_command(name, options, run, help, description, EPILOG, config, prog=f"hire experiment {name}")

    return [command_group("hire experiment", "run a multi-seed grid of runs and make the paper's tables from it",
                          "Run a grid of runs (tasks x heads x seeds x any option) one at a time, and make the paper's "
                          "tables and figures from their records.", [
        command("run", RunOptions, _cmd_run, "train the cells not done yet, one at a time (or --jobs N at once, or as "
                "a scheduler's jobs)",
                "Train every cell not done yet, one at a time (or --jobs N at once), each an ordinary `hire train` "
                "run streaming its progress here (with --jobs, to its log). Finished cells are skipped, unfinished "
                "ones resume; each finished cell gets its record. Exit status 1 if a cell failed. With --executor, "
                "the cells go to a scheduler instead, one job each.", config=True),
        command("status", StatusOptions, _cmd_status, "count the cells done, running, started and left, with the "
                "time left",
                "Count the cells done, running (their folder is locked by a training process, or the scheduler runs "
                "their job), queued (their job waits in the scheduler's queue; shown where there are such cells), "
                "started (unfinished: they resume), left, and changed (their folder holds another configuration); "
                "estimate the time left from finished records."),
        command("collect", ExperimentOptions, _cmd_collect, "(re)write the records of finished cells from their run "
                "folders",
                "(Re)write experiments/<name>/records/ from the finished run folders (`run` does this after each "
                "cell; use it after training cells by hand or changing figure2)."),
        command("adopt", AdoptOptions, _cmd_adopt, "take the records of identical cells from other experiments "
                "instead of training",
                "A cell with no run folder and no record here takes the record of a cell of another experiment "
                "whose configuration is the same in every run option (e.g. the learning-rate sweep's cell at the "
                "chosen rate is Table 1's last-layer cell of seed 1). The copy says where it came from "
                "(adopted_from); nothing is adopted across any difference."),
        command("report", ReportOptions, _cmd_report, "make the tables, figures and HTML page from the records",
                "Make tables (Markdown, CSV, JSON), figures (Figure 2, seed spread) and a self-contained report.html "
                "from the records alone (no run folders needed)."),
    ], EPILOG)]
