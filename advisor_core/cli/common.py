"""Helpers shared by the CLI commands: consoles, diagnostics printing, exit codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from advisor_core.diagnostics import DiagnosticSink, Severity

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "dim"}


def stdout_console(file: TextIO | None = None) -> Console:
    """Console for results; ``ADVISOR_WIDTH`` overrides the width (CI logs)."""
    width = int(os.environ["ADVISOR_WIDTH"]) if os.environ.get("ADVISOR_WIDTH", "").isdigit() else None
    return Console(file=file or sys.stdout, width=width, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    width = int(os.environ["ADVISOR_WIDTH"]) if os.environ.get("ADVISOR_WIDTH", "").isdigit() else None
    return Console(stderr=True, width=width, highlight=False)


def print_diagnostics(sink: DiagnosticSink, *, verbose: bool = False) -> None:
    """Diagnostics to stderr: errors and warnings always, info with ``-v``."""
    err = stderr_console()
    for d in sink:
        if d.severity == Severity.INFO and not verbose:
            continue
        err.print(d.render(), style=_STYLE[d.severity], markup=False, highlight=False, soft_wrap=True)


def write_output(text: str, output: Path | None) -> None:
    """Write a machine-format result to ``--output`` (atomically) or stdout."""
    if output is None:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        return
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    tmp.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    os.replace(tmp, output)


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)
