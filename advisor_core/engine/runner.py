"""Running rules over an analysis: select, check evidence, run each in isolation, rank.

Flow: inputs (already discovered) → for each selected rule: evidence present? →
instantiate with validated options → ``check`` under ``try`` → findings (with
rendered diffs for their patches) → :func:`sort_findings`. A rule whose evidence
is absent is *skipped* with the reason; a rule that raises is an *error* (rule
code, plugin, version, message) and the other rules run on.
"""

from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from pydantic import ValidationError

from advisor_core.diagnostics import Diagnostic
from advisor_core.engine.context import AnalysisInputs, RuleContext
from advisor_core.engine.findings import Finding, Patch, group_findings, sort_findings
from advisor_core.engine.plugins import PluginHost, RegisteredRule
from advisor_core.engine.rule import Rule, RuleOptions

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class Skipped:
    code: str
    name: str
    plugin: str
    reason: str


@dataclass
class EngineError:
    """Something that went wrong outside the inputs: a plugin or rule failure, bad settings."""

    kind: str  # plugin | rule | settings | core
    message: str
    plugin: str | None = None
    version: str | None = None
    code: str | None = None
    traceback: str | None = None


@dataclass
class RuleRun:
    code: str
    status: str  # ran | skipped | error
    seconds: float = 0.0
    findings: int = 0


@dataclass
class AnalysisResult:
    """Everything an output format needs."""

    findings: list[Finding]
    skipped: list[Skipped]
    errors: list[EngineError]
    diagnostics: list[Diagnostic]
    rules: dict[str, RegisteredRule]
    runs: list[RuleRun]
    inputs: dict[str, Any] = field(default_factory=dict)
    step_time_us: float | None = None
    # seconds of the per-rank units: "load" (op views), "derive" (step breakdowns), summed over ranks
    unit_seconds: dict[str, float] = field(default_factory=dict)
    # small frames for charts (step_breakdown, top_kernels, minddata_queue, link_bandwidth; columns in
    # advisor_core/report/html.py); a format draws what is present and says what is not
    summaries: dict[str, "pd.DataFrame"] = field(default_factory=dict)

    @property
    def has_input_errors(self) -> bool:
        return any(d.severity.value == "error" for d in self.diagnostics)


class SelectionError(ValueError):
    """A ``--select``/``--ignore`` entry or rule option that matches nothing / does not validate."""


def _matches(token: str, code: str, cls: type[Rule]) -> bool:
    t = token.strip()
    if not t:
        return False
    if t.upper() == "ALL":
        return True
    if t == cls.name or t in cls.tags:
        return True
    return code.startswith(t.upper()) and bool(re.fullmatch(r"[A-Za-z]{1,3}\d{0,3}", t))


def select_rules(
    rules: Mapping[str, RegisteredRule], select: Iterable[str] | None, ignore: Iterable[str] | None
) -> list[str]:
    """Codes to run: ``select`` (codes, prefixes, names, tags, ``ALL``; default all) minus ``ignore``."""
    sel = [s for s in (select or ["ALL"]) if s.strip()]
    ign = [s for s in (ignore or []) if s.strip()]
    for token in sel + ign:
        if token.strip().upper() == "ALL":
            continue
        if not any(_matches(token, code, r.cls) for code, r in rules.items()):
            raise SelectionError(f"'{token}' matches no registered rule (see `advisor rules`)")
    chosen = [c for c, r in rules.items() if any(_matches(s, c, r.cls) for s in sel)]
    return [c for c in chosen if not any(_matches(s, c, rules[c].cls) for s in ign)]


def rule_options(cls: type[Rule], raw: Mapping[str, Any] | None) -> RuleOptions:
    try:
        return cls.Options(**dict(raw or {}))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise SelectionError(f"options of {cls.code} ({cls.name}): {problems}") from None


