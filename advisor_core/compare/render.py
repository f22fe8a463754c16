"""A comparison as text (80 columns and up), JSON, Markdown or one self-contained HTML page.

Text, Markdown and HTML say the same things, built from the same lines: the step time
(mean, median, p90, the steady steps and how warm-up was detected, whether the change is
significant against the noise), the breakdown, peak memory, each finding of BEFORE with
its estimate, the measured change of its own time and the ratio (or why there is none),
new findings of AFTER, the kernels that changed most and the regressions, the config
changes, the ranks that gained least, and what was not compared and why.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import textwrap
from typing import Callable

from advisor_core.compare.model import Comparison, FindingOutcome, KernelDelta, RankStep
from advisor_core.report.html import PAGE_CSS

FORMATS = ("text", "json", "markdown", "html")
RANK_ROWS = 4  # ranks that gained least, listed


def _width() -> int:
    """``ADVISOR_WIDTH``, else the terminal's width, else 80."""
    env = os.environ.get("ADVISOR_WIDTH", "")
    return int(env) if env.isdigit() else shutil.get_terminal_size((80, 24)).columns


def _ms(us: float | None, signed: bool = False) -> str:
    if us is None:
        return "–"
    return f"{us / 1000:+.2f} ms" if signed else f"{us / 1000:.2f} ms"


def _mib(b: float | None, signed: bool = False) -> str:
    if b is None:
        return "–"
    return f"{b / 2**20:+.1f} MiB" if signed else f"{b / 2**20:.1f} MiB"


def _ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}"


def render(c: Comparison, fmt: str) -> str:
    """The comparison in ``fmt`` (one of :data:`FORMATS`)."""
    table: dict[str, Callable[[Comparison], str]] = {"text": text, "json": as_json, "markdown": markdown, "html": page}
    return table[fmt](c)


def as_json(c: Comparison) -> str:
    return json.dumps(c.model_dump(mode="json"), indent=2, ensure_ascii=False)


# -- the lines every format says ----------------------------------------------------------------------

def _step_rows(c: Comparison) -> list[tuple[str, float | None, float | None]]:
    b, a = c.step_before, c.step_after
    return [(k, getattr(b, k), getattr(a, k)) for k in ("mean", "median", "p90")]


def _significance(c: Comparison) -> str | None:
    if c.step_change_us is None:
        return None
    return (("a significant change" if c.step_change_significant else "no significant change")
            + f" (noise {_ms(c.noise_us)}: 0.5 % of the step or 2 SE of the means)")


def _step_summary(c: Comparison) -> str:
    b, change = c.step_before, c.step_change_us
    s = f"{c.step_before.steps} and {c.step_after.steps} steady step(s)"
    if change is not None:
        s = (f"mean {_ms(b.mean)} → {_ms(c.step_after.mean)} ({_ms(-change, signed=True)}"
             + (f", {-100 * change / b.mean:+.1f} %)" if b.mean else ")") + f"; {s}")
    return s


def _breakdown_rows(c: Comparison) -> list[tuple[str, float | None, float | None, float | None]]:
    rows = []
    for key, label in (("computing", "computing"), ("communication_not_overlapped", "comm. not overlapped"),
                       ("free", "free (incl. data wait)"), ("preparing", "preparing")):
        vb, va = getattr(c.breakdown_before, key), getattr(c.breakdown_after, key)
        if vb is None and va is None:
            continue
        rows.append((label, vb, va, None if vb is None or va is None else va - vb))
    return rows


def _memory_line(c: Comparison) -> str | None:
    b, a = c.peak_memory_before, c.peak_memory_after
    if b is None and a is None:
        return None
    d = None if b is None or a is None else a - b
    return f"peak memory (highest rank): {_mib(b)} → {_mib(a)} ({_mib(d, signed=True)})"


def _ratio_cell(o: FindingOutcome) -> str:
    if o.ratio is not None:
        return _ratio(o.ratio)
    if o.within_noise:
        return "within noise"
    return "–" if o.status == "gone" else "– (not fixed)"


