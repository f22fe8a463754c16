"""``advisor simulate --export db``: the same run, written as MindSpore's SQLite export, gives the same findings.

Every scenario is simulated again with ``export="db"`` (kernel, step and memory tables in
``ascend_mindspore_profiler_{rank}.db``, communication and step breakdown in ``analysis.db``, no
text copy of them) and analysed; its JSON findings must equal those of the text export, except
for the names of the profile files they point at (``kernel_details.csv`` → the DB file) and the
fingerprints made from those names.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from advisor_core.engine.session import Session, SessionOptions
from advisor_core.report.base import RenderContext
from advisor_core.report.formats import result_json
from advisor_core.simulate import SCENARIOS, simulate_scenario

from .conftest import rank_dirs, small_args

_PROFILE_FILE = re.compile(r"(ASCEND_PROFILER_OUTPUT/)[^\"/]+\.(?:csv|json|db)")


def _findings(root: Path) -> tuple[list[dict], list[dict]]:
    session = Session([root], SessionOptions(jobs=1))
    result = session.analyze()
    data = result_json(result, RenderContext(inputs=result.inputs, root=root))
    text = json.dumps({"findings": data["findings"], "skipped": data["skipped"]})
    text = text.replace(str(root), "ROOT")
    text = _PROFILE_FILE.sub(r"\1FILE", text)
    text = re.sub(r'"fingerprint": "[0-9a-f]+"', '"fingerprint": "-"', text)
    out = json.loads(text)
    return out["findings"], out["skipped"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_db_export_gives_the_text_findings(scenario_runs, tmp_path, name):
    _, text_out = scenario_runs[name]
    db_out = tmp_path / name
    simulate_scenario(name, db_out, export="db", **small_args(name))
    for rdir in rank_dirs(db_out):
        apo = rdir / "ASCEND_PROFILER_OUTPUT"
        assert not (apo / "kernel_details.csv").exists() and not (apo / "trace_view.json").exists()
        assert (apo / "communication_analyzer.db").is_file()
    text_findings, text_skipped = _findings(text_out)
    db_findings, db_skipped = _findings(db_out)
    assert [f["code"] for f in db_findings] == [f["code"] for f in text_findings]
    assert db_findings == text_findings
    assert db_skipped == text_skipped
    if name != "clean":
        assert text_findings


def test_db_tables_and_strings(scenario_runs, tmp_path):
    out = tmp_path / "both"
    simulate_scenario("clean", out, export="both", **small_args("clean"))
    rdir = rank_dirs(out)[0]
    apo = rdir / "ASCEND_PROFILER_OUTPUT"
    assert (apo / "kernel_details.csv").is_file()  # both exports side by side
    con = sqlite3.connect(apo / "ascend_mindspore_profiler_0.db")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"STRING_IDS", "TASK", "COMPUTE_TASK_INFO", "COMMUNICATION_OP", "STEP_TIME", "META_DATA",
            "MEMORY_RECORD", "ENUM_HCCL_DATA_TYPE", "ENUM_HCCL_LINK_TYPE"} <= tables
    n_compute = con.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO").fetchone()[0]
    n_comm = con.execute("SELECT COUNT(*) FROM COMMUNICATION_OP").fetchone()[0]
    # every op type is an interned string, and the communication ops have their tasks through connectionId
    assert con.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO c LEFT JOIN STRING_IDS s ON s.id = c.opType "
                       "WHERE s.value IS NULL").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM COMMUNICATION_OP o JOIN TASK t ON t.connectionId = o.connectionId"
                       ).fetchone()[0] == n_comm
    con.close()
    with open(apo / "kernel_details.csv", encoding="utf-8") as fh:
        assert sum(1 for _ in fh) - 1 == n_compute + n_comm
    con = sqlite3.connect(apo / "communication_analyzer.db")
    assert con.execute("SELECT COUNT(*) FROM StepTraceTime").fetchone()[0] == 1
    con.close()
