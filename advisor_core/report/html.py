"""``--format html``: the report as one self-contained HTML file, with charts.

The page has a header (command, inputs, step time, findings by severity), the ranked
findings as a table, the charts, then each finding in full with its diffs (a folded finding
says how many places it stands for and lists them). The charts are plotly's, one per frame
in ``AnalysisResult.summaries``:

- ``step_breakdown`` (rank, compute_us, comm_not_overlapped_us, free_us, data_wait_us): stacked bars per rank;
- ``top_kernels`` (name, type, total_us, share 0..1): the top 20 by total_us;
- ``minddata_queue`` (time_ms, queue, size, capacity): each queue's usage over time;
- ``link_bandwidth`` (src_rank, dst_rank, bandwidth_gbps, transport): a src × dst heatmap (mean per link).

A frame that is absent, empty or lacks a column gets a one-line note instead of a chart.
plotly's JavaScript is inlined once, gzipped and base64-encoded (the page unpacks it with the
browser's ``DecompressionStream``), so the file loads nothing, works offline and a 64-rank
report is ~2 MB; plotly is imported only when a report is rendered. The heatmap's cells are
sent sparse (a rank has a few peers) and expanded by the page. Chart numbers are rounded
(ms to 3 decimals, GB/s to 1). Light or dark follows ``prefers-color-scheme``.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import math
from html import escape
from typing import TYPE_CHECKING, Any, Callable, Iterable

from advisor_core import __version__
from advisor_core.engine.findings import Finding
from advisor_core.report.base import (
    RenderContext,
    finding_json,
    fmt_value,
    location_text,
    primary_location_text,
    short_scope,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from advisor_core.engine.runner import AnalysisResult

TOP_KERNELS = 20  # bars in the top_kernels chart
MAX_POINTS = 1000  # samples per queue line; longer series are thinned evenly (and the chart says so)
MAX_LOCATIONS = 100  # locations listed per finding (--format json lists them all)

PAGE_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#1b1f24;background:#fff}
table{border-collapse:collapse;margin:.6em 0 1.4em;width:100%}th,td{border-bottom:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}.gone{color:#1a7f37}.still{color:#9a6700}.changed{color:#0969da}
@media (prefers-color-scheme:dark){body{background:#0d1117;color:#e6edf3}th,td{border-color:#30363d}.gone{color:#3fb950}.still{color:#d29922}.changed{color:#58a6ff}}"""
"""The page style the HTML outputs share (this report and ``advisor compare --format html``)."""

_CSS = PAGE_CSS + """
a{color:#0969da}.muted,.note,dt{color:#59636e}dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em}dd{margin:0}
.sev{font-weight:600}.high{color:#cf222e}.medium{color:#9a6700}.low{color:#0969da}
section.finding{border-top:1px solid #d0d7de;padding-top:.4em}.count{font-size:.8em;border:1px solid;border-radius:1em;padding:0 .5em}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:12px}.add{color:#1a7f37}.del{color:#cf222e}.hunk{color:#8250df}
figure{margin:1em 0}figcaption{font-weight:600}
@media (prefers-color-scheme:dark){a{color:#58a6ff}.muted,.note,dt{color:#8d96a0}section.finding{border-color:#30363d}
.high{color:#f85149}.medium{color:#d29922}.low{color:#58a6ff}pre{background:#161b22}.add{color:#3fb950}.del{color:#f85149}.hunk{color:#bc8cff}}"""

