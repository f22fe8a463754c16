"""The built-in output formats: text (rich), json, sarif, markdown, github; html lives in :mod:`.html`."""

from __future__ import annotations

import io
import hashlib
import json
import textwrap
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from advisor_core import __version__
from advisor_core.engine.findings import Finding, Severity
from advisor_core.report.base import (
    RenderContext,
    finding_json,
    fmt_bytes,
    fmt_us,
    fmt_value,
    location_text,
    primary_location_text,
    result_json,
)
from advisor_core.report.html import HtmlFormat
from advisor_core.report.wrap import wrap_text

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.engine.runner import AnalysisResult

_SEV_STYLE = {Severity.HIGH: "bold red", Severity.MEDIUM: "yellow", Severity.LOW: "cyan"}
_SARIF_LEVEL = {Severity.HIGH: "error", Severity.MEDIUM: "warning", Severity.LOW: "note"}
_GH_LEVEL = {Severity.HIGH: "error", Severity.MEDIUM: "warning", Severity.LOW: "notice"}
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFO_URI = "https://advisor.local/docs/rules"


def _saving(f: Finding) -> str:
    pct = f.saving_pct
    return fmt_us(f.saving_us) + (f" ({pct:.1f}%)" if pct is not None else "")


class TextFormat:
    name = "text"
    description = "ranked table for a terminal (rich)"

    def render(self, result: "AnalysisResult", ctx: RenderContext) -> str:
        buf = io.StringIO()
        console = Console(file=buf, width=ctx.width or 120, force_terminal=False, color_system=None, highlight=False)
        self.print(result, ctx, console)
        return buf.getvalue()

    def print(self, result: "AnalysisResult", ctx: RenderContext, console: Console) -> None:
        if result.findings:
            rows = [(str(i), f.code, f.severity, _saving(f), f.title, primary_location_text(f, ctx, short=True))
                    for i, f in enumerate(result.findings, 1)]
            title = f"{len(result.findings)} finding(s), ranked by estimated saving × confidence"
            if _table_fits(rows, console.width):
                t = Table(title=title, title_justify="left", show_lines=False, expand=True)
                t.add_column("#", justify="right")
                t.add_column("code")
                t.add_column("sev")
                t.add_column("saving/step", justify="right", no_wrap=True)
                t.add_column("finding", overflow="fold", ratio=1, min_width=MIN_TITLE_WIDTH)
                t.add_column("where", no_wrap=True)  # a file:line is never cut
                for n, code, sev, saving, text, where in rows:
                    t.add_row(n, code, Text(sev.value, style=_SEV_STYLE[sev]), saving, text, where)
                console.print(t)
            else:
                _print_stacked(title, rows, console)
            for i, f in enumerate(result.findings, 1):
                console.print()
                _wrapped(console, f"[{i}] {f.code} {f.rule}: {f.title}", style="bold")
                _wrapped(console, f"{f.severity.value}; saving {_saving(f)} per step, confidence {f.confidence:.2f}",
                         style="dim")
                _wrapped(console, f.message)
                if f.memory_delta_bytes is not None:
                    _wrapped(console, f"peak memory per rank if fixed: {fmt_bytes(f.memory_delta_bytes)}")
                if f.evidence:
                    ev = "; ".join(
                        f"{e.name}={fmt_value(e.value)}{(' ' + e.unit) if e.unit else ''}"
                        + (f" (threshold {e.threshold})" if e.threshold is not None else "")
                        for e in f.evidence[:8]
                    )
                    _wrapped(console, f"evidence: {ev}", style="dim")
                for loc in f.locations[:4]:
                    _wrapped(console, location_text(loc, ctx), lead="  at ", hang="     ", style="dim")
                if len(f.locations) > 4:
                    _wrapped(console, f"  … and {len(f.locations) - 4} more location(s) (--format json lists them)",
                             hang="    ", style="dim")
                if ctx.show_fixes:
                    for p in f.patches:
                        _wrapped(console, f"  fix ({p.safety.value}): {p.title}", hang="    ")
                        if p.diff:  # raw: a wrapped diff would not apply
                            console.print(p.diff.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
                        for n in p.notes:
                            _wrapped(console, f"  note: {n}", hang="    ", style="dim")
        else:
            console.print("No findings.")
        if result.skipped and ctx.show_skipped:
            console.print()
            console.print(Text(f"{len(result.skipped)} rule(s) reported nothing:", style="bold"))
            for s in result.skipped:
                _wrapped(console, f"  {s.code} {s.name}: {s.reason}", hang="    ")
        elif result.skipped:
            console.print()
            _wrapped(console, f"{len(result.skipped)} rule run(s) reported nothing (-v lists them with the reason).",
                     style="dim")
        if result.errors:
            console.print()
            console.print(Text(f"{len(result.errors)} error(s):", style="bold red"))
            for e in result.errors:
                _wrapped(console, f"  {e.message}", hang="    ")


def _wrapped(console: Console, text: str, *, lead: str = "", hang: str = "", style: str = "") -> None:
    """:func:`~advisor_core.report.wrap.wrap_text` of ``text`` at the console's width, printed as is."""
    console.print(Text(wrap_text(text, console.width, lead=lead, hang=hang), style=style), soft_wrap=True)


MIN_TITLE_WIDTH = 30  # narrower than this, the table gives way to one block per finding
_TABLE_CHROME = 19  # borders and padding of the six-column table


def _table_fits(rows: list[tuple[Any, ...]], width: int) -> bool:
    """Do the fixed columns, whole ``file:line``s and a 30-character finding column fit in ``width``?"""
    fixed = [max(len(r[i]) for r in rows) for i in (0, 1, 3, 5)]
    sev = max(len(r[2].value) for r in rows)
    header = [1, 4, 11, 5]  # "#", "code", "saving/step", "where"
    need = sum(max(a, b) for a, b in zip(fixed, header)) + max(sev, 3) + MIN_TITLE_WIDTH + _TABLE_CHROME
    return need <= width


def _print_stacked(title: str, rows: list[tuple[Any, ...]], console: Console) -> None:
    """One block per finding, for a narrow terminal, a pipe or a file: nothing cut, nothing squeezed."""
    console.print(Text(title, style="bold"))
    for n, code, sev, saving, text, where in rows:
        head = Text(f"{n:>3} {code} ")
        head.append(sev.value, style=_SEV_STYLE[sev])
        head.append(f"  {saving} per step")
        console.print(head)
        wrapped = textwrap.fill(text, width=max(console.width, 40), initial_indent="    ", subsequent_indent="    ",
                                break_long_words=False, break_on_hyphens=False)
        console.print(Text(wrapped, style="bold"), soft_wrap=True)
        if where:
            console.print(Text(f"    {where}"), style="dim", soft_wrap=True)


class JsonFormat:
    name = "json"
    description = "versioned JSON report (schema: advisor_core/schemas/analysis.schema.json)"

    def render(self, result: "AnalysisResult", ctx: RenderContext) -> str:
        return json.dumps(result_json(result, ctx), indent=2, ensure_ascii=False) + "\n"


class SarifFormat:
    name = "sarif"
    description = "SARIF 2.1.0 for GitHub code scanning and other SARIF consumers"

    def render(self, result: "AnalysisResult", ctx: RenderContext) -> str:
        rule_ids = sorted(result.rules)
        rules = []
        for code in rule_ids:
            reg = result.rules[code]
            cls = reg.cls
            rules.append(
                {
                    "id": code,
                    "name": cls.name,
                    "shortDescription": {"text": cls.summary},
                    "fullDescription": {"text": cls.summary},
                    "help": {"text": cls.help_text() or cls.summary, "markdown": cls.help_text() or cls.summary},
                    "helpUri": f"{INFO_URI}/{code}",
                    "defaultConfiguration": {"level": _SARIF_LEVEL[cls.severity]},
                    "properties": {"tags": ["performance", *cls.tags][:20], "plugin": reg.plugin.name},
                }
            )
        index = {c: i for i, c in enumerate(rule_ids)}
        results = [r for f in result.findings for r in self._results(f, ctx, index)]
        notes = [
            {"level": "error", "message": {"text": e.message}, "descriptor": {"id": e.code or e.kind}}
            for e in result.errors
        ]
        for d in result.diagnostics:  # inputs that could not be read, or only in part
            if d.severity.value == "info":
                continue
            note: dict[str, Any] = {"level": "error" if d.severity.value == "error" else "warning",
                                    "message": {"text": d.message}, "descriptor": {"id": d.code}}
            if d.path:
                phys: dict[str, Any] = {"artifactLocation": {"uri": ctx.relpath(d.path)}}
                if d.line:
                    phys["region"] = {"startLine": d.line, **({"startColumn": d.column} if d.column else {})}
                note["locations"] = [{"physicalLocation": phys}]
            notes.append(note)
        run: dict[str, Any] = {
            "tool": {
                "driver": {
                    "name": "advisor",
                    "version": __version__,
                    "informationUri": INFO_URI,
                    "rules": rules,
                }
            },
            "automationDetails": {"id": f"advisor/{ctx.command}/"},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": ctx.root.resolve().as_uri() + "/"}},
            "results": results,
            "invocations": [
                {
                    "executionSuccessful": not result.errors and not result.has_input_errors,
                    "toolExecutionNotifications": notes,
                }
            ],
        }
        doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

    def _results(self, f: Finding, ctx: RenderContext, index: dict[str, int]) -> list[dict[str, Any]]:
        """One result for a finding; a folded one (``count`` > 1) gets one result per place it points at,
        all with its ruleId and fingerprint (and a per-place fingerprint), so code scanning lists every line."""
        if f.count <= 1 or len(f.locations) <= 1:
            return [self._result(f, ctx, index)]
        out = []
        for loc in f.locations:
            one = self._result(f.model_copy(update={"locations": [loc]}), ctx, index)
            one["partialFingerprints"] = {
                "advisorFingerprint/v1": f.fingerprint(),
                "advisorPlace/v1": hashlib.sha256(loc.model_dump_json().encode()).hexdigest()[:16],
            }
            out.append(one)
        return out

    def _result(self, f: Finding, ctx: RenderContext, index: dict[str, int]) -> dict[str, Any]:
        res: dict[str, Any] = {
            "ruleId": f.code,
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f"{f.title}. {f.message}"},
            "partialFingerprints": {"advisorFingerprint/v1": f.fingerprint()},
            "properties": {
                "impact_us": f.saving_us,
                "impact_pct": None if f.saving_pct is None else round(f.saving_pct, 3),
                "confidence": f.confidence,
                "severity": f.severity.value,
                "evidence": [e.model_dump(mode="json") for e in f.evidence],
                "patches": [
                    {"title": p.title, "safety": p.safety.value, "ops": [o.model_dump(mode="json") for o in p.ops]}
                    for p in f.patches
                ],
            },
        }
        if f.code in index:
            res["ruleIndex"] = index[f.code]
        locs = []
        logical = []
        related = []
        for loc in f.locations:
            if loc.kind in ("config", "ir") and loc.path:
                phys: dict[str, Any] = {"artifactLocation": {"uri": ctx.relpath(loc.path), "uriBaseId": "%SRCROOT%"}}
                if loc.line:
                    region: dict[str, Any] = {"startLine": loc.line}
                    if loc.column:
                        region["startColumn"] = loc.column
                    if loc.end_line:
                        region["endLine"] = loc.end_line
                    if loc.end_column:
                        region["endColumn"] = loc.end_column
                    phys["region"] = region
                entry: dict[str, Any] = {"physicalLocation": phys}
                if loc.key_path or loc.node:
                    entry["logicalLocations"] = [{"fullyQualifiedName": loc.key_path or loc.node, "kind": "member"}]
                (locs if loc.kind == "config" else related).append(entry)
            elif loc.kind == "profile":
                name = "/".join(str(x) for x in (f"rank{loc.rank}" if loc.rank is not None else None, loc.table, loc.op) if x)
                item = {"fullyQualifiedName": name or (loc.path or "profile"), "kind": "object"}
                if item not in logical:  # SARIF: logicalLocations items are unique
                    logical.append(item)
            elif loc.kind == "source" and loc.path:
                related.append({"physicalLocation": {"artifactLocation": {"uri": loc.path}, "region": {"startLine": loc.line or 1}},
                                "message": {"text": loc.note or "model code"}})
        if not locs and related:
            # No config line to point at: the IR/source location is the primary one.
            locs = [related.pop(0)]
        if logical:
            if locs:
                locs[0].setdefault("logicalLocations", []).extend(logical)
            else:
                locs = [{"logicalLocations": logical}]
        if locs:
            res["locations"] = locs[:1]
            related = locs[1:] + related
        if related:
            res["relatedLocations"] = [dict(r, id=i) for i, r in enumerate(related[:100])]
        return res


