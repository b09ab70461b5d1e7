"""An objective planned once: its name and options -> :class:`ObjectivePlan` (parsed options, head,
columns), before the objective, the embedder or torch exist.

:func:`plan_objective` is the one place that looks an objective up by its registry name. The plan it
returns is what every later step reads: config validation (the parsed options and their errors), the
embedder's head (:attr:`ObjectivePlan.head`), the check of the training data (:attr:`ObjectivePlan.columns`)
and building the objective (:meth:`ObjectivePlan.build`, with the run's seed for an objective that has
a ``seed`` option). Planning imports no torch: the options models and the head and column rules are
declared in :mod:`protoembed.objectives.registry`; the objective class itself
(:attr:`ObjectivePlan.objective_class`) is imported only to build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import ColumnSpec
from protoembed.objectives.registry import ObjectiveOptions, objective_class, options_class

if TYPE_CHECKING:
    from protoembed.model.embedder import Embedder
    from protoembed.objectives.base import Objective


@dataclass(frozen=True)
class ObjectivePlan:
    """What a run knows of its objective before building it.

    Attributes:
        name: the registry name (or a name given with its own options model, see :func:`plan_objective`).
        options: the parsed options (every option, defaults filled in).
        given: the option names the caller set (a config writes back only these).
        head: the embedder head the objective trains when the config names none; ``None`` for an
            objective outside the registry (the model's own head).
        columns: the columns a batch must have (a tuple inside: one of those alternatives).
        registered: whether ``name`` is a registered objective (only those can be built here).
    """

    name: str
    options: ObjectiveOptions
    given: frozenset[str]
    head: str | None
    columns: ColumnSpec
    registered: bool = True

    @property
    def objective_class(self) -> type[Objective]:
        """The objective class (its module imported on first use: torch).

        Raises:
            ProtoembedError: the objective is outside the registry.
        """
        if not self.registered:
            raise ProtoembedError(
                f"objective {self.name!r} is not registered: build it with your own objective factory"
            )
        return objective_class(self.name)

    def given_options(self) -> dict[str, Any]:
        """The options the caller set, parsed (``1e-5`` as a float): what a config records."""
        return self.options.model_dump(include=set(self.given))

    def build(
        self,
        embedder: Embedder,
        *,
        max_seq_length: int | None = None,
        seed: int | None = None,
        padding: str | None = None,
    ) -> Objective:
        """The objective around ``embedder`` with these options.

        Args:
            embedder: the model to train (its head must suit the objective).
            max_seq_length: truncation of the training inputs (default: the embedder's own).
            seed: the run's seed, used for a ``seed`` option the caller did not set (ConPVP's template
                draws), so that the seeds of a study vary every random choice; ``None``: the option's
                default.
            padding: how a step's columns meet the backbone (``training.padding``,
                :func:`~protoembed.objectives.views.segments`), for an objective that builds views;
                ``None``: ``auto``.
        Raises:
            ProtoembedError: an objective outside the registry, or an unsuitable head.
        """
        from protoembed.objectives.views import ViewBuilder

        options = self.options
        if seed is not None and "seed" in type(options).model_fields and "seed" not in self.given:
            options = options.model_copy(update={"seed": seed})
        objective = self.objective_class(embedder, options, max_seq_length=max_seq_length)
        views = getattr(objective, "views", None)
        if padding is not None and isinstance(views, ViewBuilder):
            views.padding = padding
        return objective


def plan_objective(
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    options_model: type[ObjectiveOptions] | None = None,
) -> ObjectivePlan:
    """Plan the objective ``name`` with raw ``options`` (no torch).

    Args:
        name: a registered objective (``simcse``, ``conpvp``, ``cross_encoder``, ...).
        options: its options as a config or a caller gives them (unknown keys are errors).
        options_model: the options model of an objective outside the registry (a run given its own
            objective factory); its plan has no head (the model's own) and cannot :meth:`~ObjectivePlan.build`.
    Returns:
        the plan: parsed options, the head, the columns.
    Raises:
        ProtoembedError: an unknown objective; :class:`~protoembed.objectives.registry.OptionError` for
            an unknown option or a bad value (naming the option).
    """
    options = dict(options or {})
    model = options_model or options_class(name)
    parsed = model.parse(name, options)
    registered = options_model is None
    return ObjectivePlan(
        name=name,
        options=parsed,
        given=frozenset(options),
        head=parsed.trained_head() if registered else None,
        columns=parsed.needed_columns(),
        registered=registered,
    )
