"""The training loop, on Hugging Face Accelerate.

In: a :class:`~protoembed.training.config.TrainConfig`; optionally an objective factory (anything meeting
:class:`~protoembed.training.components.TrainableObjective`) and a dev ``evaluator`` (an
:class:`~protoembed.evaluation.evaluator.Evaluator`, or any ``embedder -> score`` callable, as
sentence-transformers' ``evaluator=``). Without one, the config's ``training.selection`` is the evaluator
(its tasks, split and metric); with neither, ``best/`` is the last step's model. The dev score is the
objective's own when it scores pairs itself and the selection's tasks are STS-like
(``objective.dev_pair_scores(sentences1, sentences2, batch_size)`` not ``None``: the regression
cross-encoder's correlation of its pair scores), else the evaluator's score of the evaluation embedder.
Out, in ``output_dir``: ``best/`` (the objective's evaluation embedder with the best dev score,
sentence-transformers layout), ``results.json``
(the test results of ``best/`` on ``training.test_tasks``: their suite's results JSON, none without test
tasks, plus ``model``, ``selection`` (what the dev score scored),
``best_step``, ``best_dev_score``, ``best_dev_scorer`` (who scored it), ``train_wall_time_s``,
``tokens_per_second`` and ``mfu`` over the run's steps: :mod:`protoembed.training.throughput`),
``training_log.jsonl`` (one JSON object per logged step, with the same two figures over its steps,
evaluation and event), ``config.yaml`` (the resolved config) and, while running,
``checkpoint/`` (see :mod:`protoembed.training.checkpoint`).

The loop: AdamW (no weight decay on biases and LayerNorm weights; torch's fused kernel on CUDA and the
CPU, its multi-tensor one elsewhere: :func:`~protoembed.training.components.adamw`), a linear schedule with optional
warm-up decaying to zero at the last step, one epoch by default. Every epoch shuffles the examples with a
permutation seeded by ``seed + epoch``; the last incomplete batch of an epoch is dropped, so every step
sees exactly ``batch_size`` examples (and as many in-batch negatives); with ``batch_sampler:
no_duplicates`` no two examples of a batch share a text and an epoch may have fewer batches
(:mod:`protoembed.training.samplers`). With ``data.streaming`` the files are read as the batches are
drawn, through a seeded shuffle buffer, never held whole (:mod:`protoembed.training.streaming`: how epochs,
processes and resuming work there). ``precision`` (bf16 / fp16 autocast, losses in fp32) and
``gradient_checkpointing`` (:mod:`protoembed.training.mixed_precision`) change how a step computes, not what;
``report_to`` also sends the log's figures to Accelerate's trackers (:mod:`protoembed.training.trackers`).
Each step is one :func:`protoembed.training.step.forward_backward`: plain, or with ``mini_batch_size``
the GradCache step of the contrastive objectives (:mod:`protoembed.objectives.cache`); the DataLoader's
collate function (``num_workers`` processes: by default none on a CPU, up to 4 on CUDA,
:func:`~protoembed.training.components.loader_workers`; on CUDA in pinned memory, copied without blocking)
hands the step the tokenised, padded views. The host never waits for the device inside a step: the
losses are read at logging and evaluation steps only (:meth:`Trainer._loop`), so the host prepares the
next step while the device runs the current one. ``training.compile`` compiles the backbone's forward
(:func:`~protoembed.training.mixed_precision.compile_backbone`); attention is the backbone's Hugging Face
default, PyTorch's fused SDPA kernel where the architecture has it (BERT, RoBERTa, ALBERT). On the CPU
the step's dropout masks are drawn by :mod:`protoembed.training.dropout` (``training.dropout``), unless
the backbone is compiled or recomputes its activations (:func:`~protoembed.training.dropout.step_kernel`).
The dev score every ``eval_steps`` steps and after the last step, encoded as ``protoembed eval`` encodes
(the encode pipeline, eval mode, no autograd) in the training precision, the dev texts tokenised once
for the run (:func:`dev_encoding`): it equals ``protoembed eval --precision P`` of the saved model; a
checkpoint after each evaluation.
``max_seq_length`` truncates training inputs only (the objective owns it); the dev set and the saved model
read sentences up to the base model's own limit (its ``sentence_bert_config.json``'s ``max_seq_length``,
256 for the default backbone; whole sentences for a bare Hugging Face backbone, as SimCSE's and the ConPVP
authors' evaluation).

Processes: ``torchrun --nproc_per_node N -m protoembed train ...`` or ``accelerate launch -m protoembed
train ...`` (on a CPU-only machine: ``accelerate launch --multi_gpu --num_processes N``, the processes then
use gloo). ``batch_size`` is the global batch: Accelerate splits each batch over the processes
(``split_batches``), so N processes see the same batches as one process; the objective gathers the other
processes' embeddings for its negatives. Only the main process evaluates and writes files.

Resuming (``resume=True``) restores model, optimizer, scheduler (and fp16's loss scale) and every RNG from
the checkpoint and skips the batches already done in the current epoch; on CPU the final model equals the
uninterrupted run's.

Stopping: SIGTERM (a scheduler's or ``kill``'s default) lets the current step finish (with its evaluation
and checkpoint if one is due), then raises :class:`TrainingInterrupted`; the last checkpoint is kept, so
``resume=True`` continues from it. With several processes the request is shared at every logging and
evaluation step, so all of them stop after the same step.

Progress: the steps, loss, dev score, steps/s, time left and throughput on stderr
(:class:`protoembed.progress.Progress`: a bar on a terminal, a line every 10 s elsewhere; ``progress=False``:
none); messages go to the ``protoembed.training`` logger (the ``train`` command prints them).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from protoembed.core.errors import ProtoembedError, WriteError
from protoembed.data.training.examples import Examples
from protoembed.data.training.streaming import StreamedExamples
from protoembed.evaluation.evaluator import Evaluator
from protoembed.outputs.folder_lock import hold_output_dirs
from protoembed.outputs.io import write_atomic, write_json_atomic
from protoembed.outputs.run_layout import (
    BEST_DIR,
    CHECKPOINT_DIR,
    CONFIG_FILE,
    LAST_STEP,
    RESULTS_FILE,
    SELECTION,
    dev_score_name,
    fmt_score,
)
from protoembed.training.checkpoint import (
    TrainerState,
    check_output_dir,
    find_checkpoint,
    kept_checkpoint,
    read_state,
    remove_checkpoint,
    save_checkpoint,
)
from protoembed.training.components import (
    DevScorer,
    ObjectiveFactory,
    TrainableObjective,
    adamw,
    build_objective_from_config,
    embedder_for,
    example_loader,
    examples_for,
    loader_workers,
    param_groups,
    read_training_examples,
)
from protoembed.training.config import TrainConfig, dump_config
from protoembed.training.mixed_precision import (
    accelerate_precision,
    compile_backbone,
    enable_gradient_checkpointing,
)
from protoembed.training.model_card import write_run_card
from protoembed.training.runlog import RunLog
from protoembed.training.samplers import EpochPlan, build_sampler
from protoembed.training.step import Collator, check_mini_batch, forward_backward
from protoembed.training.stopping import StopRequest, TrainingInterrupted
from protoembed.training.streaming import StreamedBatches, stream_loader, streamed_examples, streamed_for
from protoembed.training.throughput import TokenCounter, device_peak_flops, flop_params, mfu
from protoembed.training.trackers import (
    TRACKER_DIR,
    TrackedLog,
    check_trackers,
    finish_trackers,
    start_trackers,
)

logger = logging.getLogger(__name__)

#: ``callback({"step", "loss", "epoch"})`` after every optimizer step.
Callback = Callable[[dict[str, Any]], None]


@contextlib.contextmanager
def dev_encoding(embedder: Any, precision: str, memory: dict[str, list[int]]) -> Iterator[None]:
    """How a dev evaluation encodes: through ``embedder.encode``'s pipeline (eval mode, no autograd,
    dedup, length-sorted batches, the tokenizer pool) at the training ``precision`` (an embedder's
    ``precision`` set for the block), its texts' token ids kept in ``memory`` across the run's
    evaluations (:meth:`~protoembed.model.encoder.PromptEncoder.remembering_ids`). A model without
    those (another evaluator's) is evaluated as it is."""
    encoder = getattr(embedder, "encoder", None)
    if not hasattr(embedder, "precision") or not hasattr(encoder, "remembering_ids"):
        yield
        return
    saved, embedder.precision = embedder.precision, precision
    try:
        with encoder.remembering_ids(memory):
            yield
    finally:
        embedder.precision = saved


def _nan_to_none(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


class Trainer:
    """One training run; see the module docstring. Use :func:`train`."""

    def __init__(
        self,
        cfg: TrainConfig,
        resume: bool = False,
        objective_factory: ObjectiveFactory | None = None,
        callback: Callback | None = None,
        progress: bool | None = None,
        evaluator: Evaluator | DevScorer | None = None,
        examples: Examples | None = None,
        hold_lock: bool = True,
    ) -> None:
        if not cfg.output_dir:
            raise ProtoembedError("no output directory: set output_dir in the config or pass --output-dir")
        self.cfg = cfg
        self.resume = resume
        self.objective_factory = objective_factory or build_objective_from_config
        self.callback = callback
        self.hold_lock = hold_lock
        self.output_dir = Path(cfg.output_dir).expanduser().absolute()
        self.progress = True if progress is None else progress
        self.data_dir = cfg.data.data_dir
        #: the evaluator given to :func:`train` (``None``: the config's ``training.selection``)
        self.custom_evaluator = evaluator
        #: what selects ``best/`` (``None``: nothing, ``best/`` is the last step's model)
        self.evaluator = evaluator or cfg.selection_evaluator(self.data_dir)
        #: the dev texts' token ids, tokenised at the first evaluation (:func:`dev_encoding`)
        self.dev_ids: dict[str, list[int]] = {}
        self.examples: Examples | StreamedExamples | None = examples
        #: ``data.streaming`` (:mod:`protoembed.training.streaming`), unless examples were passed in memory
        self.streamed = cfg.data.streaming and examples is None
        self.state = TrainerState()
        self.last_checkpoint_step: int | None = None
        self.stop = StopRequest()

    # ------------------------------------------------------------ set-up
    def _build(self):
        from accelerate import Accelerator, DataLoaderConfiguration, DistributedDataParallelKwargs
        from accelerate.utils import set_seed
        from transformers import get_linear_schedule_with_warmup

        cfg, tcfg = self.cfg, self.cfg.training
        check_trackers(tcfg.report_to)
        accelerator = Accelerator(
            cpu=not torch.cuda.is_available(),
            mixed_precision=accelerate_precision(tcfg.precision),
            # pinned batches (CUDA) go to the device without blocking the host
            dataloader_config=DataLoaderConfiguration(
                split_batches=True, non_blocking=torch.cuda.is_available()
            ),
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
            log_with=tcfg.report_to or None,
            project_dir=str(self.output_dir / TRACKER_DIR) if tcfg.report_to else None,
        )
        if tcfg.batch_size % accelerator.num_processes:
            raise ProtoembedError(
                f"training.batch_size {tcfg.batch_size} is not a multiple of the {accelerator.num_processes} "
                "processes (the batch is split over them)"
            )
        self.accelerator = accelerator
        self.log = TrackedLog(RunLog(self.output_dir, enabled=accelerator.is_main_process), accelerator)
        set_seed(tcfg.seed)
        embedder = embedder_for(cfg, accelerator.device)  # the base's limit: evaluation, the saved model
        objective: TrainableObjective = self.objective_factory(cfg, embedder)  # truncates training inputs
        if not isinstance(objective, torch.nn.Module):
            raise TypeError(
                f"the objective factory returned {type(objective).__name__}, not a torch.nn.Module"
            )
        objective.to(accelerator.device).train()
        if tcfg.gradient_checkpointing:
            enable_gradient_checkpointing(embedder.encoder.auto_model)
        rank, world = accelerator.process_index, accelerator.num_processes
        if self.streamed:
            self.examples = streamed_for(self.examples, objective.columns, cfg)  # the counting pass
            n = len(self.examples)
            self.plan = EpochPlan(lambda epoch: n // tcfg.batch_size)
        else:
            self.examples = examples_for(self.examples, objective.columns, cfg)
            self.sampler, self.plan = build_sampler(
                self.examples, tcfg.batch_size, tcfg.seed, tcfg.batch_sampler
            )
        self.steps_per_epoch = self.plan.batches_in(0)
        self.total_steps = tcfg.max_steps or self.plan.steps(tcfg.epochs)
        warmup = tcfg.warmup if isinstance(tcfg.warmup, int) else round(tcfg.warmup * self.total_steps)
        check_mini_batch(objective, tcfg.mini_batch_size, tcfg.batch_size, world)
        in_memory = None if self.streamed else self.examples
        self.workers = loader_workers(tcfg.num_workers, accelerator.device)
        self.pinned = accelerator.device.type == "cuda"
        collate = Collator(in_memory, objective, self.workers, tcfg.seed, rank)
        if self.streamed:
            self.batches = StreamedBatches(
                self.examples, tcfg.batch_size, cfg.data.shuffle_buffer, tcfg.seed, collate, rank, world
            )
            # not Accelerate's loader: see training.streaming
            loader = stream_loader(self.batches, self.workers, self.pinned)
        else:
            loader = example_loader(
                self.examples, tcfg.batch_size, self.sampler, collate, self.workers, self.pinned
            )
        backbone = embedder.encoder.auto_model
        groups = param_groups(objective, tcfg.weight_decay, tcfg.lr, tcfg.head_lr, backbone)
        optimizer = adamw(groups, tcfg.lr, accelerator.device)
        #: the backbone's attention kernel (Hugging Face's choice: ``sdpa`` where the architecture has it)
        self.attention = getattr(backbone.config, "_attn_implementation", None)
        self.tokens = TokenCounter(backbone)
        self.flop_params = flop_params(backbone)
        self.peak = device_peak_flops(accelerator.device, tcfg.precision)
        if tcfg.compile:
            compile_backbone(backbone)
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, self.total_steps)
        if self.streamed:
            self.objective, self.optimizer, self.scheduler = accelerator.prepare(
                objective, optimizer, scheduler
            )
            self.loader = loader
        else:
            self.objective, self.optimizer, self.loader, self.scheduler = accelerator.prepare(
                objective, optimizer, loader, scheduler
            )

    # ------------------------------------------------------------ logging
    def _say(self, message: str) -> None:
        if self.accelerator.is_main_process:
            logger.info(message)

    # ------------------------------------------------------------ evaluation
    def _evaluate(self, step: int) -> None:
        """The dev score (:meth:`_dev_score`); keep the model as ``best/`` if it improved. Without an
        evaluator the last step's model is ``best/`` (scorer :data:`~protoembed.run_layout.LAST_STEP`,
        no score), and the steps before it are not scored."""
        if self.accelerator.is_main_process and (self.evaluator is not None or step == self.total_steps):
            objective = self.accelerator.unwrap_model(self.objective)
            state = self.state
            if self.evaluator is None:
                score, scorer, improved = math.nan, LAST_STEP, True
            else:
                score, scorer = self._dev_score(objective)
                improved = state.best_step is None or (
                    not math.isnan(score) and (state.best_score is None or score > state.best_score)
                )
            if improved:
                objective.save(self.output_dir / BEST_DIR)
                state.best_score, state.best_step = _nan_to_none(score), step
                state.best_scorer = scorer
            state.last_score = _nan_to_none(score)
            self.log.write(
                {
                    "event": "eval",
                    "step": step,
                    "dev_score": state.last_score,
                    "dev_scorer": scorer,
                    "best_score": state.best_score,
                    "best_step": state.best_step,
                }
            )
        self.accelerator.wait_for_everyone()

    def _dev_score(self, objective: TrainableObjective) -> tuple[float, str]:
        """``(dev score, who scored)``: when no evaluator was passed and the objective scores pairs itself
        (``dev_pair_scores`` not ``None``: the regression cross-encoder), the selection's correlation of its
        scores of the selection's STS-like pairs against gold (``"objective"``;
        :meth:`~protoembed.evaluation.evaluator.Evaluator.score_pairs`), else the evaluator's on the
        evaluation embedder (``"embedder"``: the config's selection, ``"evaluator"``: the one passed in);
        the scorers are :data:`protoembed.run_layout.DEV_SCORERS`."""
        own = getattr(objective, "dev_pair_scores", None) if self.custom_evaluator is None else None
        if own is not None:
            size = self.cfg.training.eval_batch_size
            score = self.evaluator.score_pairs(lambda first, second: own(first, second, size))
            if score is not None:
                return float(score), "objective"
        scorer = "embedder" if self.custom_evaluator is None else "evaluator"
        embedder = objective.eval_embedder()
        with dev_encoding(embedder, self.cfg.training.precision, self.dev_ids):
            return float(self.evaluator(embedder)), scorer

    def _checkpoint(self, step: int) -> None:
        self.state.step = step
        self.state.wall_time_s = self.wall_before + time.monotonic() - self.started
        save_checkpoint(self.accelerator, self.output_dir, self.state)
        self.last_checkpoint_step = step

    def _final_results(self) -> dict[str, Any]:
        """``results.json``: the test evaluator's result of ``best/`` (its suite's JSON, which the report
        reads; none without test tasks), what selected ``best/`` and the run's figures."""
        from protoembed.model.loading import load

        best_dir = str(self.output_dir / BEST_DIR)
        tests = self.cfg.test_evaluator(self.data_dir)
        results: dict[str, Any] = {"suite": None, "tasks": {}, "avg": None}
        if tests is not None:
            best = load(best_dir, device=self.accelerator.device)
            # shown as `protoembed eval` shows it: a line per task, the encoding's bar (a line every 10 s in a log)
            results = next(iter(tests.run(best, label=best_dir, progress=self.progress).values()))
        selection = self.evaluator.describe() if isinstance(self.evaluator, Evaluator) else None
        results.update(
            model=best_dir,
            **{SELECTION: selection},
            best_step=self.state.best_step,
            best_dev_score=self.state.best_score,
            best_dev_scorer=self.state.best_scorer,
            train_wall_time_s=round(self.state.wall_time_s, 1),
            **self._throughput(0, 0.0),
        )
        return results

    # ------------------------------------------------------------ the loop
    def run(self) -> dict[str, Any]:
        """Train, evaluate, write the outputs; return the results dict."""
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # "Writing model shards" bars would break the training bar
        try:
            with self._lock(), self.stop:
                try:
                    return self._run()
                except WriteError as err:  # a full disk: say what a resumed run starts from
                    raise WriteError(f"{err}; {self._kept()}", err.path, err.reason) from None
        finally:
            if hasattr(self, "accelerator"):
                finish_trackers(self.accelerator)
            if bars:
                hf_logging.enable_progress_bar()

    def _kept(self) -> str:
        """What a write failure leaves of the run: ``best/`` and the checkpoint, with their steps."""
        best = self.output_dir / BEST_DIR
        kept = [f"{best} holds step {self.state.best_step}"] if self.state.best_step is not None else []
        kept.append(kept_checkpoint(self.last_checkpoint_step, self.output_dir / CHECKPOINT_DIR))
        return "training stopped: " + ", ".join(kept)

    def _lock(self) -> contextlib.AbstractContextManager:
        """The output folder's exclusive lock, held by the main process for the run (none when the caller
        holds it: ``hold_lock=False``)."""
        return hold_output_dirs([self.output_dir] if self.hold_lock else [])

    def _check_stop(self, step: int) -> None:
        """Raise :class:`TrainingInterrupted` if any process received a stop signal (collective)."""
        name = self.stop.requested(self.accelerator)
        if name is None:
            return
        self.log.write({"event": "interrupted", "step": step, "signal": name})
        kept = kept_checkpoint(self.last_checkpoint_step, self.output_dir / CHECKPOINT_DIR)
        raise TrainingInterrupted(
            f"stopped by {name} after step {step} of {self.total_steps}; {kept}",
            step,
            self.last_checkpoint_step,
            self.output_dir,
            self.accelerator.is_main_process,
        )

    def _run(self) -> dict[str, Any]:
        finished = check_output_dir(self.output_dir, self.cfg.to_dict(), self.resume)
        if finished is not None:
            logger.info("%s is already finished (results.json)", self.output_dir)
            return finished
        if self.examples is None:
            self.examples = streamed_examples(self.cfg) if self.streamed else read_training_examples(self.cfg)
        self._build()
        acc, tcfg = self.accelerator, self.cfg.training
        if acc.is_main_process:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        acc.wait_for_everyone()
        self.started = time.monotonic()
        self.wall_before = 0.0
        self.state = TrainerState()
        checkpoint = find_checkpoint(self.output_dir) if self.resume else None
        if checkpoint is not None:
            saved = read_state(checkpoint)
            if saved.world_size != acc.num_processes:
                raise ProtoembedError(
                    f"--resume: the checkpoint was written by {saved.world_size} process(es), this run "
                    f"has {acc.num_processes}; resume with the same number of processes"
                )
            acc.load_state(str(checkpoint))
            self.state = saved
            self.wall_before = saved.wall_time_s
            self.last_checkpoint_step = saved.step
            self.log.truncate(saved.step)
        elif acc.is_main_process:
            text = dump_config(self.cfg)
            write_atomic(
                self.output_dir / CONFIG_FILE, lambda tmp: Path(tmp).write_text(text, encoding="utf-8")
            )
            self.log.start()
        self.state.world_size, self.state.total_steps = acc.num_processes, self.total_steps
        step = self.state.step
        if tcfg.report_to:
            start_trackers(acc, self.output_dir, self.cfg.to_dict(), step)
        self.log.write(
            {
                "event": "resume" if checkpoint is not None else "start",
                "step": step,
                "total_steps": self.total_steps,
                "steps_per_epoch": self.steps_per_epoch,
                "world_size": acc.num_processes,
                "loader_workers": self.workers,
                "attention": self.attention,
                "data": self.examples.summary(),
                "objective": self._objective_config(),
            }
        )
        self._say(
            f"{len(self.examples)} examples ({', '.join(self.examples.names)}) from {self.examples.where()}; "
            f"{'resuming at step ' + str(step) + ' of ' if step else ''}{self.total_steps} steps of "
            f"{tcfg.batch_size} on {acc.num_processes} process(es)"
        )
        if step < self.total_steps:
            self._loop(step)
        self._check_stop(self.total_steps)
        results: dict[str, Any] = {}
        if acc.is_main_process:
            results = self._final_results()
            write_json_atomic(self.output_dir / RESULTS_FILE, results)
            write_run_card(self.output_dir)  # its numbers: the run's records
            self.log.write(
                {
                    "event": "end",
                    "step": self.total_steps,
                    "best_step": self.state.best_step,
                    "best_score": self.state.best_score,
                    "test_avg": _nan_to_none(results["avg"]),
                    "wall_time_s": results["train_wall_time_s"],
                }
            )
            if not tcfg.keep_checkpoint:
                remove_checkpoint(self.output_dir)
            tested = (
                f"test avg {fmt_score(_nan_to_none(results['avg']))} "
                f"({results['suite']}: {', '.join(results['tasks'])})"
                if results["suite"]
                else "no test tasks"
            )
            self._say(
                f"best dev score {fmt_score(results['best_dev_score'])} at step {results['best_step']} "
                f"({dev_score_name(results)}); {tested}; model in {self.output_dir / BEST_DIR}; "
                f"{self._rate_text(results)}"
            )
        acc.wait_for_everyone()
        return results

    def _objective_config(self) -> dict[str, Any]:
        objective: TrainableObjective = self.accelerator.unwrap_model(self.objective)
        return {"name": self.cfg.objective.name, **objective.config()}

    def _loop(self, step: int) -> None:
        """Train from ``step`` to the last step.

        A step queues its work on the device and moves on: its loss stays a device tensor until a
        *sync step* (a logging step, an evaluation step, the last step, or every step when a callback
        is set), where the losses since the last sync are read together (one device sync, one
        reduction over the processes), checked to be finite (a non-finite loss stops the run naming the
        step that had it, before any later evaluation or checkpoint), logged and shown with the
        throughput (:mod:`protoembed.training.throughput`) in the progress line
        (:class:`protoembed.progress.Progress`: a bar on a terminal, a line every 10 s elsewhere).
        """
        from protoembed.core.progress import Progress
        from protoembed.training.dropout import step_kernel

        acc, tcfg = self.accelerator, self.cfg.training
        dropout = step_kernel(tcfg.dropout, tcfg.compile, tcfg.gradient_checkpointing)
        pending: list[tuple[torch.Tensor, int]] = []  # (detached loss on the device, epoch) not yet read
        logged: list[float] = []  # losses read since the last log entry
        since_log = [0, 0.0]  # tokens, seconds of training since the last log entry
        mark = time.monotonic()
        progress = Progress(
            self.total_steps,
            desc="Training",
            unit="steps",
            initial=step,
            show=self.progress and acc.is_main_process,
        )
        with progress:
            while step < self.total_steps:
                epoch, done_in_epoch = self.plan.locate(step)
                for batch in self._epoch_batches(epoch, done_in_epoch):
                    if acc.num_processes == 1:  # a flag here; across processes a collective, at syncs
                        self._check_stop(step)
                    self.tokens.add_batch(batch)
                    loss = forward_backward(acc, self.objective, batch, tcfg.mini_batch_size, dropout)
                    if tcfg.grad_clip is not None:
                        acc.clip_grad_norm_(self.objective.parameters(), tcfg.grad_clip)
                    self.optimizer.step()
                    self.scheduler.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    step += 1
                    pending.append((loss.float().reshape(1), epoch))
                    logging_step = step % tcfg.log_steps == 0 or step == self.total_steps
                    eval_step = step % tcfg.eval_steps == 0 or step == self.total_steps
                    if not (logging_step or eval_step or self.callback is not None):
                        progress.update(1)
                        continue
                    values = self._read_losses(pending, step)
                    pending = []
                    logged += values
                    tokens, seconds = self._read_tokens(), time.monotonic() - mark
                    self.state.tokens += tokens
                    self.state.train_time_s += seconds
                    since_log[0] += tokens
                    since_log[1] += seconds
                    if logging_step:
                        rate = self._throughput(*since_log)
                        self.log.write(
                            {
                                "event": "train",
                                "step": step,
                                "epoch": epoch,
                                "loss": sum(logged) / len(logged),
                                "lr": self.scheduler.get_last_lr()[0],
                                "elapsed_s": round(self.wall_before + time.monotonic() - self.started, 2),
                                **rate,
                            }
                        )
                        progress.status = self._status(values[-1], rate)
                        logged, since_log = [], [0, 0.0]
                    if self.callback is not None:
                        self.callback({"step": step, "loss": values[-1], "epoch": epoch})
                    if eval_step:
                        self._evaluate(step)
                        self._checkpoint(step)
                        progress.status = self._status(values[-1], self._throughput(0, 0.0))
                    progress.update(1)
                    if acc.num_processes > 1:
                        self._check_stop(step)
                    mark = time.monotonic()
                    if step >= self.total_steps:
                        break

    def _read_losses(self, pending: list[tuple[torch.Tensor, int]], step: int) -> list[float]:
        """The losses of the ``len(pending)`` steps up to ``step`` (each the mean over processes), read
        from the device at once; stops the run at the first non-finite one (:meth:`_stop_on_nan`)."""
        losses = self.accelerator.reduce(torch.cat([loss for loss, _ in pending]), reduction="mean")
        values = [float(v) for v in losses.tolist()]
        first = step - len(values) + 1
        for i, value in enumerate(values):
            if not math.isfinite(value):
                self._stop_on_nan(first + i, pending[i][1], value)
        return values

    def _read_tokens(self) -> int:
        """The tokens trained since the last call, over every process (:class:`TokenCounter`)."""
        tokens = self.tokens.take()
        acc = self.accelerator
        if acc.num_processes > 1:
            total = torch.tensor([float(tokens)], dtype=torch.float64, device=acc.device)
            tokens = int(acc.reduce(total, reduction="sum").item())
        return tokens

    def _throughput(self, tokens: int, seconds: float) -> dict[str, float | None]:
        """``tokens_per_second`` (every process's) and ``mfu`` (per device: over the processes' devices)
        of ``tokens`` trained in ``seconds`` by all processes (0 seconds: the run's so far, from
        :attr:`state`); see :mod:`protoembed.training.throughput`."""
        if seconds <= 0:
            tokens, seconds = self.state.tokens, self.state.train_time_s
        rate = tokens / seconds if seconds > 0 else 0.0
        utilisation = mfu(self.flop_params, rate, self.peak, self.accelerator.num_processes)
        return {
            "tokens_per_second": round(rate, 1),
            "mfu": None if utilisation is None else round(utilisation, 5),
        }

    @staticmethod
    def _rate_text(rate: dict[str, Any]) -> str:
        """``51,200 tokens/s`` and, where the peak is known, ``, MFU 8.1%``."""
        text = f"{rate['tokens_per_second']:,.0f} tokens/s"
        return text + (f", MFU {rate['mfu']:.1%}" if rate.get("mfu") is not None else "")

    def _status(self, loss: float, rate: dict[str, float | None]) -> str:
        """What the progress line shows after the counts: the last loss, the dev score, the throughput."""
        return f"loss {loss:.4f}, dev {fmt_score(self.state.last_score)}, {self._rate_text(rate)}"

    def _epoch_batches(self, epoch: int, done: int) -> Iterable[Any]:
        """The batches of ``epoch`` after the ``done`` first ones: Accelerate's prepared loader in memory,
        the streamed batches (:mod:`protoembed.training.streaming`) sent to the device here."""
        if self.streamed:
            from accelerate.utils import send_to_device

            self.batches.set_epoch(epoch, done)
            device, pinned = self.accelerator.device, self.pinned
            return (send_to_device(batch, device, non_blocking=pinned) for batch in self.loader)
        self.sampler.set_epoch(epoch)
        loader = self.accelerator.skip_first_batches(self.loader, done) if done else self.loader
        loader.set_epoch(epoch)
        return loader

    def _stop_on_nan(self, step: int, epoch: int, value: float) -> None:
        kept = (
            f"the last good checkpoint (step {self.last_checkpoint_step}) is kept in "
            f"{self.output_dir / CHECKPOINT_DIR}"
            if self.last_checkpoint_step is not None
            else "no checkpoint had been written yet"
        )
        self.log.write({"event": "non_finite_loss", "step": step, "epoch": epoch, "loss": str(value)})
        raise ProtoembedError(f"loss is {value} at step {step} (epoch {epoch + 1}); training stopped, {kept}")


def train(
    cfg: TrainConfig,
    resume: bool = False,
    objective_factory: ObjectiveFactory | None = None,
    callback: Callback | None = None,
    progress: bool | None = None,
    evaluator: Evaluator | DevScorer | None = None,
    examples: Examples | None = None,
    hold_lock: bool = True,
) -> dict[str, Any]:
    """Run a training described by ``cfg`` (see the module docstring); returns the results dict.

    ``objective_factory(cfg, embedder)`` replaces ``build_objective`` (tests, custom objectives);
    ``callback(event)`` is called after every optimizer step with ``{"step", "loss", "epoch"}`` (an
    exception from it stops the run); ``evaluator`` (an :class:`~protoembed.evaluation.evaluator.Evaluator`
    or any ``embedder -> float``, higher is better) replaces ``training.selection`` as what selects
    ``best/``; ``examples`` replaces reading ``cfg.data`` (already read);
    ``hold_lock=False``: the caller holds the output folder's lock
    (:func:`protoembed.folder_lock.hold_output_dirs`, as ``protoembed train`` does before loading anything).
    """
    return Trainer(cfg, resume, objective_factory, callback, progress, evaluator, examples, hold_lock).run()