class MarkdownFormat:
    name = "markdown"
    description = "Markdown report (PR comments, GitHub step summaries, notebooks)"

    def render(self, result: "AnalysisResult", ctx: RenderContext) -> str:
        out = ["# advisor report", ""]
        total = sum(f.saving_us or 0 for f in result.findings)
        out.append(f"{len(result.findings)} finding(s); estimated saving up to {fmt_us(total)} per step in all.")
        out.append("")
        if result.findings:
            out.append("| # | code | severity | saving/step | confidence | where | finding |")
            out.append("|---:|---|---|---:|---:|---|---|")
            for i, f in enumerate(result.findings, 1):
                out.append(
                    f"| {i} | {f.code} | {f.severity.value} | {_saving(f)} | {f.confidence:.2f} | "
                    f"{_md(primary_location_text(f, ctx))} | {_md(f.title)} |"
                )
            out.append("")
            for i, f in enumerate(result.findings, 1):
                out.append(f"## {i}. {f.code} {f.rule}: {_md(f.title)}")
                out.append("")
                out.append(f.message)
                out.append("")
                if f.evidence:
                    out.append("Evidence: " + "; ".join(
                        f"{e.name} = {fmt_value(e.value)}{(' ' + e.unit) if e.unit else ''}" for e in f.evidence))
                    out.append("")
                for p in f.patches:
                    out.append(f"**Fix ({p.safety.value})**: {_md(p.title)}")
                    out.append("")
                    if p.diff:
                        out.append("```diff")
                        out.append(p.diff.rstrip("\n"))
                        out.append("```")
                        out.append("")
        if result.skipped:
            out.append("<details><summary>Rules that reported nothing</summary>")
            out.append("")
            for s in result.skipped:
                out.append(f"- **{s.code}** {s.name}: {_md(s.reason)}")
            out.append("")
            out.append("</details>")
            out.append("")
        if result.errors:
            out.append("## Errors")
            out.append("")
            for e in result.errors:
                out.append(f"- {_md(e.message)}")
            out.append("")
        return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def gh_escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def gh_escape_prop(s: str) -> str:
    return gh_escape_data(s).replace(":", "%3A").replace(",", "%2C")


