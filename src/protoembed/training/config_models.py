"""The training config schema: the pydantic models of a run's config and their validators.

:class:`TrainConfig` (a whole run) with its sections :class:`ObjectiveConfig` (``objective:``, which
plans the objective: :mod:`protoembed.objectives.plan`), :class:`DataConfig` / :class:`DataFile`
(``data:``) and :class:`TrainingConfig` (``training:``); :class:`StagedConfig` the ``stages:`` list of a
chained run (:class:`StageConfig` each; :mod:`protoembed.training.stages`): field types, defaults,
allowed values and descriptions (``configs/README.md`` shows them as YAML,
:mod:`protoembed.training.schema`). A validator
that knows which key is wrong raises :class:`ConfigKeyError`. Reading files, ``base:`` includes, ``--set``
overrides and the one-line error messages are :mod:`protoembed.training.config`'s. No torch here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import STRICT, Name, Number, OptionalText
from protoembed.data.paths import DATA_DIR_DEFAULT
from protoembed.data.training.columns import mapping_problem
from protoembed.data.training.streaming import DEFAULT_SHUFFLE_BUFFER
from protoembed.evaluation.tasks import Task, TaskDeclaration, declared_tasks, tasks_in_scope
from protoembed.model.heads import HEADS
from protoembed.model.model_spec import HeadName, MaxSeqLength, ModelSettings, ModelSpec, model_spec
from protoembed.objectives.plan import ObjectivePlan, plan_objective
from protoembed.objectives.registry import (
    FORWARD_TOKENS,
    PADDINGS,
    REGISTRY,
    OptionError,
    grad_cache_objectives,
)

if TYPE_CHECKING:
    from protoembed.evaluation.evaluator import Evaluator


class ConfigKeyError(ValueError):
    """A validation error about config key ``key`` (``full``: ``message`` is a whole sentence)."""

    def __init__(self, key: str, message: str, full: bool = False) -> None:
        super().__init__(message)
        self.key, self.full = key, full


class ObjectiveConfig(BaseModel):
    """``objective:`` section: the registry name; every other key is an option of that objective.

    Validating the section plans the objective once (:func:`~protoembed.objectives.plan.plan_objective`,
    no torch): :attr:`plan` holds the parsed options, the head and the columns the run uses, and
    ``options`` the options the config set (parsed).
    """

    model_config = STRICT

    name: Name = Field(description="a registered objective, e.g. conpvp, cosine_regression (required)")
    options: dict[str, Any] = Field(default_factory=dict, description="the objective's own options")
    _plan: ObjectivePlan | None = PrivateAttr(default=None)

    @property
    def plan(self) -> ObjectivePlan:
        """The objective's plan, made when the section was validated (planned here if it was built
        without validation)."""
        if self._plan is None:
            self._plan = plan_objective(self.name, self.options)
        return self._plan

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        if isinstance(data, dict) and "options" not in data:
            return {
                **({"name": data["name"]} if data.get("name") is not None else {}),
                "options": {k: v for k, v in data.items() if k != "name"},
            }
        return data

    @model_validator(mode="after")
    def _check_options(self, info: ValidationInfo) -> ObjectiveConfig:
        bad = [k for k in self.options if not isinstance(k, str)]
        if bad:
            raise ConfigKeyError(f"objective.{bad[0]}", "option names must be strings")
        extra = (info.context or {}).get("objectives", {})
        try:
            plan = plan_objective(self.name, self.options, options_model=extra.get(self.name))  # no torch
        except OptionError as err:
            raise ConfigKeyError(f"objective.{err.key}", str(err), full=True) from None
        except ProtoembedError as err:
            raise ConfigKeyError("objective.name", str(err), full=True) from None
        self.options = plan.given_options()
        self._plan = plan
        return self


def _known_format(value: str | None) -> str | None:
    from protoembed.data.training.formats import FORMATS

    if value is not None and value not in FORMATS:
        raise ValueError(f"expected one of {', '.join(FORMATS)}, got {value!r}")
    return value


DataFormat = Annotated[OptionalText, AfterValidator(_known_format)]


def _column_mapping(mapping: dict[str, str] | None) -> dict[str, str] | None:
    """A column mapping checked by the rule the command line's uses too
    (:func:`protoembed.data.training.columns.mapping_problem`)."""
    for target, source in (mapping or {}).items():
        problem = mapping_problem(target, source)
        if problem:
            raise ValueError(problem)
    return mapping


ColumnMapping = Annotated[dict[str, str] | None, AfterValidator(_column_mapping)]
_COLUMNS_HELP = "example column -> the file's column, e.g. {anchor: question, positive: answer}"


class DataFile(BaseModel):
    """One training file of ``data.corpus`` given with its format."""

    model_config = STRICT

    path: Name = Field(description="the file")
    format: DataFormat = Field(None, description="its format (default: data.format, else from the name)")
    split: OptionalText = Field(None, description="allnli, hf_dataset: the split to read (default train)")
    columns: ColumnMapping = Field(None, description=f"{_COLUMNS_HELP} (default: data.columns)")


def _tag(value: Any) -> str:
    """Which alternative of a union of a path, a list of files and a file entry ``value`` is meant to be
    (so that an error is about that alternative alone; the tags are not identifiers, so messages leave
    them out of the dotted key)."""
    return "a list" if isinstance(value, list) else "a file entry" if isinstance(value, dict) else "a path"


_FileItem = Annotated[
    Annotated[Name, Tag("a path")] | Annotated[DataFile, Tag("a file entry")], Discriminator(_tag)
]
CorpusFiles = Annotated[
    Annotated[Name, Tag("a path")] | Annotated[list[_FileItem], Field(min_length=1), Tag("a list")],
    Discriminator(_tag),
]


class DataConfig(BaseModel):
    """``data:`` section: the training examples (one or more files, read in order and concatenated)."""

    model_config = STRICT

    corpus: CorpusFiles = Field(
        description="training file(s) (required): a path or a list of paths / {path, format}; relative "
        "paths: working dir, then data_dir",
        examples=["unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt"],
    )
    format: DataFormat = Field(
        None,
        description="text | stsb | sick | senteval_nli | ... (default: from each file name; text for .txt)",
    )
    max_sentences: Annotated[int, Field(ge=1)] | None = Field(
        None, description="keep the first N usable examples (sentences, pairs, triplets)"
    )
    drop_unterminated_last_line: bool = Field(
        True, description='text format: a file not ending in "\\n" may be cut mid-sentence: drop that line'
    )
    data_dir: OptionalText = Field(
        None, description=f"benchmark data + base of relative corpus paths (default {DATA_DIR_DEFAULT})"
    )
    streaming: bool = Field(
        False,
        description="read the files (text and table formats) as training goes, never whole in memory, "
        "shuffled through a buffer",
    )
    shuffle_buffer: Annotated[int, Field(ge=1)] = Field(
        DEFAULT_SHUFFLE_BUFFER, description="streaming: examples held to shuffle (seed + epoch)"
    )
    columns: ColumnMapping = Field(
        None,
        description=f"table formats (jsonl, csv, ...): {_COLUMNS_HELP}; default: the columns named like those",
    )

    def reader_options(self, file: DataFile) -> dict[str, Any]:
        """The keyword options a reader (or a stream) of ``file`` gets besides its path, format, data
        directory and columns: the text format's last-line rule and, when given, the file's ``split``."""
        return {
            "drop_unterminated_last_line": self.drop_unterminated_last_line,
            **({"split": file.split} if file.split else {}),
        }

    def files(self) -> list[DataFile]:
        """``corpus`` as a list of :class:`DataFile` (``data.format`` and ``data.columns`` filled in where a
        file has none)."""
        items = [self.corpus] if isinstance(self.corpus, str) else self.corpus
        return [
            DataFile(path=item, format=self.format, columns=self.columns)
            if isinstance(item, str)
            else DataFile(
                path=item.path,
                format=item.format or self.format,
                split=item.split,
                columns=item.columns or self.columns,
            )
            for item in items
        ]


def _one_task(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def run_evaluator(
    tasks: list[str],
    split: str | None,
    metric: str | None = None,
    variant: str = "senteval",
    data_dir: str | None = None,
    batch_size: int = 64,
) -> Evaluator:
    """The :class:`~protoembed.evaluation.evaluator.Evaluator` a run uses: ``tasks`` on ``split``, scored
    by ``metric``, STS data of ``variant`` (given to the suites that read it)."""
    from protoembed.evaluation.evaluator import Evaluator, group_by_suite
    from protoembed.evaluation.suite import SUITES

    reads_variant = any("variant" in SUITES[name].options.model_fields for name in group_by_suite(tasks))
    options = {"variant": variant} if reads_variant else {}
    return Evaluator(tasks, split=split, metric=metric, data_dir=data_dir, batch_size=batch_size, **options)


class SelectionConfig(BaseModel):
    """``training.selection``: the evaluator that chooses ``best/`` (:class:`~protoembed.evaluation.evaluator.Evaluator`):
    its tasks (any suite's; a task declared in the config's ``tasks:`` too), scored on ``split`` every
    ``eval_steps`` steps and after the last, ``metric`` averaged over the tasks, higher is better. The
    papers' configs select on ``{tasks: [STSBenchmark], metric: spearman, split: dev}``
    (``configs/base/sts-eval.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: Annotated[list[str], BeforeValidator(_one_task), Field(min_length=1)] = Field(
        validation_alias=AliasChoices("tasks", "task"),
        description="task names (or one; `task:` works too), their table names, or tasks declared in `tasks:`",
    )
    metric: str | None = Field(
        None,
        description="the per-task score averaged (spearman, ndcg_at_10, acc, ...); null = each task's main score",
    )
    split: Literal["train", "dev", "test"] | None = Field(
        "dev",
        description="the split scored (STS, retrieval); null for suites that evaluate by their own protocol "
        "(transfer, few-shot, clustering)",
    )

    @model_validator(mode="after")
    def _checked(self) -> SelectionConfig:
        """Tasks, then split, then metric, each error under its own key (no file is read)."""
        from protoembed.evaluation.evaluator import group_by_suite

        steps = (
            ("tasks", lambda: group_by_suite(self.tasks)),
            ("split", lambda: run_evaluator(self.tasks, self.split)),
            ("metric", lambda: run_evaluator(self.tasks, self.split, self.metric)),
        )
        for key, check in steps:
            try:
                checked = check()
            except ProtoembedError as err:
                raise ConfigKeyError(f"training.selection.{key}", str(err)) from None
        object.__setattr__(self, "tasks", checked.task_names())
        return self


def _warmup_number(value: Any) -> Any:
    """``warmup``: an int stays an int (steps); a numeric string becomes a float (fraction)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {value!r}")
    return value


#: Accelerate's experiment trackers (``accelerate.tracking.LOGGER_TYPE_TO_CLASS``; a test keeps them equal).
TRACKERS = ("aim", "comet_ml", "mlflow", "tensorboard", "wandb", "clearml", "dvclive", "swanlab", "trackio")
#: ``training.dropout``: how a training step draws its dropout masks, the default first
#: (:mod:`protoembed.training.dropout`).
DROPOUT_KERNELS = ("fast", "torch")
TrackerName = Literal[TRACKERS]  # type: ignore[valid-type]


class TrainingConfig(BaseModel):
    """``training:`` section: optimisation, evaluation and logging."""

    model_config = STRICT

    epochs: Annotated[int, Field(ge=1)] = Field(1, description="passes over the corpus")
    max_steps: Annotated[int, Field(ge=1)] | None = Field(
        None, description="optimizer steps; overrides epochs"
    )
    batch_size: Annotated[int, Field(ge=1)] = Field(
        64, description="global batch, split over processes; the last partial batch of an epoch is dropped"
    )
    lr: Annotated[Number, Field(ge=0)] = Field(
        3e-5, description="AdamW learning rate (1e-5 without a dot too)"
    )
    warmup: Annotated[int | float, BeforeValidator(_warmup_number)] = Field(
        0, description="integer = steps, float in [0, 1] = fraction of the steps; then linear decay to 0"
    )
    weight_decay: Annotated[Number, Field(ge=0)] = Field(
        0.0, description="AdamW; never on biases / LayerNorm weights"
    )
    head_lr: Annotated[Number, Field(ge=0)] | None = Field(
        None,
        description="learning rate of what is not the pretrained backbone (a fresh CNN head, a training "
        "classifier or MLP, the soft prompt); default lr",
    )
    grad_clip: Annotated[Number, Field(gt=0)] | None = Field(None, description="max gradient norm")
    seed: Annotated[int, Field(ge=0)] = Field(
        42, description="model init, dropout, shuffling (seed + epoch), ConPVP's template draws"
    )
    eval_steps: Annotated[int, Field(ge=1)] = Field(
        125, description="the selection's score every N steps and at the end; checkpoint after each"
    )
    eval_variant: Literal["senteval", "raw"] = Field(
        "senteval", description="STS data of selection and test: senteval | raw"
    )
    eval_batch_size: Annotated[int, Field(ge=1)] = Field(128, description="sentences per evaluation batch")
    log_steps: Annotated[int, Field(ge=1)] = Field(
        10, description="training_log.jsonl: mean loss of the last N steps, lr"
    )
    selection: SelectionConfig | None = Field(
        None,
        description="the evaluator that chooses best/ every eval_steps: tasks, metric, split (null: best/ is "
        "the last step's model)",
    )
    test_tasks: Annotated[list[str], BeforeValidator(_one_task)] = Field(
        default_factory=list,
        description="test tasks of results.json, all of one suite, on their test split (the tables' names "
        "STS-B, SICK-R work too; [] = none)",
    )
    keep_checkpoint: bool = Field(False, description="keep OUTPUT_DIR/checkpoint after the run finished")
    mini_batch_size: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description=f"GradCache ({', '.join(grad_cache_objectives())}): the backbone sees M rows at a time, "
        "the loss the whole batch; divides the per-process batch; null = off",
    )
    num_workers: Annotated[int, Field(ge=0)] | None = Field(
        None,
        description="DataLoader processes tokenising and collating batches (0 = the main process); "
        "null = 0 on CPU, on CUDA one per free core, at most 4",
    )
    precision: Literal["fp32", "bf16", "fp16"] = Field(
        "fp32",
        description="fp32 | bf16 (CUDA or CPU) | fp16 (CUDA, loss scaling): the backbone's arithmetic; "
        "similarities, tau and losses stay fp32, the saved model fp32",
    )
    batch_sampler: Literal["shuffle", "no_duplicates"] = Field(
        "shuffle",
        description="shuffle (seed + epoch) | no_duplicates: no text twice in a batch (across its columns)",
    )
    dropout: Literal[DROPOUT_KERNELS] = Field(  # type: ignore[valid-type]
        DROPOUT_KERNELS[0],
        description="how a step draws its dropout masks on the CPU: fast = 16-bit numbers cut from "
        "torch's 64-bit draws (keep rate 1 - p to 2**-17, the expectation exact); torch = torch's own "
        "kernels (one draw per element); CUDA, compile and gradient_checkpointing always use torch's",
    )
    padding: Literal[PADDINGS] = Field(  # type: ignore[valid-type]
        "auto",
        description="how a step's rows (anchor, positive, negatives; a prompt objective's views) meet "
        "the backbone: column = a forward per column, each padded to its own longest row; joint = one "
        "forward padded to the longest row; auto = the rows sorted by length, in the forwards that pad "
        f"fewest tokens at a price of {FORWARD_TOKENS} tokens a forward (one forward, joint, where no cut pays)",
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute the backbone's activations in backward (less memory, same gradients)"
    )
    compile: bool = Field(
        False,
        description="torch.compile the backbone's forward (CUDA: fewer kernel launches; the first steps "
        "compile; dropout masks drawn by the compiled kernels)",
    )
    report_to: Annotated[list[TrackerName], BeforeValidator(_one_task)] = Field(
        default_factory=list,
        description="Accelerate trackers also logging loss, lr and dev score: tensorboard, wandb, ...",
    )

    @model_validator(mode="after")
    def _mini_batch(self) -> TrainingConfig:
        m, batch = self.mini_batch_size, self.batch_size
        if m is not None and (m > batch or batch % m):
            raise ConfigKeyError(
                "training.mini_batch_size",
                f"expected a divisor of training.batch_size {batch} (the per-process batch is cut into "
                f"chunks of it), got {m}",
            )
        return self

    @field_validator("warmup")
    @classmethod
    def _warmup(cls, value: int | float) -> int | float:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"must be at least 0, got {value}")
        if isinstance(value, float) and not 0 <= value <= 1:
            raise ValueError(
                f"a float is a fraction of the steps in [0, 1], got {value} (write an integer for a "
                "number of steps)"
            )
        return value

    @field_validator("test_tasks")
    @classmethod
    def _tasks(cls, tasks: list[str]) -> list[str]:
        """Any task entries (names or table names) of one suite, as canonical names."""
        if not tasks:
            return tasks
        try:  # names the task and lists the known ones
            evaluator = run_evaluator(tasks, None)
        except ProtoembedError as err:
            raise ValueError(str(err)) from None
        if len(evaluator.tasks) > 1:
            per_suite = "; ".join(f"{suite}: {', '.join(names)}" for suite, names in evaluator.tasks.items())
            raise ValueError(
                f"results.json holds the tasks of one suite; these are of {len(evaluator.tasks)} ({per_suite})"
            )
        return evaluator.task_names()


class TrainConfig(ModelSettings):
    """A whole training run: the model's settings (:class:`~protoembed.model_spec.ModelSettings`, the
    fields of :class:`~protoembed.model_spec.ModelSpec` a config sets; ``head`` defaults to the
    objective's own and ``max_seq_length`` is the training inputs' budget), the objective, the data and
    the training."""

    model_config = STRICT

    head: HeadName = Field(
        None,
        description=f"{' | '.join(HEADS)} (default: the objective's own: "
        + ", ".join(f"{name} {entry.options.default_head}" for name, entry in REGISTRY.items())
        + ")",
    )
    max_seq_length: MaxSeqLength = Field(
        32,
        description="training inputs only: sentence tokens (prompt heads; template tokens come on top) / all "
        "tokens (plain heads); evaluation and the saved model keep the base model's own limit",
    )
    objective: ObjectiveConfig = Field(description=f"name ({', '.join(REGISTRY)}), and its options (below)")
    data: DataConfig = Field(description="the training examples")
    training: TrainingConfig = Field(
        default_factory=TrainingConfig, description="optimisation and evaluation"
    )
    output_dir: OptionalText = Field(
        None, description="run folder (required here or as --output-dir)", examples=["runs/NAME"]
    )
    tasks: list[TaskDeclaration] = Field(
        default_factory=list,
        description="evaluation tasks of this run's own, which training.selection and training.test_tasks may name (never registered "
        "for another run): name, kind (pairs | classification | clustering | retrieval | retrieval_pairs), files (split -> path, relative: the working directory if it is there, else the data directory, as data.corpus) and the task's fields",
    )
    _own_tasks: list[Task] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _with_own_tasks(cls, data: Any, handler: ModelWrapValidatorHandler[TrainConfig]) -> TrainConfig:
        """Make the config's own tasks first and validate the rest with them known by name (so that
        ``training.selection`` and ``training.test_tasks`` may name them), registering none: a config's
        tasks are its run's, and a failed validation leaves nothing behind."""
        entries: list[Task] = []
        if isinstance(data, dict) and isinstance(data.get("tasks"), list):
            try:
                declared = [TaskDeclaration.model_validate(t) for t in data["tasks"]]
            except ValidationError:
                declared = []  # the field's own validation names the key and the problem
            try:
                entries = declared_tasks(declared)
            except ProtoembedError as err:
                raise ConfigKeyError("tasks", str(err)) from None
        with tasks_in_scope(entries):
            config = handler(data)
        config._own_tasks = entries
        return config

    def selection_evaluator(self, data_dir: str | None) -> Evaluator | None:
        """The evaluator of ``training.selection`` with this config's own tasks (``None``: no selection,
        ``best/`` is the last step's model)."""
        sel, training = self.training.selection, self.training
        if sel is None:
            return None
        with tasks_in_scope(self._own_tasks):
            return run_evaluator(
                sel.tasks, sel.split, sel.metric, training.eval_variant, data_dir, training.eval_batch_size
            )

    def test_evaluator(self, data_dir: str | None) -> Evaluator | None:
        """The evaluator of ``training.test_tasks`` with this config's own tasks (``None``: no test tasks),
        on the test split: the default split of the suites that take one."""
        training = self.training
        if not training.test_tasks:
            return None
        with tasks_in_scope(self._own_tasks):
            return run_evaluator(
                training.test_tasks, None, None, training.eval_variant, data_dir, training.eval_batch_size
            )

    @model_validator(mode="after")
    def _streaming(self) -> TrainConfig:
        if self.data.streaming and self.training.batch_sampler == "no_duplicates":
            raise ConfigKeyError(
                "training.batch_sampler",
                "no_duplicates needs the whole corpus in memory; with data.streaming: true use "
                "batch_sampler: shuffle",
            )
        return self

    def model_spec(self, **settings: Any) -> ModelSpec:
        """The :class:`~protoembed.model_spec.ModelSpec` of the model a run loads: the config's model
        settings but ``max_seq_length`` (the training inputs' budget, not the model's), with
        ``settings`` (e.g. ``head``, ``device``) on top."""
        shared = {
            name: getattr(self, name) for name in ModelSettings.model_fields if name != "max_seq_length"
        }
        return model_spec(**{**shared, **settings})

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data, objective options flattened as in the YAML."""
        out = self.model_dump()
        out["objective"] = {"name": self.objective.name, **self.objective.options}
        return out


#: The keys a staged config sets once, outside ``stages`` (each stage's output folder and model are derived).
SHARED_ONLY = ("model", "output_dir", "stages")
_STAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class StageConfig(BaseModel):
    """One entry of ``stages:``: its ``name`` and the config keys it sets on top of the shared ones (any
    key of :class:`TrainConfig` but :data:`SHARED_ONLY`, and its own ``base:`` files); those keys are
    validated as a whole run once merged (:func:`protoembed.training.stages.stage_configs`)."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(
        description="the stage's folder under output_dir (letters, digits, _.-); other keys: as above",
        examples=["nli"],
    )

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _STAGE_NAME.match(name):
            raise ValueError(f"expected a folder name (letters, digits, _.-), got {name!r}")
        return name

    @model_validator(mode="after")
    def _not_shared(self) -> StageConfig:
        bad = [key for key in self.model_extra or {} if key in SHARED_ONLY]
        if bad:
            raise ValueError(f"{bad[0]!r} is set once for all stages, outside 'stages'")
        return self

    def keys(self) -> dict[str, Any]:
        """The keys this stage sets (everything but its ``name``)."""
        return dict(self.model_extra or {})


class StagedConfig(BaseModel):
    """A chained run: the shared keys (any of :class:`TrainConfig`'s; not checked here) and ``stages``."""

    model_config = ConfigDict(extra="allow")

    stages: Annotated[list[StageConfig], Field(min_length=1)] = Field(
        description="chained runs, each from the previous one's best/ (output_dir/NAME each)"
    )

    @field_validator("stages")
    @classmethod
    def _distinct(cls, stages: list[StageConfig]) -> list[StageConfig]:
        names = [stage.name for stage in stages]
        for i, name in enumerate(names, 1):
            if name in names[: i - 1]:
                raise ConfigKeyError(
                    f"stages.{i}.name", f"stage {i} ({name!r}): stage names must be distinct", full=True
                )
        return stages
