"""Training configuration: YAML file(s) + ``--set`` overrides -> a validated :class:`TrainConfig`.

Schema (every key optional unless marked; an unknown key at any level is an error naming it)::

    base: other.yaml | [a.yaml, b.yaml]   # include: merged first, in order, paths relative to this file
    model: default                  # backbone spec for protoembed.load
    head: soft_prompt               # cls | mean | max | mask | soft_prompt (default: the objective's own)
    template: null                  # template of prompt heads (default: the head's)
    max_seq_length: 32              # sentence tokens (prompt heads) / all tokens (plain heads)
    n_soft_prompt: null             # soft_prompt head: number of prompt vectors (default 4)
    soft_prompt_init: null          # uniform | template
    objective:
      name: conpvp                  # required: simcse | promptbert | conpvp
      ...                           # every other key is an option of that objective
    data:
      corpus: unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt   # required
      max_sentences: null           # keep the first N usable sentences
      drop_unterminated_last_line: true
      data_dir: null                # benchmark data (STS) and base of relative corpus paths
    training:
      epochs: 1
      max_steps: null               # stop after N optimizer steps (overrides epochs)
      batch_size: 64                # global batch (split over processes)
      lr: 3.0e-5
      warmup: 0                     # int = steps, float in [0, 1] = fraction of the steps
      weight_decay: 0.0
      grad_clip: null
      seed: 42
      eval_steps: 125               # STS-B dev Spearman every N steps and at the end
      eval_variant: senteval        # senteval | raw
      eval_batch_size: 128
      log_steps: 10
      test_tasks: [STS12, ..., SICKRelatedness]   # tasks of results.json
      keep_checkpoint: false        # keep output_dir/checkpoint after a finished run
    output_dir: runs/NAME           # required here or via --output-dir

``base`` merges dictionaries key by key (the including file wins); lists and scalars are replaced.
``--set key.sub=value`` is applied after all files; ``value`` is parsed as YAML (``1e-5``, ``null``,
``[a, b]``, ``true``). Floats written without a dot (``1e-5``, which YAML reads as a string) are
accepted for float keys.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from protoembed.errors import ProtoembedError

STS_TEST_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")


@dataclass
class ObjectiveConfig:
    """``objective:`` section: the registry name and the options passed to ``build_objective``."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataConfig:
    """``data:`` section: the training corpus (one sentence per line)."""

    corpus: str
    max_sentences: int | None = None
    drop_unterminated_last_line: bool = True
    data_dir: str | None = None


@dataclass
class TrainingConfig:
    """``training:`` section: optimisation, evaluation and logging."""

    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 64
    lr: float = 3e-5
    warmup: int | float = 0
    weight_decay: float = 0.0
    grad_clip: float | None = None
    seed: int = 42
    eval_steps: int = 125
    eval_variant: str = "senteval"
    eval_batch_size: int = 128
    log_steps: int = 10
    test_tasks: list[str] = field(default_factory=lambda: list(STS_TEST_TASKS))
    keep_checkpoint: bool = False


