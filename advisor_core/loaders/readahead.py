"""Arrow reads of CSV tables begun ahead, on a thread, and handed to the loader that asks for them.

On a large profile the kernel table's read is the biggest part of an analysis, and
before the first rank asks for it the process spends most of a second importing
pandas, the rules and their models. Arrow parses CSV without holding the interpreter,
so a read begun early overlaps that start-up. :func:`begin` starts
:func:`~advisor_core.loaders.csvtable.read_csv_table` (``arrow=True``) for one file,
table spec and column list; :func:`claim` — called by the CSV loader before it reads —
returns that result (waiting for it if still running) when file, spec and columns are
exactly those, and replays into the caller's sink the diagnostics the read made, at the
point the loader would have made them. Each read is claimed at most once; anything
else reads as before. What to read ahead is the caller's choice (the engine's, see
:mod:`advisor_core.engine.ahead`); this module imports neither pandas nor the
rest of the loaders, so a read can start before they are imported.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from advisor_core.diagnostics import Diagnostic, DiagnosticSink

if TYPE_CHECKING:
    from advisor_core.loaders.csvtable import CsvReadResult, CsvTableSpec

Key = tuple[str, str, tuple[str, ...]]


@dataclass
class _Ahead:
    result: CsvReadResult | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failed: bool = False  # raised: the loader reads again and meets the same error where it always did
    done: threading.Event = field(default_factory=threading.Event)  # this read has ended (or was skipped)
    dropped: bool = False  # discarded: not to be made if its turn has not come (a claimed one still is)


_pending: dict[Key, _Ahead] = {}
_lock = threading.Lock()


def key_of(path: Path, spec: CsvTableSpec, columns: Sequence[str]) -> Key:
    return (os.path.realpath(path), spec.name, tuple(columns))


def begin(path: Path, spec: CsvTableSpec, columns: Sequence[str]) -> Key:
    """Start reading ``columns`` of ``path`` (a ``spec`` table) as Arrow on a thread, on every core; its key.

    A daemon thread, so that an interrupted run does not wait for the read to end. An
    interpreter that tears itself down while Arrow still reads on such a thread crashes:
    a run that ends normally waits for the reads nobody claimed (:func:`discard`), and
    the ``advisor`` process ends without the teardown (:mod:`advisor_core.cli.process_exit`).
    """
    return _begin([(path, spec, columns)], threads=True, name=path.name)[0]


def begin_in_turn(reads: Sequence[tuple[Path, CsvTableSpec, Sequence[str]]]) -> list[Key]:
    """Start the ``reads`` (file, spec, columns) one after another on one thread that uses one core; their keys.

    For reads that overlap work this process does on another core meanwhile (its start-up): on every
    core they would take that core from it. Each is claimed as soon as it has ended; a read discarded
    before its turn is not made. Otherwise as :func:`begin`.
    """
    return _begin(reads, threads=False, name=f"{len(reads)}-in-turn") if reads else []


def _begin(reads: Sequence[tuple[Path, CsvTableSpec, Sequence[str]]], *, threads: bool, name: str) -> list[Key]:
    keys = [key_of(path, spec, columns) for path, spec, columns in reads]

    def read_each() -> None:
        try:
            from advisor_core.loaders.csvtable import read_csv_table

            for ahead, (path, spec, columns) in zip(aheads, reads):
                with _lock:
                    if ahead.dropped:  # discarded before its turn (claimed is not dropped: the claimer waits)
                        ahead.done.set()
                        continue
                sink = DiagnosticSink()
                try:
                    ahead.result = read_csv_table(path, spec, list(columns), sink, what=path.name, arrow=True,
                                                  threads=threads)
                except Exception:  # noqa: BLE001 - the loader's own read reports it, where it always did
                    ahead.failed = True
                ahead.diagnostics = list(sink)
                ahead.done.set()
        finally:  # whatever ended this thread, no one waits for a read it will not make
            for ahead in aheads:
                if not ahead.done.is_set():
                    ahead.failed = True
                    ahead.done.set()

    aheads = [_Ahead() for _ in keys]
    thread = threading.Thread(target=read_each, name=f"advisor-readahead-{name}", daemon=True)
    with _lock:
        _pending.update(zip(keys, aheads))
    thread.start()
    return keys


@dataclass(frozen=True)
class Claimed:
    """A read begun ahead: what :func:`~advisor_core.loaders.csvtable.read_csv_table` returned (``None`` included)."""

    result: CsvReadResult | None


def claim(path: Path, spec: CsvTableSpec, columns: Sequence[str] | None, sink: DiagnosticSink) -> Claimed | None:
    """The read begun for exactly this file, spec and column list (its diagnostics put in ``sink``);
    ``None`` when there is none (or it raised): the caller reads."""
    if columns is None or not _pending:
        return None
    with _lock:
        ahead = _pending.pop(key_of(path, spec, columns), None)
    if ahead is None:
        return None
    ahead.done.wait()
    if ahead.failed:
        return None
    sink.extend(ahead.diagnostics)
    return Claimed(ahead.result)


def discard(keys: Sequence[Key], *, wait: bool = True) -> None:
    """Forget reads nobody claimed (their tables are freed), once they have ended (``wait=False``: at once,
    for a run that is being interrupted)."""
    with _lock:
        left = [a for a in (_pending.pop(k, None) for k in keys) if a is not None]
        for ahead in left:
            ahead.dropped = True
    for ahead in left if wait else ():
        ahead.done.wait()


def pending_paths() -> set[str]:
    """The files (real paths) with a read begun and not yet claimed."""
    with _lock:
        return {k[0] for k in _pending}


def wait_all() -> None:
    """Wait until every read begun has ended (their results stay to be claimed): before this process forks,
    so that no Arrow read is running in it, and a forked worker inherits finished tables it can claim."""
    with _lock:
        running = list(_pending.values())
    for ahead in running:
        ahead.done.wait()


def discard_paths(paths: Sequence[str]) -> None:
    """Forget the reads of these files (real paths): another process claims them (a forked worker)."""
    wanted = set(paths)
    with _lock:
        keys = [k for k in _pending if k[0] in wanted]
    discard(keys, wait=False)