def finding_lines(o: FindingOutcome) -> list[str]:
    """What is said about one finding of BEFORE, after its heading (every format says these lines)."""
    lines = []
    own = (f"its own time ({o.metric}): {_ms(o.before_us)} → {_ms(o.after_us)}"
           + (f" ({_ms(-o.measured_us, signed=True)})" if o.measured_us is not None else "")) if o.metric else ""
    if o.within_noise:
        lines.append(f"estimated {_ms(o.estimate_us)}, measured {_ms(o.measured_us)}: both within the noise of "
                     f"its own time (±{_ms(o.noise_us)}, 0.5 % of it), too small to measure")
    elif o.ratio is not None:
        lines.append(f"estimated {_ms(o.estimate_us)}, measured {_ms(o.measured_us)} = {_ratio(o.ratio)} of the "
                     "estimate")
    elif o.status == "gone":
        lines.append(f"estimated {_ms(o.estimate_us)}, measured {_ms(o.measured_us)}")
    elif o.metric == "steady step time":
        lines.append(f"estimated {_ms(o.estimate_us)}; AFTER still reports it and only the step time measures it, "
                     "so no ratio")
    else:
        lines.append(f"estimated {_ms(o.estimate_us)}; not fixed: its own time did not move (±{_ms(o.noise_us)}), "
                     "so no ratio")
    if o.status != "gone":
        lines.append(f"AFTER still reports it, now estimated {_ms(o.after_estimate_us)}")
    if own:
        lines.append(own)
    if o.estimate_memory_bytes is not None:
        lines.append(f"memory: estimated {_mib(o.estimate_memory_bytes, signed=True)}"
                     + (f", measured {_mib(o.measured_memory_bytes, signed=True)} (peak, before − after)"
                        if o.measured_memory_bytes is not None else ""))
    if o.status != "gone" and o.after_title and o.after_title != o.title:
        lines.append(f"now: {o.after_title}")
    if o.note:
        lines.append(o.note)
    return lines


def _regression_count(c: Comparison) -> str:
    if not c.kernels_compared:
        return "not compared (the runs' kernels are not comparable: see not compared)"
    return str(len(c.regressions)) if c.regressions else "none"


def _least_gained(c: Comparison) -> list[RankStep]:
    return sorted((r for r in c.ranks if r.delta is not None), key=lambda r: (r.delta, r.rank))[:RANK_ROWS] \
        if len(c.ranks) > 1 else []


# -- text ------------------------------------------------------------------------------------------------

def _kernel_line(d: KernelDelta) -> str:
    return f"  {d.what[:42]:<42} {_ms(d.before_us):>10} → {_ms(d.after_us):>10} {_ms(d.delta, signed=True):>11}"


def text(c: Comparison, width: int | None = None) -> str:
    width = width or _width()
    b, a = c.step_before, c.step_after
    L = [f"compare {c.before} → {c.after}", "", "step time over the steady steps (the slowest rank's step):",
         f"  {_step_summary(c)}", f"  median {_ms(b.median)} → {_ms(a.median)}, p90 {_ms(b.p90)} → {_ms(a.p90)}"]
    sig = _significance(c)
    if sig:
        L.append(f"  {sig}")
    L += [f"  warm-up, before: {b.warmup}", f"  warm-up, after: {a.warmup}"]
    rows = _breakdown_rows(c)
    if rows:
        L += ["", "breakdown per step (the slowest rank's mean):"]
        L += [f"  {label:<24} {_ms(vb):>11} → {_ms(va):>11}  {_ms(d, signed=True):>11}" for label, vb, va, d in rows]
    mem = _memory_line(c)
    if mem:
        L += ["", mem]
    L += ["", f"findings of BEFORE (estimates from {c.estimates_from}):"]
    if not c.findings:
        L.append("  none")
    for o in c.findings:
        L.append(f"  {o.code} {o.status}: {o.title}")
        L += [f"    {x}" for x in finding_lines(o)]
    if c.new_findings:
        L += ["", "new in AFTER:"] + [f"  {f['code']} ({f['severity']}): {f['title']}" for f in c.new_findings]
    if c.kernels:
        L += ["", "kernels that changed most (per step, mean over ranks):"] + [_kernel_line(d) for d in c.kernels]
    L += ["", "kernel regressions: " + _regression_count(c)]
    L += [_kernel_line(d) for d in c.regressions[:8]]
    if c.config_changes:
        L += ["", "config changes:"] + [f"  {x.key}: {x.before or '(absent)'} → {x.after or '(absent)'}"
                                        for x in c.config_changes]
    least = _least_gained(c)
    if least:
        L += ["", "ranks that gained least (steady mean step):"]
        L += [f"  rank {r.rank:<5} {_ms(r.before):>11} → {_ms(r.after):>11}  {_ms(-(r.delta or 0.0), signed=True):>11}"
              for r in least]
    if c.notes:
        L += ["", "notes:"] + [f"  {n}" for n in c.notes]
    if c.not_comparable:
        L += ["", "not compared:"] + [f"  {n}" for n in c.not_comparable]
    return "\n".join(_wrap(line, width) for line in L) + "\n"


