"""Multi-seed experiments: a grid of ordinary runs, their records, and the paper's tables and figures.

    spec.py        the experiment file: options, grids, cells and their ids
    layout.py      which cells go in which table row and column, each row's baseline, Figure 2
    experiment.py  load_experiment(path) -> Experiment
    status.py      each cell's state (done, running, started, left, changed) and time estimates
    loop.py        hire experiment run: one `hire train` subprocess per cell, one at a time
    cluster.py     hire experiment run --executor slurm|local: each cell one job of a scheduler (submitit)
    records.py     one JSON record per finished cell (+ Figure 2's per-example layer weights)
    stats.py       median, spread, paired differences, bootstrap interval, Wilcoxon test
    aggregate.py   a table as data;  tables.py: Markdown, CSV;  figures.py: Figure 2, seed spread
    summary.py     machines, precisions, training time;  html.py, publish.py: the report (every file of it)
    cli.py         the `hire experiment` command

Nothing is imported here: ``hire`` builds its parser from ``cli.py`` at every start, so the package must
cost nothing until an experiment command runs. Import from the modules, e.g.
``from hire.experiments.experiment import load_experiment``.
"""