@dataclass
class TrainConfig:
    """A whole training run."""

    objective: ObjectiveConfig
    data: DataConfig
    training: TrainingConfig = field(default_factory=TrainingConfig)
    model: str = "default"
    head: str | None = None
    template: str | None = None
    max_seq_length: int | None = 32
    n_soft_prompt: int | None = None
    soft_prompt_init: str | None = None
    output_dir: str | None = None
    #: where the YAML came from (not a config key; for messages).
    source: str = field(default="<dict>", compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data, objective options flattened as in the YAML."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "source":
                continue
            value = getattr(self, f.name)
            if f.name == "objective":
                value = {"name": value.name, **value.options}
            elif dataclasses.is_dataclass(value):
                value = dataclasses.asdict(value)
            out[f.name] = value
        return out


_SECTIONS = {"data": DataConfig, "training": TrainingConfig}
_TOP_KEYS = {f.name for f in dataclasses.fields(TrainConfig)} - {"source"}


# ------------------------------------------------------------------ YAML + base + --set
def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProtoembedError(f"config file {path} not found") from None
    except OSError as err:
        raise ProtoembedError(f"cannot read config file {path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ProtoembedError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProtoembedError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge two config dicts: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def read_config_file(path: str | os.PathLike[str], _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a YAML config, resolving ``base:`` includes (relative to the including file)."""
    path = Path(path).expanduser().absolute()
    if path in _seen:
        chain = " -> ".join(str(p) for p in (*_seen, path))
        raise ProtoembedError(f"config include cycle: {chain}")
    data = _read_yaml(path)
    bases = data.pop("base", None)
    if bases is None:
        return data
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise ProtoembedError(f"{path}: 'base' must be a file name or a list of file names")
    merged: dict[str, Any] = {}
    for name in bases:
        merged = merge(merged, read_config_file(path.parent / name, (*_seen, path)))
    return merge(merged, data)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"training.lr=1e-5"`` -> ``(["training", "lr"], "1e-5")`` with the value parsed as YAML."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ProtoembedError(f"--set {text!r}: expected KEY=VALUE, e.g. training.lr=1e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides (later ones win); nested sections are created as needed."""
    data = merge({}, data)
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ProtoembedError(f"--set {text!r}: {part!r} is not a section")
            else:
                child = node[part] = dict(child)
            node = child
        node[path[-1]] = value
    return data


# ------------------------------------------------------------------ validation
def _type_error(key: str, expected: str, value: Any) -> ProtoembedError:
    return ProtoembedError(f"config key {key!r}: expected {expected}, got {value!r}")


def _as_int(key: str, value: Any, minimum: int | None = None, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(key, "an integer" + (" or null" if optional else ""), value)
    if minimum is not None and value < minimum:
        raise ProtoembedError(f"config key {key!r}: must be at least {minimum}, got {value}")
    return value


def _as_float(key: str, value: Any, minimum: float | None = None, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, str):  # YAML 1.1 reads 1e-5 (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            raise _type_error(key, "a number", value) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _type_error(key, "a number" + (" or null" if optional else ""), value)
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise _type_error(key, "a finite number", value)
    if minimum is not None and value < minimum:
        raise ProtoembedError(f"config key {key!r}: must be at least {minimum}, got {value}")
    return value


def _as_str(key: str, value: Any, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not optional:
        value = str(value)
    if not isinstance(value, str) or not value:
        raise _type_error(key, "a non-empty string" + (" or null" if optional else ""), value)
    return value


def _as_bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _type_error(key, "true or false", value)
    return value


def _check_keys(section: str, data: dict[str, Any], known: set[str]) -> None:
    unknown = [k for k in data if k not in known]
    if unknown:
        name = f"{section}.{unknown[0]}" if section else str(unknown[0])
        raise ProtoembedError(f"unknown config key {name!r}; known keys here: {', '.join(sorted(known))}")


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _type_error(name, "a mapping (section)", value)
    return value


def _training(data: dict[str, Any]) -> TrainingConfig:
    known = {f.name for f in dataclasses.fields(TrainingConfig)}
    _check_keys("training", data, known)
    cfg = TrainingConfig()
    k = "training."
    for name in ("epochs", "batch_size", "eval_steps", "eval_batch_size", "log_steps"):
        if name in data:
            setattr(cfg, name, _as_int(k + name, data[name], minimum=1))
    if "seed" in data:
        cfg.seed = _as_int(k + "seed", data["seed"], minimum=0)
    if "max_steps" in data:
        cfg.max_steps = _as_int(k + "max_steps", data["max_steps"], minimum=1, optional=True)
    if "lr" in data:
        cfg.lr = _as_float(k + "lr", data["lr"], minimum=0.0)
    if "weight_decay" in data:
        cfg.weight_decay = _as_float(k + "weight_decay", data["weight_decay"], minimum=0.0)
    if "grad_clip" in data:
        cfg.grad_clip = _as_float(k + "grad_clip", data["grad_clip"], optional=True)
        if cfg.grad_clip is not None and cfg.grad_clip <= 0:
            raise ProtoembedError(
                f"config key 'training.grad_clip': must be positive or null, got {cfg.grad_clip}"
            )
    if "warmup" in data:
        value = data["warmup"]
        if isinstance(value, int) and not isinstance(value, bool):
            cfg.warmup = _as_int(k + "warmup", value, minimum=0)
        else:
            cfg.warmup = _as_float(k + "warmup", value, minimum=0.0)
            if cfg.warmup > 1:
                raise ProtoembedError(
                    f"config key 'training.warmup': a float is a fraction of the steps in [0, 1], got "
                    f"{cfg.warmup} (write an integer for a number of steps)"
                )
    if "eval_variant" in data:
        cfg.eval_variant = _as_str(k + "eval_variant", data["eval_variant"])
        if cfg.eval_variant not in ("senteval", "raw"):
            raise ProtoembedError(
                f"config key 'training.eval_variant': expected senteval or raw, got {cfg.eval_variant!r}"
            )
    if "test_tasks" in data:
        tasks = data["test_tasks"]
        if isinstance(tasks, str):
            tasks = [tasks]
        if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
            raise _type_error(k + "test_tasks", "a non-empty list of STS task names", data["test_tasks"])
        bad = [t for t in tasks if t not in STS_TEST_TASKS]
        if bad:
            raise ProtoembedError(
                f"config key 'training.test_tasks': unknown task {bad[0]!r}; known: {', '.join(STS_TEST_TASKS)}"
            )
        cfg.test_tasks = list(tasks)
    if "keep_checkpoint" in data:
        cfg.keep_checkpoint = _as_bool(k + "keep_checkpoint", data["keep_checkpoint"])
    return cfg


def _data(data: dict[str, Any]) -> DataConfig:
    _check_keys("data", data, {f.name for f in dataclasses.fields(DataConfig)})
    if data.get("corpus") is None:
        raise ProtoembedError("config key 'data.corpus' is required (a one-sentence-per-line text file)")
    cfg = DataConfig(corpus=_as_str("data.corpus", data["corpus"]))
    if "max_sentences" in data:
        cfg.max_sentences = _as_int("data.max_sentences", data["max_sentences"], minimum=1, optional=True)
    if "drop_unterminated_last_line" in data:
        cfg.drop_unterminated_last_line = _as_bool(
            "data.drop_unterminated_last_line", data["drop_unterminated_last_line"]
        )
    if "data_dir" in data:
        cfg.data_dir = _as_str("data.data_dir", data["data_dir"], optional=True)
    return cfg


def _objective(data: Any) -> ObjectiveConfig:
    if isinstance(data, str):
        data = {"name": data}
    if not isinstance(data, dict) or data.get("name") is None:
        raise ProtoembedError("config key 'objective.name' is required (simcse, promptbert or conpvp)")
    options = {k: v for k, v in data.items() if k != "name"}
    bad = [k for k in options if not isinstance(k, str)]
    if bad:
        raise ProtoembedError(f"config key 'objective.{bad[0]}': option names must be strings")
    return ObjectiveConfig(name=_as_str("objective.name", data["name"]), options=options)


def config_from_dict(data: dict[str, Any], source: str = "<dict>") -> TrainConfig:
    """Validate a merged config dict (no ``base`` left) and build a :class:`TrainConfig`."""
    data = dict(data)
    data.pop("base", None)
    _check_keys("", data, _TOP_KEYS)
    if "objective" not in data:
        raise ProtoembedError("config key 'objective' is required (objective: {name: conpvp, ...})")
    if "data" not in data:
        raise ProtoembedError("config key 'data.corpus' is required (a one-sentence-per-line text file)")
    cfg = TrainConfig(
        objective=_objective(data["objective"]),
        data=_data(_section(data, "data")),
        training=_training(_section(data, "training")),
        source=source,
    )
    if "model" in data:
        cfg.model = _as_str("model", data["model"])
    for name in ("head", "template", "soft_prompt_init", "output_dir"):
        if name in data:
            setattr(cfg, name, _as_str(name, data[name], optional=True))
    if "max_seq_length" in data:
        cfg.max_seq_length = _as_int("max_seq_length", data["max_seq_length"], minimum=1, optional=True)
    if "n_soft_prompt" in data:
        cfg.n_soft_prompt = _as_int("n_soft_prompt", data["n_soft_prompt"], minimum=1, optional=True)
    if cfg.head is not None:
        from protoembed.heads import get_head

        get_head(cfg.head)  # one-line error listing the known heads
    return cfg


def load_config(path: str | os.PathLike[str], overrides: list[str] | None = None) -> TrainConfig:
    """Read ``path`` (with its ``base`` includes), apply ``--set`` overrides and validate."""
    data = apply_overrides(read_config_file(path), list(overrides or []))
    return config_from_dict(data, source=str(path))


def dump_config(cfg: TrainConfig) -> str:
    """The config as YAML (what ``output_dir/config.yaml`` holds)."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True)
