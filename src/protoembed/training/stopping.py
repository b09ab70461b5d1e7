"""Stopping a run cleanly: SIGTERM becomes a request the trainer honours between two steps.

:class:`StopRequest` installs a SIGTERM handler for the duration of a run (in the main thread only, where
Python delivers signals) that records the signal instead of ending the process; the trainer asks
:meth:`StopRequest.requested` before every step (one process), or after every logging and evaluation
step (several: a collective over the processes, so all of them stop after the same step) and raises :class:`TrainingInterrupted`, keeping its last checkpoint.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType, TracebackType

import torch

from protoembed.core.errors import ProtoembedError


class TrainingInterrupted(ProtoembedError):
    """A run stopped by a signal between two steps; it can be resumed from its last checkpoint.

    Attributes:
        step: steps done when it stopped.
        checkpoint_step: step of the checkpoint a resumed run starts from (``None``: none was written).
        output_dir: the run folder.
        main_process: whether this process is the main one (the one that reports).
    """

    def __init__(
        self, message: str, step: int, checkpoint_step: int | None, output_dir: Path, main_process: bool
    ) -> None:
        super().__init__(message)
        self.step, self.checkpoint_step = step, checkpoint_step
        self.output_dir, self.main_process = output_dir, main_process


class StopRequest:
    """Context manager: while active, SIGTERM sets :attr:`signal_name` instead of ending the process."""

    def __init__(self) -> None:
        #: name of the stop signal received (``"SIGTERM"``), or ``None``.
        self.signal_name: str | None = None
        self._previous: signal.Handlers | None = None
        self._installed = False

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # signal handlers live there only
            self._previous = signal.signal(signal.SIGTERM, self._record)
            self._installed = True
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.signal_name = signal.Signals(signum).name

    def requested(self, accelerator) -> str | None:
        """The signal that asks to stop, in this or any other process (collective), or ``None``."""
        stop = self.signal_name is not None
        if accelerator.num_processes > 1:
            flag = torch.tensor([float(stop)], device=accelerator.device)
            stop = bool(accelerator.reduce(flag, reduction="sum").item() > 0)
        if not stop:
            return None
        return self.signal_name or "a stop signal (in another process)"
