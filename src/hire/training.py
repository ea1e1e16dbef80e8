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
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import AutoTokenizer, get_linear_schedule_with_warmup

from hire.config import RunConfig
from hire.data.batching import Collator, LengthGroupedBatches, encode
from hire.data.tasks import TaskData, load_task
from hire.evaluation import eval_loader, predict, score, write_predictions, write_submission, zip_submission
from hire.model import HireModel, build_model, load_tokenizer
from hire.runs import RunState, prepare_run_dir, resolve_mixed_precision


def build_for_task(cfg: RunConfig, task: TaskData) -> tuple[HireModel, Any]:
    m = cfg.model
    if m.init_from:  # e.g. MNLI before RTE: a new output layer when the label set differs
        model = HireModel.from_pretrained(m.init_from, num_labels=task.num_labels, label_names=task.label_names)
        return model, AutoTokenizer.from_pretrained(m.init_from)
    model = build_model(m.encoder, m.head, task.num_labels, m.head_options, task.label_names,
                        m.classifier_dropout)
    return model, load_tokenizer(m.encoder)


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
    """AdamW, fused into one kernel where PyTorch has one (about 5x faster a step than per-tensor loops)."""
    try:
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without a fused kernel
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps)


def training_step(model: torch.nn.Module, batch: dict[str, torch.Tensor], accelerator: Accelerator,
                  optimizer: torch.optim.Optimizer, scheduler: Any, max_grad_norm: float) -> float:
    """One optimizer step on one batch (forward, backward, clipping, step); returns the loss."""
    batch = {k: v for k, v in batch.items() if k != "index"}
    loss = model(**batch).loss
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item()


# For the resume tests only: the process dies abruptly after this optimizer step.
_KILL_AT_STEP = int(os.environ.get("HIRE_TEST_KILL_AT_STEP", "0"))


