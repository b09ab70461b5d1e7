"""Progress of a long loop on stderr: the sentences of encode, eval and corpus encoding, the bytes of a
download, the steps of training.

On a terminal, a tqdm bar: the count, its rate (``sentences/s``) and the time left. Elsewhere (CI, a pipe,
a log file), where a bar would be a stream of carriage returns, one line every :data:`LINE_EVERY`
seconds::

    Encoding: 12,800/18,850 sentences (1,020/s, 6 s left)
    Training: 120/500 steps (6.63/s, 57 s left); loss 0.4123, dev 78.12, 51,200 tokens/s

(bytes: ``wiki.txt: 12.5 MB/120.0 MB (4.1 MB/s, 26 s left)``; without a known total, the count
and the rate)
and a last line when the loop ends, only when a line was written before (a loop shorter than
:data:`LINE_EVERY` writes nothing). Like the bar, the lines go to stderr: they are the bar's form in a
log, never a command's output.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

#: Seconds between two progress lines when stderr is not a terminal.
LINE_EVERY = 10.0
#: The unit counted in bytes (shown by :func:`format_size`: B, KB, MB, GB).
BYTES = "B"


def format_size(n: int, exact: bool = True) -> str:
    """``n`` bytes for people (a download's size in ``protoembed data list``, a progress line), in powers of 1000: ``512 B``, ``156.1 KB``, ``1.3 MB``; approximate
    (``exact`` False): ``~`` and whole units from 10 up (``~95 MB``, ``~1.7 MB``)."""
    value, unit = float(n), "B"
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            break
        value /= 1000
    if unit == "B":
        text = f"{n} B"
    else:
        text = f"{value:.0f} {unit}" if not exact and value >= 10 else f"{value:.1f} {unit}"
    return text if exact else f"~{text}"


def _amount(value: float, unit: str) -> str:
    """``12,800`` (any unit), ``12.5 MB`` (:data:`BYTES`: :func:`format_size`)."""
    return format_size(round(value)) if unit == BYTES else f"{value:,.0f}"


def _seconds(value: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 5 min``."""
    value = int(round(value))
    if value < 60:
        return f"{value} s"
    if value < 3600:
        return f"{value // 60} min {value % 60} s"
    return f"{value // 3600} h {value % 3600 // 60} min"


class Progress:
    """Progress of ``total`` items (``unit``: ``sentences``) on ``stream`` (default: stderr), from
    ``initial`` already done (a resumed run). Use as a context manager and call :meth:`update` with the
    items each step finished.

    Args:
        total: the items the loop will have done at its end (``None``: not known).
        desc: what the loop does (``Encoding``), the start of the bar and of each line.
        unit: what it counts, plural; :data:`BYTES` for bytes.
        initial: items done before this run (not counted in the rate).
        show: ``False``: nothing at all.
        every: seconds between two lines when ``stream`` is not a terminal (default: :data:`LINE_EVERY`).
        stream: where to write (default: ``sys.stderr`` when created).
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        total: int | None,
        desc: str = "Encoding",
        unit: str = "sentences",
        initial: int = 0,
        show: bool = True,
        every: float | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.desc, self.unit, self.done = total, desc, unit, initial
        self.stream = sys.stderr if stream is None else stream
        self.every = LINE_EVERY if every is None else every
        self.clock = clock
        self.initial = initial
        self.started = self.last = clock()
        self.lines = 0
        self.bar: Any = None
        self.show = show
        self._status = ""
        if show and _isatty(self.stream):
            from tqdm.auto import tqdm

            scale: dict[str, Any] = (
                {"unit": BYTES, "unit_scale": True, "unit_divisor": 1024}
                if unit == BYTES
                else {"unit": f" {unit}"}
            )
            self.bar = tqdm(total=total, initial=initial, desc=desc, file=self.stream, **scale)

    @property
    def status(self) -> str:
        """What the loop reports besides the counts (training: ``loss 0.4123, dev 78.12, ...``), after
        the bar or at the end of each line; empty: nothing."""
        return self._status

    @status.setter
    def status(self, text: str) -> None:
        self._status = text
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)

    def update(self, n: int) -> None:
        """``n`` more items done: the bar moves, or a line is written if :attr:`every` seconds passed
        since the last one (``n`` 0: nothing)."""
        if n <= 0:
            return
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.show and self.clock() - self.last >= self.every:
            self._line(final=False)

    def line(self, final: bool = False) -> str:
        """The progress line now: ``<desc>: <done>/<total> <unit> (<rate>/s, <time> left)``, at the end
        ``(<rate>/s, <time> in all)``; without a total, ``<done> <unit> (<rate>/s)``; then ``; <status>``
        when :attr:`status` is set. A rate under 10 keeps three significant digits (``6.63/s``)."""
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = (self.done - self.initial) / elapsed
        if self.unit == BYTES:
            done = _amount(self.done, BYTES)
            done += f"/{_amount(self.total, BYTES)}" if self.total is not None else ""
            speed = f"{_amount(rate, BYTES)}/s"
        else:
            done = f"{self.done:,}" + (f"/{self.total:,}" if self.total is not None else "") + f" {self.unit}"
            speed = f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.3g}/s"
        if final:
            tail = f", {_seconds(elapsed)} in all"
        elif self.total is None:
            tail = ""
        elif rate > 0:
            tail = f", {_seconds((self.total - self.done) / rate)} left"
        else:
            tail = ", starting"
        return f"{self.desc}: {done} ({speed}{tail})" + (f"; {self._status}" if self._status else "")

    def _line(self, final: bool) -> None:
        print(self.line(final), file=self.stream, flush=True)
        self.last = self.clock()
        self.lines += 1

    def close(self, finished: bool = True) -> None:
        """End the bar, or write the last line if lines were written and the loop ``finished``."""
        if self.bar is not None:
            self.bar.close()
        elif self.show and self.lines and finished:
            self._line(final=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.close(finished=kind is None)  # an error or Ctrl-C: no "in all" line


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
