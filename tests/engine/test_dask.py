"""Per-rank units on a Dask cluster: the same report as one process, faults named, never a hang.

A LocalCluster with two worker processes on the loopback interface is started here and
stopped by the fixture; ``distributed`` is in the test extras, so this never skips in CI.
Every wait is bounded: subprocesses and futures have timeouts, and a watchdog ends the
test process (with every thread's traceback) if a test runs past :data:`WATCHDOG_S`.

Faults are made deterministic by patching, on the workers only, the module-level function
the task calls (``run_rank_job`` for a unit, ``build_op_view_of`` for an op view): the
first call anywhere on the cluster takes a lock file, writes its worker's pid and address
and holds; the test then kills exactly that process, or lets it time out.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import cloudpickle
import psutil
import pytest
from distributed import Client, LocalCluster

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.engine.dask_units import DaskUnits, SchedulerError, checked_source
from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.simulate import simulate_scenario

WATCHDOG_S = 240  # a test past this is hung: the process ends with every thread's traceback
CLI_TIMEOUT_S = 180
WAIT_S = 60  # any single wait on the cluster in a test
HOST = load_plugins(autoload=False)
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the patches below travel by value, not by import


@pytest.fixture(autouse=True)
def watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def run16(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dask") / "ks16"
    simulate_scenario("kitchen-sink", out, ranks=16, layers=2, steps=2, ground_truth=False)
    return out


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    try:
        assert lc.scheduler_address.startswith("tcp://127.0.0.1:")
        me = psutil.Process()
        listening = [c.laddr for p in [me, *me.children(recursive=True)] for c in p.net_connections("inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and {a.ip for a in listening} == {"127.0.0.1"}, listening  # scheduler, HTTP, workers, nannies
        yield lc
    finally:
        lc.close(timeout=30)


@pytest.fixture(scope="module")
def client(cluster: LocalCluster) -> Iterator[Client]:
    c = Client(cluster.scheduler_address, timeout="30s")
    try:
        yield c
    finally:
        c.close(timeout=30)


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, ADVISOR_WIDTH="200", **(env or {}))
    return subprocess.run([sys.executable, "-m", "advisor_core", *args], capture_output=True, text=True, env=e,
                          cwd=cwd, timeout=CLI_TIMEOUT_S)


def _json_report(run: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    proc = _cli("analyze", str(run), "--format", "json", "-o", str(out), "--no-plugins", "-q", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(out.read_text())


def _computed_since(cluster: LocalCluster, t0: float) -> list[str]:
    """Keys the cluster's workers computed (processing → memory) since ``t0``, from the scheduler's transition log."""
    return sorted({str(t.key) for t in list(cluster.scheduler.transition_log)
                   if t.timestamp >= t0 and t.start == "processing" and t.finish == "memory"})


def _units(keys: list[str]) -> list[int]:
    return sorted(int(k.rsplit("-", 1)[1]) for k in keys if k.startswith("advisor-unit-"))


def _on_workers(client: Client, fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` once in every worker process (as a task pinned to it), waiting at most WAIT_S."""
    for addr in client.scheduler_info(n_workers=-1)["workers"]:
        client.submit(fn, *args, workers=[addr], allow_other_workers=False, pure=False).result(timeout=WAIT_S)


def _hold_first(module: str, name: str, lock: str, only_rank: int | None = None) -> None:
    """On a worker: the first call of ``module.name`` on the cluster (for ``only_rank``, if given) takes
    ``lock``, writes ``pid address`` into it and holds until killed, ``lock.release`` appears, or WAIT_S."""
    import importlib

    from distributed import get_worker

    mod = importlib.import_module(module)
    original = getattr(mod, f"_test_saved_{name}", getattr(mod, name))
    address = get_worker().address

    def held(job):  # type: ignore[no-untyped-def]
        if only_rank is None or job.source.identity.rank_id == only_rank:
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                fd = None
            if fd is not None:
                os.write(fd, f"{os.getpid()} {address}".encode())
                os.close(fd)
                deadline = time.monotonic() + WAIT_S
                while not os.path.exists(lock + ".release") and time.monotonic() < deadline:
                    time.sleep(0.05)
        return original(job)

    setattr(mod, f"_test_saved_{name}", original)
    setattr(mod, name, held)


def _fail_rank(module: str, name: str, rank_id: int) -> None:
    """On a worker: ``module.name`` raises for rank ``rank_id``."""
    import importlib

    mod = importlib.import_module(module)
    original = getattr(mod, f"_test_saved_{name}", getattr(mod, name))

    def failing(job):  # type: ignore[no-untyped-def]
        if job.source.identity.rank_id == rank_id:
            raise RuntimeError("disk on fire")
        return original(job)

    setattr(mod, f"_test_saved_{name}", original)
    setattr(mod, name, failing)


