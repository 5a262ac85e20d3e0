"""Progress on stderr: a rich bar with documents/s and ETA on a terminal, plain periodic lines
otherwise (logs, CI), nothing when disabled."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress

PLAIN_EVERY = 10.0  # seconds between plain progress lines


class Progress:
    def __init__(
        self, total: int, enabled: bool | None = None, label: str = "deciding", unit: str = "docs"
    ) -> None:
        self.total, self.done, self.label, self.unit, self.status = total, 0, label, unit, ""
        self.started = self.last_line = time.monotonic()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.terminal = self.enabled and sys.stderr.isatty()
        self._rich: RichProgress | None = None
        if self.terminal:
            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]} " + unit + "/s"),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._task = self._rich.add_task(label, total=total, rate="-", status="")
            self._rich.start()

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def advance(self, n: int = 1, status: str = "") -> None:
        self.done += n
        self.status = status
        if self._rich is not None:
            self._rich.update(self._task, advance=n, rate=f"{self.rate():.1f}", status=status)
        elif self.enabled and time.monotonic() - self.last_line >= PLAIN_EVERY:
            self.last_line = time.monotonic()
            self._line()

    def _line(self) -> None:
        rate = self.rate()
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta = f"{left:.0f}s" if left == left else "?"
        status = f", {self.status}" if self.status else ""
        print(
            f"{self.label}: {self.done}/{self.total} {self.unit}, {rate:.1f} {self.unit}/s, "
            f"ETA {eta}{status}",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
        elif self.enabled and self.done:
            self._line()
