"""Shared helpers for the IR parser tests: where the real dumps are, cached parsing."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.ir.model import IRFile
from advisor_core.ir.parser import parse_ir_file

ROOT = Path(__file__).resolve().parents[2]
# Same place and override as tests/conftest.py: ../shared/real-data beside the checkout.
REAL = Path(os.environ.get("ADVISOR_REAL_DATA", ROOT.parent / "shared" / "real-data")) / "mindspore-2.10-cpu"
if not REAL.is_dir():  # a broken checkout layout must fail loudly, not skip
    raise RuntimeError(f"MindSpore real-data samples not found at {REAL} (set ADVISOR_REAL_DATA)")


def real_ir_files() -> list[Path]:
    """Every IR text file under the real-data folder except ``actor_set/`` (another format)."""
    out = []
    for p in sorted(REAL.rglob("*")):
        if not p.is_file() or "actor_set" in p.relative_to(REAL).parts:
            continue
        if p.suffix == ".ir" or p.name.startswith("trace_code_graph_"):
            out.append(p)
    return out


@lru_cache(maxsize=None)
def parsed(rel: str) -> tuple[IRFile, tuple]:
    """Parse ``REAL / rel`` once per test session; returns (IRFile, diagnostics)."""
    sink = DiagnosticSink()
    ir = parse_ir_file(REAL / rel, sink)
    assert ir is not None, [d.render() for d in sink]
    return ir, tuple(sink)


def problems(diags) -> list[str]:  # type: ignore[no-untyped-def]
    """Warnings and errors, rendered (infos left out)."""
    return [d.render() for d in diags if d.severity != Severity.INFO]


def codes(sink: DiagnosticSink) -> list[tuple[str, str, int | None]]:
    """(severity, code, line) of every diagnostic."""
    return [(d.severity.value, d.code, d.line) for d in sink]
