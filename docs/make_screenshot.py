"""Make docs/report-screenshot.png: the HTML report of a simulated kitchen-sink run, drawn by headless Chromium.

    python docs/make_screenshot.py [OUT.png]

Simulates the kitchen-sink scenario (8 ranks, as ``advisor demo``), analyses it with the chart
frames (``Session.analyze(summaries=True)``: per-rank step breakdown, kernel time, MindData
queues, link bandwidth — what ``advisor analyze --format html`` does), renders the report and screenshots
the top of the page. The simulation is deterministic, so the picture changes only when
the report or the simulator does. Needs chromium, chromium-browser or google-chrome on PATH.
``ADVISOR_UPDATE_SCREENSHOT=1 pytest tests/report/test_html.py`` runs it too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.report.base import RenderContext
from advisor_core.report.html import HtmlFormat
from advisor_core.simulate import simulate_scenario

OUT = Path(__file__).resolve().parent / "report-screenshot.png"


def main(out: Path = OUT) -> None:
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        sys.exit("make_screenshot: no chromium, chromium-browser or google-chrome on PATH")
    out, cwd = out.resolve(), Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the report names the run as `advisor analyze run` would from here
        try:
            simulate_scenario("kitchen-sink", Path("run"), ground_truth=False)
            session = Session([Path("run")], SessionOptions(jobs=1), host=load_plugins(autoload=False))
            result = session.analyze(summaries=True)  # what `advisor analyze --format html` computes
            page = Path(tmp) / "report.html"
            page.write_text(HtmlFormat().render(result, RenderContext(inputs=result.inputs, root=Path(tmp))),
                            encoding="utf-8")
        finally:
            os.chdir(cwd)
        subprocess.run([browser, "--headless=new", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                        f"--user-data-dir={Path(tmp) / 'profile'}", "--window-size=1280,3000",
                        "--virtual-time-budget=10000", f"--screenshot={out}", page.as_uri()],
                       check=True, timeout=60, capture_output=True, stdin=subprocess.DEVNULL)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