def _restore(module: str, name: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    saved = getattr(mod, f"_test_saved_{name}", None)
    if saved is not None:
        setattr(mod, name, saved)
        delattr(mod, f"_test_saved_{name}")


def _kill_when_held(lock: Path, killed: list[str]) -> threading.Thread:
    """A thread that waits (≤ WAIT_S) for ``lock`` and kills the worker process named in it."""
    def run() -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            text = lock.read_text() if lock.exists() else ""
            if " " in text:
                pid, address = text.split(" ", 1)
                os.kill(int(pid), signal.SIGKILL)
                killed.append(address)
                return
            time.sleep(0.05)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait_for_two_workers(client: Client) -> None:
    client.wait_for_workers(2, timeout=WAIT_S)  # a killed worker is restarted by its nanny


# -- the same report ------------------------------------------------------------------------------------

def test_same_report_as_one_process(run16: Path, tmp_path: Path, cluster: LocalCluster) -> None:
    local = _json_report(run16, tmp_path, "--jobs", "1")
    t0 = time.time()
    remote = _json_report(run16, tmp_path, "--scheduler", cluster.scheduler_address)
    assert remote == local
    assert len(local["inputs"]["ranks"]) == 16 and len(local["findings"]) >= 8
    done = _computed_since(cluster, t0)
    assert _units(done) == list(range(16))  # every rank's unit ran on the cluster's workers
    assert any(k.startswith("rank_op_view-") for k in done)  # and the op views the rules asked for


def test_scheduler_setting_and_environment(run16: Path, tmp_path: Path, cluster: LocalCluster) -> None:
    (tmp_path / "advisor.toml").write_text(f'scheduler = "{cluster.scheduler_address}"\n')
    out = tmp_path / "s.json"
    t0 = time.time()
    proc = _cli("analyze", str(run16), "--format", "json", "-o", str(out), "--no-plugins", "-q", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(out.read_text())["findings"]
    assert _units(_computed_since(cluster, t0)) == list(range(16))  # the setting sent the run to this cluster
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _cli("analyze", str(run16), "--no-plugins", "-q", "--scheduler-timeout", "600",
                env={"ADVISOR_SCHEDULER": f"tcp://127.0.0.1:{port}"}, cwd=tmp_path)
    # refused is said at once (the subprocess timeout is far below the 600 s the connect could take)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"advisor: the Dask scheduler at tcp://127.0.0.1:{port} refused the connection: nothing "
                           f"listens on 127.0.0.1:{port} (start one with `dask scheduler --port {port}`)\n")


# -- a scheduler that cannot be used --------------------------------------------------------------------

@pytest.mark.parametrize("address, why", [
    ("http://x", "scheme http:// is not one advisor connects with"),
    ("nonsense", "no port"),
    ("tcp://127.0.0.1:99999", "the port is not a number from 1 to 65535"),
    ("tcp://:8786", "no host"),
    ("tcp://host:8786/path", "it has more than a host and a port"),
    ("tcp://host name:8786", "it contains spaces or control characters"),
])
def test_a_malformed_address_is_refused_before_any_work(address: str, why: str) -> None:
    with pytest.raises(SchedulerError) as exc:
        DaskUnits(address, timeout=600)
    assert str(exc.value) == (f"scheduler address {address!r} is not usable: {why} "
                              "(expected tcp://HOST:PORT, tls://HOST:PORT or local)")


def test_a_bad_address_on_the_command_line_is_one_line(run16: Path) -> None:
    proc = _cli("analyze", str(run16), "-q", "--scheduler", "http://x")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("advisor: scheduler address 'http://x' is not usable: scheme http:// is not one advisor "
                           "connects with (expected tcp://HOST:PORT, tls://HOST:PORT or local)\n")


def test_something_that_is_not_a_scheduler() -> None:
    with socket.socket() as server:  # accepts connections (the kernel's backlog) and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        with pytest.raises(SchedulerError) as exc:
            DaskUnits(f"tcp://127.0.0.1:{port}", timeout=1)
    assert str(exc.value) == (f"no Dask scheduler at tcp://127.0.0.1:{port}: it accepted the connection but sent no "
                              "Dask handshake within 1 s")


# -- faults during the run ------------------------------------------------------------------------------

def test_a_worker_killed_while_it_holds_a_unit(run16: Path, tmp_path: Path, cluster: LocalCluster,
                                               client: Client) -> None:
    reference = Session([run16], SessionOptions(jobs=1), host=HOST).analyze()
    lock, killed = tmp_path / "held", []
    mod = "advisor_core.engine.dask_units"
    _on_workers(client, _hold_first, mod, "run_rank_job", str(lock))
    try:
        killer = _kill_when_held(lock, killed)
        t0 = time.time()
        result = Session([run16], SessionOptions(scheduler=cluster.scheduler_address, scheduler_timeout=20),
                         host=HOST).analyze()
        killer.join(WAIT_S)
        assert len(killed) == 1
        (line,) = [d.message for d in result.diagnostics if d.code == "worker-lost"]
        assert line == f"Dask worker(s) {killed[0]} left during the run; their ranks were recomputed elsewhere"
        assert not [d for d in result.diagnostics if d.code == "rank-not-analysed"]
        assert [(f.code, f.title, round(f.saving_us or 0, 3)) for f in result.findings] == \
               [(f.code, f.title, round(f.saving_us or 0, 3)) for f in reference.findings]
        assert _units(_computed_since(cluster, t0)) == list(range(16))
    finally:
        _wait_for_two_workers(client)
        _on_workers(client, _restore, mod, "run_rank_job")


def test_a_rank_whose_task_fails_is_named_and_left_out(run16: Path, cluster: LocalCluster, client: Client) -> None:
    mod = "advisor_core.engine.dask_units"
    _on_workers(client, _fail_rank, mod, "run_rank_job", 3)
    try:
        session = Session([run16], SessionOptions(scheduler=cluster.scheduler_address), host=HOST)
        result = session.analyze()
    finally:
        _on_workers(client, _restore, mod, "run_rank_job")
    lost = [d.render() for d in result.diagnostics if d.code == "rank-not-analysed"]
    assert lost == [f"error: rank 3 ({session.run.rank(3).path}): not analysed: its task failed on the cluster "
                    "(RuntimeError: disk on fire)"]
    assert result.findings and not result.errors  # the other 15 ranks are reported


def test_a_unit_that_stalls_is_given_up_after_the_task_timeout(run16: Path, tmp_path: Path, cluster: LocalCluster,
                                                               client: Client) -> None:
    ranks = list(Session([run16], SessionOptions(jobs=1), host=HOST).run)[:2]
    mod = "advisor_core.engine.dask_units"
    lock = tmp_path / "held"
    _on_workers(client, _hold_first, mod, "run_rank_job", str(lock), 1)
    units = DaskUnits(cluster.scheduler_address, timeout=10, task_timeout=8)  # rank 0 finishes well within
    try:
        digests = units.run(ranks, [], HOST.spec)
    finally:
        units.close()
        lock.with_name("held.release").touch()
        _on_workers(client, _restore, mod, "run_rank_job")
    assert lock.read_text().split()[1] in client.scheduler_info(n_workers=-1)["workers"]  # the unit was held
    assert digests[0].op_view is not None and not [d for d in digests[0].diagnostics if d.severity.value == "error"]
    assert [d.render() for d in digests[1].diagnostics] == [
        f"error: rank 1 ({ranks[1].path}): not analysed: no task finished on the cluster for 8 s"]


def test_an_op_view_fetch_that_stalls_is_built_here(run16: Path, tmp_path: Path, cluster: LocalCluster,
                                                    client: Client) -> None:
    ranks = list(Session([run16], SessionOptions(jobs=1), host=HOST).run)[:1]
    units = DaskUnits(cluster.scheduler_address, timeout=10, task_timeout=30)
    lock = tmp_path / "held"
    mod = "advisor_core.engine.dask_units"
    try:
        (digest,) = units.run(ranks, [], HOST.spec)
        _on_workers(client, _hold_first, mod, "rank_op_view", str(lock))
        units.task_timeout = 1
        digest.op_view.sink = sink = DiagnosticSink()
        view = digest.op_view.fetch()
    finally:
        units.close()
        lock.with_name("held.release").touch()
        _on_workers(client, _restore, mod, "rank_op_view")
    assert lock.exists()  # a worker held the fetch
    assert view is not None and view.timeline is None and len(view.ops) > 0  # built on the client instead
    assert [d.render() for d in sink] == [
        f"warning: rank 0 ({ranks[0].path}): its op view was not fetched from the Dask cluster (no result within "
        "1 s); built here from its files instead"]


def test_a_worker_killed_while_an_op_view_is_fetched(run16: Path, tmp_path: Path, cluster: LocalCluster,
                                                     client: Client) -> None:
    ranks = list(Session([run16], SessionOptions(jobs=1), host=HOST).run)[:1]
    units = DaskUnits(cluster.scheduler_address, timeout=10, task_timeout=WAIT_S)
    lock, killed = tmp_path / "held", []
    mod = "advisor_core.engine.dask_units"
    try:
        (digest,) = units.run(ranks, [], HOST.spec)
        _on_workers(client, _hold_first, mod, "rank_op_view", str(lock))
        killer = _kill_when_held(lock, killed)
        digest.op_view.sink = sink = DiagnosticSink()
        view = digest.op_view.fetch()
        killer.join(WAIT_S)
    finally:
        units.close()
        _wait_for_two_workers(client)
        _on_workers(client, _restore, mod, "rank_op_view")
    assert len(killed) == 1 and view is not None and len(view.ops) > 0
    assert [d.render() for d in sink] == [
        f"warning: Dask worker(s) {killed[0]} left while op views were fetched; their tasks were recomputed elsewhere"]


# -- a rank the workers cannot read ---------------------------------------------------------------------

def test_a_rank_the_workers_cannot_read_is_one_line(run16: Path, tmp_path: Path, cluster: LocalCluster) -> None:
    """The victim's files hold garbage while the workers read them (the client reads them fine afterwards)."""
    run = tmp_path / "run"
    shutil.copytree(run16, run)
    session = Session([run], SessionOptions(scheduler=cluster.scheduler_address), host=HOST)
    victim = list(session.run)[5]
    files = sorted(p for p in (victim.path / "ASCEND_PROFILER_OUTPUT").iterdir() if p.is_file())
    saved = {p: p.read_bytes() for p in files}
    for p in files:
        p.write_bytes(b"\x00garbage\n")

    def restore_when_units_are_done(phase: str, done: int, total: int) -> None:
        if phase == "ranks" and done == total:
            for p, data in saved.items():
                p.write_bytes(data)

    result = session.analyze(progress=restore_when_units_are_done)
    errors = [d.render() for d in result.diagnostics if d.severity.value == "error"]
    assert errors == [f"error: rank 5 ({victim.path}): not analysed: the Dask worker could not read 6 of its files "
                      "(kernel_details.csv is binary (contains NUL bytes), not text; -v lists them all)"]
    details = sorted(Path(d.path).name for d in result.diagnostics
                     if d.severity.value == "info" and d.message.startswith("rank 5: ") and "binary" in d.message)
    assert details == ["communication.json", "kernel_details.csv", "minddata_pipeline_raw_5.csv",
                       "minddata_pipeline_summary_5.json", "step_trace_time.csv", "trace_view.json"]
    assert not result.errors and result.findings  # the other ranks are analysed


# -- paths are checked before submission ----------------------------------------------------------------

def test_an_artifact_linked_from_outside_its_rank_is_not_sent(run16: Path, tmp_path: Path,
                                                               cluster: LocalCluster) -> None:
    run = tmp_path / "run"
    shutil.copytree(run16, run)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    session = Session([run], SessionOptions(scheduler=cluster.scheduler_address), host=HOST)
    victim = list(session.run)[3]
    link = victim.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    shutil.move(link, outside / "kernel_details.csv")
    link.symlink_to(outside / "kernel_details.csv")
    with pytest.raises(SchedulerError) as exc:
        checked_source(victim._source)
    assert str(exc.value) == (f"artifact {link} resolves to {outside / 'kernel_details.csv'}, outside its rank "
                              f"directory {victim.path.resolve()}; not sent to the cluster")
    t0 = time.time()
    result = session.analyze()
    lost = [d.render() for d in result.diagnostics if d.code == "rank-not-analysed"]
    assert lost == [f"error: rank 3 ({victim.path}): not analysed: {exc.value}"]
    assert _units(_computed_since(cluster, t0)) == [r for r in range(16) if r != 3]  # never submitted


def _refuse_to_read(module: str, name: str) -> None:
    """On a worker: ``module.name`` raises (the original is kept for :func:`_restore`)."""
    import importlib

    mod = importlib.import_module(module)
    setattr(mod, f"_test_saved_{name}", getattr(mod, name))

    def refuse(job):  # type: ignore[no-untyped-def]
        raise RuntimeError("read the kernels again")

    setattr(mod, name, refuse)


def test_an_op_view_fetch_is_served_by_the_worker_that_kept_it(run16: Path, cluster: LocalCluster,
                                                              client: Client) -> None:
    """The fetch goes to the worker that ran the rank's unit, which sends the view it kept: no second read."""
    ranks = list(Session([run16], SessionOptions(jobs=1), host=HOST).run)[:2]
    units = DaskUnits(cluster.scheduler_address, timeout=10, task_timeout=WAIT_S)
    mod = "advisor_core.engine.dask_units"
    try:
        digests = units.run(ranks, [], HOST.spec)
        _on_workers(client, _refuse_to_read, mod, "build_op_view_of")
        views, sinks = [], []
        for d in digests:
            d.op_view.sink = sink = DiagnosticSink()
            views.append(d.op_view.fetch())
            sinks.append(list(sink))
    finally:
        units.close()
        _on_workers(client, _restore, mod, "build_op_view_of")
    assert all(v is not None and len(v.ops) > 0 and v.timeline is None for v in views)
    assert sinks == [[], []]  # fetched from the cluster, not built here after a failure
    assert units.stats.fetches == 2
