"""``--format html``: one self-contained file of findings, diffs and plotly charts, drawn offline by a browser.

The page under test is the kitchen-sink scenario's (8 ranks, dp2 x mp2 x pp2), charts from the run's own
``Session.analyze(summaries=True)`` frames; hand-made 4-rank frames pin the chart builders' exact values.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from html import escape
from pathlib import Path

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from advisor_core.engine.findings import group_findings
from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.runner import AnalysisResult
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.report.base import RenderContext
from advisor_core.report.formats import BUILTIN_FORMATS
from advisor_core.report.html import CHARTS, HtmlFormat, plotly_packed
from advisor_core.simulate import simulate_scenario

ROOT = Path(__file__).resolve().parents[2]
SIZE_LIMIT = 5_000_000  # bytes for a 64-rank report, plotly's JavaScript included
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def small_summaries() -> dict[str, pd.DataFrame]:
    """Hand-made chart frames for 4 ranks, in the columns of the ``AnalysisResult.summaries`` contract."""
    return {
        "step_breakdown": pd.DataFrame({
            "rank": [0, 1, 2, 3],
            "compute_us": [100_000.0, 101_000.0, 99_000.0, 100_500.0],
            "comm_not_overlapped_us": [20_000.0, 21_000.0, 19_000.0, 20_000.0],
            "free_us": [250.0, 250.0, 250.0, 250.0],
            "data_wait_us": [1_000.0, 0.0, 0.0, 0.0],
        }),
        "top_kernels": pd.DataFrame({
            "name": ["Default/network/layers.0/attention/wq-Linear/MatMul-op0", "Default/network/<Cast&Mul>-op7",
                     "Default/network/layers.0/TransData-op3"],
            "type": ["MatMulV3", "Cast", "TransData"],
            "total_us": [2_000.0, 50_000.0, 12_345.678],
            "share": [0.02, 0.5, 0.1234567],
        }),
        "minddata_queue": pd.DataFrame({
            "time_ms": [0.0, 10.04, 20.0, 0.0, 10.0, 19.96],
            "queue": ["device", "device", "device", "Map(id=3)", "Map(id=3)", "Map(id=3)"],
            "size": [2.0, 1.0, 0.0, 4.0, 8.0, 6.0],
            "capacity": [2.0, 2.0, 2.0, 16.0, 16.0, 16.0],
        }),
        "link_bandwidth": pd.DataFrame({
            "src_rank": [0, 1, 0, 2, 2, 3],
            "dst_rank": [1, 0, 2, 0, 3, 2],
            "bandwidth_gbps": [177.34, 177.34, 20.123, 20.1, 177.0, 176.0],
            "transport": ["HCCS", "HCCS", "RDMA", "RDMA", "HCCS", "HCCS"],
        }),
    }


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> AnalysisResult:  # type: ignore[no-untyped-def]
    """The kitchen-sink scenario (8 ranks, dp2 x mp2 x pp2; 2 layers, 2 steps) analysed with its real chart frames."""
    out = tmp_path_factory.mktemp("html") / "kitchen-sink"
    simulate_scenario("kitchen-sink", out, layers=2, steps=2, ground_truth=False)
    return Session([out], SessionOptions(jobs=1), host=load_plugins(autoload=False)).analyze(summaries=True)


@pytest.fixture(scope="module")
def page(result: AnalysisResult) -> str:
    return HtmlFormat().render(result, RenderContext(inputs=result.inputs))


@pytest.fixture(scope="module")
def hand_page(result: AnalysisResult) -> str:
    """The page drawn from the hand-made frames, whose every chart value is known."""
    return HtmlFormat().render(dataclasses.replace(result, summaries=small_summaries()), RenderContext())


def expand(trace: dict) -> dict:
    """A sparse heatmap trace as the page's script expands it (z, and text when the links mix transports)."""
    sparse = trace["sparse"]
    out = {k: v for k, v in trace.items() if k != "sparse"}
    out["z"] = [[None] * len(trace["x"]) for _ in trace["y"]]
    if "text" in sparse:
        out["text"] = [[""] * len(trace["x"]) for _ in trace["y"]]
    for cell in sparse["cells"]:
        out["z"][cell[0]][cell[1]] = cell[2]
        if "text" in sparse:
            out["text"][cell[0]][cell[1]] = sparse["text"][cell[3]]
    return out


