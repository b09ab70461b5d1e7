"""Chained training stages in one config: e.g. SBERT's NLI then STS-B as ONE command.

A config with a ``stages:`` list trains each stage in turn, the next starting from the previous stage's
kept model (``best/``, chosen by the stage's ``training.selection`` as in a single run). Every key outside ``stages`` is shared;
each stage is a mapping with a ``name`` and the keys it sets on top (deep-merged as ``base:`` files are):
its own ``objective``, ``data``, ``training`` (epochs, batch, lr, ...), ``head``, ``max_seq_length``, and
its own ``base:`` files (paths relative to the config file given to ``protoembed train``)::

    model: bert-base-uncased
    head: mean
    output_dir: runs/sbert-nli-stsb
    stages:
      - name: nli
        objective: nli_softmax
        data: {corpus: [senteval/SNLI/s1.dev, senteval/SNLI/s1.test]}
        training: {epochs: 1, batch_size: 16}
      - name: stsb
        objective: cosine_regression
        data: {corpus: senteval/STS/STSBenchmark/sts-train.csv}
        training: {epochs: 10, batch_size: 32}

Stage ``name`` writes a whole run folder ``output_dir/name/`` (``best/``, ``results.json``,
``training_log.jsonl``, ``config.yaml``); ``output_dir/results.json`` is the last stage's results with a
``stages`` list (each stage's folder, best step, dev and STS scores, wall time, ``tokens_per_second`` and
``mfu``; at the top the wall time is the stages' sum, the two throughput keys ``null``). ``model`` is set once, for the
first stage. ``--set`` overrides apply to every stage, after its own keys (``--set training.epochs=1``
makes every stage one epoch). Before the first stage trains, the data of EVERY stage is read and matched to its
objective's columns, so a missing file or a wrong column fails at once. ``--resume`` skips finished
stages and continues an interrupted one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import first_error, problem
from protoembed.outputs.io import write_atomic, write_json_atomic
from protoembed.outputs.run_layout import BEST_DIR, CONFIG_FILE, RESULTS_FILE
from protoembed.training.config import (
    TrainConfig,
    apply_overrides,
    config_from_dict,
    load_config,
    merge,
    merge_bases,
    read_config_file,
)
from protoembed.training.config_models import ConfigKeyError, StagedConfig

logger = logging.getLogger(__name__)


def stage_configs(
    data: dict[str, Any],
    source: str,
    output_dir: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
) -> list[tuple[str, TrainConfig]]:
    """Expand a config dict with ``stages`` into one validated :class:`TrainConfig` per stage.

    Args:
        data: the merged config (``base`` resolved, ``--set`` applied) with a ``stages`` list.
        source: where it came from, for messages.
        output_dir: overrides the config's ``output_dir``.
        overrides: ``--set`` overrides, applied to every stage after its keys are merged (they win).
    Returns:
        ``[(name, config), ...]``: stage ``name`` trains into ``output_dir/name`` from ``model`` (first
        stage) or the previous stage's ``best/``.
    Raises:
        ProtoembedError: a ``stages`` list the schema rejects (:class:`StagedConfig`: not a list of
            mappings, a duplicate or bad stage name, a key only the shared part may set), or a stage whose
            merged config does not validate (named).
    """
    staged = _validate_stages(data, source)
    shared = {k: v for k, v in data.items() if k != "stages"}
    out = output_dir or shared.get("output_dir")
    if not out:
        raise ProtoembedError("no output directory: set output_dir in the config or pass --output-dir")
    out = Path(out).expanduser()
    configs: list[tuple[str, TrainConfig]] = []
    for i, stage in enumerate(staged.stages, 1):
        name = stage.name
        where = f"{source}: stage {i} ({name!r})"
        merged = apply_overrides(merge(shared, stage.keys()), overrides or [])
        merged["output_dir"] = str(out / name)
        if configs:
            merged["model"] = str(out / configs[-1][0] / BEST_DIR)
        configs.append((name, config_from_dict(merged, where)))
    return configs


def _validate_stages(data: dict[str, Any], source: str) -> StagedConfig:
    """``data``'s ``stages`` list checked by :class:`~protoembed.training.config_models.StagedConfig`
    (a non-empty list of mappings, each with a distinct folder ``name`` and no shared-only key).

    Raises:
        ProtoembedError: one line naming ``source``, the stage (number and name) and what is wrong.
    """
    try:
        return StagedConfig.model_validate({"stages": data.get("stages")})
    except ValidationError as err:
        loc, error = first_error(err)
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigKeyError) and cause.full:
            raise ProtoembedError(f"{source}: {cause}") from None
        if len(loc) < 2:
            raise ProtoembedError(
                f"{source}: 'stages' must be a non-empty list of mappings with a 'name' ({problem(error)})"
            ) from None
        index = int(loc[1])
        stage = data["stages"][index]
        name = stage.get("name") if isinstance(stage, dict) else None
        where = f"stage {index + 1}" + (f" ({name!r})" if isinstance(name, str) else "")
        key = ".".join(str(part) for part in loc[2:])
        what = problem(error)
        if key:
            what = f"{key!r} {what}" if what.startswith(("is ", "must ")) else f"{key!r}: {what}"
        raise ProtoembedError(f"{source}: {where}: {what}") from None


def load_run(
    path: str | os.PathLike[str], overrides: list[str] | None = None, output_dir: str | None = None
) -> list[tuple[str, TrainConfig]]:
    """Read a config file: ``[("", config)]`` for a single run, one entry per stage for a staged one.

    ``--set`` overrides apply to every stage, on top of the stage's own keys.
    """
    overrides = list(overrides or [])
    data = read_config_file(path)
    if isinstance(data.get("stages"), list):
        data["stages"] = [_stage_with_base(stage, Path(path)) for stage in data["stages"]]
    if "stages" not in data:
        cfg = load_config(path, overrides)
        if output_dir:
            cfg.output_dir = output_dir
        return [("", cfg)]
    return stage_configs(data, str(path), output_dir, overrides)


def _stage_with_base(stage: Any, path: Path) -> Any:
    """A stage's own ``base:`` files (paths relative to the config file) merged under its keys, resolved
    as the config file's own (:func:`~protoembed.training.config.merge_bases`: the same missing-file and
    include-cycle errors, the config file itself on the include chain)."""
    if not isinstance(stage, dict) or "base" not in stage:
        return stage
    return merge_bases(stage, path, what="a stage's 'base'")


def _check_data(stages: list[tuple[str, TrainConfig]]):
    """Read every stage's data and match it to the columns of its objective's plan (fails before any
    training)."""
    from protoembed.training.components import examples_for, read_training_examples

    examples = []
    for name, cfg in stages:
        try:
            raw = read_training_examples(cfg)
            examples.append(examples_for(raw, cfg.objective.plan.columns, cfg))
        except ProtoembedError as err:
            raise ProtoembedError(f"stage {name!r}: {err}") from None
    return examples


def train_stages(
    stages: list[tuple[str, TrainConfig]], resume: bool = False, **kwargs: Any
) -> dict[str, Any]:
    """Train the stages in order (see the module docstring); returns the pipeline's results dict.

    ``kwargs`` go to :func:`protoembed.training.trainer.train` (``progress``, ``callback``, ...).
    """
    from protoembed.training.trainer import train

    if len(stages) == 1 and not stages[0][0]:
        return train(stages[0][1], resume=resume, **kwargs)
    examples = _check_data(stages)
    top = Path(str(stages[0][1].output_dir)).parent
    summary: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    for (name, cfg), data in zip(stages, examples):
        logger.info("stage %s: %s on %s", name, cfg.objective.name, data.where())
        results = train(cfg, resume=resume, examples=data, **kwargs)
        summary.append(
            {
                "name": name,
                "objective": cfg.objective.name,
                "output_dir": str(cfg.output_dir),
                "best_step": results.get("best_step"),
                "best_dev_score": results.get("best_dev_score"),
                "best_dev_scorer": results.get("best_dev_scorer"),
                "avg": results.get("avg"),
                "train_wall_time_s": results.get("train_wall_time_s"),
                "tokens_per_second": results.get("tokens_per_second"),
                "mfu": results.get("mfu"),
            }
        )
    if results:  # the main process (others return {})
        final = {**results, "stages": summary}
        final["train_wall_time_s"] = round(sum(s["train_wall_time_s"] or 0.0 for s in summary), 1)
        final["tokens_per_second"] = final["mfu"] = None  # each stage's own: in "stages"
        text = yaml.safe_dump(_pipeline_dict(stages), sort_keys=False, allow_unicode=True)
        write_atomic(top / CONFIG_FILE, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        write_json_atomic(top / RESULTS_FILE, final)
        return final
    return results


def _pipeline_dict(stages: list[tuple[str, TrainConfig]]) -> dict[str, Any]:
    """The resolved config of every stage, for ``output_dir/config.yaml``."""
    return {"stages": [{"name": name, **cfg.to_dict()} for name, cfg in stages]}
