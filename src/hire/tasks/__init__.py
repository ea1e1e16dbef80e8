"""hire's own kinds of task, a package each: sentences and sentence pairs (:mod:`hire.tasks.sequence`), a tag per
word (:mod:`hire.tasks.tokens`), ranking passages (:mod:`hire.tasks.ranking`). Each package's ``__init__`` is its
:class:`hire.tasktype.TaskKind` (its options, checks and names; light), its ``tasktype`` module what training and
evaluation ask of it, its ``predict`` module how ``hire predict`` reads a user's input and writes its output. They
plug into the core through the seam, :mod:`hire.tasktype`, as any other library's kinds do: each is an entry point
of the ``hire.task_kinds`` group (``pyproject.toml``), and nothing in the core imports them."""
