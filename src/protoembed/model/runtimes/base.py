"""What a runtime is: a :class:`RuntimeSpec`, one entry of :data:`protoembed.model.runtimes.RUNTIMES`.

A runtime runs a model's forward pass behind the one ``encode`` of :mod:`protoembed.model.batching`. Its entry
declares everything the rest of the package asks of it: its name (``--runtime``), the labels messages and
model cards print, the export format it writes (``--format``, if any) and the formats it runs, how it
opens an export folder, the precisions it runs, its rule for ``--runtime auto`` and the optional
packages it needs. Like a head's pooling factory, its code is named by import path
(``"module:function"``), so the registry (and ``--help``) imports neither torch nor the runtime.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protoembed.core.errors import ProtoembedError, missing_package

if TYPE_CHECKING:
    from pathlib import Path

    from protoembed.model.encoder import PromptEncoder
    from protoembed.model.export.runtime import ExportedEmbedder


def resolve(target: str | Callable[..., Any]) -> Callable[..., Any]:
    """A ``"module:function"`` path (imported now) or a callable, as the callable."""
    if callable(target):
        return target
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


@dataclass(frozen=True)
class RuntimeSpec:
    """Recipe for one runtime.

    Attributes:
        name: registry name, as ``--runtime`` and results files spell it (its key in ``RUNTIMES``).
        label: how messages and logs name it (``ONNX Runtime``).
        description: one line for ``--help``.
        library_name: the Hugging Face ``library_name`` of a model card of a folder it wrote (the torch
            runtime: a saved model; the others: an export in their :attr:`format`).
        format: the export format its writer writes (``--format``, the ``format`` of
            ``protoembed_export.json``); ``None``: it writes none.
        format_label: how a model card names that format (``ONNX`` -> row ``ONNX export``).
        format_help: one line for ``export --format``'s help: the files it writes.
        format_version: the export format version a reader needs for a folder in :attr:`format`.
        quantize_help: what ``--quantize int8`` does in :attr:`format`, for ``export --quantize``'s help.
        writer: ``"module:function"`` ``(model, folder, with_states, *, quantize, optimize, calibration)
            -> (inputs, outputs, config entries)`` writing the graph of :attr:`format` into ``folder``.
        calibration: ``"module:function"`` ``(texts, a file of them, or None; data_dir) -> sentences`` for
            an int8 export that calibrates on text; ``None``: its int8 export reads no text.
        reads: the export formats it runs (none: it runs torch models only).
        loader: ``"module:function"`` ``(root, config, encoder, normalize, threads, precision) ->
            ExportedEmbedder`` opening an export folder; ``None`` for the torch runtime.
        precisions: the precisions it runs an fp32 export (or a torch model) in when asked; an int8
            export runs in int8 only, whatever the runtime.
        default_precision: ``"module:function"`` ``() -> precision`` it runs an fp32 export in when none
            is asked, on this machine; ``None``: fp32.
        auto_priority: the order ``--runtime auto`` tries the runtimes that read a folder's format
            (highest first).
        auto_when: ``"module:function"`` ``(spec, export config) -> bool``: whether ``auto`` picks it
            for that folder; ``None``: always. When no reader's rule holds, ``auto`` picks the first.
        auto_help: when ``auto`` picks it, for ``--help``.
        extra: the pip extra of protoembed that installs :attr:`requires`.
        requires: modules it imports (checked by :meth:`require` / :meth:`available`).
    """

    name: str
    label: str
    description: str
    library_name: str
    format: str | None = None
    format_label: str = ""
    format_help: str = ""
    format_version: int = 1
    quantize_help: str = ""
    writer: str | Callable[..., Any] | None = None
    calibration: str | Callable[..., Any] | None = None
    reads: tuple[str, ...] = ()
    loader: str | Callable[..., Any] | None = None
    precisions: tuple[str, ...] = ("fp32",)
    default_precision: str | Callable[..., Any] | None = None
    auto_priority: int = 0
    auto_when: str | Callable[..., Any] | None = None
    auto_help: str = ""
    extra: str | None = None
    requires: tuple[str, ...] = ()

    @property
    def runs_exports(self) -> bool:
        """True if it opens export folders (every runtime but torch)."""
        return self.loader is not None

    def missing(self) -> str | None:
        """The first module of :attr:`requires` that cannot be imported, else ``None``."""
        for module in self.requires:
            try:
                importlib.import_module(module)
            except ImportError:
                return module
        return None

    def available(self) -> bool:
        """True if every module of :attr:`requires` can be imported."""
        return self.missing() is None

    def require(self) -> None:
        """Raise a one-line :class:`ProtoembedError` with the pip command when a required module is
        missing."""
        missing = self.missing()
        if missing is not None:
            raise missing_package(self.label, missing, str(self.extra))

    def runs_in(self, config: dict[str, Any]) -> str:
        """The precision it runs an export with ``config`` in when none is asked, on this machine: the
        export's quantisation (``int8``), else :attr:`default_precision`'s answer, else ``fp32``."""
        if config.get("quantize"):
            return str(config["quantize"])
        return "fp32" if self.default_precision is None else str(resolve(self.default_precision)())

    def picked_by_auto(self, config: dict[str, Any]) -> bool:
        """Whether ``--runtime auto`` picks this runtime for an export with ``config`` (see
        :attr:`auto_when`)."""
        return self.auto_when is None or bool(resolve(self.auto_when)(self, config))

    def load(
        self,
        root: Path,
        config: dict[str, Any],
        encoder: PromptEncoder,
        normalize: bool,
        threads: int | None,
        precision: str | None,
    ) -> ExportedEmbedder:
        """The export folder ``root`` (its ``config``, tokenisation ``encoder``) opened on this runtime:
        its packages checked, then :attr:`loader` called."""
        if self.loader is None:
            raise ProtoembedError(f"runtime {self.name!r} runs torch models only")
        self.require()
        return resolve(self.loader)(root, config, encoder, normalize, threads, precision)

    def calibrate(
        self, texts: Sequence[str] | str | os.PathLike | None, data_dir: str | os.PathLike | None
    ) -> list[str]:
        """The sentences an int8 export in :attr:`format` calibrates on (see :attr:`calibration`)."""
        if self.calibration is None:
            raise ProtoembedError(f"an int8 {self.format} export reads no calibration text")
        return resolve(self.calibration)(texts, data_dir)

    def write(self, model: Any, folder: Path, with_states: bool, **options: Any) -> tuple[list, list, dict]:
        """Write ``model``'s graph in :attr:`format` into ``folder`` (see :attr:`writer`)."""
        if self.writer is None:
            raise ProtoembedError(f"runtime {self.name!r} writes no export format")
        return resolve(self.writer)(model, folder, with_states, **options)
