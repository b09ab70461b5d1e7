"""One shape for every table of named things in the package: :class:`Registry`, name -> entry.

The heads (:data:`protoembed.model.heads.HEADS`), the runtimes (:data:`protoembed.model.runtimes.RUNTIMES`),
the objectives (:data:`protoembed.objectives.registry.REGISTRY`), the training-data formats
(:data:`protoembed.data.training.formats.FORMATS`), the datasets
(:data:`protoembed.data.download.registry.DATASETS`), the evaluation suites
(:data:`protoembed.evaluation.suite.SUITES`) and the evaluation tasks (:data:`protoembed.evaluation.tasks.TASKS`)
are each one :class:`Registry`:

- a mapping from name to entry, iterated in registration order (``--help``'s order, the tables' order);
- :meth:`Registry.register` adds an entry under its name; a name already there is refused with the one
  message of :meth:`Registry.duplicate`, unless ``replace``;
- :meth:`Registry.lookup` gives the entry of a name; an unknown one is refused with the one message of
  :meth:`Registry.unknown`, which lists the choices;
- ``builtin``: a function making the built-in entries, called on first use, for a table whose entries
  are checked against other tables or come from what its module must not import when it is imported.

Setting or deleting a key directly (``registry[name] = entry``, ``del registry[name]``, what
``monkeypatch.setitem`` does) is the plain mapping: no check. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import TypeVar

from protoembed.core.errors import ProtoembedError

T = TypeVar("T")


class Registry(MutableMapping[str, T]):
    """Name -> entry, in registration order.

    Args:
        kind: what an entry is, as the messages name it (``head``, ``runtime``, ``data format``...).
        entries: the first entries: a mapping name -> entry, or entries that carry their ``name``.
        builtin: a function returning entries (each carrying its ``name``), registered on first use of the
            registry (after ``entries``).

    Raises:
        ProtoembedError: two of ``entries`` share a name.
    """

    def __init__(
        self,
        kind: str,
        entries: Mapping[str, T] | Iterable[T] = (),
        *,
        builtin: Callable[[], Iterable[T]] | None = None,
    ) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._builtin: Callable[[], Iterable[T]] | None = None
        if isinstance(entries, Mapping):
            for name, entry in entries.items():
                self.register(entry, name=name)
        else:
            for entry in entries:
                self.register(entry)
        self._builtin = builtin

    @property
    def _data(self) -> dict[str, T]:
        """The entries, the built-in ones made first if they are not yet (once: a failure is not retried)."""
        if self._builtin is not None:
            builtin, self._builtin = self._builtin, None
            for entry in builtin():
                self.register(entry)
        return self._entries

    def register(self, entry: T, *, name: str | None = None, replace: bool = False) -> T:
        """Add ``entry`` under ``name`` (default: the entry's own ``name``), last in the order (a replaced
        entry keeps its place); returns it.

        Raises:
            ProtoembedError: the name is taken and ``replace`` is false (:meth:`duplicate`).
        """
        key = _name_of(entry) if name is None else name
        entries = self._data
        if key in entries and not replace:
            raise ProtoembedError(self.duplicate(key))
        entries[key] = entry
        return entry

    def lookup(self, name: str) -> T:
        """The entry registered as ``name``.

        Raises:
            ProtoembedError: no entry has that name (:meth:`unknown`).
        """
        try:
            return self._data[name]
        except (KeyError, TypeError):
            raise ProtoembedError(self.unknown(name)) from None

    def unknown(self, name: object, choices: Iterable[str] | None = None, *, scope: str = "") -> str:
        """The message of a name that is not registered: ``unknown head 'x': expected one of cls, mean, ...``.

        Args:
            name: the name asked for.
            choices: the names to list (default: the registered ones, in order).
            scope: words after the name that narrow the choices (``" of suite sts"``).
        """
        listed = ", ".join(self if choices is None else choices)
        return f"unknown {self.kind} {name!r}{scope}: expected one of {listed}"

    def duplicate(self, name: str) -> str:
        """The message of a name registered twice."""
        return (
            f"{self.kind} {name!r} is already registered; give another name (or, from Python, replace=True)"
        )

    def __getitem__(self, name: str) -> T:
        return self._data[name]

    def __setitem__(self, name: str, entry: T) -> None:
        self._data[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)}{', builtin pending' if self._builtin else ''})"


def _name_of(entry: object) -> str:
    """An entry's own ``name``."""
    name = getattr(entry, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{type(entry).__name__} entry has no name: register it with name=...")
    return name
