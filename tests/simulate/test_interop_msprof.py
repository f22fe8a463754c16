"""Interop: Huawei's own reader, ``msprof-analyze`` (PyPI), accepts the simulated MindSpore profiles.

The test builds (once, cached) a separate virtual environment with the pinned
``msprof-analyze`` and runs

* ``msprof-analyze cluster -d PROFILE -m all``: its ``cluster_step_trace_time.csv`` must hold,
  per rank, the values of the simulator's ``step_trace_time.csv``, plus stage rows for the
  pipeline stages;
* ``msprof-analyze advisor all -d RANK_DIR -pt mindspore``: exit 0 and a non-zero E2E time.

Cache: ``$ADVISOR_INTEROP_CACHE`` or ``~/.cache/advisor-interop``, one venv per version. When PyPI
cannot be reached the test fails with that message; it never skips.
"""

from __future__ import annotations

import csv
import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import rank_dirs

MSPROF_VERSION = "26.2.0"  # msprof-analyze, pure Python wheel; 26.1.0 reads the same files
pytestmark = pytest.mark.interop


def _cache_root() -> Path:
    return Path(os.environ.get("ADVISOR_INTEROP_CACHE", Path.home() / ".cache" / "advisor-interop"))


@pytest.fixture(scope="session")
def msprof_analyze() -> Path:
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"msprof-analyze-{MSPROF_VERSION}"
    exe = venv / "bin" / "msprof-analyze"
    marker = venv / ".installed"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent test runs build the venv once
        if not (marker.exists() and exe.exists()):
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True)
            pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                                  "-q", f"msprof-analyze=={MSPROF_VERSION}"], capture_output=True, text=True, timeout=600)
            if pip.returncode != 0:
                pytest.fail(f"cannot install msprof-analyze=={MSPROF_VERSION} from PyPI (is PyPI reachable?):\n"
                            f"{pip.stderr[-2000:]}")
            marker.write_text(MSPROF_VERSION)
    return exe


def _run(exe: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


COLUMNS = ["Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage", "Bubble",
           "Communication(Not Overlapped and Exclude Receive)", "Preparing"]


def test_cluster_step_trace_matches_the_simulator(sink_run, msprof_analyze, tmp_path):
    result, out = sink_run
    proc = _run(msprof_analyze, ["cluster", "-d", str(out / "profile"), "-m", "all", "-o", str(tmp_path)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = _csv(tmp_path / "cluster_analysis_output" / "cluster_step_trace_time.csv")
    by_rank = {int(r["Index"]): r for r in rows if r["Type"] == "rank"}
    assert sorted(by_rank) == list(range(result.workload.world))
    for rdir in rank_dirs(out):
        rank = int(next(rdir.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        (ours,) = _csv(rdir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
        theirs = by_rank[rank]
        for col in COLUMNS:
            assert float(theirs[col]) == pytest.approx(float(ours[col]), abs=1e-6), (rank, col)
        # MindFormers' distributed_args let it place the rank in the parallel layout
        s, d, m = result.workload.coords(rank)
        assert (int(theirs["DP Index"]), int(theirs["PP Index"]), int(theirs["TP Index"])) == (d, s, m)
    stages = [r for r in rows if r["Type"] == "stage"]
    assert len(stages) == result.workload.pp
    assert (tmp_path / "cluster_analysis_output" / "cluster_communication.json").is_file()


def test_advisor_all_completes_on_a_rank(clean_run, msprof_analyze, tmp_path):
    result, out = clean_run
    rank_dir = rank_dirs(out)[0]
    proc = _run(msprof_analyze, ["advisor", "all", "-d", str(rank_dir), "-pt", "mindspore", "-o", str(tmp_path), "-l", "en"],
                tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    m = re.search(r"The Model E2E Time is ([0-9.]+)ms", proc.stdout)
    assert m, proc.stdout[-3000:]
    e2e_ms = float(m.group(1))
    assert e2e_ms > 0
    # its E2E is the profiled window: computing + uncovered communication + free
    (ours,) = _csv(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    window_ms = (float(ours["Computing"]) + float(ours["Communication(Not Overlapped)"]) + float(ours["Free"])) / 1000
    assert e2e_ms == pytest.approx(window_ms, rel=1e-3)


def test_cluster_reads_the_db_only_export(sink_run, msprof_analyze, tmp_path):
    """``--export db``: msprof-analyze's DB route (its recipes and step-trace adapter) reads the simulated databases.

    Its per-rank step trace is computed from our TASK / COMPUTE_TASK_INFO / COMMUNICATION_OP intervals and
    must equal the simulator's own numbers (free time aside: msprof counts it from the first task, the
    simulator from the step start); communication time and matrix come from communication_analyzer.db.
    """
    import sqlite3

    from advisor_core.simulate import simulate_scenario

    from .conftest import small_args

    result, text_out = sink_run
    out = tmp_path / "db"
    simulate_scenario("kitchen-sink", out, export="db", **small_args("kitchen-sink"))
    proc = _run(msprof_analyze, ["cluster", "-d", str(out / "profile"), "-m", "all", "-o", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ERROR" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    con = sqlite3.connect(tmp_path / "o" / "cluster_analysis_output" / "cluster_analysis.db")
    rows = con.execute("SELECT [index], computing, communication_not_overlapped, overlapped, communication "
                       "FROM ClusterStepTraceTime WHERE type = 'rank'").fetchall()
    n_time = con.execute("SELECT COUNT(DISTINCT rank_id) FROM ClusterCommunicationTime").fetchone()[0]
    n_matrix = con.execute("SELECT COUNT(*) FROM ClusterCommunicationMatrix").fetchone()[0]
    con.close()
    assert sorted(int(r[0]) for r in rows) == list(range(result.workload.world))
    assert n_time == result.workload.world and n_matrix > 0
    for index, computing, cno, overlapped, communication in rows:
        rdir = next(d for d in rank_dirs(text_out) if (d / f"profiler_info_{index}.json").is_file())
        (ours,) = _csv(rdir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
        got = {"Computing": computing, "Communication(Not Overlapped)": cno, "Overlapped": overlapped,
               "Communication": communication}
        for col, value in got.items():
            assert value == pytest.approx(float(ours[col]), abs=1e-3), (index, col)
