"""Helpers shared by the CLI commands: consoles, diagnostics printing, exit codes."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.report.wrap import wrap_text

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "dim"}


def stdout_console(file: TextIO | None = None) -> Console:
    """Console for results; ``ADVISOR_WIDTH`` overrides the width (CI logs)."""
    width = int(os.environ["ADVISOR_WIDTH"]) if os.environ.get("ADVISOR_WIDTH", "").isdigit() else None
    return Console(file=file or sys.stdout, width=width, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    width = int(os.environ["ADVISOR_WIDTH"]) if os.environ.get("ADVISOR_WIDTH", "").isdigit() else None
    return Console(stderr=True, width=width, highlight=False)


def print_wrapped(console: Console, text: str, *, lead: str = "", hang: str = "", style: str | None = None) -> None:
    """Print :func:`wrap_text` of ``text`` at the console's width (nothing re-wrapped by rich)."""
    console.print(wrap_text(text, console.width, lead=lead, hang=hang), style=style, markup=False, highlight=False,
                  soft_wrap=True)


def print_diagnostics(sink: DiagnosticSink, *, verbose: bool = False) -> None:
    """Diagnostics to stderr: errors and warnings always, info with ``-v``."""
    err = stderr_console()
    for d in sink:
        if d.severity == Severity.INFO and not verbose:
            continue
        err.print(d.render(), style=_STYLE[d.severity], markup=False, highlight=False, soft_wrap=True)


def check_output_path(output: Path | None) -> None:
    """Refuse an ``--output`` that cannot be written, before any work: one line naming the path (exit 2).

    Beyond the directory existing and the permission bits, a file is really created (and removed)
    beside it: some directories refuse files whatever their mode says (``/proc``, read-only mounts).
    """
    import click

    if output is None:
        return
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise click.UsageError(f"--output {output}: directory {parent} does not exist")
    if output.is_dir():
        raise click.UsageError(f"--output {output} is a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".probe", dir=parent)
    except OSError as exc:
        raise click.UsageError(f"--output {output}: cannot write in {parent}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)


def write_output(text: str, output: Path | None) -> None:
    """Write a machine-format result to ``--output`` (atomically) or stdout.

    A write that fails (disk full, the directory gone or read-only meanwhile) is one line naming
    the path on stderr and exit 2; no partial file is left.
    """
    if output is None:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        return
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        os.replace(tmp, output)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        stderr_console().print(f"advisor: cannot write {output}: {exc.strerror or exc}", style="bold red",
                               markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(2) from None


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)


@dataclass(frozen=True)
class SavedReport:
    """A saved ``analyze --format json`` report, as ``fix --from-report`` and ``compare --report`` use it."""

    findings: list[Any]  # advisor_core.engine.findings.Finding, validated
    inputs: dict[str, Any]  # what identifies the run it was made from; ``{}`` when the report has none


def read_saved_report(path: Path) -> SavedReport:
    """Read and validate a saved JSON report once; a usage error naming the file (and finding) when it is not one."""
    import click

    from advisor_core.engine.findings import Finding

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        raw = data["findings"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.UsageError(f"{path}: not an advisor JSON report ({exc})") from None
    keep = set(Finding.model_fields)
    out = []
    for i, f in enumerate(raw):
        item = {k: v for k, v in f.items() if k in keep}
        if "finding_rank" in f:
            item["rank"] = f["finding_rank"]
        try:
            out.append(Finding.model_validate(item))
        except Exception as exc:  # noqa: BLE001 - pydantic ValidationError; say which finding
            raise click.UsageError(f"{path}: finding {i + 1} is not valid: {exc}") from None
    inputs = data.get("inputs")
    return SavedReport(out, inputs if isinstance(inputs, dict) else {})