class GithubFormat:
    name = "github"
    description = "GitHub Actions workflow annotations (+ a Markdown step summary in $GITHUB_STEP_SUMMARY)"
    per_level = 10  # GitHub shows about 10 annotations of each level per step

    def render(self, result: "AnalysisResult", ctx: RenderContext) -> str:
        lines = []
        shown: dict[str, int] = {}
        for f in result.findings:
            level = _GH_LEVEL[f.severity]
            if shown.get(level, 0) >= self.per_level:
                continue
            shown[level] = shown.get(level, 0) + 1
            props = []
            loc = f.primary_config_location() or next((l for l in f.locations if l.kind == "ir"), None)
            if loc is not None and loc.path:
                props.append(f"file={gh_escape_prop(ctx.relpath(loc.path) or '')}")
                if loc.line:
                    props.append(f"line={loc.line}")
                    props.append(f"endLine={loc.end_line or loc.line}")
                if loc.column:
                    props.append(f"col={loc.column}")
            props.append(f"title={gh_escape_prop(f'{f.code} {f.title}')}")
            msg = f"{f.message} (estimated saving {_saving(f)}, confidence {f.confidence:.2f})"
            lines.append(f"::{level} {','.join(props)}::{gh_escape_data(msg)}")
        for e in result.errors:
            lines.append(f"::error title={gh_escape_prop('advisor error')}::{gh_escape_data(e.message)}")
        summary_path = ctx.env.get("GITHUB_STEP_SUMMARY")
        if summary_path:
            md = MarkdownFormat().render(result, ctx)
            encoded = md.encode("utf-8")[: 1024 * 1024 - 1024]  # GitHub keeps at most 1 MiB per step
            with open(summary_path, "a", encoding="utf-8") as fh:
                fh.write(encoded.decode("utf-8", errors="ignore") + "\n")
        return "\n".join(lines) + ("\n" if lines else "")


BUILTIN_FORMATS = (TextFormat(), JsonFormat(), SarifFormat(), MarkdownFormat(), GithubFormat(), HtmlFormat())
__all__ = ["BUILTIN_FORMATS", "finding_json"]
