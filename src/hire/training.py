"""Fine-tuning on Hugging Face Accelerate: one loop for CPU, one GPU or many (``accelerate launch``).

The recipe is the paper's (appendix A.2): AdamW (0.9, 0.98, eps 1e-6, weight decay 0.1), linear
warm-up over 6% of the steps then linear decay, gradient clipping at 1, early stopping on the dev
metric, the best checkpoint kept. A run folder holds everything (see ``hire.runs``); an interrupted
run resumes from its last checkpoint and finishes as if it had never stopped: the data order is a
function of (seed, epoch), and the optimizer, scheduler and random-number states are restored.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, DistributedDataParallelKwargs, broadcast_object_list, set_seed
from safetensors import SafetensorError
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from hire.checks import writing
from hire.config import ConfigError, RunConfig, check_max_length
from hire.data.batching import BOOKKEEPING_KEYS
from hire.evaluation import eval_loader, predict_task
from hire.hardware import machine
from hire.model import BiEncoder, HireModel, load_model
from hire.model.sharing import ModelCard
from hire.runs import (
    CHECKPOINT,
    CHECKPOINT_TMP,
    COMPLETE,
    STAGED_BEST,
    RunLock,
    RunState,
    check_output_dir,
    install_checkpoint,
    prepare_run_dir,
    remove,
    run_precision,
    write_atomic,
)
from hire.tasktype import load_task


def param_groups(model: HireModel, cfg: RunConfig) -> list[dict[str, Any]]:
    """Weight decay on weight matrices only; the head and output layer may have their own rate."""
    t = cfg.train
    groups: dict[tuple[bool, bool], list[torch.nn.Parameter]] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            decay = p.dim() >= 2 and "LayerNorm" not in name and "layer_norm" not in name
            groups.setdefault((name.startswith("encoder."), decay), []).append(p)
    return [{"params": ps, "weight_decay": t.weight_decay if decay else 0.0,
             "lr": t.lr if is_encoder or t.head_lr is None else t.head_lr}
            for (is_encoder, decay), ps in groups.items()]


def make_optimizer(params: Any, lr: float, betas: tuple[float, float], eps: float) -> torch.optim.Optimizer:
    """AdamW, fused into one kernel where PyTorch has one (much faster a step than per-tensor loops)."""
    try:
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without a fused kernel
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps)


class TrainingDiverged(ValueError):
    """The loss or the gradients stopped being finite; the run stops before the step is applied."""


def training_step(model: torch.nn.Module, batch: dict[str, torch.Tensor], accelerator: Accelerator,
                  optimizer: torch.optim.Optimizer, scheduler: Any, max_grad_norm: float) -> float:
    """One optimizer step on one batch (forward, backward, clipping, step); returns the loss.

    A non-finite loss or gradient norm raises :class:`TrainingDiverged` before the optimizer step, so the
    weights, the last checkpoint and ``best/`` stay as they were. (Under fp16 an infinite gradient norm is
    the loss scaler's business: it skips the step and lowers the scale.)
    """
    batch = {k: v for k, v in batch.items() if k not in BOOKKEEPING_KEYS}
    loss = model(**batch).loss
    accelerator.backward(loss)
    norm = accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
    value = loss.item()
    bad = not math.isfinite(value)
    if norm is not None and accelerator.mixed_precision != "fp16":
        bad = bad or not math.isfinite(float(norm))  # the norm of the reduced gradients: the same on every process
    if accelerator.num_processes > 1:  # every process stops together, or none does
        bad = bool(accelerator.reduce(torch.tensor(float(bad), device=accelerator.device), "max").item())
    if bad:
        optimizer.zero_grad()
        raise TrainingDiverged(f"the loss is {value:g} and the gradient norm {float(norm or 0):g}")
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return value


class Trainer:
    def __init__(self, cfg: RunConfig):
        # Everything that can be checked is checked before the run folder changes (``_prepare_folder``): the
        # options, the precision, every split of the data (labels, columns), the model and the tokenisation.
        cfg.validate()  # every option checked before anything is read, built or written
        self.cfg, self.out = cfg, Path(cfg.output_dir)
        check_output_dir(self.out)
        precision = run_precision(self.out, cfg)  # fp16 without a GPU is refused here
        self.task = load_task(cfg.data)  # every split read (every bad row reported) before training
        if not self.task.dev:
            raise ValueError(f"task {self.task.name}: no labelled evaluation split to select the best model")
        set_seed(cfg.train.seed)
        self.model, self.tokenizer = self.task.type.build(cfg, self.task)  # bad head names fail here, early
        check_max_length(cfg.data.max_length, self.model.encoder.config)
        t, d = cfg.train, cfg.data
        kind = self.task.type  # how this kind of task is tokenized, batched, predicted and scored
        self.train_split = kind.encode(self.task, self.task.train, self.tokenizer, d.max_length)
        self.dev_splits = {s: kind.encode(self.task, ex, self.tokenizer, d.max_length)
                           for s, ex in self.task.dev.items()}
        # The training batches: length-grouped, or the type's own (a pairwise ranker's whole questions), made
        # before the run folder changes, as they may find the data unfit (no question to pair).
        self.sampler = kind.train_batches(self.task, self.train_split, t)
        # batch_size is the global batch, split over the processes: the same run on 1 or N processes.
        ddp = DistributedDataParallelKwargs(find_unused_parameters=not self.model.head.reads_last_layer)
        # Launched as several processes (torchrun, accelerate launch) on a machine without a GPU: Accelerate
        # joins them into one CPU (gloo) process group only when told to use the CPU.
        world = int(os.environ.get("WORLD_SIZE", "1"))
        self.accelerator = Accelerator(mixed_precision=precision,
                                       log_with="tensorboard", project_dir=str(self.out),
                                       dataloader_config=DataLoaderConfiguration(split_batches=True),
                                       kwargs_handlers=[ddp], cpu=world > 1 and not torch.cuda.is_available())
        n = self.accelerator.num_processes
        if n != world:  # never several independent runs racing on one folder
            raise ConfigError(f"launched as {world} processes, but Accelerate formed a group of {n}")
        if t.batch_size % n:
            raise ConfigError(f"--train.batch_size: {t.batch_size} examples cannot be split evenly over "
                              f"{n} processes; use a multiple of {n}")
        if n > 1 and getattr(self.sampler, "whole_groups", False):
            raise ConfigError(f"--train.rank_loss {t.rank_loss}: batches of whole questions cannot be split over {n} "
                              "processes (the pairs across the split would be lost); train on one process")
        self.lock: RunLock | None = None
        self.state = self._prepare_folder()
        # The loader's own generator keeps its start-up draw off the global random state (exact resume).
        loader = DataLoader(self.train_split, batch_sampler=self.sampler, generator=torch.Generator(),
                            collate_fn=kind.collator(self.tokenizer.pad_token_id))
        optimizer = make_optimizer(param_groups(self.model, cfg), t.lr, (t.adam_beta1, t.adam_beta2), t.adam_eps)
        self.model, self.optimizer, self.loader = self.accelerator.prepare(self.model, optimizer, loader)
        self.steps_per_epoch = len(self.loader)  # the same on every process (each takes part of every batch)
        self.total_steps = t.max_steps or t.epochs * self.steps_per_epoch
        scheduler = get_linear_schedule_with_warmup(self.optimizer, math.ceil(t.warmup_ratio * self.total_steps),
                                                    self.total_steps)
        self.scheduler = self.accelerator.prepare(scheduler)
        self.dev_loaders = {s: self.accelerator.prepare(eval_loader(sp, t.batch_size, kind.collator(
                            self.tokenizer.pad_token_id))) for s, sp in self.dev_splits.items()}

    def _prepare_folder(self) -> RunState:
        """The main process locks the run folder and decides (fresh, resume or refuse); the others follow."""
        acc = self.accelerator
        outcome: list[Any] = [None]
        if acc.is_main_process:
            try:
                self.out.mkdir(parents=True, exist_ok=True)
                self.lock = RunLock(self.out).acquire()
                outcome = [prepare_run_dir(self.out, self.cfg).to_dict()]
            except (ConfigError, OSError) as err:
                outcome = [err]
        if acc.num_processes > 1:
            broadcast_object_list(outcome)
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return RunState.from_dict(outcome[0])

    # -- checkpoints ---------------------------------------------------------------------------------
    def save_checkpoint(self, new_best: bool = False) -> None:
        """Save everything needed to resume; a new best model is staged inside the checkpoint.

        The checkpoint is written whole to ``checkpoint.tmp`` (``trainer_state.json`` last), then takes
        the place of the previous one, and only then does a staged best model replace ``best/``; a kill
        at any point leaves a folder that :func:`hire.runs.recover` brings back to a consistent state.
        """
        acc = self.accelerator
        tmp = self.out / CHECKPOINT_TMP
        acc.wait_for_everyone()
        with self._checkpoint_writes(tmp):
            if acc.is_main_process:
                if tmp.exists():
                    remove(tmp)
                tmp.mkdir()
            acc.wait_for_everyone()
            acc.save_state(str(tmp))  # model, optimizer, scheduler, every process's random states
            acc.wait_for_everyone()
            if acc.is_main_process:
                if new_best:
                    acc.unwrap_model(self.model).save_pretrained(tmp / STAGED_BEST, self.tokenizer)
                now = time.perf_counter()
                self.state.train_seconds += now - self._clock
                self._clock = now
                self.state.mixed_precision = acc.mixed_precision  # what a resume goes on in: see run_precision
                write_atomic(tmp / COMPLETE, json.dumps({**self.state.to_dict(), "rng": None}))
        if acc.is_main_process:
            install_checkpoint(self.out)
            with writing(self.out / "state.json"):
                self.state.save(self.out)
        acc.wait_for_everyone()

    @contextmanager
    def _checkpoint_writes(self, tmp: Path) -> Iterator[None]:
        """A checkpoint that cannot be written whole (a full disk, a quota, a read-only folder) is one line naming
        the file that failed, with the half-written checkpoint removed (the space it took is freed) and the
        previous checkpoint and ``best/`` as they were: the same command resumes once the cause is fixed. torch
        and safetensors report a failed write as a RuntimeError (``PytorchStreamWriter``, ``unexpected pos``) or
        their own error, without the file; the newest file of the half-written checkpoint is the one."""
        try:
            yield
        except (OSError, RuntimeError, SafetensorError) as err:
            # Python and torch leave the file they failed to write (the newest); safetensors does not.
            newest = None if isinstance(err, SafetensorError) else _newest_file(tmp)
            if isinstance(err, OSError):
                failed, reason = err.filename or newest or tmp, err.strerror or str(err)
            else:
                failed, reason = newest or tmp, " ".join(str(err).split())
            if self.accelerator.is_main_process and tmp.exists():
                remove(tmp)
            raise OSError(f"{failed}: could not write the checkpoint of step {self.state.step} ({reason}); "
                          f"{self._kept()}; fix the cause (free some space) and run the same command again") from err

    def _kept(self) -> str:
        """What a run that stops here keeps, for its message."""
        try:
            step = json.loads((self.out / CHECKPOINT / COMPLETE).read_text())["step"]
        except (OSError, ValueError, KeyError, TypeError):
            return f"{self.out} holds no checkpoint yet: the run starts again"
        return f"the last checkpoint (step {step}) and best/ are kept in {self.out}: the run resumes from it"

    def load_checkpoint(self) -> None:
        """Restore the checkpoint; each process's random state is put back just before training goes on."""
        self.accelerator.load_state(str(self.out / CHECKPOINT))
        self.state = RunState.from_dict(json.loads((self.out / CHECKPOINT / COMPLETE).read_text()))
        self.state.rng = torch.get_rng_state().tolist()  # as load_state restored it for this process

    # -- evaluation ----------------------------------------------------------------------------------
    def evaluate(self) -> bool:
        """Score every dev split and log it; returns whether the model is the best so far."""
        results = {}
        for split, loader in self.dev_loaders.items():
            kind, data = self.task.type, self.dev_splits[split]
            preds = kind.predict(self.model, loader, data, self.accelerator, desc=f"eval {split}")
            results[split] = kind.score(self.task, preds, self.task.dev[split], data)
        selection = sum(r["score"] for r in results.values()) / len(results)
        record = {"step": self.state.step, "epoch": round(self.state.step / self.steps_per_epoch, 3),
                  "train_loss": self.state.running_loss(), "dev": results, "selection_score": selection}
        if self.accelerator.is_main_process:
            path = self.out / "metrics.jsonl"
            with writing(path), path.open("a") as f:  # lines after the checkpoint are dropped on resume
                f.write(json.dumps(record) + "\n")
            self.accelerator.log({f"{split}/{k}": v for split, r in results.items() for k, v in r.items()},
                                 step=self.state.step)
        self.state.loss_sum, self.state.loss_count = 0.0, 0  # the next record's loss: since this one
        self.model.train()
        if self.state.best_score is None or selection > self.state.best_score:
            self.state.best_score, self.state.best_step, self.state.bad_evals = selection, self.state.step, 0
            return True
        self.state.bad_evals += 1
        return False

    def should_stop(self) -> bool:
        p = self.cfg.train.patience
        return self.state.step >= self.total_steps or (p is not None and self.state.bad_evals >= p)

    # -- the loop ------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        try:
            return self._train()
        finally:
            if self.lock is not None:
                self.lock.release()

    def _train(self) -> dict[str, Any]:
        acc, t = self.accelerator, self.cfg.train
        if self.state.step > 0:
            self.load_checkpoint()
            acc.print(f"Resuming {self.out} from step {self.state.step} of {self.total_steps}")
        state = self.state
        acc.init_trackers("tensorboard")
        self.model.train()
        bar = tqdm(total=self.total_steps, initial=state.step, desc=f"train {self.task.name}",
                   disable=not acc.is_local_main_process)
        self._clock = time.perf_counter()
        try:
            while not self.should_stop() and not state.finished_training:
                epoch, skip = divmod(state.step, self.steps_per_epoch)
                # The data order is a function of (seed, epoch). Accelerate's loader sets its sampler's epoch
                # from its own iteration count, which starts at 0 in a new process: set both explicitly.
                self.loader.set_epoch(epoch)
                self.sampler.set_epoch(epoch)
                loader = acc.skip_first_batches(self.loader, skip) if skip else self.loader
                iterator = iter(loader)
                if state.rng is not None:  # resume: the random state as it was at the checkpoint
                    torch.set_rng_state(torch.tensor(state.rng, dtype=torch.uint8))
                    state.rng = None
                for batch in iterator:
                    try:
                        loss = training_step(self.model, batch, acc, self.optimizer, self.scheduler,
                                             t.max_grad_norm)
                    except TrainingDiverged as err:
                        kept = f"step {state.step}" if state.step else "none yet"
                        raise TrainingDiverged(
                            f"step {state.step + 1}: {err}; training stopped before applying it (try a lower "
                            f"--train.lr than {t.lr:g}). The last checkpoint ({kept}) and best/ are kept in "
                            f"{self.out}") from None
                    state.step += 1
                    state.add_loss(loss)
                    bar.update(1)
                    bar.set_postfix(loss=f"{state.running_loss():.4f}", best=state.best_score)
                    acc.log({"train/loss": loss, "train/lr": self.scheduler.get_last_lr()[0]},
                            step=state.step)
                    end_of_epoch = state.step % self.steps_per_epoch == 0
                    if (t.eval_every and state.step % t.eval_every == 0) or (not t.eval_every and end_of_epoch) \
                            or state.step == self.total_steps:
                        self.save_checkpoint(new_best=self.evaluate())
                    elif state.step % t.checkpoint_every == 0:
                        self.save_checkpoint()
                    if self.should_stop():
                        break
        except KeyboardInterrupt:
            raise RunInterrupted(f"interrupted at step {state.step}; run the same command again to resume "
                                 f"from the last checkpoint") from None
        finally:
            bar.close()
        state.finished_training = True
        final = self.finish()
        for tracker in acc.trackers:  # not acc.end_training(): the process group stays for the next run
            tracker.finish()
        return final

    def finish(self) -> dict[str, Any]:
        """Reload the best model; write dev predictions (with layer weights), test submissions (unless
        ``--predict_test false``), metrics, and the best model's card (its dev metrics, mean layer weights and
        this run's recipe).

        ``metrics.json`` and then ``state.json`` (finished) are written last: a kill before them leaves an
        unfinished run, which the same command finishes from its last checkpoint.
        """
        acc, out = self.accelerator, self.out
        acc.wait_for_everyone()  # the main process has written best/
        saved = load_model(out / "best")
        best = acc.prepare(saved)
        final: dict[str, Any] = {"task": self.task.name, "head": saved.config.head,  # init_from: its own head
                                 "encoder": self.cfg.model.encoder, "best_step": self.state.best_step,
                                 "steps": self.state.step, "train_seconds": round(self.state.train_seconds, 3),
                                 "mixed_precision": acc.mixed_precision, "processes": acc.num_processes,
                                 "machine": machine(), "dev": {}}
        final.update(self.task.type.final_record(saved))
        splits = [*self.task.dev, *self.task.held_out, *(self.task.test if self.cfg.predict_test else [])]
        with writing(out):  # a write that fails without naming its file (a full disk) names the run folder
            return self._write_results(best, saved, final, splits)

    def _write_results(self, best: Any, saved: HireModel | BiEncoder, final: dict[str, Any],
                       splits: list[str]) -> dict[str, Any]:
        """:meth:`finish`'s writes: predictions, submissions, the model card, ``metrics.json``, ``state.json``."""
        acc, out = self.accelerator, self.out
        predicted = predict_task(best, self.task, splits, self.tokenizer, acc,
                                 max_length=self.cfg.data.max_length, batch_size=self.cfg.train.batch_size,
                                 predictions_dir=out / "predictions", submission_dir=out / "submission",
                                 encoded=self.dev_splits)
        final["dev"] = {split: predicted.results[split] for split in self.task.dev}
        if self.task.held_out:  # labelled, scored only now: never used to choose the model
            final["held_out"] = {split: predicted.results[split] for split in self.task.held_out}
        final["score"] = sum(r["score"] for r in final["dev"].values()) / len(final["dev"])
        chosen = self.task.type.final_options(self.task)  # what dev chose that the model keeps (a threshold)
        if acc.is_main_process and chosen:
            saved.config.task_options = {**saved.config.task_options, **chosen}
            saved.config.save_pretrained(out / "best")
        if acc.is_main_process:
            card = ModelCard(self.task.name, final["dev"], predicted.layer_weights, self.cfg.to_dict())
            saved.write_card(out / "best", card)
            write_atomic(out / "metrics.json", json.dumps(final, indent=2) + "\n")
            self.state.finished = True
            self.state.save(out)
            remove(out / CHECKPOINT)
        acc.wait_for_everyone()
        return final


def _newest_file(folder: Path) -> Path | None:
    """The file under ``folder`` written last (the one a failed save was writing); None if there is none."""
    try:
        files = [p for p in folder.rglob("*") if p.is_file()]
        return max(files, key=lambda p: p.stat().st_mtime_ns) if files else None
    except OSError:
        return None


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during training; the message says how to resume."""


def train(cfg: RunConfig) -> dict[str, Any]:
    return Trainer(cfg).train()
