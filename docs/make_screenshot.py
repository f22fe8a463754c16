"""Make docs/report-screenshot.png: the HTML report of a simulated kitchen-sink run, drawn by headless Chromium.

    python docs/make_screenshot.py [OUT.png]

Simulates the kitchen-sink scenario (8 ranks, as ``advisor demo``), analyses it, fills
``AnalysisResult.summaries`` from the run's own tables (per-rank step breakdown, kernel
time, MindData queues, communication matrix), renders ``--format html`` and screenshots
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

import pandas as pd

from advisor_core.analyses.step_time import step_breakdown
from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.report.base import RenderContext
from advisor_core.report.html import HtmlFormat
from advisor_core.simulate import simulate_scenario

OUT = Path(__file__).resolve().parent / "report-screenshot.png"


def summaries(session: Session) -> dict[str, pd.DataFrame]:
    """The chart frames, computed from the simulated run's tables."""
    steps = []
    for rank in session.run:
        b = step_breakdown(rank).mean(numeric_only=True)
        steps.append({"rank": rank.rank_id, "compute_us": b["computing_us"],
                      "comm_not_overlapped_us": b["communication_not_overlapped_us"],
                      "free_us": max(b["free_us"] - b["preparing_us"], 0.0), "data_wait_us": b["preparing_us"]})
    kernels = session.table("kernels", ["name", "type", "duration_us"])
    top = kernels.groupby(["name", "type"], as_index=False, observed=True)["duration_us"].sum()
    top = top.rename(columns={"duration_us": "total_us"}).assign(share=lambda d: d.total_us / d.total_us.sum())
    pipe = session.table("minddata_pipeline")
    pipe = pipe[(pipe["rank"] == 0) & (pipe["queue_sizes"].str.len() > 0)]
    queues = [pd.DataFrame({"time_ms": [i * op.sample_interval_ms for i in range(len(op.queue_sizes))],
                            "queue": f"{op.op_type}({op.op_id})", "size": op.queue_sizes,
                            "capacity": float(op.queue_length)}) for op in pipe.itertuples()]
    host = session.table("host_queue")
    host = host[host["rank"] == 0]
    queues.append(pd.DataFrame({"time_ms": host["timestamp_ms"], "queue": "device queue",
                                "size": host["queue_size"], "capacity": host["queue_capacity"]}))
    links = session.table("communication_matrix", ["src_rank", "dst_rank", "bandwidth_gbps", "transport_type"])
    links = links[links["src_rank"] != links["dst_rank"]].rename(columns={"transport_type": "transport"})
    return {"step_breakdown": pd.DataFrame(steps), "top_kernels": top, "minddata_queue": pd.concat(queues),
            "link_bandwidth": links}


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
            result = session.analyze()
            result.summaries = summaries(session)
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
