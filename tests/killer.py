"""Run the ``hire`` command and kill the process abruptly (``os._exit(137)``, like ``kill -9``) at a
chosen point, for the resume tests. Production code has no test hooks: the points are reached by
wrapping library functions here.

    python tests/killer.py KIND:N -- train --output_dir ...

KIND is ``step`` (after the N-th optimizer step of this process), ``rename`` (just before the N-th
file rename or replace: every atomic write and every checkpoint swap is one) or ``unlink`` (before the
N-th file removal, e.g. half-way through removing an old checkpoint). ``rename:SUFFIX:N`` and
``unlink:SUFFIX:N`` count only the calls whose (source) path ends with SUFFIX, e.g.
``rename:checkpoint.tmp:1`` dies just before the first new checkpoint takes the old one's place. The others do not
kill: ``interrupt`` raises KeyboardInterrupt (Ctrl-C) after the N-th step, ``nan`` makes the N-th training loss NaN
(a diverging run), ``full:torch:N`` and ``full:python:N`` fill the disk while the N-th checkpoint is written
(:func:`full_disk`), and ``fsize:N`` limits the files the process writes to N bytes. With ``FAKE_FAST_BF16=0`` or
``1`` in the environment the process sees a CPU without or with bf16 units (what ``--train.mixed_precision auto``
picks from), as on another machine.
"""

from __future__ import annotations

import os
import sys


def install(spec: str) -> None:
    """Arm the kill point ``spec`` (``KIND:N`` or ``KIND:SUFFIX:N``) in this process, before ``hire`` runs in it
    (here, or in a process forked from ``tests/hire_driver.py``, which calls this)."""
    kind, *suffix, n = spec.split(":")
    calls = 0
    if "FAKE_FAST_BF16" in os.environ:
        import hire.hardware

        fast = os.environ["FAKE_FAST_BF16"] == "1"
        hire.hardware.cpu_has_fast_bf16 = lambda: fast

    def tick(path: object = "") -> None:
        nonlocal calls
        if suffix and not str(path).endswith(suffix[0]):
            return
        calls += 1
        if calls == int(n):
            os._exit(137)

    def wrap(fn, before: bool = True):
        def wrapped(*a, **k):
            if before:
                path = a[0] if a else ""
                if k.get("dir_fd") is not None:  # shutil.rmtree, imported before this, names a file by its folder's fd
                    path = os.path.join(os.readlink(f"/proc/self/fd/{k['dir_fd']}"), path)
                tick(path)
            result = fn(*a, **k)
            if not before:
                tick()
            return result
        return wrapped

    if kind == "step":
        import hire.training

        hire.training.training_step = wrap(hire.training.training_step, before=False)
    elif kind == "rename":
        os.rename, os.replace = wrap(os.rename), wrap(os.replace)
    elif kind == "unlink":
        os.unlink = wrap(os.unlink)
    elif kind == "interrupt":
        import hire.training

        step = hire.training.training_step

        def interrupted(*a, **k):
            nonlocal calls
            result = step(*a, **k)
            calls += 1
            if calls == int(n):
                raise KeyboardInterrupt
            return result
        hire.training.training_step = interrupted
    elif kind == "nan":
        import torch.nn.functional as F

        def poison(loss_fn):
            def poisoned(*a, **k):
                nonlocal calls
                calls += 1
                loss = loss_fn(*a, **k)
                return loss * float("nan") if calls == int(n) else loss
            return poisoned
        F.cross_entropy, F.mse_loss = poison(F.cross_entropy), poison(F.mse_loss)
    elif kind == "full":
        full_disk(suffix[0], int(n))
    elif kind == "fsize":  # a real failed write: files limited to N bytes (the kernel's EFBIG, not a signal)
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(n), int(n)))
    else:
        raise SystemExit(f"unknown kill point {kind!r}")


def full_disk(where: str, n: int) -> None:
    """The disk fills while the n-th checkpoint is written: ``torch``'s own failure (part of ``optimizer.bin``
    written, then torch's error) or Python's (``.trainer_state.json.tmp`` cut short, then an ``OSError`` that names
    no file)."""
    import errno
    from pathlib import Path

    import torch

    real_save, real_write = torch.save, Path.write_text
    calls = 0

    def save(obj, f, *args, **kwargs):
        nonlocal calls
        if where == "torch" and str(f).endswith("optimizer.bin"):
            calls += 1
            if calls == n:
                Path(f).write_bytes(b"PK half")
                raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
        return real_save(obj, f, *args, **kwargs)

    def write_text(self, *args, **kwargs):
        nonlocal calls
        if where == "python" and self.name == ".trainer_state.json.tmp":
            calls += 1
            if calls == n:
                real_write(self, "{")
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, *args, **kwargs)

    torch.save, Path.write_text = save, write_text


def main() -> int:
    spec, sep, *args = sys.argv[1:]
    assert sep == "--", "usage: killer.py KIND:N -- hire arguments"
    install(spec)
    from hire.cli import main as hire_main

    return hire_main(args)


if __name__ == "__main__":
    sys.exit(main())