def chart_spec(page: str) -> dict:
    (text,) = re.findall(r'<script type="application/json" id="advisor-charts">(.*?)</script>', page, re.S)
    return json.loads(text)


def test_is_a_builtin_format() -> None:
    assert [f.name for f in BUILTIN_FORMATS] == ["text", "json", "sarif", "markdown", "github", "html"]


def test_header_and_ranked_findings(result: AnalysisResult, page: str) -> None:
    assert page.startswith("<!doctype html>\n") and page.endswith("</body></html>\n")
    assert "<dt>command</dt><dd>analyze</dd>" in page
    high, medium, low = (sum(f.severity.value == s for f in result.findings) for s in ("high", "medium", "low"))
    assert (f'<dt>findings</dt><dd>{len(result.findings)}: <span class="sev high">{high} high</span>, '
            f'<span class="sev medium">{medium} medium</span>, <span class="sev low">{low} low</span></dd>') in page
    assert re.search(r"<dt>step time</dt><dd>\d+\.\d\d ms</dd>", page)
    assert f"<dd>{escape(result.inputs['config'])}</dd>" in page
    positions = [page.index(f'<section class="finding" id="f{i}">') for i in range(1, len(result.findings) + 1)]
    assert positions == sorted(positions)
    for i, f in enumerate(result.findings, 1):
        assert f'<a href="#f{i}">{escape(f.title)}</a>' in page
        assert f'<span class="sev {f.severity.value}">{f.severity.value}</span> {escape(f.title)}' in page
        assert escape(f.message) in page


def test_diffs_are_shown_escaped_and_marked(result: AnalysisResult, page: str) -> None:
    al001 = next(f for f in result.findings if f.code == "AL001" and "hidden_size" in f.title)
    assert '<p>fix (unsafe): set hidden_size to 4112</p>' in page
    assert '<span class="del">-    hidden_size: 4100</span>\n<span class="add">+    hidden_size: 4112</span>' in page
    diffs = [p.diff for f in result.findings for p in f.patches if p.diff]
    assert al001.patches[0].diff in diffs and len(diffs) == page.count('<pre class="diff">')
    assert '<span class="hunk">@@ -134,7 +134,7 @@</span>' in page


def test_folded_findings_say_how_many_places(result: AnalysisResult) -> None:
    f = next(f for f in result.findings if f.code == "AL001" and "hidden_size" in f.title)
    elsewhere = [loc.model_copy(update={"rank": 9}) for loc in f.locations]
    (folded,) = group_findings([f, f.model_copy(update={"locations": elsewhere})])
    page = HtmlFormat().render(dataclasses.replace(result, findings=[folded]), RenderContext())
    n = 2 * len(f.locations)
    assert f'{escape(f.title)} (2 places) <span class="count">2 places</span></h3>' in page
    assert f"<details><summary>{n} locations</summary><ul>" in page
    assert page.count("<li>rank 9 ") == sum(loc.kind == "profile" for loc in f.locations) > 0
    assert "The same cause at 2 places" in page


def test_text_is_escaped(result: AnalysisResult) -> None:
    f = result.findings[0]
    evil = f.model_copy(update={"title": '<img src=x onerror="alert(1)">', "message": "a < b & c"})
    page = HtmlFormat().render(dataclasses.replace(result, findings=[evil], summaries=small_summaries()),
                               RenderContext())
    assert "<img" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page and "a &lt; b &amp; c" in page
    # a kernel name ending the script element cannot: the chart JSON escapes < > &
    assert "<Cast" not in page and "Default/network/\\u0026lt;Cast\\u0026amp;Mul\\u0026gt;-op7" in page