# Unpacks plotly (inlined gzip + base64: 1.96 MB instead of 4.82 MB, see _plotly_packed), expands the sparse
# heatmaps, then draws every chart with the plotly template of the colour scheme, again when the scheme changes;
# <html data-theme> and <body data-charts-drawn> say what was drawn. A browser without DecompressionStream
# (Chrome < 80, Firefox < 113, Safari < 16.4) gets a note instead of the charts; the rest of the page is plain HTML.
_DRAW_JS = """(function(){var spec=JSON.parse(document.getElementById('advisor-charts').textContent);
function expand(t){if(!t.sparse)return t;var s=t.sparse,o=Object.assign({},t);delete o.sparse;
o.z=t.y.map(function(){return t.x.map(function(){return null;});});
if(s.text)o.text=t.y.map(function(){return t.x.map(function(){return '';});});
s.cells.forEach(function(c){o.z[c[0]][c[1]]=c[2];if(s.text)o.text[c[0]][c[1]]=s.text[c[3]];});return o;}
Object.keys(spec.charts).forEach(function(n){spec.charts[n].data=spec.charts[n].data.map(expand);});
var mq=window.matchMedia('(prefers-color-scheme: dark)');
function draw(){var theme=mq.matches?'dark':'light';document.documentElement.dataset.theme=theme;
Promise.all(Object.keys(spec.charts).map(function(name){var c=spec.charts[name];
var layout=Object.assign({template:spec.templates[theme],paper_bgcolor:'rgba(0,0,0,0)',margin:{t:30}},c.layout);
return Plotly.react(document.getElementById('chart-'+name),c.data,layout,{displaylogo:false,responsive:true});
})).then(function(d){document.body.dataset.chartsDrawn=d.length;});}
if(!window.DecompressionStream){document.body.dataset.chartsDrawn=0;Array.prototype.forEach.call(
document.querySelectorAll('div.chart'),function(e){e.outerHTML='<p class="note">this browser cannot unpack the '+
'charts (it lacks DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or later draw them)</p>';});return;}
var b=atob(document.getElementById('advisor-plotly').textContent),u=new Uint8Array(b.length);
for(var i=0;i<b.length;i++){u[i]=b.charCodeAt(i);}
new Response(new Blob([u]).stream().pipeThrough(new DecompressionStream('gzip'))).text().then(function(code){
var s=document.createElement('script');s.textContent=code;document.head.appendChild(s);
draw();if(mq.addEventListener){mq.addEventListener('change',draw);}});})();"""


@functools.lru_cache(maxsize=1)
def plotly_packed() -> str:
    """plotly's JavaScript (the plotly package's ``plotly.min.js``, the only bundle it ships) gzipped and base64'd.

    4,815,814 bytes become 1,958,508: a 64-rank report is ~2 MB instead of 4.9 MB, far under the 5 MB it must
    stay below. ``mtime=0``: the same inputs give a byte-identical report.
    """
    from plotly.offline import get_plotlyjs

    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode("ascii")


def _nums(values: Iterable[Any], digits: int) -> list[float | None]:
    """Rounded floats for compact JSON; NaN, inf and missing values become null."""
    out: list[float | None] = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        out.append(round(x, digits) if math.isfinite(x) else None)
    return out


Chart = tuple[list[dict[str, Any]], dict[str, Any], str]  # plotly data, layout, a note under the chart


def _step_breakdown(df: "pd.DataFrame") -> Chart:
    df = df.sort_values("rank", kind="stable")
    ranks = [int(r) for r in df["rank"]]
    parts = (("compute_us", "compute"), ("comm_not_overlapped_us", "communication not overlapped"),
             ("free_us", "free"), ("data_wait_us", "data wait"))
    data = [{"type": "bar", "name": label, "x": ranks, "y": _nums(df[col] / 1000, 3),
             "hovertemplate": f"rank %{{x}}: %{{y:.3f}} ms {label}<extra></extra>"} for col, label in parts]
    layout = {"barmode": "stack", "xaxis": {"title": {"text": "rank"}, "type": "category"},
              "yaxis": {"title": {"text": "ms per step"}}}
    return data, layout, ""