class Trainer:
    def __init__(self, cfg: RunConfig):
        self.cfg, self.out = cfg, Path(cfg.output_dir)
        self.task = load_task(cfg.data)  # every split read (every bad row reported) before training
        if not self.task.dev:
            raise ValueError(f"task {self.task.name}: no labelled evaluation split to select the best model")
        set_seed(cfg.train.seed)
        self.model, self.tokenizer = build_for_task(cfg, self.task)  # bad head names fail here, early
        self.state = prepare_run_dir(self.out, cfg)  # the folder is touched only once all is checked
        self.accelerator = Accelerator(mixed_precision=resolve_mixed_precision(cfg.train.mixed_precision),
                                       log_with="tensorboard", project_dir=str(self.out))
        t, d = cfg.train, cfg.data
        self.train_split = encode(self.task.train, self.tokenizer, d.max_length, self.task.label_names)
        self.dev_splits = {s: encode(ex, self.tokenizer, d.max_length, self.task.label_names)
                           for s, ex in self.task.dev.items()}
        self.sampler = LengthGroupedBatches(self.train_split.lengths, t.batch_size, shuffle=True, seed=t.seed,
                                            group_by_length=t.group_by_length)
        # The loader's own generator keeps its start-up draw off the global random state (exact resume).
        loader = DataLoader(self.train_split, batch_sampler=self.sampler, generator=torch.Generator(),
                            collate_fn=Collator(self.tokenizer.pad_token_id))
        optimizer = make_optimizer(param_groups(self.model, cfg), t.lr, (t.adam_beta1, t.adam_beta2), t.adam_eps)
        self.model, self.optimizer, self.loader = self.accelerator.prepare(self.model, optimizer, loader)
        self.steps_per_epoch = len(self.loader)  # per process, once the batches are shared out
        self.total_steps = t.max_steps or t.epochs * self.steps_per_epoch
        # A prepared scheduler advances once per process at every step: count the steps of all processes.
        n = self.accelerator.num_processes
        scheduler = get_linear_schedule_with_warmup(self.optimizer, n * math.ceil(t.warmup_ratio * self.total_steps),
                                                    n * self.total_steps)
        self.scheduler = self.accelerator.prepare(scheduler)
        self.dev_loaders = {s: self.accelerator.prepare(eval_loader(sp, t.batch_size, self.tokenizer.pad_token_id))
                            for s, sp in self.dev_splits.items()}

    # -- checkpoints ---------------------------------------------------------------------------------
    def save_checkpoint(self) -> None:
        """Save everything needed to resume (atomically: a kill mid-save keeps the previous one)."""
        self.accelerator.wait_for_everyone()
        tmp, final = self.out / "checkpoint.tmp", self.out / "checkpoint"
        self.accelerator.save_state(str(tmp))
        if self.accelerator.is_main_process:
            self.state.rng = torch.get_rng_state().tolist()
            (tmp / "trainer_state.json").write_text(json.dumps(self.state.to_dict()))
            if final.exists():
                final.rename(self.out / "checkpoint.old")
            tmp.rename(final)
            shutil.rmtree(self.out / "checkpoint.old", ignore_errors=True)
            self.state.save(self.out)

    def load_checkpoint(self) -> None:
        self.accelerator.load_state(str(self.out / "checkpoint"))
        self.state = RunState.from_dict(json.loads((self.out / "checkpoint" / "trainer_state.json").read_text()))

    # -- evaluation ----------------------------------------------------------------------------------
    def evaluate(self) -> float:
        """Score every dev split; keep the model if it is the best so far. Returns the selection score."""
        results = {}
        for split, loader in self.dev_loaders.items():
            preds = predict(self.model, loader, self.accelerator, desc=f"eval {split}")
            results[split] = score(self.task.metrics, preds, self.dev_splits[split], self.task.regression)
        selection = sum(r["score"] for r in results.values()) / len(results)
        record = {"step": self.state.step, "epoch": round(self.state.step / self.steps_per_epoch, 3),
                  "train_loss": self.state.running_loss(), "dev": results, "selection_score": selection}
        if self.accelerator.is_main_process:
            with (self.out / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(record) + "\n")
            for split, r in results.items():
                for k, v in r.items():
                    self.accelerator.log({f"{split}/{k}": v}, step=self.state.step)
        self.state.loss_sum, self.state.loss_count = 0.0, 0  # the next record's loss: since this one
        if self.state.best_score is None or selection > self.state.best_score:
            self.state.best_score, self.state.best_step, self.state.bad_evals = selection, self.state.step, 0
            if self.accelerator.is_main_process:
                self.accelerator.unwrap_model(self.model).save_pretrained(self.out / "best", self.tokenizer)
        else:
            self.state.bad_evals += 1
        self.model.train()
        return selection

    def should_stop(self) -> bool:
        p = self.cfg.train.patience
        return self.state.step >= self.total_steps or (p is not None and self.state.bad_evals >= p)

    # -- the loop ------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        acc, t, state = self.accelerator, self.cfg.train, self.state
        if state.step > 0:
            self.load_checkpoint()
            state = self.state
            acc.print(f"Resuming {self.out} from step {state.step} of {self.total_steps}")
        acc.init_trackers("tensorboard")
        self.model.train()
        bar = tqdm(total=self.total_steps, initial=state.step, desc=f"train {self.task.name}",
                   disable=not acc.is_local_main_process)
        start = time.perf_counter()
        try:
            while not self.should_stop() and not state.finished_training:
                epoch, skip = divmod(state.step, self.steps_per_epoch)
                self.sampler.set_epoch(epoch)
                loader = acc.skip_first_batches(self.loader, skip) if skip else self.loader
                iterator = iter(loader)
                if state.rng is not None:  # resume: the random state as it was at the checkpoint
                    torch.set_rng_state(torch.tensor(state.rng, dtype=torch.uint8))
                    state.rng = None
                for batch in iterator:
                    loss = training_step(self.model, batch, acc, self.optimizer, self.scheduler, t.max_grad_norm)
                    state.step += 1
                    state.add_loss(loss)
                    if state.step == _KILL_AT_STEP:  # tests: die like `kill -9`, with no clean-up at all
                        os._exit(137)
                    bar.update(1)
                    bar.set_postfix(loss=f"{state.running_loss():.4f}", best=state.best_score)
                    acc.log({"train/loss": loss, "train/lr": self.scheduler.get_last_lr()[0]},
                            step=state.step)
                    end_of_epoch = state.step % self.steps_per_epoch == 0
                    if (t.eval_every and state.step % t.eval_every == 0) or (not t.eval_every and end_of_epoch) \
                            or state.step == self.total_steps:
                        self.evaluate()
                        self.save_checkpoint()
                    elif state.step % t.checkpoint_every == 0:
                        self.save_checkpoint()
                    if self.should_stop():
                        break
        except KeyboardInterrupt:
            acc.print(f"\nInterrupted at step {state.step}; the run resumes from its last checkpoint: "
                      f"run the same command again.")
            raise
        state.finished_training = True
        state.train_seconds += time.perf_counter() - start
        bar.close()
        acc.end_training()
        return self.finish()

    def finish(self) -> dict[str, Any]:
        """Reload the best model; write dev predictions (with layer weights), test submissions, metrics."""
        acc, out = self.accelerator, self.out
        acc.wait_for_everyone()  # the main process has written best/
        best = HireModel.from_pretrained(out / "best")
        best = acc.prepare(best)
        final: dict[str, Any] = {"task": self.task.name, "head": self.cfg.model.head,
                                 "encoder": self.cfg.model.encoder, "best_step": self.state.best_step,
                                 "steps": self.state.step, "train_seconds": round(self.state.train_seconds, 1),
                                 "mixed_precision": acc.mixed_precision, "dev": {}}
        for split, loader in self.dev_loaders.items():
            preds = predict(best, loader, acc, desc=f"predict {split}")
            final["dev"][split] = score(self.task.metrics, preds, self.dev_splits[split], self.task.regression)
            if acc.is_main_process:
                write_predictions(out / "predictions" / f"{split}.jsonl", self.task.dev[split], preds,
                                  self.task.label_names)
        final["score"] = sum(r["score"] for r in final["dev"].values()) / len(final["dev"])
        for split, examples in self.task.test.items():
            encoded = encode(examples, self.tokenizer, self.cfg.data.max_length, None, labelled=False)
            preds = predict(best, acc.prepare(eval_loader(encoded, self.cfg.train.batch_size,
                                                          self.tokenizer.pad_token_id)), acc, desc=f"predict {split}")
            if acc.is_main_process:
                write_predictions(out / "predictions" / f"{split}.jsonl", examples, preds, self.task.label_names)
                name = self.task.submission_files.get(split, f"{self.task.name}-{split}.tsv")
                write_submission(out / "submission" / name, examples, preds, self.task.label_names)
        if acc.is_main_process:
            if self.task.test:
                zip_submission(out / "submission")
            (out / "metrics.json").write_text(json.dumps(final, indent=2) + "\n")
            self.state.finished = True
            self.state.save(out)
            shutil.rmtree(out / "checkpoint", ignore_errors=True)
        return final


def train(cfg: RunConfig) -> dict[str, Any]:
    return Trainer(cfg).train()