def test_each_chart_has_its_div_and_data(hand_page: str) -> None:
    page = hand_page
    for name in CHARTS:
        assert page.count(f'<div class="chart" id="chart-{name}" data-chart="{name}"></div>') == 1
    spec = chart_spec(page)
    assert sorted(spec["templates"]) == ["dark", "light"]
    charts = spec["charts"]
    assert list(charts) == ["step_breakdown", "top_kernels", "minddata_queue", "link_bandwidth"]

    steps = charts["step_breakdown"]
    assert steps["layout"]["barmode"] == "stack"
    assert [(t["type"], t["name"], t["x"], t["y"]) for t in steps["data"]] == [
        ("bar", "compute", [0, 1, 2, 3], [100.0, 101.0, 99.0, 100.5]),
        ("bar", "communication not overlapped", [0, 1, 2, 3], [20.0, 21.0, 19.0, 20.0]),
        ("bar", "free", [0, 1, 2, 3], [0.25, 0.25, 0.25, 0.25]),
        ("bar", "data wait", [0, 1, 2, 3], [1.0, 0.0, 0.0, 0.0]),
    ]

    (kernels,) = charts["top_kernels"]["data"]
    assert kernels["orientation"] == "h" and kernels["x"] == [50.0, 12.346, 2.0]
    assert kernels["text"] == ["50.0%", "12.3%", "2.0%"]
    # plotly reads its labels as HTML: names are escaped for it
    assert [c[:2] for c in kernels["customdata"]] == [
        ["Default/network/&lt;Cast&amp;Mul&gt;-op7", "Cast"],
        ["Default/network/layers.0/TransData-op3", "TransData"],
        ["Default/network/layers.0/attention/wq-Linear/MatMul-op0", "MatMulV3"],
    ]
    assert charts["top_kernels"]["layout"]["yaxis"]["ticktext"] == [
        "…/network/&lt;Cast&amp;Mul&gt;-op7", "…/layers.0/TransData-op3", "…/wq-Linear/MatMul-op0"]

    queues = charts["minddata_queue"]["data"]
    assert [(t["name"], t["x"], t["y"]) for t in queues] == [
        ("Map(id=3)", [0.0, 10.0, 20.0], [0.25, 0.5, 0.375]),
        ("device", [0.0, 10.0, 20.0], [1.0, 0.5, 0.0]),
    ]

    (links,) = charts["link_bandwidth"]["data"]
    assert links["type"] == "heatmap" and links["x"] == [0, 1, 2, 3] and links["y"] == [0, 1, 2, 3]
    # the links only, [row, column, GB/s, transport]: the page fills the grid
    assert links["sparse"] == {"cells": [[0, 1, 177.3, 0], [0, 2, 20.1, 1], [1, 0, 177.3, 0], [2, 0, 20.1, 1],
                                         [2, 3, 177.0, 0], [3, 2, 176.0, 0]], "text": ["HCCS", "RDMA"]}
    grid = expand(links)
    assert grid["z"] == [[None, 177.3, 20.1, None], [177.3, None, None, None], [20.1, None, None, 177.0],
                         [None, None, 176.0, None]]
    assert grid["text"][0] == ["", "HCCS", "RDMA", ""]


def test_absent_empty_or_incomplete_frames_get_a_note(result: AnalysisResult) -> None:
    frames = {"step_breakdown": small_summaries()["step_breakdown"], "top_kernels": pd.DataFrame(),
              "link_bandwidth": small_summaries()["link_bandwidth"].drop(columns="transport")}
    page = HtmlFormat().render(dataclasses.replace(result, summaries=frames), RenderContext())
    assert list(chart_spec(page)["charts"]) == ["step_breakdown"]
    assert "<figcaption>Top kernels by device time</figcaption><p class=\"note\">not in this run</p>" in page
    assert "<figcaption>MindData queue usage</figcaption><p class=\"note\">not in this run</p>" in page
    assert "<figcaption>Link bandwidth</figcaption><p class=\"note\">not drawn: the frame lacks transport</p>" in page
    bare = HtmlFormat().render(dataclasses.replace(result, summaries={}), RenderContext())
    assert "<script" not in bare and bare.count("not in this run") == 4  # no chart, no plotly