def _top_kernels(df: "pd.DataFrame") -> Chart:
    df = df.sort_values("total_us", ascending=False, kind="stable").head(TOP_KERNELS)
    names = [escape(str(n)) for n in df["name"]]  # plotly reads label text as HTML
    shares = _nums(df["share"] * 100, 1)
    rows = list(range(len(names)))  # bars by position: two kernels with one short label stay two bars
    data = [{"type": "bar", "orientation": "h", "y": rows, "x": _nums(df["total_us"] / 1000, 3),
             "text": [f"{s}%" if s is not None else "" for s in shares], "textposition": "auto",
             "customdata": [[n, escape(str(t)), s] for n, t, s in zip(names, df["type"], shares)],
             "hovertemplate": "%{customdata[0]}<br>%{customdata[1]}: %{x:.3f} ms, %{customdata[2]}% of the time"
                              "<extra></extra>"}]
    layout = {"height": 140 + 24 * len(rows), "xaxis": {"title": {"text": "ms"}},
              "yaxis": {"tickvals": rows, "ticktext": [escape(short_scope(str(n), keep=2)) for n in df["name"]],
                        "autorange": "reversed", "automargin": True}}
    return data, layout, f"the {len(rows)} kernels with the most device time; the share is of all kernel time"


def _minddata_queue(df: "pd.DataFrame") -> Chart:
    data, thinned = [], 1
    for queue, q in df.sort_values("time_ms", kind="stable").groupby("queue", sort=True):
        step = max(1, math.ceil(len(q) / MAX_POINTS))
        q = q.iloc[::step]
        thinned = max(thinned, step)
        usage = q["size"] / q["capacity"].where(q["capacity"] > 0)
        data.append({"type": "scatter", "mode": "lines", "name": escape(str(queue)), "x": _nums(q["time_ms"], 1),
                     "y": _nums(usage, 3),
                     "hovertemplate": "%{x:.1f} ms: %{y:.0%} full<extra>%{fullData.name}</extra>"})
    layout = {"xaxis": {"title": {"text": "time (ms)"}}, "yaxis": {"title": {"text": "size / capacity"},
                                                                   "tickformat": ".0%", "range": [0, 1.05]}}
    return data, layout, f"every {thinned}th sample shown" if thinned > 1 else ""


def _link_bandwidth(df: "pd.DataFrame") -> Chart:
    links = df.groupby(["src_rank", "dst_rank"], sort=True).agg(
        bw=("bandwidth_gbps", "mean"), transport=("transport", lambda s: "/".join(sorted(set(map(str, s))))))
    src = sorted(int(r) for r in df["src_rank"].unique())
    dst = sorted(int(r) for r in df["dst_rank"].unique())
    transports = sorted(set(links["transport"]))
    # Sparse: a rank talks to a few peers, so a dense src × dst grid is mostly empty cells (at 64 ranks 34 KB of
    # nulls for 192 links); the page expands [row, column, GB/s(, transport)] cells into z (and text) itself.
    row_of = {r: i for i, r in enumerate(src)}
    col_of = {r: i for i, r in enumerate(dst)}
    kind_of = {t: i for i, t in enumerate(transports)}
    cells = [[row_of[int(s)], col_of[int(d)], bw, *([kind_of[t]] if len(transports) > 1 else [])]
             for (s, d), bw, t in zip(links.index, _nums(links["bw"], 1), links["transport"]) if bw is not None]
    trace: dict[str, Any] = {"type": "heatmap", "x": dst, "y": src, "sparse": {"cells": cells},
                             "hoverongaps": False, "colorbar": {"title": {"text": "GB/s"}},
                             "hovertemplate": "rank %{y} → rank %{x}: %{z:.1f} GB/s %{text}<extra></extra>"}
    if len(transports) > 1:  # one transport: named in the note, not repeated in every cell
        trace["sparse"]["text"] = [escape(t) for t in transports]
    else:
        trace["hovertemplate"] = trace["hovertemplate"].replace(" %{text}", "")
    layout = {"xaxis": {"title": {"text": "destination rank"}, "type": "category"},
              "yaxis": {"title": {"text": "source rank"}, "type": "category", "autorange": "reversed"}}
    return [trace], layout, "mean bandwidth per link" + (f" ({transports[0]})" if len(transports) == 1 else "")