def _wrap(line: str, width: int) -> str:
    """A long line wrapped at ``width``, continuation lines indented two more than the first."""
    if len(line) <= width:
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.fill(line, width=width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


# -- Markdown --------------------------------------------------------------------------------------------

def markdown(c: Comparison) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    b, a = c.step_before, c.step_after
    L = ["# advisor compare", "", f"`{c.before}` → `{c.after}`", "",
         "| step time (steady) | before | after | change |", "|---|---|---|---|"]
    L += [f"| {k} | {_ms(vb)} | {_ms(va)} | {_ms(None if vb is None or va is None else va - vb, True)} |"
          for k, vb, va in _step_rows(c)]
    sig = _significance(c)
    L += ["", f"{b.steps} and {a.steps} steady step(s)." + (f" {sig[0].upper()}{sig[1:]}." if sig else ""),
          "", f"Warm-up: before — {b.warmup}; after — {a.warmup}."]
    rows = _breakdown_rows(c)
    if rows:
        L += ["", "| breakdown per step | before | after | change |", "|---|---|---|---|"]
        L += [f"| {label} | {_ms(vb)} | {_ms(va)} | {_ms(d, True)} |" for label, vb, va, d in rows]
    mem = _memory_line(c)
    if mem:
        L += ["", mem[0].upper() + mem[1:] + "."]
    L += ["", f"## Findings of BEFORE", "", f"Estimates from {c.estimates_from}.", "",
          "| finding | status | estimated | measured | ratio | what was measured |", "|---|---|---|---|---|---|"]
    L += [f"| {o.code} {esc(o.title)} | {o.status} | {_ms(o.estimate_us)} | {_ms(o.measured_us)} | {_ratio_cell(o)} | "
          f"{esc(o.metric)} |" for o in c.findings]
    if not c.findings:
        L.append("| none | | | | | |")
    for o in c.findings:
        L += ["", f"- **{o.code} {o.status}**: {esc(o.title)}"] + [f"  - {esc(x)}" for x in finding_lines(o)]
    if c.new_findings:
        L += ["", "## New in AFTER", ""] + [f"- {f['code']} ({f['severity']}): {esc(f['title'])}" for f in c.new_findings]
    L += ["", "## Kernels"]
    if c.kernels:
        L += ["", "| changed most (per step, mean over ranks) | before | after | change |", "|---|---|---|---|"]
        L += [f"| {esc(d.what)} | {_ms(d.before_us)} | {_ms(d.after_us)} | {_ms(d.delta, True)} |" for d in c.kernels]
    L += ["", f"Kernel regressions: {_regression_count(c)}."]
    if c.regressions:
        L += ["", "| regression | before | after | change |", "|---|---|---|---|"]
        L += [f"| {esc(d.what)} | {_ms(d.before_us)} | {_ms(d.after_us)} | {_ms(d.delta, True)} |"
              for d in c.regressions[:8]]
    if c.config_changes:
        L += ["", "## Config changes", "", "| config key | before | after |", "|---|---|---|"]
        L += [f"| `{x.key}` | {esc(x.before or '(absent)')} | {esc(x.after or '(absent)')} |" for x in c.config_changes]
    least = _least_gained(c)
    if least:
        L += ["", "## Ranks that gained least", "", "| rank | before | after | change |", "|---|---|---|---|"]
        L += [f"| {r.rank} | {_ms(r.before)} | {_ms(r.after)} | {_ms(-(r.delta or 0.0), True)} |" for r in least]
    if c.notes:
        L += ["", "## Notes", ""] + [f"- {esc(n)}" for n in c.notes]
    if c.not_comparable:
        L += ["", "## Not compared", ""] + [f"- {esc(n)}" for n in c.not_comparable]
    return "\n".join(L) + "\n"


# -- HTML ------------------------------------------------------------------------------------------------

def page(c: Comparison) -> str:
    e = html.escape
    b, a = c.step_before, c.step_after

    def table(head: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
        th = "".join(f"<th>{h}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td class=n>{x}</td>" if i >= numeric_from else f"<td>{x}</td>"
                                         for i, x in enumerate(r)) + "</tr>" for r in rows)
        return f"<table><tr>{th}</tr>{body or f'<tr><td colspan={len(head)}>none</td></tr>'}</table>"

    def kernel_rows(ds: list[KernelDelta]) -> list[list[str]]:
        return [[e(d.what), _ms(d.before_us), _ms(d.after_us), _ms(d.delta, True)] for d in ds]

    cls = {"gone": "gone", "still there": "still", "changed": "changed"}
    finds = "".join(
        f"<tr><td>{e(o.code)}</td><td>{e(o.title)}</td><td class={cls[o.status]}>{e(o.status)}</td>"
        f"<td class=n>{_ms(o.estimate_us)}</td><td class=n>{_ms(o.measured_us)}</td><td class=n>{e(_ratio_cell(o))}</td>"
        f"<td>{'<br>'.join(e(x) for x in finding_lines(o))}</td></tr>" for o in c.findings) \
        or "<tr><td colspan=7>none</td></tr>"
    parts = [
        f"<h1>advisor compare</h1><p><code>{e(c.before)}</code> → <code>{e(c.after)}</code></p>",
        "<h2>Step time (steady steps)</h2>",
        table(["", "before", "after", "change"],
              [[k, _ms(vb), _ms(va), _ms(None if vb is None or va is None else va - vb, True)]
               for k, vb, va in _step_rows(c)]),
        f"<p>{b.steps} and {a.steps} steady step(s). {e(_significance(c) or '')}</p>",
        f"<p>Warm-up — before: {e(b.warmup)}; after: {e(a.warmup)}.</p>",
    ]
    rows = _breakdown_rows(c)
    if rows:
        parts += ["<h2>Breakdown per step</h2>",
                  table(["", "before", "after", "change"], [[e(lb), _ms(vb), _ms(va), _ms(d, True)] for lb, vb, va, d in rows])]
    mem = _memory_line(c)
    if mem:
        parts.append(f"<p>{e(mem)}</p>")
    parts += [f"<h2>Findings of BEFORE</h2><p>Estimates from {e(c.estimates_from)}.</p>",
              f"<table><tr><th>code</th><th>finding</th><th>status</th><th>estimated</th><th>measured</th><th>ratio</th>"
              f"<th>what was measured</th></tr>{finds}</table>"]
    if c.new_findings:
        parts += ["<h2>New in AFTER</h2><ul>"
                  + "".join(f"<li>{e(f['code'])} ({e(f['severity'])}): {e(f['title'])}</li>" for f in c.new_findings)
                  + "</ul>"]
    parts += ["<h2>Kernels that changed most</h2>", table(["op type or cell", "before", "after", "change"], kernel_rows(c.kernels)),
              f"<h2>Kernel regressions: {e(_regression_count(c))}</h2>"]
    if c.regressions:
        parts.append(table(["op type or cell", "before", "after", "change"], kernel_rows(c.regressions[:8])))
    if c.config_changes:
        parts += ["<h2>Config changes</h2>",
                  table(["key", "before", "after"], [[f"<code>{e(x.key)}</code>", e(x.before or "(absent)"),
                                                      e(x.after or "(absent)")] for x in c.config_changes], 3)]
    least = _least_gained(c)
    if least:
        parts += ["<h2>Ranks that gained least</h2>",
                  table(["rank", "before", "after", "change"],
                        [[str(r.rank), _ms(r.before), _ms(r.after), _ms(-(r.delta or 0.0), True)] for r in least])]
    if c.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in c.notes) + "</ul>")
    if c.not_comparable:
        parts.append("<h2>Not compared</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in c.not_comparable) + "</ul>")
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>advisor compare</title><style>{PAGE_CSS}"
            f"</style></head><body>{''.join(parts)}</body></html>\n")
