"""A progress display on stderr for long analyses: ranks analysed, rules run.

Silent unless stderr is a terminal and the run lasts longer than :data:`DELAY_S` (a
short run prints nothing extra); ``--quiet`` switches it off. The engine reports
``(phase, done, total)``; the display shows one bar per phase and disappears when
the analysis ends.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

DELAY_S = 1.0
_LABELS = {"ranks": "ranks analysed", "rules": "rules run"}

# Displays entered and not yet exited. A fork (the analysis forks its worker processes) waits until none of
# them is writing: a worker forked in the middle of a write would inherit stderr's lock taken, and hang on
# it when it flushes its streams at exit.
_OPEN: list["RunProgress"] = []
_HELD: list[Any] = []


def _hold_writers() -> None:
    for display in list(_OPEN):
        for lock in display._write_locks():
            lock.acquire()
            _HELD.append(lock)


def _release_writers() -> None:
    while _HELD:
        _HELD.pop().release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_hold_writers, after_in_parent=_release_writers, after_in_child=_release_writers)


class RunProgress:
    """Callable progress sink for :meth:`advisor_core.engine.session.Session.analyze` (use as a context manager)."""

    def __init__(self, console: Any, enabled: bool = True) -> None:
        self._console = console
        self._enabled = enabled and bool(getattr(console, "is_terminal", False))
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._state: dict[str, tuple[int, int]] = {"inputs": (0, 0)}
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._started = time.perf_counter()

    def __enter__(self) -> "RunProgress":
        if self._enabled:
            _OPEN.append(self)
            self._timer = threading.Timer(DELAY_S, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._enabled = False
            if self._timer is not None:
                self._timer.cancel()
            if self._progress is not None:
                self._progress.stop()
                self._progress = None
        if self in _OPEN:
            _OPEN.remove(self)

    def _write_locks(self) -> list[Any]:
        """The locks held while this display writes, in the order its writers take them: its own (showing,
        updating), rich's refresh thread's, then the console's (every write to the terminal, the display's
        and what other threads print through it)."""
        locks: list[Any] = [self._lock]
        live = getattr(self._progress, "live", None)
        if live is not None and hasattr(live, "_lock"):
            locks.append(live._lock)
        console_lock = getattr(self._console, "_lock", None)
        if console_lock is not None:
            locks.append(console_lock)
        return locks

    def __call__(self, phase: str, done: int, total: int) -> None:
        with self._lock:
            self._state.pop("inputs", None)
            self._state[phase] = (done, total)
            if self._progress is not None:
                self._update(phase)

    def _show(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self._lock:
            if not self._enabled or self._progress is not None:
                return
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), console=self._console, transient=True)
            self._progress.start()
            for phase in self._state:
                self._update(phase)

    def _update(self, phase: str) -> None:
        done, total = self._state[phase]
        if phase not in self._tasks:
            label = _LABELS.get(phase, "reading inputs")
            self._tasks[phase] = self._progress.add_task(label, total=total or None)
        self._progress.update(self._tasks[phase], completed=done, total=total or None)
