"""A comparison as text (80 columns and up), JSON, Markdown or one self-contained HTML page."""

from __future__ import annotations

import html
import json
import os
import shutil
import textwrap
from typing import Callable

from advisor_core.compare.model import Comparison, KernelDelta
from advisor_core.report.html import PAGE_CSS

FORMATS = ("text", "json", "markdown", "html")


def _width() -> int:
    """``ADVISOR_WIDTH``, else the terminal's width, else 80."""
    env = os.environ.get("ADVISOR_WIDTH", "")
    return int(env) if env.isdigit() else shutil.get_terminal_size((80, 24)).columns


def _ms(us: float | None, signed: bool = False) -> str:
    if us is None:
        return "–"
    return f"{us / 1000:+.2f} ms" if signed else f"{us / 1000:.2f} ms"


def _ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}"


def render(c: Comparison, fmt: str) -> str:
    """The comparison in ``fmt`` (one of :data:`FORMATS`)."""
    table: dict[str, Callable[[Comparison], str]] = {"text": text, "json": as_json, "markdown": markdown, "html": page}
    return table[fmt](c)


def as_json(c: Comparison) -> str:
    return json.dumps(c.model_dump(mode="json"), indent=2, ensure_ascii=False)


def _step_lines(c: Comparison) -> list[str]:
    b, a = c.step_before, c.step_after
    change = c.step_change_us
    lines = [
        "step time over the steady steps (the slowest rank's step):",
        f"  mean {_ms(b.mean)} → {_ms(a.mean)}"
        + (f" ({_ms(-change, signed=True)}" + (f", {-100 * change / b.mean:+.1f} %)" if b.mean else ")")
           if change is not None else ""),
        f"  median {_ms(b.median)} → {_ms(a.median)}, p90 {_ms(b.p90)} → {_ms(a.p90)}",
        f"  {b.steps} and {a.steps} steady step(s)",
    ]
    if change is not None:
        lines.append("  " + ("a significant change" if c.step_change_significant else "no significant change")
                     + f" (noise {_ms(c.noise_us)}: 0.5 % of the step or 2 SE)")
    lines.append(f"  warm-up, before: {b.warmup}")
    lines.append(f"  warm-up, after: {a.warmup}")
    return lines


def _breakdown_lines(c: Comparison) -> list[str]:
    rows = []
    for key, label in (("computing", "computing"), ("communication_not_overlapped", "comm. not overlapped"),
                       ("free", "free (incl. data wait)"), ("preparing", "preparing")):
        vb, va = getattr(c.breakdown_before, key), getattr(c.breakdown_after, key)
        if vb is None and va is None:
            continue
        d = None if vb is None or va is None else va - vb
        rows.append(f"  {label:<24} {_ms(vb):>11} → {_ms(va):>11}  {_ms(d, signed=True):>11}")
    return (["breakdown per step (the slowest rank's mean):"] + rows) if rows else []


def _kernel_line(d: KernelDelta) -> str:
    return f"  {d.what[:44]:<44} {_ms(d.before_us):>10} → {_ms(d.after_us):>10} {_ms(d.delta, signed=True):>11}"


def text(c: Comparison, width: int | None = None) -> str:
    width = width or _width()
    L = [f"compare {c.before} → {c.after}", ""]
    L += _step_lines(c)
    L += [""] + _breakdown_lines(c)
    L += ["", f"findings of BEFORE (estimates from {c.estimates_from}):"]
    if not c.findings:
        L.append("  none")
    for o in c.findings:
        L.append(f"  {o.code} {o.status}: {o.title}")
        L.append(f"    estimated {_ms(o.estimate_us)}, measured {_ms(o.measured_us)}"
                 + (f" = {_ratio(o.ratio)} of the estimate" if o.ratio is not None else ""))
        if o.metric:
            L.append(f"    measured: {o.metric}, {_ms(o.before_us)} → {_ms(o.after_us)}")
        if o.estimate_memory_bytes is not None:
            L.append(f"    memory: estimated {o.estimate_memory_bytes / 2**20:+.1f} MiB, measured "
                     + ("–" if o.measured_memory_bytes is None else f"{o.measured_memory_bytes / 2**20:+.1f} MiB")
                     + " (peak, before − after)")
        if o.status != "gone" and o.after_title and o.after_title != o.title:
            L.append(f"    now: {o.after_title}")
        if o.note:
            L.append(f"    {o.note}")
    if c.new_findings:
        L += ["", "new in AFTER:"] + [f"  {f['code']} ({f['severity']}): {f['title']}" for f in c.new_findings]
    if c.kernels:
        L += ["", "kernels that changed most (per step, mean over ranks):"] + [_kernel_line(d) for d in c.kernels]
    L += ["", "kernel regressions: " + ("none" if not c.regressions else f"{len(c.regressions)}")]
    L += [_kernel_line(d) for d in c.regressions[:8]]
    if c.config_changes:
        L += ["", "config changes:"] + [f"  {x.key}: {x.before or '(absent)'} → {x.after or '(absent)'}"
                                        for x in c.config_changes]
    if c.ranks and len(c.ranks) > 1:
        least = sorted((r for r in c.ranks if r.delta is not None), key=lambda r: (r.delta, r.rank))[:4]
        L += ["", "ranks that gained least (steady mean step):"]
        L += [f"  rank {r.rank:<5} {_ms(r.before):>11} → {_ms(r.after):>11}  {_ms(-r.delta, signed=True):>11}"
              for r in least]
    if c.not_comparable:
        L += ["", "not compared:"] + [f"  {n}" for n in c.not_comparable]
    return "\n".join(_wrap(line, width) for line in L) + "\n"


