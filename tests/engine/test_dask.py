"""Per-rank units on a Dask cluster: the same report as one process, faults named, never a hang.

A LocalCluster with two worker processes on the loopback interface is started here and
stopped by the fixture; ``distributed`` is in the test extras, so this never skips in CI.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import shutil
import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.simulate import simulate_scenario

from engine_support import run_cli


@pytest.fixture(scope="module")
def run16(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dask") / "ks16"
    simulate_scenario("kitchen-sink", out, ranks=16, layers=2, steps=2, ground_truth=False)
    return out


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR)
    try:
        assert lc.scheduler_address.startswith("tcp://127.0.0.1:")
        yield lc
    finally:
        lc.close(timeout=30)


def _json_report(run: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    proc = run_cli("analyze", str(run), "--format", "json", "-o", str(out), "--no-plugins", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(out.read_text())


def test_same_report_as_one_process(run16: Path, tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    local = _json_report(run16, tmp_path, "--jobs", "1")
    remote = _json_report(run16, tmp_path, "--scheduler", cluster.scheduler_address)
    assert remote == local
    assert len(local["inputs"]["ranks"]) == 16 and len(local["findings"]) >= 8


def test_unreachable_scheduler_is_one_line(run16: Path) -> None:
    t = time.perf_counter()
    proc = run_cli("analyze", str(run16), "--scheduler", "tcp://127.0.0.1:9", "--scheduler-timeout", "2")
    assert time.perf_counter() - t < 30
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("advisor: cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 2 s "
                                   "(OSError: Timed out trying to connect to tcp://127.0.0.1:9 after 2 s)")
    assert proc.stdout == ""


def test_a_rank_the_workers_cannot_read(run16: Path, tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    shutil.copytree(run16, run)
    session = Session([run], SessionOptions(scheduler=cluster.scheduler_address), host=load_plugins(autoload=False))
    ranks = list(session.run)  # discovered here, then the rank's files disappear before the workers read them
    victim = ranks[5]
    shutil.rmtree(victim.path / "ASCEND_PROFILER_OUTPUT")
    result = session.analyze()
    mine = [d for d in result.diagnostics if d.path and str(victim.path) in d.path and d.severity.value == "error"]
    assert mine and any("does not exist" in d.message for d in mine)
    assert not result.errors and result.findings  # the other ranks are analysed


def test_scheduler_setting_and_environment(run16: Path, tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "advisor.toml").write_text(f'scheduler = "{cluster.scheduler_address}"\n')
    out = tmp_path / "s.json"
    proc = run_cli("analyze", str(run16), "--format", "json", "-o", str(out), "--no-plugins", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(out.read_text())["findings"]
    with Client(cluster.scheduler_address, timeout="10s") as c:  # the run's tasks went to this cluster
        prefixes = c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert {"advisor-unit", "rank_op_view"} <= set(prefixes)  # units, and op views fetched for rules
    proc = run_cli("analyze", str(run16), "--format", "json", "-o", str(out), "--no-plugins", "--scheduler-timeout", "2",
                   env={"ADVISOR_SCHEDULER": "tcp://127.0.0.1:9"}, cwd=tmp_path)
    assert proc.returncode == 2 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in proc.stderr


def test_a_worker_killed_mid_run(run16: Path, tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    reference = Session([run16], SessionOptions(jobs=1), host=load_plugins(autoload=False)).analyze()
    killed: list[int] = []

    def kill_one(phase: str, done: int, total: int) -> None:
        if phase == "ranks" and done == 1 and not killed:
            nanny = next(iter(cluster.workers.values()))
            pid = nanny.process.process.pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    session = Session([run16], SessionOptions(scheduler=cluster.scheduler_address, scheduler_timeout=20),
                      host=load_plugins(autoload=False))
    t = time.perf_counter()
    result = session.analyze(progress=kill_one)
    assert time.perf_counter() - t < 120
    assert killed
    lost = [d.message for d in result.diagnostics if d.code == "rank-not-analysed"]
    if lost:  # Dask gave up on a rank: it is named, the rest is reported
        assert all(m.startswith("rank ") and "was not analysed" in m for m in lost)
    else:  # recomputed: the full report
        assert [(f.code, f.title, round(f.saving_us or 0, 3)) for f in result.findings] == \
               [(f.code, f.title, round(f.saving_us or 0, 3)) for f in reference.findings]