def run_rules(
    inputs: AnalysisInputs,
    host: PluginHost,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    render_diffs: bool = True,
    workers: int | None = 1,
    progress: Any = None,
    cluster: Any = None,
    settle: Callable[[], None] | None = None,
) -> AnalysisResult:
    """Run the selected rules over ``inputs`` (see module docstring). Raises :class:`SelectionError`.

    ``settle()``, when given, is called once the per-rank units are done, before any rule's check: what the
    caller decides from their op views (``Session``: whether the config agrees with the run; it may leave the
    config out of ``inputs``). The rules whose evidence is then missing are skipped.

    ``workers`` processes run the per-rank units (:mod:`advisor_core.engine.rankwork`;
    ``None``: every core when the run is large enough), or a Dask ``cluster``
    (:class:`~advisor_core.engine.dask_units.DaskUnits`); ``progress`` (optional) is told
    ``(phase, done, total)`` as ranks and rules complete.
    """
    rules = host.rules()
    codes = select_rules(rules, select, ignore)
    # rules that cite the others' findings run last (stable order otherwise)
    codes = sorted(codes, key=lambda c: bool(getattr(rules[c].cls, "reads_other_findings", False)))
    opts = {k.upper(): v for k, v in (options or {}).items()}
    for code in sorted(k for k in opts if k not in rules):
        # A warning, not an error: the rule may belong to a plugin switched off for this
        # run (--no-plugins in CI) while the shared settings still configure it.
        inputs.sink.warning("options-for-unknown-rule",
                            f"options given for rule {code}, which is not loaded (plugin not installed or "
                            "switched off?); they are ignored")
    host.call_each("advisor_configure", settings=dict(inputs.settings))
    prepared = {code: rule_options(rules[code].cls, opts.get(code)) for code in codes}

    findings: list[Finding] = []
    skipped: list[Skipped] = []
    errors: list[EngineError] = []
    runs: list[RuleRun] = []
    instances: dict[str, Rule] = {}
    for code in codes:
        reg = rules[code]
        try:
            instances[code] = reg.cls(prepared[code])
        except Exception as exc:  # noqa: BLE001 - a rule must not take the run down
            errors.append(EngineError("rule", f"rule {code} ({reg.cls.name}) raised {type(exc).__name__}: {exc}",
                                      plugin=reg.plugin.name, version=reg.plugin.version, code=code,
                                      traceback=traceback.format_exc()))
    def availability() -> dict[str, bool]:
        return {code: any(inputs.available(n) for n in rules[code].cls.requires.any_of) for code in instances}

    available = availability()
    unit_seconds = _rank_units(inputs, host, rules, {c: i for c, i in instances.items() if available[c]}, opts,
                               workers, progress, errors, cluster)
    if settle is not None:
        settle()
        before, available = available, availability()
        gone = {code for code in instances if before[code] and not available[code]}
        errors = [e for e in errors if e.code not in gone]  # a unit of a rule that no longer runs
    for i, code in enumerate(codes):
        reg = rules[code]
        cls = reg.cls
        if code not in instances:
            runs.append(RuleRun(code, "error"))
            continue
        if not available[code]:
            why = [w for w in (inputs.unavailable_because(n) for n in cls.requires.any_of) if w]
            skipped.append(Skipped(code, cls.name, reg.plugin.name, f"needs {cls.requires.describe()}; none was found"
                                   + (f" ({'; '.join(dict.fromkeys(why))})" if why else "")))
            runs.append(RuleRun(code, "skipped"))
            continue
        ctx = RuleContext(inputs, prepared[code], code, instances[code], earlier=findings)
        t0 = time.perf_counter()
        if progress:
            progress("rules", i, len(codes))
        try:
            produced = [f for f in instances[code].check(ctx) if f is not None]
        except Exception as exc:  # noqa: BLE001 - a rule must not take the run down
            errors.append(
                EngineError(
                    "rule",
                    f"rule {code} ({cls.name}) raised {type(exc).__name__}: {exc}",
                    plugin=reg.plugin.name,
                    version=reg.plugin.version,
                    code=code,
                    traceback=traceback.format_exc(),
                )
            )
            runs.append(RuleRun(code, "error", time.perf_counter() - t0 + unit_seconds.get(code, 0.0)))
            continue
        bad = [f for f in produced if not isinstance(f, Finding)]
        if bad:
            errors.append(EngineError("rule", f"rule {code} yielded {type(bad[0]).__name__}, not Finding",
                                      plugin=reg.plugin.name, version=reg.plugin.version, code=code))
            produced = [f for f in produced if isinstance(f, Finding)]
        produced = [f if f.code == code and f.plugin else f.model_copy(update={"code": code, "plugin": reg.plugin.name}) for f in produced]
        runs.append(RuleRun(code, "ran", time.perf_counter() - t0 + unit_seconds.get(code, 0.0), len(produced)))
        if not produced:
            reason = "; ".join(ctx.skip_reasons) if ctx.skip_reasons else "evidence present; nothing found"
            skipped.append(Skipped(code, cls.name, reg.plugin.name, reason))
        findings.extend(produced)

    for he in host.hook_errors:
        errors.append(EngineError("plugin", f"{he.plugin.label()}: {he.message}", plugin=he.plugin.name,
                                  version=he.plugin.version, traceback=he.traceback or None))
    for rec in host.failed:
        if not any(e.plugin == rec.name for e in errors):
            errors.append(EngineError("plugin", f"failed to load plugin {rec.label()}: {rec.error}",
                                      plugin=rec.name, version=rec.version))

    if progress:
        progress("rules", len(codes), len(codes))
    if render_diffs and inputs.config_doc is not None:
        findings = [_with_diffs(f, inputs) for f in findings]
    return AnalysisResult(
        findings=sort_findings(group_findings(findings)),
        skipped=skipped,
        errors=errors,
        diagnostics=list(inputs.sink),
        rules=rules,
        runs=runs,
        unit_seconds={k: v for k, v in unit_seconds.items() if k in ("load", "derive")},
    )


def _needs_units(rule: Rule) -> bool:
    """Does the rule read kernels (through the op view), per-rank tables, or have per-rank evidence?"""
    if type(rule).rank_evidence is not Rule.rank_evidence or rule.rank_tables:
        return True
    return any(n.kind == "table" and n.name == "kernels" for n in rule.requires.any_of)