def _wrap(line: str, width: int) -> str:
    """A long line wrapped at ``width``, continuation lines indented two more than the first."""
    if len(line) <= width:
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.fill(line, width=width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def markdown(c: Comparison) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    b, a = c.step_before, c.step_after
    L = [f"# advisor compare", "", f"`{c.before}` → `{c.after}`", "",
         "| step time (steady) | before | after | change |", "|---|---|---|---|"]
    for key in ("mean", "median", "p90"):
        vb, va = getattr(b, key), getattr(a, key)
        L.append(f"| {key} | {_ms(vb)} | {_ms(va)} | {_ms(None if vb is None or va is None else va - vb, True)} |")
    L += ["", f"Warm-up: before — {b.warmup}; after — {a.warmup}.", ""]
    L += ["| finding of BEFORE | status | estimated | measured | ratio | what was measured |", "|---|---|---|---|---|---|"]
    for o in c.findings:
        L.append(f"| {o.code} {esc(o.title)} | {o.status} | {_ms(o.estimate_us)} | {_ms(o.measured_us)} | "
                 f"{_ratio(o.ratio)} | {esc(o.metric)} |")
    if c.new_findings:
        L += ["", "New in AFTER: " + "; ".join(f"{f['code']} {esc(f['title'])}" for f in c.new_findings)]
    if c.kernels:
        L += ["", "| kernels (per step) | before | after | change |", "|---|---|---|---|"]
        L += [f"| {esc(d.what)} | {_ms(d.before_us)} | {_ms(d.after_us)} | {_ms(d.delta, True)} |" for d in c.kernels]
    L += ["", f"Kernel regressions: {len(c.regressions) or 'none'}."]
    if c.config_changes:
        L += ["", "| config key | before | after |", "|---|---|---|"]
        L += [f"| `{x.key}` | {esc(x.before or '(absent)')} | {esc(x.after or '(absent)')} |" for x in c.config_changes]
    if c.not_comparable:
        L += ["", "Not compared: " + "; ".join(esc(n) for n in c.not_comparable)]
    return "\n".join(L) + "\n"


def page(c: Comparison) -> str:
    e = html.escape
    b, a = c.step_before, c.step_after
    rows = "".join(f"<tr><td>{k}</td><td class=n>{_ms(getattr(b, k))}</td><td class=n>{_ms(getattr(a, k))}</td></tr>"
                   for k in ("mean", "median", "p90"))
    cls = {"gone": "gone", "still there": "still", "changed": "changed"}
    finds = "".join(
        f"<tr><td>{e(o.code)}</td><td>{e(o.title)}</td><td class={cls[o.status]}>{e(o.status)}</td>"
        f"<td class=n>{_ms(o.estimate_us)}</td><td class=n>{_ms(o.measured_us)}</td><td class=n>{_ratio(o.ratio)}</td>"
        f"<td>{e(o.metric)}</td></tr>" for o in c.findings) or "<tr><td colspan=7>none</td></tr>"
    kern = "".join(f"<tr><td>{e(d.what)}</td><td class=n>{_ms(d.before_us)}</td><td class=n>{_ms(d.after_us)}</td>"
                   f"<td class=n>{_ms(d.delta, True)}</td></tr>" for d in c.kernels) or "<tr><td colspan=4>none</td></tr>"
    conf = "".join(f"<tr><td><code>{e(x.key)}</code></td><td>{e(x.before or '(absent)')}</td><td>{e(x.after or '(absent)')}</td></tr>"
                   for x in c.config_changes)
    notes = "".join(f"<li>{e(n)}</li>" for n in c.not_comparable)
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>advisor compare</title><style>{PAGE_CSS}</style>"
            f"</head><body><h1>advisor compare</h1><p><code>{e(c.before)}</code> → <code>{e(c.after)}</code></p>"
            f"<h2>Step time (steady steps)</h2><table><tr><th></th><th>before</th><th>after</th></tr>{rows}</table>"
            f"<p>Warm-up — before: {e(b.warmup)}; after: {e(a.warmup)}.</p>"
            f"<h2>Findings of BEFORE</h2><table><tr><th>code</th><th>finding</th><th>status</th><th>estimated</th>"
            f"<th>measured</th><th>ratio</th><th>what was measured</th></tr>{finds}</table>"
            f"<h2>Kernels that changed most</h2><table><tr><th>op type or cell</th><th>before</th><th>after</th>"
            f"<th>change</th></tr>{kern}</table>"
            + (f"<h2>Config changes</h2><table><tr><th>key</th><th>before</th><th>after</th></tr>{conf}</table>" if conf else "")
            + (f"<h2>Not compared</h2><ul>{notes}</ul>" if notes else "")
            + "</body></html>\n")
