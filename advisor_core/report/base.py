"""Output formats: the contract and the shared JSON view of a finding.

An :class:`OutputFormat` turns an :class:`~advisor_core.engine.runner.AnalysisResult`
into one string (written to stdout or ``--output``). Built-in formats (text,
json, sarif, markdown, github, html) are registered through the
``advisor_register_formats`` hook exactly like a plugin's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from advisor_core import __version__
from advisor_core.engine.findings import Finding

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.engine.runner import AnalysisResult

JSON_SCHEMA_VERSION = 1


@dataclass
class RenderContext:
    """What formats need besides the result."""

    inputs: dict[str, Any] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)  # paths in SARIF/GitHub output are made relative to this
    fail_on: str = "low"
    command: str = "analyze"
    width: int | None = None
    show_fixes: bool = True
    show_skipped: bool = True  # text format: list every rule that reported nothing, with why
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def relpath(self, path: str | None) -> str | None:
        if path is None:
            return None
        p = Path(path)
        try:
            return p.resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError):
            return p.as_posix()


class OutputFormat(Protocol):
    name: str
    description: str

    def render(self, result: "AnalysisResult", ctx: RenderContext) -> str:  # pragma: no cover - protocol
        ...


def fmt_us(us: float | None) -> str:
    if us is None:
        return "–"
    if abs(us) >= 1000:
        return f"{us / 1000:,.2f} ms"
    return f"{us:,.1f} µs"


def fmt_bytes(b: float | None) -> str:
    if b is None:
        return "–"
    sign = "-" if b < 0 else "+"
    v = abs(b)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{sign}{v:,.1f} {unit}" if unit != "B" else f"{sign}{v:,.0f} B"
        v /= 1024
    return f"{b}"


def finding_json(f: Finding, index: int) -> dict[str, Any]:
    """The versioned JSON view of one finding (``advisor_core/schemas/analysis.schema.json``)."""
    data = f.model_dump(mode="json")
    data["rank_in_report"] = index
    data["saving_pct"] = None if f.saving_pct is None else round(f.saving_pct, 3)
    data["score"] = round(f.score, 3)
    data["fingerprint"] = f.fingerprint()
    data["finding_rank"] = data.pop("rank")
    return data


def result_json(result: "AnalysisResult", ctx: RenderContext) -> dict[str, Any]:
    """The whole JSON report (what ``--format json`` prints)."""
    from advisor_core.inspect import diagnostic_json

    by_sev: dict[str, int] = {"high": 0, "medium": 0, "low": 0}
    for f in result.findings:
        by_sev[f.severity.value] += 1
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": {
            "name": "advisor",
            "version": __version__,
            "rules": [
                {"code": c, "name": r.cls.name, "plugin": r.plugin.name, "plugin_version": r.plugin.version}
                for c, r in sorted(result.rules.items())
            ],
        },
        "command": ctx.command,
        "inputs": ctx.inputs,
        "summary": {
            "findings": len(result.findings),
            "by_severity": by_sev,
            "estimated_saving_us": round(sum(f.saving_us or 0.0 for f in result.findings), 3),
            "rules_run": sum(1 for r in result.runs if r.status == "ran"),
            "rules_skipped": sum(1 for r in result.runs if r.status == "skipped"),
            "rules_failed": sum(1 for r in result.runs if r.status == "error"),
        },
        "findings": [finding_json(f, i + 1) for i, f in enumerate(result.findings)],
        "skipped": [{"code": s.code, "name": s.name, "plugin": s.plugin, "reason": s.reason} for s in result.skipped],
        "errors": [
            {"kind": e.kind, "message": e.message, "plugin": e.plugin, "version": e.version, "code": e.code}
            for e in result.errors
        ],
        "diagnostics": [diagnostic_json(d) for d in result.diagnostics],
    }


def _base(path: str | None) -> str:
    return "" if not path else path.replace("\\", "/").rsplit("/", 1)[-1]


def primary_location_text(f: Finding, ctx: RenderContext, *, short: bool = False) -> str:
    """Where the finding points, config key first; ``short`` is ``file:line`` for a table cell."""
    cfg = f.primary_config_location()
    if cfg is not None:
        if short:
            return f"{_base(cfg.path)}:{cfg.line}"
        return f"{ctx.relpath(cfg.path)}:{cfg.line}" + (f" {cfg.key_path}" if cfg.key_path else "")
    for loc in f.locations:
        if loc.kind == "ir":
            if short:
                return f"{_base(loc.path)}:{loc.line}"
            return f"{ctx.relpath(loc.path)}:{loc.line}" + (f" {loc.node}" if loc.node else "")
        if loc.kind == "profile":
            where = loc.table if short else (loc.op or loc.table or "")
            rank = f"rank {loc.rank} " if loc.rank is not None else ""
            return f"{rank}{where or ''}".strip() or (ctx.relpath(loc.path) or "")
        if loc.kind == "source":
            return f"{_base(loc.path) if short else loc.path}:{loc.line}"
    return ""


def fmt_value(v: Any) -> str:
    """An evidence value for people: whole and large floats with thousands separators, others to 4 digits."""
    if isinstance(v, float):
        if v.is_integer() or abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    return str(v)


def short_scope(op: str, keep: int = 3) -> str:
    """The last ``keep`` components of a kernel's full scope name (the rest is in the JSON report)."""
    parts = op.split("/")
    return op if len(parts) <= keep else "…/" + "/".join(parts[-keep:])


def location_text(loc: Any, ctx: RenderContext) -> str:
    """One location in full (config ``file:line:col pointer``, IR ``file:line node``, profile rank/table/op)."""
    if loc.kind == "config":
        return f"{ctx.relpath(loc.path)}:{loc.line}:{loc.column} {loc.key_path or ''}".rstrip()
    if loc.kind == "ir":
        return f"{ctx.relpath(loc.path)}:{loc.line} {loc.node or ''}".rstrip()
    if loc.kind == "source":
        return f"{loc.path}:{loc.line}" + (f" ({loc.note})" if loc.note else "")
    table = loc.path.replace("\\", "/").rsplit("/", 1)[-1] if loc.path else loc.table
    bits = [f"rank {loc.rank}" if loc.rank is not None else None, table,
            short_scope(loc.op) if loc.op else None, f"row {loc.row}" if loc.row is not None else None]
    return " ".join(b for b in bits if b).strip()