CHARTS: dict[str, tuple[str, tuple[str, ...], Callable[["pd.DataFrame"], Chart]]] = {
    "step_breakdown": ("Step time per rank",
                       ("rank", "compute_us", "comm_not_overlapped_us", "free_us", "data_wait_us"), _step_breakdown),
    "top_kernels": ("Top kernels by device time", ("name", "type", "total_us", "share"), _top_kernels),
    "minddata_queue": ("MindData queue usage", ("time_ms", "queue", "size", "capacity"), _minddata_queue),
    "link_bandwidth": ("Link bandwidth", ("src_rank", "dst_rank", "bandwidth_gbps", "transport"), _link_bandwidth),
}
"""Chart name (the key in ``AnalysisResult.summaries``) → (title, required columns, builder)."""


def _ms(us: float | None) -> str:
    return "–" if us is None else f"{us / 1000:,.2f} ms"


def _diff(text: str) -> str:
    """A unified diff, escaped, its added, removed and hunk lines marked for colour."""
    def line(s: str) -> str:
        cls = ("add" if s[:1] == "+" and not s.startswith("+++") else "del" if s[:1] == "-" and not s.startswith("---")
               else "hunk" if s.startswith("@@") else "")
        return f'<span class="{cls}">{escape(s)}</span>' if cls else escape(s)
    return '<pre class="diff">' + "\n".join(line(s) for s in text.rstrip("\n").split("\n")) + "</pre>"


def _finding(f: Finding, i: int, ctx: RenderContext) -> str:
    """One finding in full, from its JSON view (``finding_json``, as ``--format json`` has it)."""
    d = finding_json(f, i)
    pct = "" if d["saving_pct"] is None else f" ({d['saving_pct']:.1f}%)"
    count = f' <span class="count">{d["count"]} places</span>' if d["count"] > 1 else ""
    out = [f'<section class="finding" id="f{i}"><h3>{i}. <code>{escape(d["code"])}</code> '
           f'<span class="sev {d["severity"]}">{d["severity"]}</span> {escape(d["title"])}{count}</h3>',
           f'<p class="muted">{escape(d["rule"])}; saving {_ms(d["saving_us"])}{pct} per step, '
           f'confidence {d["confidence"]:.2f}</p>', f'<p>{escape(d["message"])}</p>']
    if f.evidence:
        ev = "; ".join(f"{e.name}={fmt_value(e.value)}{(' ' + e.unit) if e.unit else ''}" for e in f.evidence)
        out.append(f'<p class="muted">evidence: {escape(ev)}</p>')
    locs = [f"<li>{escape(location_text(loc, ctx))}</li>" for loc in f.locations[:MAX_LOCATIONS]]
    more = len(f.locations) - MAX_LOCATIONS
    if more > 0:
        locs.append(f"<li>… and {more} more (--format json lists them)</li>")
    if len(locs) > 4:
        out.append(f"<details><summary>{len(f.locations)} locations</summary><ul>{''.join(locs)}</ul></details>")
    elif locs:
        out.append(f"<ul>{''.join(locs)}</ul>")
    if ctx.show_fixes:
        for p in d["patches"]:
            out.append(f"<p>fix ({escape(p['safety'])}): {escape(p['title'])}</p>")
            if p.get("diff"):
                out.append(_diff(p["diff"]))
            out += [f'<p class="note">note: {escape(n)}</p>' for n in p.get("notes", [])]
    return "\n".join(out) + "</section>"


