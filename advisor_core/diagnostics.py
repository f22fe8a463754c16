"""Diagnostics: what went wrong with an input, said once, with the file and place.

Every layer that reads user input reports problems through a :class:`DiagnosticSink`
instead of raising, so one bad file never stops the rest of a run. A diagnostic
names the file, optionally a line/column or a key (a CSV column, a JSON key, a
YAML key path), and says in plain words what is wrong.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Iterable, Iterator

from pydantic import BaseModel, ConfigDict


class Severity(str, Enum):
    """How bad a diagnostic is.

    ``error``: the input (or part of it) could not be used.
    ``warning``: it was used, but something was guessed or repaired.
    ``info``: a fact worth knowing (an optional file is absent, a choice was made).
    """

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Diagnostic(BaseModel):
    """One problem with one input."""

    model_config = ConfigDict(frozen=True)

    severity: Severity
    code: str
    message: str
    path: str | None = None
    line: int | None = None
    column: int | None = None
    key: str | None = None

    def location(self) -> str:
        """``file:line:column`` (or ``file [key]``), whatever is known."""
        if self.path is None:
            return ""
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        if self.key is not None:
            loc += f" [{self.key}]"
        return loc

    def render(self) -> str:
        """One line for a terminal or a log."""
        where = self.location()
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.severity.value}: {self.message}"


class DiagnosticSink:
    """Collects diagnostics in the order they were raised.

    Duplicates (same severity, code, path, line, key and message) are kept once:
    the same broken file may be touched by several readers.
    """

    def __init__(self) -> None:
        self._items: list[Diagnostic] = []
        self._seen: set[tuple] = set()

    def _first_time(self, diagnostic: Diagnostic) -> bool:
        """Is this the first time ``diagnostic`` is said (same severity, code, place and message)? Remembers it."""
        ident = (
            diagnostic.severity,
            diagnostic.code,
            diagnostic.path,
            diagnostic.line,
            diagnostic.key,
            diagnostic.message,
        )
        if ident in self._seen:
            return False
        self._seen.add(ident)
        return True

    def add(self, diagnostic: Diagnostic) -> Diagnostic:
        if self._first_time(diagnostic):
            self._items.append(diagnostic)
        return diagnostic

    def _make(
        self,
        severity: Severity,
        code: str,
        message: str,
        path: str | Path | None,
        line: int | None,
        column: int | None,
        key: str | None,
    ) -> Diagnostic:
        return self.add(
            Diagnostic(
                severity=severity,
                code=code,
                message=message,
                path=str(path) if path is not None else None,
                line=line,
                column=column,
                key=key,
            )
        )

    def error(
        self,
        code: str,
        message: str,
        path: str | Path | None = None,
        *,
        line: int | None = None,
        column: int | None = None,
        key: str | None = None,
    ) -> Diagnostic:
        return self._make(Severity.ERROR, code, message, path, line, column, key)

    def warning(
        self,
        code: str,
        message: str,
        path: str | Path | None = None,
        *,
        line: int | None = None,
        column: int | None = None,
        key: str | None = None,
    ) -> Diagnostic:
        return self._make(Severity.WARNING, code, message, path, line, column, key)

    def info(
        self,
        code: str,
        message: str,
        path: str | Path | None = None,
        *,
        line: int | None = None,
        column: int | None = None,
        key: str | None = None,
    ) -> Diagnostic:
        return self._make(Severity.INFO, code, message, path, line, column, key)

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        for d in diagnostics:
            self.add(d)

    def mark(self) -> int:
        """Where the next diagnostic goes: for :meth:`insert_at`, by something said later that belongs here."""
        return len(self._items)

    def insert_at(self, mark: int, diagnostics: Iterable[Diagnostic]) -> None:
        """Put ``diagnostics`` (those not said yet) where :meth:`mark` was taken, before what came after it."""
        self._items[mark:mark] = [d for d in diagnostics if self._first_time(d)]

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        # A sink is an object, not a container to test for emptiness: an empty
        # sink must not be replaced by ``sink or DiagnosticSink()``.
        return True

    @property
    def items(self) -> list[Diagnostic]:
        return list(self._items)

    def of(self, severity: Severity) -> list[Diagnostic]:
        return [d for d in self._items if d.severity == severity]

    @property
    def has_errors(self) -> bool:
        return any(d.severity == Severity.ERROR for d in self._items)

    def for_path(self, path: str | Path) -> list[Diagnostic]:
        p = str(path)
        return [d for d in self._items if d.path == p]
