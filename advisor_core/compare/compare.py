"""``advisor compare``: did the fix work, and was the estimate right.

Both sides are analysed (BEFORE's findings may come from the saved report the user acted
on instead). Step times are compared over steady-state steps (warm-up detected and left
out, :mod:`advisor_core.analyses.steady`), the slowest rank's step standing for the
cluster's. Each finding of BEFORE is looked for in AFTER — same fingerprint (code and
where it points), else same code and config key or cell — and is *gone*, *still there*
or *changed*; the time it was about is measured on both runs (the rule's ``measure``
where it has one, else the steady step time) and the change is set beside its estimate.
Kernels are compared by op type and by cell (layer index folded) from the op views, so
an unexpected regression shows; configs are compared key by key. What cannot be
compared (another parallel layout, another model) is said, not guessed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable

import numpy as np

from advisor_core.compare.model import ConfigChange, Comparison, FindingOutcome, KernelDelta, RankStep
from advisor_core.compare.sides import SideMeasures, measure_side, cell_key
from advisor_core.engine.findings import Finding

NOISE_FRACTION = 0.005  # of the step: jitter no fix is measured against (as the closed loop)
CHANGED_FRACTION = 0.3  # a finding still there whose saving moved by more than this is "changed"
KERNEL_MIN_FRACTION = 0.01  # a kernel change below 1 % of the step is not listed as significant
TOP_KERNELS = 12


def compare_runs(before: Any, after: Any, *, before_label: str, after_label: str,
                 before_findings: list[Finding] | None = None, select: Iterable[str] | None = None,
                 ignore: Iterable[str] | None = None, workers: int | None = None) -> Comparison:
    """Compare two :class:`~advisor_core.engine.session.Session` (see module docstring).

    ``before_findings`` (from a saved report) replace BEFORE's own analysis as the estimates
    acted on; BEFORE is still analysed for its measurements.
    """
    res_b = before.analyze(select=select, ignore=ignore)
    res_a = after.analyze(select=select, ignore=ignore)
    findings_b = before_findings if before_findings is not None else res_b.findings
    side_b, side_a = measure_side(before.run), measure_side(after.run)
    out = Comparison(before=before_label, after=after_label, step_before=side_b.steps, step_after=side_a.steps,
                     breakdown_before=side_b.breakdown, breakdown_after=side_a.breakdown,
                     estimates_from="the saved report" if before_findings is not None else "the analysis of BEFORE")
    out.not_comparable = _comparability(before, after, side_b, side_a)
    _step_change(out, side_b, side_a)
    if "layout" not in " ".join(out.not_comparable):
        out.ranks = [RankStep(rank=r, before=side_b.rank_means.get(r), after=side_a.rank_means.get(r))
                     for r in sorted(set(side_b.rank_means) | set(side_a.rank_means))]
    out.findings, matched = _outcomes(before, after, findings_b, res_a.findings, out, side_b, side_a)
    out.new_findings = [{"code": f.code, "title": f.title, "saving_us": f.saving_us, "severity": f.severity.value}
                        for i, f in enumerate(res_a.findings) if i not in matched]
    if not any("kernels" in n for n in out.not_comparable):
        out.kernels, out.regressions = _kernel_deltas(side_b, side_a, out.step_before.mean)
    out.config_changes = _config_changes(before.config_doc, after.config_doc)
    return out


# -- step time ---------------------------------------------------------------------------------------

def _step_change(out: Comparison, b: SideMeasures, a: SideMeasures) -> None:
    if b.steps.mean is None or a.steps.mean is None:
        out.not_comparable.append("step time: a side has no step-level evidence (step trace or ProfilerStep windows)")
        return
    out.step_change_us = b.steps.mean - a.steps.mean
    se = [_se(s) for s in (b.step_series, a.step_series)]
    out.noise_us = max(NOISE_FRACTION * b.steps.mean, 2.0 * math.sqrt(se[0] ** 2 + se[1] ** 2))
    out.step_change_significant = abs(out.step_change_us) > out.noise_us


def _se(series: dict[int, np.ndarray]) -> float:
    """Standard error of the steady step mean (the ranks' steps pooled)."""
    vals = np.concatenate(list(series.values())) if series else np.array([])
    return float(vals.std(ddof=1) / math.sqrt(len(vals))) if len(vals) > 1 else 0.0


# -- findings -----------------------------------------------------------------------------------------

def _where_key(f: Finding) -> tuple[str, str] | None:
    """Code and the first config key, else the first IR node / kernel cell (layer folded) a finding points at."""
    for loc in f.locations:
        if loc.kind == "config" and loc.key_path:
            return f.code, loc.key_path
    for loc in f.locations:
        if loc.op or loc.node:
            return f.code, cell_key(None, re.sub(r"-op\d+.*$", "", loc.op or loc.node or ""))
    return None


def _outcomes(before: Any, after: Any, findings_b: list[Finding], findings_a: list[Finding], out: Comparison,
              side_b: SideMeasures, side_a: SideMeasures) -> tuple[list[FindingOutcome], set[int]]:
    by_fp = {f.fingerprint(): i for i, f in enumerate(findings_a)}
    by_where: dict[tuple[str, str], int] = {}
    for i, f in enumerate(findings_a):
        k = _where_key(f)
        if k is not None:
            by_where.setdefault(k, i)
    rules_b = before.host.rules()
    matched: set[int] = set()
    outcomes: list[FindingOutcome] = []
    pending: list[tuple[FindingOutcome, Finding]] = []
    for f in findings_b:
        j = by_fp.get(f.fingerprint())
        if j is None or j in matched:
            k = _where_key(f)
            j = by_where.get(k) if k is not None else None
            if j in matched:
                j = None
        o = FindingOutcome(code=f.code, title=f.title, fingerprint=f.fingerprint(), status="gone",
                           estimate_us=f.saving_us,
                           estimate_memory_bytes=None if f.memory_delta_bytes is None else -float(f.memory_delta_bytes))
        if j is not None:
            matched.add(j)
            g = findings_a[j]
            o.after_title = g.title
            o.status = "changed" if _moved(f.saving_us, g.saving_us, out.noise_us) else "still there"
        reg = rules_b.get(f.code)
        mb = _measure(before, reg, f)
        ma = _measure(after, reg, f) if mb is not None else None
        if mb is not None and ma is not None:
            o.metric, o.before_us, o.after_us = mb.name, mb.value_us, ma.value_us
            o.measured_us = mb.value_us - ma.value_us
        pending.append((o, f))
        outcomes.append(o)
    gone = [o for o in outcomes if o.status != "still there"]
    for o, f in pending:
        if o.measured_us is None and out.step_change_us is not None:
            o.metric = "steady step time"
            o.before_us, o.after_us = out.step_before.mean, out.step_after.mean
            o.measured_us = out.step_change_us
            if o.status != "still there" and len(gone) > 1:
                o.note = (f"the step change is shared by the {len(gone)} findings that went or changed; "
                          "fix one at a time to measure each")
        if o.measured_us is not None and o.estimate_us and abs(o.estimate_us) > 1e-9:
            o.ratio = o.measured_us / o.estimate_us
        if o.estimate_memory_bytes is not None and side_b.peak_memory_bytes is not None \
                and side_a.peak_memory_bytes is not None:
            o.measured_memory_bytes = side_b.peak_memory_bytes - side_a.peak_memory_bytes
    return outcomes, matched


def _moved(before_us: float | None, after_us: float | None, noise_us: float | None) -> bool:
    if before_us is None or after_us is None:
        return before_us != after_us
    return abs(before_us - after_us) > max(CHANGED_FRACTION * abs(before_us), noise_us or 0.0)


def _measure(session: Any, reg: Any, finding: Finding) -> Any:
    """The rule's own measure of ``finding`` on ``session``'s run (``None`` when it has none)."""
    if reg is None or session.run is None:
        return None
    from advisor_core.engine.context import RuleContext
    from advisor_core.engine.runner import rule_options

    rule = reg.cls(rule_options(reg.cls, session.options.settings.rule_options.get(finding.code)))
    try:
        return rule.measure(RuleContext(session.inputs(), rule.options, finding.code, rule), finding)
    except Exception:  # noqa: BLE001 - a rule's measure failing leaves the step time as the measure
        return None


# -- kernels --------------------------------------------------------------------------------------------

def _kernel_deltas(b: SideMeasures, a: SideMeasures, step_us: float | None) -> tuple[list[KernelDelta], list[KernelDelta]]:
    deltas: list[KernelDelta] = []
    for kind, db, da in (("type", b.by_type, a.by_type), ("cell", b.by_cell, a.by_cell)):
        for k in set(db) | set(da):
            deltas.append(KernelDelta(what=k, kind=kind, before_us=db.get(k, 0.0), after_us=da.get(k, 0.0)))
    floor = KERNEL_MIN_FRACTION * (step_us or 0.0)
    significant = [d for d in deltas if abs(d.delta) > max(floor, 0.05 * max(d.before_us, d.after_us), 1.0)]
    top = sorted(significant, key=lambda d: -abs(d.delta))
    listed = [d for d in top if d.kind == "type"][:TOP_KERNELS // 2] + [d for d in top if d.kind == "cell"][:TOP_KERNELS // 2]
    regressions = [d for d in top if d.delta > 0]
    return sorted(listed, key=lambda d: -abs(d.delta)), regressions


# -- config and comparability -----------------------------------------------------------------------------

def _config_changes(doc_b: Any, doc_a: Any) -> list[ConfigChange]:
    if doc_b is None or doc_a is None:
        return []
    from advisor_core.config.plain import json_plain

    flat_b, flat_a = _flatten(json_plain(doc_b.data)), _flatten(json_plain(doc_a.data))
    out = []
    for key in sorted(set(flat_b) | set(flat_a)):
        vb, va = flat_b.get(key), flat_a.get(key)
        if vb != va:
            out.append(ConfigChange(key=key, before=vb, after=va))
    return out


def _flatten(node: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(node, dict):
        out: dict[str, str] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}/{str(k).replace('~', '~0').replace('/', '~1')}"))
        return out
    return {prefix or "/": json.dumps(node, sort_keys=True, ensure_ascii=False)}


def _comparability(before: Any, after: Any, b: SideMeasures, a: SideMeasures) -> list[str]:
    notes = []
    if b.layout and a.layout and b.layout != a.layout:
        notes.append(f"parallel layout differs (before {_fmt_layout(b.layout)}, after {_fmt_layout(a.layout)}): "
                     "per-rank step times are not compared, only the cluster's")
    cb, ca = before.inputs().config, after.inputs().config
    if cb is not None and ca is not None:
        dims = [(k, cb.get(k), ca.get(k)) for k in ("model.type", "model.num_layers", "model.num_heads")]
        other = [f"{k.split('.', 1)[1]} {x} → {y}" for k, x, y in dims if x != y]
        if other:
            notes.append("another model (" + ", ".join(other) + "): kernels are not compared op by op")
            return notes
    sb, sa = set(b.by_cell), set(a.by_cell)
    if sb and sa and len(sb & sa) < 0.5 * min(len(sb), len(sa)):
        notes.append(f"kernels: the runs share {len(sb & sa)} of {len(sb)} cells: not the same network, not compared")
    return notes


def _fmt_layout(layout: dict[str, Any]) -> str:
    return " × ".join(f"{k}{v}" for k, v in layout.items() if v)
