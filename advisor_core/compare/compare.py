"""``advisor compare``: did the fix work, and was the estimate right.

Both sides are analysed (BEFORE's findings may come from the saved report the user acted
on instead — checked to be a report of BEFORE first, :func:`check_report`). Step times are
compared over steady-state steps (warm-up detected and left out,
:mod:`advisor_core.analyses.steady`), the slowest rank's step standing for the cluster's.

Each finding of BEFORE is looked for in AFTER — same fingerprint (code and where it
points), else same code and config key or cell — and is *gone*, *still there* or
*changed* (still there, its saving moved by more than :data:`CHANGED_FRACTION`). The time
it is about is measured on both runs by the rule's ``measure`` (the data wait, the Cast
kernels of its cells …), else by the steady step time. The measured change is set beside
the estimate as a ratio when the finding is gone, or still reported but its own time
moved beyond the noise (acted on: in part, or with a further step left to take — one more
data worker after the first); a finding whose own time did not move was not fixed, and
one measured only by the step time cannot be told apart from the other changes: no
ratio, and the output says so. A finding whose estimate and measured change are both
within the noise of its own time (:data:`NOISE_FRACTION` of it) is *too small to measure*:
no ratio either.

Kernels are compared by op type and by cell (layer index folded) from the op views, so an
unexpected regression shows; configs key by key. What cannot be compared is said, not
guessed: another parallel layout (per-rank step and kernel times are not comparable, only
the cluster's step), another network (type, layers, heads: kernels not compared), runs
sharing too few cells; other model dims (hidden, FFN, vocab size) are compared and noted.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from advisor_core.compare.model import ConfigChange, Comparison, FindingOutcome, KernelDelta, RankStep
from advisor_core.compare.sides import SideMeasures, measure_side, cell_key
from advisor_core.engine.findings import Finding

# Noise of a measured time, as a fraction of it: run-to-run jitter no fix is measured against. The
# closed loop uses the same floor for the step; for a kernel-time sum, simulated runs differing only
# in the jitter seed differ by at most 0.34 % per compute cell (MatMul, FlashAttention, Cast, norms:
# three seeds of the clean scenario), so 0.5 % covers it.
NOISE_FRACTION = 0.005
CHANGED_FRACTION = 0.3  # a finding still there whose saving moved by more than this is "changed"
KERNEL_MIN_FRACTION = 0.01  # a kernel change below 1 % of the step is not listed as significant
TOP_KERNELS = 12
ARCHITECTURE_KEYS = ("model.type", "model.num_layers", "model.num_heads")


class ReportMismatch(ValueError):
    """The saved report given with ``--report`` is not a report of BEFORE (one line naming both)."""


def compare_runs(before: Any, after: Any, *, before_label: str, after_label: str,
                 before_findings: list[Finding] | None = None, report_inputs: dict[str, Any] | None = None,
                 report_label: str = "the report", select: Iterable[str] | None = None,
                 ignore: Iterable[str] | None = None, workers: int | None = None,
                 before_result: Any = None) -> Comparison:
    """Compare two :class:`~advisor_core.engine.session.Session` (see module docstring).

    ``before_findings`` (from a saved report, whose ``inputs`` are ``report_inputs``) replace
    BEFORE's own analysis as the estimates acted on; BEFORE is still analysed for its
    measurements, and the report is checked against it (:class:`ReportMismatch`).
    ``before_result``: BEFORE's analysis when it was already made on this session (to
    compare one BEFORE with several AFTERs; a session is analysed once — its op views keep
    no kernel order after the first analysis).
    """
    res_b = before_result if before_result is not None else before.analyze(select=select, ignore=ignore)
    findings_b = res_b.findings
    if before_findings is not None:
        ran = {r.code for r in res_b.runs}
        before_findings = [f for f in before_findings if f.code in ran]  # the rules selected here
        check_report(report_inputs or {}, before_findings, before, res_b.findings, report_label, before_label)
        findings_b = before_findings
    res_a = after.analyze(select=select, ignore=ignore)
    side_b, side_a = measure_side(before.run), measure_side(after.run)
    out = Comparison(before=before_label, after=after_label, step_before=side_b.steps, step_after=side_a.steps,
                     breakdown_before=side_b.breakdown, breakdown_after=side_a.breakdown,
                     peak_memory_before=side_b.peak_memory_bytes, peak_memory_after=side_a.peak_memory_bytes,
                     estimates_from="the saved report" if before_findings is not None else "the analysis of BEFORE")
    out.not_comparable, out.notes = _comparability(before, after, side_b, side_a)
    layout_differs = bool(side_b.layout and side_a.layout and side_b.layout != side_a.layout)
    _step_change(out, side_b, side_a)
    if not layout_differs:
        out.ranks = [RankStep(rank=r, before=side_b.rank_means.get(r), after=side_a.rank_means.get(r))
                     for r in sorted(set(side_b.rank_means) | set(side_a.rank_means))]
    out.findings, matched = _outcomes(before, after, findings_b, res_a.findings, out)
    out.new_findings = [{"code": f.code, "title": f.title, "saving_us": f.saving_us, "severity": f.severity.value}
                        for i, f in enumerate(res_a.findings) if i not in matched]
    out.kernels_compared = not any(n.startswith(("another network", "kernels:", "parallel layout"))
                                   for n in out.not_comparable)
    if out.kernels_compared:
        out.kernels, out.regressions = _kernel_deltas(side_b, side_a, out.step_before.mean)
    out.config_changes = _config_changes(before.config_doc, after.config_doc)
    return out


# -- the saved report ---------------------------------------------------------------------------------

def check_report(inputs: dict[str, Any], report: list[Finding], before: Any, own: list[Finding], label: str,
                 before_label: str) -> None:
    """Raise :class:`ReportMismatch` when the saved report is not a report of BEFORE.

    The report's run identity is what its JSON carries: the rank ids (``inputs.ranks``), the
    rank directories' names (host, pid and start time in MindSpore's naming) and its
    findings' fingerprints (code and where they point) — at least one of them must be a
    finding BEFORE's own analysis makes (same fingerprint, or same code and config key or
    cell), unless BEFORE gives none at all. The config's path is not compared: the config
    a run was made with may be given as a copy (``--before-config``).
    """
    desc = before.describe_inputs()
    problems: list[str] = []
    ranks_r, ranks_b = inputs.get("ranks"), desc.get("ranks")
    if isinstance(ranks_r, list) and ranks_b and sorted(ranks_r) != sorted(ranks_b):
        problems.append(f"its ranks are {_ranks(ranks_r)}, BEFORE's {_ranks(ranks_b)}")
    names_r = {Path(str(p)).name for p in inputs.get("profiles") or []}
    names_b = {Path(str(p)).name for p in desc.get("profiles") or []}
    if names_r and names_b and not names_r & names_b:
        problems.append(f"its profiles ({_few(names_r)}) are not BEFORE's ({_few(names_b)})")
    if report and own:
        keys = {f.fingerprint() for f in own} | {k for k in map(_where_key, own) if k is not None}
        if not any(f.fingerprint() in keys or _where_key(f) in keys for f in report):
            problems.append(f"none of its findings ({_codes(report)}) is one BEFORE has ({_codes(own)})")
    if problems:
        raise ReportMismatch(f"{label} is not a report of BEFORE {before_label}: {'; '.join(problems)} "
                             f"(run `advisor analyze {before_label} --format json -o report.json` to make one)")


def _ranks(ids: list[Any]) -> str:
    ids = sorted(int(i) for i in ids)
    return f"{ids[0]}–{ids[-1]}" if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)) else ", ".join(map(str, ids))


def _few(names: set[str]) -> str:
    s = sorted(names)
    return ", ".join(s[:2]) + (f" … {len(s)} in all" if len(s) > 2 else "")


def _codes(findings: list[Finding]) -> str:
    return ", ".join(dict.fromkeys(f.code for f in findings))


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


def _outcomes(before: Any, after: Any, findings_b: list[Finding], findings_a: list[Finding],
              out: Comparison) -> tuple[list[FindingOutcome], set[int]]:
    by_fp = {f.fingerprint(): i for i, f in enumerate(findings_a)}
    by_where: dict[tuple[str, str], int] = {}
    for i, f in enumerate(findings_a):
        k = _where_key(f)
        if k is not None:
            by_where.setdefault(k, i)
    rules_b = before.host.rules()
    matched: set[int] = set()
    outcomes: list[FindingOutcome] = []
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
            o.after_title, o.after_estimate_us = g.title, g.saving_us
            o.status = "changed" if _moved(f.saving_us, g.saving_us, out.noise_us) else "still there"
        reg = rules_b.get(f.code)
        mb, why = _measure(before, reg, f)
        ma, why_a = _measure(after, reg, f) if mb is not None else (None, None)
        if mb is not None and ma is not None:
            o.metric, o.before_us, o.after_us = mb.name, mb.value_us, ma.value_us
            o.measured_us = mb.value_us - ma.value_us
            o.noise_us = NOISE_FRACTION * max(abs(mb.value_us), abs(ma.value_us))
        elif why or why_a:
            o.note = f"its rule's measure failed ({why or why_a}); the step time stands in"
        outcomes.append(o)
    moved = [o for o in outcomes if o.status != "still there"]
    for o in outcomes:
        if o.measured_us is None and out.step_change_us is not None:
            o.metric = "steady step time"
            o.before_us, o.after_us = out.step_before.mean, out.step_after.mean
            o.measured_us, o.noise_us = out.step_change_us, out.noise_us
            if o.status != "still there" and len(moved) > 1:
                o.note = (f"the step change is shared by the {len(moved)} findings that went or changed; "
                          "fix one at a time to measure each")
        if o.status == "gone" and o.estimate_memory_bytes is not None and out.peak_memory_before is not None \
                and out.peak_memory_after is not None:
            o.measured_memory_bytes = out.peak_memory_before - out.peak_memory_after  # the run's peak: shared
        if o.measured_us is None:
            continue
        noise = o.noise_us or 0.0
        o.within_noise = abs(o.measured_us) <= noise and abs(o.estimate_us or 0.0) <= noise
        # a finding AFTER still reports was acted on when its own time moved (a fix in part, or one that left
        # a further step to take); if it did not move, it was not fixed and no ratio is claimed
        acted_on = o.status == "gone" or (o.metric != "steady step time" and abs(o.measured_us) > noise)
        if acted_on and not o.within_noise and o.estimate_us and abs(o.estimate_us) > 1e-9:
            o.ratio = o.measured_us / o.estimate_us
    return outcomes, matched


def _moved(before_us: float | None, after_us: float | None, noise_us: float | None) -> bool:
    if before_us is None or after_us is None:
        return before_us != after_us
    return abs(before_us - after_us) > max(CHANGED_FRACTION * abs(before_us), noise_us or 0.0)


def _measure(session: Any, reg: Any, finding: Finding) -> tuple[Any, str | None]:
    """The rule's own measure of ``finding`` on ``session``'s run, or ``None`` (and why, when it failed)."""
    if reg is None or session.run is None:
        return None, None
    from advisor_core.engine.context import RuleContext
    from advisor_core.engine.runner import rule_options

    rule = reg.cls(rule_options(reg.cls, session.options.settings.rule_options.get(finding.code)))
    try:
        return rule.measure(RuleContext(session.inputs(), rule.options, finding.code, rule), finding), None
    except Exception as exc:  # noqa: BLE001 - a rule's measure failing leaves the step time as the measure
        return None, f"{type(exc).__name__}: {exc}"


# -- kernels --------------------------------------------------------------------------------------------

def _kernel_deltas(b: SideMeasures, a: SideMeasures, step_us: float | None) -> tuple[list[KernelDelta], list[KernelDelta]]:
    deltas: list[KernelDelta] = []
    for kind, db, da in (("type", b.by_type, a.by_type), ("cell", b.by_cell, a.by_cell)):
        for k in set(db) | set(da):
            deltas.append(KernelDelta(what=k, kind=kind, before_us=db.get(k, 0.0), after_us=da.get(k, 0.0)))
    floor = KERNEL_MIN_FRACTION * (step_us or 0.0)
    significant = [d for d in deltas if abs(d.delta) > max(floor, 0.05 * max(d.before_us, d.after_us), 1.0)]
    top = sorted(significant, key=lambda d: (-abs(d.delta), d.kind, d.what))
    listed = [d for d in top if d.kind == "type"][:TOP_KERNELS // 2] + [d for d in top if d.kind == "cell"][:TOP_KERNELS // 2]
    regressions = [d for d in top if d.delta > 0]
    return sorted(listed, key=lambda d: (-abs(d.delta), d.kind, d.what)), regressions


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


def _model_dims(cfg: Any) -> dict[str, Any]:
    """The model's sizes where the config has them (hidden, FFN, vocab)."""
    ffn, _ = cfg.ffn_hidden_size()
    return {"hidden_size": cfg.hidden_size, "intermediate_size": ffn, "vocab_size": cfg.vocab_size}


