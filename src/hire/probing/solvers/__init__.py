"""The probe fitter's solvers: each fits a batch of independent probes at once, in PyTorch, on the CPU or a GPU.

The protocol that calls them (folds, the choice of ``C`` or ``alpha``, the feature sets batched by width) is
:mod:`hire.probing.fit`; the meaning of every number is :mod:`hire.probing.classifiers`'.

- :mod:`~hire.probing.solvers.standardise`: ``StandardScaler``'s statistics, of a feature set and of each fit's rows;
- :mod:`~hire.probing.solvers.logistic`: logistic regression, whose objective and preconditioner are
  :mod:`~hire.probing.solvers.objective` and whose solver is :mod:`~hire.probing.solvers.lbfgs` (batched L-BFGS);
- :mod:`~hire.probing.solvers.ridge`: ridge regression in closed form, ``alpha`` by exact leave-one-out error;
- :mod:`~hire.probing.solvers.mlp`: SentEval's MLP probe, early-stopped on a selection split.
"""