def test_nothing_is_loaded_from_the_network(page: str) -> None:
    packed = plotly_packed()
    assert page.count(packed) == 1  # plotly inlined once, gzipped
    assert gzip.decompress(base64.b64decode(packed)).decode() == get_plotlyjs()
    rest = page.replace(packed, "")
    assert "http://" not in rest and "https://" not in rest
    assert re.findall(r"<(?:script|img|iframe|link)\b[^>]*\b(?:src|href)=", page) == []
    assert re.findall(r'\bhref="(?!#)', rest) == []  # only links within the page


def test_size(page: str, result: AnalysisResult, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    assert path.stat().st_size - len(plotly_packed()) < 60_000  # everything but plotly: findings, diffs, chart data
    assert path.stat().st_size < SIZE_LIMIT


def frames_of_64_ranks(real: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Chart frames of a 64-rank run, in the shape of the real 8-rank ones and larger where a run can be: unrounded
    µs per rank, 500 kernels with the real kernel names' length, 3 queues of 20,000 samples, and every rank linked
    to every other (a dense matrix; kitchen-sink's real 64 ranks have 192 links)."""
    ranks = range(64)
    name = str(real["top_kernels"]["name"].iloc[0])
    return {
        "step_breakdown": pd.DataFrame({"rank": list(ranks), "compute_us": [95_131.153_5 + 7.1 * r for r in ranks],
                                        "comm_not_overlapped_us": [76_530.981_5 - 3.3 * r for r in ranks],
                                        "free_us": [0.123_456 * r for r in ranks],
                                        "data_wait_us": [68_618.601_234] * 64}),
        "top_kernels": pd.DataFrame({"name": [f"{name[:-8]}-op{i:05d}" for i in range(500)],
                                     "type": ["MatMulV3"] * 500, "total_us": [6601.331_562 - i for i in range(500)],
                                     "share": [0.039_399_1] * 500}),
        "minddata_queue": pd.DataFrame({"time_ms": [i * 10.123_456 for i in range(20_000)] * 3,
                                        "queue": [q for q in real["minddata_queue"]["queue"].unique()[:3]
                                                  for _ in range(20_000)],
                                        "size": [float(i % 17) for i in range(60_000)], "capacity": [16.0] * 60_000}),
        "link_bandwidth": pd.DataFrame([{"src_rank": s, "dst_rank": d,
                                         "bandwidth_gbps": 181.855_633 + s / 7 if s // 2 == d // 2 else 23.456_789,
                                         "transport": "HCCS" if s // 2 == d // 2 else "RDMA"}
                                        for s in ranks for d in ranks if s != d]),
    }


def test_a_64_rank_report_stays_well_under_5_mb(result: AnalysisResult) -> None:
    assert sorted(result.summaries) == sorted(CHARTS)  # the real run gives every frame: their shapes are copied
    frames = frames_of_64_ranks(result.summaries)
    page = HtmlFormat().render(dataclasses.replace(result, summaries=frames), RenderContext())
    charts = chart_spec(page)["charts"]
    assert len(charts["step_breakdown"]["data"][0]["x"]) == 64
    assert len(charts["top_kernels"]["data"][0]["x"]) == 20
    assert [len(t["x"]) for t in charts["minddata_queue"]["data"]] == [1000, 1000, 1000]
    assert '<p class="note">every 20th sample shown</p>' in page
    assert len(charts["link_bandwidth"]["data"][0]["sparse"]["cells"]) == 64 * 63
    size = len(page.encode())
    assert size - len(plotly_packed()) < 250_000  # 4,032 links, 3,000 queue points, findings and diffs
    assert size < 2_500_000 < SIZE_LIMIT  # half the limit: plotly is 1.96 MB gzipped (4.8 MB plain)


def test_plotly_is_imported_only_to_render() -> None:
    code = ("import sys, advisor_core.cli, advisor_core.report.formats\n"
            "from advisor_core.engine.plugins import load_plugins\n"
            "load_plugins(autoload=False).formats(); print('plotly' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout == "False\n"


def test_cli_writes_the_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    simulate_scenario("clean", run, layers=2, steps=2, ground_truth=False)
    env = dict(os.environ, ADVISOR_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run([sys.executable, "-m", "advisor_core", "analyze", str(run), "--format", "html", "-o",
                           str(tmp_path / "r.html"), "-q"], capture_output=True, text=True, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout == ""
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "<dt>command</dt><dd>analyze</dd>" in text


# -- in a real browser ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail(f"no browser on PATH ({', '.join(BROWSERS)}): CI must draw the HTML report (.ci/run installs "
                    "chromium)")
    pytest.skip(f"no browser on PATH ({', '.join(BROWSERS)}); CI installs chromium and runs this")


def run_browser(exe: str, page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless=new", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--window-size=1280,2000",
           *args, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def console_lines(stderr: str) -> list[str]:
    """What the page wrote to the console (the page itself writes nothing), uncaught errors included."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.fixture(scope="module")
def written(page: str, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("html-page") / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def drawn_marks(dom: str) -> dict[str, dict[str, int]]:
    """Per chart: the plotly SVG marks it holds (bar traces and their points, scatter traces, heatmap images)."""
    drawn = {}
    for name in CHARTS:
        start = re.search(rf'<div class="chart js-plotly-plot" id="chart-{name}" data-chart="{name}">', dom)
        assert start, name
        body = dom[start.end():dom.index("</figure>", start.end())]
        assert '<svg class="main-svg"' in body, name
        drawn[name] = {mark: body.count(mark) for mark in ('class="trace bars"', 'class="point"',
                                                           'class="trace scatter', 'class="hm"') if mark in body}
    return drawn


@pytest.mark.parametrize("scheme, flags", [("light", ()), ("dark", ("--force-dark-mode",))])
def test_browser_draws_every_chart(browser: str, result: AnalysisResult, written: Path, tmp_path: Path, scheme: str,
                                   flags: tuple) -> None:
    proc = run_browser(browser, written, tmp_path / "profile", "--dump-dom", *flags)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert console_lines(proc.stderr) == []
    assert f'data-theme="{scheme}"' in dom and 'data-charts-drawn="4"' in dom
    s = result.summaries
    assert drawn_marks(dom) == {
        "step_breakdown": {'class="trace bars"': 4, 'class="point"': 4 * len(s["step_breakdown"])},  # parts × ranks
        "top_kernels": {'class="trace bars"': 1, 'class="point"': 20},
        "minddata_queue": {'class="trace scatter': s["minddata_queue"]["queue"].nunique()},
        "link_bandwidth": {'class="hm"': 1},
    }
    assert len(s["step_breakdown"]) == 8 and s["minddata_queue"]["queue"].nunique() == 3


def test_browser_draws_the_hand_made_frames_exactly(browser: str, hand_page: str, tmp_path: Path) -> None:
    path = tmp_path / "hand.html"
    path.write_text(hand_page, encoding="utf-8")
    proc = run_browser(browser, path, tmp_path / "profile", "--dump-dom")
    assert console_lines(proc.stderr) == [] and 'data-charts-drawn="4"' in proc.stdout
    assert drawn_marks(proc.stdout) == {
        "step_breakdown": {'class="trace bars"': 4, 'class="point"': 16},  # 4 parts × 4 ranks
        "top_kernels": {'class="trace bars"': 1, 'class="point"': 3},
        "minddata_queue": {'class="trace scatter': 2},
        "link_bandwidth": {'class="hm"': 1},
    }


def test_browser_screenshot(browser: str, written: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    shot = tmp_path_factory.mktemp("artefacts") / "report-screenshot.png"
    proc = run_browser(browser, written, shot.parent / "profile", f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 1280  # width from the IHDR chunk
    assert len(data) > 100_000  # a drawn page, not a blank one
    print(f"\nscreenshot of the kitchen-sink report: {shot}")  # pytest -s shows it; the file stays in pytest's tmp
    if os.environ.get("ADVISOR_UPDATE_SCREENSHOT") == "1":
        # the README's picture: the same page drawn the same way (docs/make_screenshot.py, one maker)
        docs = ROOT / "docs"
        subprocess.run([sys.executable, str(docs / "make_screenshot.py"), str(docs / "report-screenshot.png")],
                       check=True, timeout=120)