def _comparability(before: Any, after: Any, b: SideMeasures, a: SideMeasures) -> tuple[list[str], list[str]]:
    """What is not compared and why; and remarks on what is compared though it differs."""
    not_compared: list[str] = []
    notes: list[str] = []
    if b.layout and a.layout and b.layout != a.layout:
        not_compared.append(f"parallel layout differs (before {_fmt_layout(b.layout)}, after {_fmt_layout(a.layout)}): "
                            "per-rank step and kernel times are not compared (each rank holds another part of the "
                            "model), only the cluster's step")
    cb, ca = before.inputs().config, after.inputs().config
    if cb is not None and ca is not None:
        arch = [(k.split(".", 1)[1], cb.get(k), ca.get(k)) for k in ARCHITECTURE_KEYS]
        other = [f"{k} {x} → {y}" for k, x, y in arch if x != y]
        if other:
            not_compared.append("another network (" + ", ".join(other) + "): kernels are not compared op by op")
            return not_compared, notes
        db, da = _model_dims(cb), _model_dims(ca)
        dims = [f"{k} {db[k]} → {da[k]}" for k in db if db[k] and da[k] and db[k] != da[k]]
        if dims:
            notes.append("model dims differ (" + ", ".join(dims) + "): kernels are compared by cell and type, "
                         "their shapes changed")
    sb, sa = set(b.by_cell), set(a.by_cell)
    if sb and sa and len(sb & sa) < 0.5 * min(len(sb), len(sa)):
        not_compared.append(f"kernels: the runs share {len(sb & sa)} of {len(sb)} cells: not the same network, "
                            "not compared")
    return not_compared, notes


def _fmt_layout(layout: dict[str, Any]) -> str:
    return " × ".join(f"{k}{v}" for k, v in layout.items() if v)