def _rank_units(inputs: AnalysisInputs, host: PluginHost, registered: Mapping[str, RegisteredRule],
                instances: Mapping[str, Rule], raw_options: Mapping[str, Mapping[str, Any]], workers: int | None,
                progress: Any, errors: list[EngineError], cluster: Any = None) -> dict[str, float]:
    """Run the per-rank units (op views, shared derived values, rules' rank evidence) and adopt them.

    Returns the seconds spent in each rule's ``rank_evidence`` (summed over ranks), plus
    ``load`` and ``derive`` for the op views and the step breakdowns.
    """
    from advisor_core.engine.rankwork import adopt_digests, run_rank_units

    run = inputs.run
    needing = {code: inst for code, inst in instances.items() if _needs_units(inst)}
    if run is None or not run.ranks or not needing:
        return {}
    # What the units give depends only on the ranks and the rules' options (Rule.rank_evidence's contract), not
    # on the config or the IR: a run analysed again with the same rules (lint's configs against one baseline, a
    # session's second analyze) takes it from the run, which keeps the last (each holds every rank's evidence).
    # Not from a Dask cluster: its op views left with it.
    key = None if cluster is not None else _units_key(needing)
    done = run.units_done.get(key) if key is not None else None
    if done is None:
        units = [(code, inst, raw_options.get(code) or {}) for code, inst in needing.items()]
        digests = run_rank_units(list(run), units, workers=workers, plugins=host.spec,
                                 progress=(lambda n, total: progress("ranks", n, total)) if progress else None,
                                 cluster=cluster)
        adopt_digests(run.ranks, digests, inputs.sink)
        done = _units_done(digests, needing, registered)
        if key is not None:
            run.units_done = {key: done}
    else:
        inputs.sink.extend(done.diagnostics)  # said again in this analysis, as its units would have
        done = UnitsDone(done.evidence, done.errors, done.diagnostics, {})  # nothing was computed this time
    inputs.rank_evidence.update(done.evidence)
    errors.extend(done.errors)
    return dict(done.seconds)


@dataclass(frozen=True)
class UnitsDone:
    """What the per-rank units of a set of rules gave, as the run keeps it: each rule's evidence per rank (``None``
    where it raised), the errors and diagnostics to report, and the seconds spent (per rule, ``load``, ``derive``)."""

    evidence: dict[tuple[str, int], Any]
    errors: list[EngineError]
    diagnostics: list[Any]
    seconds: dict[str, float]


def _units_key(instances: Mapping[str, Rule]) -> tuple[tuple[str, str, str], ...] | None:
    """The rules and their options, as what the units computed for them is found again; ``None`` (not kept)
    when a rule's options are not plain values (numbers, strings, lists, mappings), which alone tell them apart."""
    import json

    try:
        return tuple(sorted((code, f"{type(r).__module__}.{type(r).__qualname__}",
                             json.dumps(r.options.model_dump(), sort_keys=True)) for code, r in instances.items()))
    except (TypeError, ValueError):  # a plugin's options holding objects: then its units run every time, as before
        return None


def _units_done(digests: Iterable[Any], instances: Mapping[str, Rule],
                registered: Mapping[str, RegisteredRule]) -> UnitsDone:
    evidence: dict[tuple[str, int], Any] = {}
    errors: list[EngineError] = []
    seconds: dict[str, float] = {}
    ordered = sorted(digests, key=lambda d: d.rank_id)
    for d in ordered:
        for code in instances:
            if code in d.evidence:
                evidence[(code, d.rank_id)] = d.evidence[code]
        for f in d.failures:
            if not f.code:  # the core's part of the unit (op view, step breakdown)
                errors.append(EngineError("core", f.message, traceback=f.traceback))
                continue
            evidence[(f.code, d.rank_id)] = None
            reg = registered[f.code]
            errors.append(EngineError("rule", f.message, plugin=reg.plugin.name, version=reg.plugin.version,
                                      code=f.code, traceback=f.traceback))
        for name, sec in d.seconds.items():
            seconds[name] = seconds.get(name, 0.0) + sec
    return UnitsDone(evidence, errors, [diag for d in ordered for diag in d.diagnostics], seconds)


def _with_diffs(finding: Finding, inputs: AnalysisInputs) -> Finding:
    if not finding.patches:
        return finding
    from advisor_core.patch import render_patch_diff

    doc = inputs.config_doc
    assert doc is not None
    patches: list[Patch] = []
    for p in finding.patches:
        if p.diff is None and (p.target is None or str(p.target) == str(doc.path)):
            try:
                diff = render_patch_diff(doc, p)
            except Exception:  # noqa: BLE001 - a diff is a nicety; never lose the finding for it
                diff = None
            p = p.model_copy(update={"diff": diff, "target": str(doc.path)})
        patches.append(p)
    return finding.model_copy(update={"patches": patches})
