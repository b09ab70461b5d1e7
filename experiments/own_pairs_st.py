"""The own-pairs study's anchor: a supervised run of the study trained by sentence-transformers' own
``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss``, from the same config file as
protoembed's run.

``python experiments/own_pairs_st.py --config configs/cpu/own-pairs/sup-googlenews.yaml --output-dir RUN
[--set training.lr=5e-5 --set training.seed=2 --set training.eval_steps=16]`` reads the config (its
``base:`` files and ``--set`` overrides merged as ``protoembed train`` merges them; not validated by
protoembed, whose schema is not sentence-transformers') and trains what it describes:

- the pairs: ``data.corpus`` (JSONL) with ``data.columns`` mapping its columns to anchor / positive (a
  mined file: anchor, positive, negative as they are), in that column order;
- the model: ``model`` resolved by protoembed (``default``: the embedded all-MiniLM-L6-v2 folder) and
  loaded with ``SentenceTransformer(path)``: its mean pooling and normalisation, i.e. protoembed's ``head:
  mean`` without an MLP (anything else is refused); training inputs cut to ``max_seq_length`` tokens by the
  data collator, while evaluation and the saved model keep the model's own limit, as protoembed does;
- the loss: ``MultipleNegativesRankingLoss`` with scale ``1 / objective.temperature`` (20 for tau 0.05) and
  cosine similarity: InfoNCE over the batch's positives (and negatives), as protoembed's ``simcse_sup``;
  with ``objective.matryoshka`` (``dims``, ``weights``, ``n_dims_per_step``, as protoembed reads them)
  wrapped in ``MatryoshkaLoss`` with the same sizes, weights and sampling;
- the optimisation: AdamW at ``training.lr``, ``weight_decay`` (never on biases and LayerNorm weights, in
  both), ``warmup`` then linear decay to 0, no gradient clipping unless ``grad_clip``, ``training.seed``
  (model, dropout, data order), ``precision`` (bf16: autocast), batches of ``batch_size`` with the last
  incomplete one dropped; ``batch_sampler: no_duplicates`` -> ``BatchSamplers.NO_DUPLICATES`` (no text
  twice in a batch, across the columns, as protoembed's), ``shuffle`` -> ``BATCH_SAMPLER``;
- the steps: ``max_steps``, else ``epochs`` x the batches protoembed's sampler makes of an epoch (the same
  count; sentence-transformers' ``NO_DUPLICATES`` fills its advertised ``n // batch_size`` batches by
  resampling when a pass falls short, so the steps are set explicitly);
- the selection: ``training.selection``'s one retrieval task (``tasks:``, a BEIR folder) evaluated with
  ``InformationRetrievalEvaluator`` (cosine, nDCG@10) every ``eval_steps`` steps and after the last step,
  ``load_best_model_at_end``.

Out, in RUN (the layout of a protoembed run, so the study records both alike): ``best/`` (the best
checkpoint, sentence-transformers layout, read by ``protoembed eval --model RUN/best``), ``results.json``
(``best_step``, ``best_dev_score`` x100, what scored it, steps, wall time, versions; no test task: the
study evaluates ``best/`` with protoembed's commands), ``training_log.jsonl`` (the trainer's log history,
one JSON object per entry, with ``elapsed_s``), ``config.yaml`` (the config as read, and the
sentence-transformers settings). The process is set up as protoembed's command line sets its own
(:func:`protoembed.core.threads.configure_process`: torch's threads sized to the cores that are free, OpenMP's
idle threads sleeping): without it, on this shared 2-core machine, a step took 7x protoembed's.
A run whose ``results.json`` exists is left as it is; an unfinished one starts again.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # run as a script: python experiments/own_pairs_st.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.records import BEST_DIR, CONFIG_FILE, LOG_FILE, RESULTS_FILE, write_json, write_text  # noqa: E402

#: Where the trainer's checkpoints go inside the run folder (removed once best/ is saved).
CHECKPOINTS = "st-checkpoints"


@dataclass(frozen=True)
class AnchorConfig:
    """What the anchor reads from a study config (see the module docstring)."""

    model: str
    max_seq_length: int
    corpus: str
    columns: dict[str, str]
    temperature: float
    batch_size: int
    epochs: int
    max_steps: int | None
    lr: float
    warmup: int | float
    weight_decay: float
    grad_clip: float | None
    seed: int
    eval_steps: int
    eval_batch_size: int
    log_steps: int
    precision: str
    batch_sampler: str
    dev_task: str
    dev_folder: str
    dev_split: str
    matryoshka_dims: tuple[int, ...] | None = None
    matryoshka_weights: tuple[float, ...] | None = None
    matryoshka_dims_per_step: int = -1


def read_config(path: Path, overrides: list[str]) -> dict[str, Any]:
    """The config file with its ``base:`` files and ``--set`` overrides merged (protoembed's own reading)."""
    from protoembed.training.config import apply_overrides, read_config_file

    return apply_overrides(read_config_file(path), overrides)


def anchor_config(data: dict[str, Any]) -> AnchorConfig:
    """The anchor's settings from a merged config; refuses what the anchor does not reproduce.

    Raises:
        ValueError: another objective or head, an MLP, a selection that is not one retrieval task's
            nDCG@10, or a missing key.
    """
    objective = data.get("objective") or {}
    if objective.get("name") != "simcse_sup" or data.get("head") != "mean" or objective.get("mlp") != "none":
        raise ValueError("the anchor reproduces objective simcse_sup with head: mean and mlp: none only")
    training = data.get("training") or {}
    selection = training.get("selection") or {}
    tasks = {task["name"]: task for task in data.get("tasks") or []}
    names = selection.get("tasks") or []
    if len(names) != 1 or names[0] not in tasks or tasks[names[0]].get("kind") != "retrieval":
        raise ValueError("training.selection must name one retrieval task declared under tasks:")
    if selection.get("metric", "ndcg_at_10") != "ndcg_at_10":
        raise ValueError("the anchor selects on nDCG@10 only")
    task = tasks[names[0]]
    data_section = data.get("data") or {}
    matryoshka = objective.get("matryoshka") or {}
    weights = matryoshka.get("weights")
    return AnchorConfig(
        model=str(data.get("model", "default")),
        max_seq_length=int(data["max_seq_length"]),
        corpus=str(data_section["corpus"]),
        columns=dict(data_section.get("columns") or {}),
        temperature=float(objective.get("temperature", 0.05)),
        batch_size=int(training["batch_size"]),
        epochs=int(training.get("epochs", 1)),
        max_steps=training.get("max_steps"),
        lr=float(training["lr"]),
        warmup=training.get("warmup", 0),
        weight_decay=float(training.get("weight_decay", 0.0)),
        grad_clip=training.get("grad_clip"),
        seed=int(training["seed"]),
        eval_steps=int(training["eval_steps"]),
        eval_batch_size=int(training.get("eval_batch_size", 128)),
        log_steps=int(training.get("log_steps", 10)),
        precision=str(training.get("precision", "fp32")),
        batch_sampler=str(training.get("batch_sampler", "shuffle")),
        dev_task=task["name"],
        dev_folder=str(task["files"]["all"]),
        dev_split=str(selection.get("split", "dev")),
        matryoshka_dims=tuple(int(d) for d in matryoshka["dims"]) if matryoshka else None,
        matryoshka_weights=tuple(float(w) for w in weights) if weights else None,
        matryoshka_dims_per_step=int(matryoshka.get("n_dims_per_step") or -1),
    )


def _local(path: str) -> Path:
    """A config's path as protoembed reads a training file: from the working directory if it is there,
    else under the benchmark data directory."""
    from protoembed import resolve_data_dir
    from protoembed.data.paths import local_path

    return local_path(path) or resolve_data_dir(None) / path


def read_pairs(cfg: AnchorConfig) -> dict[str, list[str]]:
    """The training examples as columns ``anchor``, ``positive`` (, ``negative``), in that order."""
    rows = [json.loads(line) for line in _local(cfg.corpus).read_text(encoding="utf-8").splitlines() if line]
    source = {role: column for role, column in cfg.columns.items()}
    roles = [r for r in ("anchor", "positive", "negative") if source.get(r, r) in rows[0]]
    if roles[:2] != ["anchor", "positive"]:
        raise ValueError(f"{cfg.corpus}: no anchor / positive columns (data.columns: {cfg.columns})")
    return {role: [str(row[source.get(role, role)]) for row in rows] for role in roles}


def epoch_batches(columns: dict[str, list[str]], cfg: AnchorConfig) -> int:
    """The batches of epoch 1 as protoembed's sampler makes them (``n // batch_size`` for ``shuffle``; for
    ``no_duplicates`` the full batches without a repeated text, from the same seed)."""
    from protoembed.data.training.examples import Examples
    from protoembed.training.samplers import build_sampler

    _, plan = build_sampler(Examples(dict(columns)), cfg.batch_size, cfg.seed, cfg.batch_sampler)
    return plan.batches_in(0)


def total_steps(cfg: AnchorConfig, per_epoch: int) -> int:
    """The run's optimizer steps: ``max_steps``, else ``epochs`` epochs."""
    return int(cfg.max_steps) if cfg.max_steps else cfg.epochs * per_epoch


def dev_evaluator(cfg: AnchorConfig) -> Any:
    """sentence-transformers' ``InformationRetrievalEvaluator`` on the selection task's split: the BEIR
    folder read by protoembed's reader (the same texts and judgments protoembed evaluates), cosine."""
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.util import cos_sim

    from protoembed.data.benchmarks.beir import read_beir

    data = read_beir(_local(cfg.dev_folder), cfg.dev_split, cfg.dev_task)
    corpus_ids = list(data.corpus_ids)
    return InformationRetrievalEvaluator(
        queries=dict(zip(data.query_ids, data.query_texts)),
        corpus=dict(zip(corpus_ids, data.corpus_texts)),
        relevant_docs={q: set(docs) for q, docs in data.qrels.items()},
        ndcg_at_k=[10],
        mrr_at_k=[10],
        accuracy_at_k=[10],
        precision_recall_at_k=[10],
        map_at_k=[10],
        batch_size=cfg.eval_batch_size,
        name=cfg.dev_task,
        write_csv=False,
        score_functions={"cosine": cos_sim},
        main_score_function="cosine",
    )


def dev_metric(cfg: AnchorConfig) -> str:
    """The trainer's name of the selection score (the evaluator's cosine nDCG@10)."""
    return f"eval_{cfg.dev_task}_cosine_ndcg@10"


def anchor_loss(model: Any, cfg: AnchorConfig) -> tuple[Any, str]:
    """The run's loss on ``model`` and its description: ``MultipleNegativesRankingLoss`` (scale ``1 / tau``,
    cosine), wrapped in ``MatryoshkaLoss`` when the config has ``objective.matryoshka``."""
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss, MultipleNegativesRankingLoss

    loss = MultipleNegativesRankingLoss(model, scale=1.0 / cfg.temperature)
    text = f"MultipleNegativesRankingLoss(scale={1.0 / cfg.temperature:g}, cos_sim)"
    if cfg.matryoshka_dims is None:
        return loss, text
    wrapped = MatryoshkaLoss(
        model,
        loss,
        list(cfg.matryoshka_dims),
        list(cfg.matryoshka_weights) if cfg.matryoshka_weights else None,
        n_dims_per_step=cfg.matryoshka_dims_per_step,
    )
    dims = list(wrapped.matryoshka_dims)
    weights = [float(w) for w in wrapped.matryoshka_weights]
    return (
        wrapped,
        f"MatryoshkaLoss({text}, dims={dims}, weights={weights}, n_dims_per_step={wrapped.n_dims_per_step})",
    )


def training_arguments(cfg: AnchorConfig, steps: int, folder: Path) -> Any:
    """The ``SentenceTransformerTrainingArguments`` of the run (see the module docstring)."""
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    warmup = cfg.warmup if isinstance(cfg.warmup, int) else round(float(cfg.warmup) * steps)
    sampler = {"no_duplicates": BatchSamplers.NO_DUPLICATES, "shuffle": BatchSamplers.BATCH_SAMPLER}
    return SentenceTransformerTrainingArguments(
        output_dir=str(folder / CHECKPOINTS),
        max_steps=steps,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.eval_batch_size,
        learning_rate=cfg.lr,
        lr_scheduler_type="linear",
        warmup_steps=warmup,
        weight_decay=cfg.weight_decay,
        max_grad_norm=float(cfg.grad_clip) if cfg.grad_clip else 0.0,  # 0: no clipping
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=cfg.precision == "bf16",
        use_cpu=True,
        dataloader_drop_last=True,
        dataloader_num_workers=0,
        batch_sampler=sampler[cfg.batch_sampler],
        eval_strategy="steps",
        eval_steps=cfg.eval_steps,
        save_strategy="steps",
        save_steps=cfg.eval_steps,
        save_only_model=True,
        save_total_limit=1,
        load_best_model_at_end=True,
        metric_for_best_model=dev_metric(cfg),
        greater_is_better=True,
        logging_steps=cfg.log_steps,
        report_to="none",
        disable_tqdm=True,
    )


def _protoembed_flow() -> Any:
    """A callback that evaluates (and saves) after the last step too, as protoembed does, and stamps each
    log entry with the seconds since training began (``elapsed_s``, as protoembed's log)."""
    from transformers import TrainerCallback

    class ProtoembedFlow(TrainerCallback):
        started = time.monotonic()

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.monotonic()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.global_step >= state.max_steps:
                control.should_evaluate = True
                control.should_save = True
            return control

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if state.log_history:  # the trainer appended a copy of ``logs`` just before
                state.log_history[-1]["elapsed_s"] = round(time.monotonic() - self.started, 2)

    return ProtoembedFlow()


def train(config: Path, overrides: list[str], folder: Path) -> dict[str, Any]:
    """Train the anchor run of ``config`` (with ``overrides``) into ``folder``; returns its results."""
    import datasets
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator

    from protoembed.model.backbones import resolve_model_dir

    data = read_config(config, overrides)
    cfg = anchor_config(data)
    columns = read_pairs(cfg)
    per_epoch = epoch_batches(columns, cfg)
    steps = total_steps(cfg, per_epoch)
    shutil.rmtree(folder / CHECKPOINTS, ignore_errors=True)  # an unfinished run starts again
    folder.mkdir(parents=True, exist_ok=True)
    model = SentenceTransformer(str(resolve_model_dir(cfg.model)), device="cpu")
    loss, loss_text = anchor_loss(model, cfg)
    args = training_arguments(cfg, steps, folder)
    settings = {
        "library": f"sentence-transformers {sentence_transformers.__version__}",
        "loss": loss_text,
        "model_path": str(resolve_model_dir(cfg.model)),
        "train_max_length": cfg.max_seq_length,
        "eval_max_seq_length": model.max_seq_length,
        "steps": steps,
        "steps_per_epoch": per_epoch,
        "examples": len(columns["anchor"]),
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "columns": list(columns),
        "arguments": {
            k: str(v)
            for k, v in args.to_dict().items()
            if k
            in (
                "learning_rate",
                "lr_scheduler_type",
                "warmup_steps",
                "weight_decay",
                "max_grad_norm",
                "seed",
                "bf16",
                "batch_sampler",
                "dataloader_drop_last",
                "eval_steps",
                "metric_for_best_model",
                "load_best_model_at_end",
                "optim",
                "adam_beta1",
                "adam_beta2",
                "adam_epsilon",
            )
        },
        "settings": asdict(cfg),
    }
    write_text(folder / CONFIG_FILE, yaml.safe_dump({**data, "anchor": settings}, sort_keys=False))
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=datasets.Dataset.from_dict(columns),
        loss=loss,
        evaluator=dev_evaluator(cfg),
        data_collator=SentenceTransformerDataCollator(
            preprocess_fn=model.preprocess, max_length=cfg.max_seq_length
        ),
        callbacks=[_protoembed_flow()],
    )
    started = time.monotonic()
    trainer.train()
    wall = time.monotonic() - started
    state = trainer.state
    write_text(folder / LOG_FILE, "".join(json.dumps(entry) + "\n" for entry in state.log_history))
    model.save(str(folder / BEST_DIR))  # the best checkpoint (load_best_model_at_end)
    shutil.rmtree(folder / CHECKPOINTS, ignore_errors=True)
    best_step = int(Path(state.best_model_checkpoint).name.rsplit("-", 1)[1])
    results = {
        "model": str(folder / BEST_DIR),
        "library": settings["library"],
        "tasks": {},
        "best_step": best_step,
        "best_dev_score": 100.0 * float(state.best_metric),
        "best_dev_scorer": f"InformationRetrievalEvaluator cosine nDCG@10 x100, {cfg.dev_task} ({cfg.dev_split})",
        "total_steps": steps,
        "steps_per_epoch": per_epoch,
        "train_wall_time_s": round(wall, 1),
    }
    write_json(folder / RESULTS_FILE, results)
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python experiments/own_pairs_st.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--config", required=True, type=Path, help="a supervised own-pairs config")
    parser.add_argument("--output-dir", required=True, type=Path, help="the run folder")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE, as train's")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train one anchor run (see the module docstring); returns the exit code."""
    args = parse_args(argv)
    if "torch" not in sys.modules:  # the process as protoembed's command line sets its own, before torch
        from protoembed.core.threads import configure_process

        configure_process()
    if (args.output_dir / RESULTS_FILE).is_file():
        print(f"own_pairs_st: {args.output_dir} is finished; left as it is", file=sys.stderr)
        return 0
    results = train(args.config, args.overrides, args.output_dir)
    print(
        f"own_pairs_st: best dev nDCG@10 {results['best_dev_score']:.2f} at step {results['best_step']} of "
        f"{results['total_steps']}; model in {args.output_dir / BEST_DIR}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