def _header(result: "AnalysisResult", ctx: RenderContext) -> str:
    by_sev = {s: sum(1 for f in result.findings if f.severity.value == s) for s in ("high", "medium", "low")}
    sev = ", ".join(f'<span class="sev {s}">{n} {s}</span>' for s, n in by_sev.items())
    step = result.step_time_us
    if step is None:  # the step the findings' savings are shares of
        step = max((f.step_time_us for f in result.findings if f.step_time_us), default=None)
    rows = [("command", escape(ctx.command)), ("step time", _ms(step)), ("findings", f"{len(result.findings)}: {sev}")]
    for key, value in ctx.inputs.items():
        if value in (None, [], {}):
            continue
        if isinstance(value, dict):
            value = [f"{k}: {v}" for k, v in value.items()]
        if isinstance(value, list):
            items = "".join(f"<li>{escape(str(v))}</li>" for v in value)
            text = f"<ul>{items}</ul>" if len(value) <= 4 else \
                f"<details><summary>{len(value)}</summary><ul>{items}</ul></details>"
        else:
            text = escape(str(value))
        rows.append((escape(str(key)), text))
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _json(data: Any) -> str:
    """Compact JSON safe inside a <script> element (no ``<``, ``>`` or ``&`` left to end it)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _templates() -> dict[str, Any]:
    """plotly's own white and dark templates, cut to the trace types drawn here."""
    import plotly.io as pio

    out = {}
    for theme, name in (("light", "plotly_white"), ("dark", "plotly_dark")):
        t = pio.templates[name].to_plotly_json()
        out[theme] = {"layout": t["layout"], "data": {k: t["data"][k] for k in ("bar", "scatter", "heatmap")}}
    return out


class HtmlFormat:
    name = "html"
    description = "one self-contained HTML file: ranked findings, diffs and charts (works offline)"

    def render(self, result: "AnalysisResult", ctx: RenderContext) -> str:
        figures, charts = [], {}
        for name, (title, columns, build) in CHARTS.items():
            df = result.summaries.get(name)
            lacking = [] if df is None else [c for c in columns if c not in df.columns]
            if df is None or df.empty:
                body = '<p class="note">not in this run</p>'
            elif lacking:
                body = f'<p class="note">not drawn: the frame lacks {escape(", ".join(lacking))}</p>'
            else:
                data, layout, note = build(df)
                charts[name] = {"data": data, "layout": layout}
                body = f'<div class="chart" id="chart-{name}" data-chart="{name}"></div>' + \
                    (f'<p class="note">{escape(note)}</p>' if note else "")
            figures.append(f"<figure><figcaption>{escape(title)}</figcaption>{body}</figure>")
        rows = "".join(
            f'<tr><td class="n">{i}</td><td><code>{escape(f.code)}</code></td>'
            f'<td class="sev {f.severity.value}">{f.severity.value}</td><td class="n">{_ms(f.saving_us)}</td>'
            f'<td><a href="#f{i}">{escape(f.title)}</a></td>'
            f'<td>{escape(primary_location_text(f, ctx, short=True))}</td></tr>'
            for i, f in enumerate(result.findings, 1))
        table = ("<table><tr><th>#</th><th>code</th><th>severity</th><th>saving/step</th><th>finding</th>"
                 f"<th>where</th></tr>{rows}</table>") if rows else "<p>No findings.</p>"
        skipped = "".join(f"<li>{escape(f'{s.code} {s.name}: {s.reason}')}</li>" for s in result.skipped)
        errors = "".join(f"<li>{escape(e.message)}</li>" for e in result.errors)
        scripts = ""
        if charts:
            scripts = (f'<script type="application/gzip" id="advisor-plotly">{plotly_packed()}</script>\n'
                       f'<script type="application/json" id="advisor-charts">'
                       f'{_json({"templates": _templates(), "charts": charts})}</script>\n<script>{_DRAW_JS}</script>')
        return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
                f'<meta name="viewport" content="width=device-width,initial-scale=1">'
                f'<meta name="color-scheme" content="light dark"><title>advisor report</title>'
                f"<style>{_CSS}</style></head>\n<body><h1>advisor report</h1>"
                f'<p class="muted">advisor {escape(__version__)}; findings ranked by estimated saving × confidence</p>'
                f"{_header(result, ctx)}<h2>Findings</h2>{table}\n<h2>Charts</h2>{''.join(figures)}\n"
                + "\n".join(_finding(f, i, ctx) for i, f in enumerate(result.findings, 1))
                + (f"<h2>Rules that reported nothing</h2><ul>{skipped}</ul>" if skipped else "")
                + (f'<h2>Errors</h2><ul class="high">{errors}</ul>' if errors else "")
                + f"\n{scripts}</body></html>\n")
