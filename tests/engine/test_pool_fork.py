"""Worker processes are forked from the client (Linux), on its main thread, before its own lane starts.

Each lane's first rank has its kernel table read ahead while the client imports (the largest tables, one
per lane); the fork waits for those reads, and a worker claims the one read for it from the memory it
inherits.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import multiprocessing.context as mpc
import os
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from engine_support import kitchen_sink_profile

from advisor_core.engine import rankwork
from advisor_core.engine.ahead import begin_ahead
from advisor_core.loaders import csvtable, readahead
from advisor_core.loaders.kernels import KERNELS

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory) -> Path:
    return kitchen_sink_profile(tmp_path_factory.mktemp("fork") / "three", ranks=3, steps=1)


def test_workers_fork_on_the_main_thread_before_the_client_lane(three_ranks: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    from advisor_core.cli import main

    events: list[tuple[str, str]] = []

    class RecordingProcess(mpc.ForkProcess):
        def start(self) -> None:
            events.append(("fork", threading.current_thread().name))
            reading = [t.name for t in threading.enumerate() if t.name.startswith("advisor-readahead")]
            events.extend(("still reading", name) for name in reading)  # must be none: Arrow mid-read
            super().start()

    class RecordingContext(mpc.ForkContext):
        Process = RecordingProcess

    real_digest = rankwork.digest_rank

    def client_lane(rank, rules):  # type: ignore[no-untyped-def]
        events.append(("rank", threading.current_thread().name))  # in a worker, this list is the worker's copy
        events.append(("reads kept", str(len(readahead.pending_paths()))))
        return real_digest(rank, rules)

    real_read = csvtable.read_csv_table

    def slow_ahead(*args, **kw):  # type: ignore[no-untyped-def]
        if threading.current_thread().name.startswith("advisor-readahead"):
            time.sleep(0.5)  # still reading when the client is ready to fork, unless it waits
        return real_read(*args, **kw)

    real_wait = readahead.wait_all

    def waited() -> None:
        real_wait()
        events.append(("reads ended", threading.current_thread().name))

    monkeypatch.setattr(rankwork, "_context", RecordingContext)
    monkeypatch.setattr(rankwork, "digest_rank", client_lane)
    monkeypatch.setattr(csvtable, "read_csv_table", slow_ahead)
    monkeypatch.setattr(readahead, "wait_all", waited)
    reports = {}
    for jobs in ("2", "1"):
        out = tmp_path / f"j{jobs}.json"
        code = main(["analyze", str(three_ranks), "--no-plugins", "--jobs", jobs, "--format", "json", "-o", str(out),
                     "--quiet"])
        assert code == 1
        reports[jobs] = out.read_bytes()
        if jobs == "2":
            # one worker (two lanes: it and this process), forked before this process took its first rank, once
            # the reads begun ahead had ended
            assert events[:2] == [("reads ended", "MainThread"), ("fork", "MainThread")]
            assert [e for e in events if e[0] in ("fork", "still reading")] == [("fork", "MainThread")]
            assert 1 <= len([e for e in events if e == ("rank", "MainThread")]) <= 2
            # as its lane starts, this process keeps only its own rank's read: the worker's was let go here
            assert events[events.index(("rank", "MainThread")) + 1] == ("reads kept", "1")
            assert readahead._pending == {}  # claimed here, or let go of here for the worker that claims it
    assert reports["1"] == reports["2"]
    assert [e for e in events if e[0] == "fork"] == [("fork", "MainThread")]  # --jobs 1 forks nothing


def test_only_the_main_thread_forks(monkeypatch) -> None:
    methods: list[str] = []
    t = threading.Thread(target=lambda: methods.append(rankwork._context().get_start_method()))
    t.start()
    t.join()
    assert methods == ["spawn"]  # a library caller's thread: the main thread may be holding any lock
    assert rankwork._context().get_start_method() == "fork"


def test_a_pool_that_fails_to_fork_leaves_no_worker_behind(three_ranks: Path, tmp_path: Path, monkeypatch) -> None:
    from advisor_core.cli import main

    started: list[int] = []

    class FailingSecond(mpc.ForkProcess):
        def start(self) -> None:
            if started:
                raise OSError(12, "Cannot allocate memory")
            started.append(1)
            super().start()

    class FailingContext(mpc.ForkContext):
        Process = FailingSecond

    monkeypatch.setattr(rankwork, "_context", FailingContext)
    out = tmp_path / "r.json"
    try:
        assert main(["analyze", str(three_ranks), "--no-plugins", "--jobs", "3", "--format", "json", "-o", str(out),
                     "--quiet"]) == 1
        assert "worker processes stopped (OSError" in out.read_text()
        assert mp.active_children() == []  # the one forked before the failure was stopped, not left waiting
    finally:
        for child in mp.active_children():
            child.terminate()


def test_where_processes_cannot_share_a_lock_every_rank_runs_here(three_ranks: Path, tmp_path: Path,
                                                                  monkeypatch) -> None:
    """No POSIX semaphores (some sandboxes): the rank queue cannot be made, the pool is not started, and the
    report is the one ``--jobs 1`` gives, with a note."""
    from advisor_core.cli import main

    class NoSemaphores(mpc.ForkContext):
        def Lock(self):  # type: ignore[no-untyped-def]
            raise OSError(38, "Function not implemented")

    out = {jobs: tmp_path / f"r{jobs}.json" for jobs in (1, 2)}
    main(["analyze", str(three_ranks), "--no-plugins", "--jobs", "1", "--format", "json", "-o", str(out[1]), "--quiet"])
    monkeypatch.setattr(rankwork, "_context", NoSemaphores)
    assert main(["analyze", str(three_ranks), "--no-plugins", "--jobs", "2", "--format", "json", "-o", str(out[2]),
                 "--quiet"]) == 1
    one, two = (json.loads(out[j].read_text()) for j in (1, 2))
    assert [d["message"] for d in two.pop("diagnostics")] == [
        "worker processes stopped (OSError: [Errno 38] Function not implemented); 3 of 3 rank(s) analysed in this "
        "process instead"]
    one.pop("diagnostics")
    assert one == two
    assert mp.active_children() == []


def test_a_worker_writes_to_the_real_streams(monkeypatch) -> None:
    import gc
    import io

    import pyarrow as pa

    cores, thresholds = pa.cpu_count(), gc.get_threshold()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # as rich's proxy while the display is shown
    try:
        rankwork._init_worker()
        assert sys.stderr is sys.__stderr__ and sys.stdout is sys.__stdout__
    finally:
        pa.set_cpu_count(cores)
        gc.set_threshold(*thresholds)


def test_spawned_workers_need_an_importable_main(monkeypatch) -> None:
    monkeypatch.setattr(rankwork, "_context", lambda: mp.get_context("spawn"))
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # as under `python -c`
    assert not rankwork._workers_can_start()
    monkeypatch.setattr(rankwork, "_context", lambda: mp.get_context("fork"))
    assert rankwork._workers_can_start()  # a forked worker imports nothing again


SPAWNING_MAIN = """
import multiprocessing as mp
import os
import sys
import time

from advisor_core.engine import rankwork

rankwork._context = lambda: mp.get_context("spawn")  # as on macOS and Windows

if __name__ == "__mp_main__":  # a spawned worker: say which ranks it took
    take = rankwork.run_next_pool_job

    def said():
        taken = take()
        with open(os.environ["TAKEN_LOG"], "a") as log:
            log.write(f"{taken[0] if taken else None}\\n")
        return taken

    rankwork.run_next_pool_job = said

if __name__ == "__main__":
    from advisor_core.cli import main

    digest = rankwork.digest_rank

    def slowly(rank, rules):  # this lane waits, so that the worker, a second or so to start, takes some
        time.sleep(1.5)
        return digest(rank, rules)

    rankwork.digest_rank = slowly
    sys.exit(main(sys.argv[1:]))
"""


def test_spawned_workers_take_their_ranks_from_the_queue_they_are_given(three_ranks: Path, tmp_path: Path) -> None:
    """Where workers are spawned, the queue and the jobs reach them as they start (pickled then, as
    ``multiprocessing``'s lock allows only then): the report is the one ``--jobs 1`` gives."""
    import subprocess

    from advisor_core.cli import main

    script, log = tmp_path / "spawning.py", tmp_path / "taken.log"
    script.write_text(SPAWNING_MAIN, encoding="utf-8")
    out = {jobs: tmp_path / f"r{jobs}.json" for jobs in (1, 2)}
    main(["analyze", str(three_ranks), "--no-plugins", "--jobs", "1", "--format", "json", "-o", str(out[1]), "--quiet"])
    proc = subprocess.run([sys.executable, str(script), "analyze", str(three_ranks), "--no-plugins", "--jobs", "2",
                           "--format", "json", "-o", str(out[2]), "--quiet"], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "TAKEN_LOG": str(log)})
    assert proc.returncode == 1, proc.stderr  # findings
    assert proc.stderr == ""  # no worker failed
    assert out[1].read_text() == out[2].read_text()
    taken = [line for line in log.read_text().splitlines() if line != "None"]
    assert taken and len(set(taken)) == len(taken)  # the worker analysed some, each once


def _kernel_csvs(profile: Path) -> list[Path]:
    return sorted(profile.rglob("kernel_details.csv"))


def test_each_lane_s_first_rank_is_read_ahead(three_ranks: Path) -> None:
    csvs = _kernel_csvs(three_ranks)
    largest = sorted(csvs, key=lambda p: (-p.stat().st_size, str(p.parent.parent)))
    keys = begin_ahead([three_ranks], source="auto", jobs=2, scheduler=None)
    try:
        assert [k[0] for k in keys] == [str(p.resolve()) for p in largest[:2]]  # two lanes: the two largest
        assert keys[0][2][:3] == ("name", "type", "accelerator_core")  # what the op view asks for
    finally:
        readahead.discard(keys)
    assert begin_ahead([three_ranks], source="auto", jobs=2, scheduler=None, kernels=False) == []  # --select
    assert begin_ahead([three_ranks], source="auto", jobs=1, scheduler=None) == []  # one core
    assert begin_ahead([three_ranks], source="auto", jobs=None, scheduler=None) == []  # too small for a pool


def test_what_is_read_ahead_for_a_pool_is_bounded(three_ranks: Path, monkeypatch) -> None:
    from advisor_core.engine import ahead

    sizes = sorted((p.stat().st_size for p in _kernel_csvs(three_ranks)), reverse=True)

    def begun(jobs: int) -> int:
        keys = begin_ahead([three_ranks], source="auto", jobs=jobs, scheduler=None)
        readahead.discard(keys)
        return len(keys)

    assert begun(8) == 3  # a lane each, as many as there are ranks
    monkeypatch.setattr(ahead, "MAX_READ_AHEAD", 2)
    assert begun(8) == 2
    monkeypatch.setattr(ahead, "READ_AHEAD_BUDGET_BYTES", sizes[0] + sizes[1] - 1)
    assert begun(8) == 1  # the second would pass the budget
    monkeypatch.setattr(ahead, "READ_AHEAD_BUDGET_BYTES", 1)
    assert begun(8) == 1  # the first is always read, as for a lone rank


def _log_kernel_reads(log: Path, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    """Append each kernel table read, in this process or a worker forked from it, to ``log``: pid, thread, file."""
    from advisor_core.loaders import registry

    real = csvtable.read_csv_table

    def counted(path, spec, columns, sink, **kw):  # type: ignore[no-untyped-def]
        if spec is KERNELS:
            with open(log, "a") as fh:
                fh.write(f"{os.getpid()} {threading.current_thread().name} {Path(path).resolve()}\n")
        return real(path, spec, columns, sink, **kw)

    monkeypatch.setattr(csvtable, "read_csv_table", counted)
    monkeypatch.setattr(registry, "read_csv_table", counted)
    return log


def test_analyze_reads_each_kernel_table_once_across_the_lanes(three_ranks: Path, tmp_path: Path,
                                                               monkeypatch) -> None:
    from advisor_core.cli import main

    log = _log_kernel_reads(tmp_path / "reads.log", monkeypatch)
    out = tmp_path / "r.json"
    assert main(["analyze", str(three_ranks), "--no-plugins", "--jobs", "2", "--format", "json", "-o", str(out),
                 "--quiet"]) == 1
    reads = [line.split(" ", 2) for line in log.read_text().splitlines()]
    ahead = [f for pid, t, f in reads if t.startswith("advisor-readahead")]
    assert len(ahead) == 2 and {pid for pid, t, f in reads if t.startswith("advisor-readahead")} == {str(os.getpid())}
    assert sorted(f for pid, t, f in reads) == sorted(str(p.resolve()) for p in _kernel_csvs(three_ranks))  # once each
    assert readahead._pending == {}


def test_the_ranks_read_ahead_come_first_in_their_lanes(monkeypatch) -> None:
    class FakeRank:
        def __init__(self, i: int) -> None:
            self.path = f"/p/{i}/kernel_details.csv"

        def has_table(self, name: str) -> bool:
            return True

        def table_source(self, name: str) -> tuple[str, str]:
            return (self.path, "kernel_details")

    ranks = [FakeRank(i) for i in range(6)]
    monkeypatch.setattr(readahead, "pending_paths", lambda: {"/p/2/kernel_details.csv", "/p/4/kernel_details.csv"})
    # the pool takes from the left (its one lane: rank 2), this process from the right (rank 4)
    assert rankwork._first_read_ahead([0, 1, 2, 3, 4, 5], ranks, 1) == [2, 0, 1, 3, 5, 4]
    assert rankwork._first_read_ahead([5, 4, 3, 2, 1, 0], ranks, 2) == [4, 2, 5, 3, 1, 0]  # two pool lanes
    monkeypatch.setattr(readahead, "pending_paths", lambda: set())
    assert rankwork._first_read_ahead([3, 1, 2], ranks, 1) == [3, 1, 2]


def test_a_worker_takes_its_rank_from_the_queue_as_it_begins_a_job(monkeypatch) -> None:
    from advisor_core.engine.lanes import SharedRankQueue

    queue = SharedRankQueue([4, 0, 2], mp.get_context("fork"))
    jobs = tuple(f"job {i}" for i in range(5))
    monkeypatch.setattr(rankwork, "_LANE", rankwork._WorkerLane(queue, jobs, "/spill"))  # type: ignore[arg-type]
    monkeypatch.setattr(rankwork, "run_pool_job", lambda job, spill: (job, spill))
    assert queue.take_right() == 2  # the client's lane took one meanwhile
    assert rankwork.run_next_pool_job() == (4, ("job 4", "/spill"))
    assert rankwork.run_next_pool_job() == (0, ("job 0", "/spill"))
    assert rankwork.run_next_pool_job() is None  # a job begun after the last was taken


def test_a_busy_worker_keeps_its_next_job_waiting_while_any_rank_is_queued() -> None:
    """Near the end too: one rank left and a worker busy with its last, the worker still has a job in its pipe,
    which takes the rank the moment the worker is free (else it waited for a round trip through the client)."""
    from advisor_core.engine.lanes import SharedRankQueue

    class CountingPool:
        def __init__(self) -> None:
            self.submitted = 0

        def submit(self, fn):  # type: ignore[no-untyped-def]
            self.submitted += 1
            return object()

    feeder = rankwork._PoolFeeder.__new__(rankwork._PoolFeeder)
    feeder._size, feeder._pool, feeder._running = 1, CountingPool(), {object()}  # one job out: a busy worker's
    feeder._queue = SharedRankQueue([7], mp.get_context("fork"))
    feeder._submit_while_queued()
    assert feeder._pool.submitted == 1 and len(feeder._running) == rankwork.JOBS_PER_WORKER
    feeder._submit_while_queued()
    assert feeder._pool.submitted == 1  # two per worker at most
    feeder._running = set()
    assert feeder._queue.take_right() == 7
    feeder._submit_while_queued()
    assert feeder._pool.submitted == 1  # none queued: nothing more to give


def _lanes_of(monkeypatch) -> dict[int, int]:  # type: ignore[no-untyped-def]
    """Which process analysed each rank (filled as the client adopts the digests)."""
    lanes: dict[int, int] = {}
    real_digest, real_adopt = rankwork.digest_rank, rankwork.adopt_digests

    def digest(rank, rules):  # type: ignore[no-untyped-def]
        d = real_digest(rank, rules)
        d.seconds["lane-pid"] = os.getpid()
        return d

    def adopt(ranks, digests, sink):  # type: ignore[no-untyped-def]
        digests = list(digests)
        lanes.update({d.rank_id: int(d.seconds.pop("lane-pid")) for d in digests})
        return real_adopt(ranks, digests, sink)

    monkeypatch.setattr(rankwork, "digest_rank", digest)
    monkeypatch.setattr(rankwork, "adopt_digests", adopt)
    return lanes


def test_no_rank_waits_for_a_busy_worker_while_the_client_lane_is_free(three_ranks: Path, tmp_path: Path,
                                                                       monkeypatch) -> None:
    """A worker is kept a second job in its pipe, but the job names no rank: a worker held up by a slow rank does
    not hold the next one, which the free lane takes."""
    from advisor_core.cli import main

    client = os.getpid()
    lanes = _lanes_of(monkeypatch)
    real_digest, slowed = rankwork.digest_rank, []

    def slow_first_in_a_worker(rank, rules):  # type: ignore[no-untyped-def]
        if os.getpid() != client and not slowed:
            slowed.append(rank.rank_id)  # this worker's copy of the list
            time.sleep(2.0)
        return real_digest(rank, rules)

    monkeypatch.setattr(rankwork, "digest_rank", slow_first_in_a_worker)
    out = tmp_path / "r.json"
    main(["analyze", str(three_ranks), "--no-plugins", "--jobs", "2", "--format", "json", "-o", str(out), "--quiet"])
    assert sorted(lanes) == [0, 1, 2]
    assert sorted(pid == client for pid in lanes.values()) == [False, True, True]  # the worker did its first only


@pytest.mark.parametrize("jobs", ["2", "3"])  # with a second worker, its take meets the lock held too
def test_a_worker_dead_inside_a_take_leaves_its_ranks_to_the_client(jobs: str, three_ranks: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """A worker killed while it holds the queue's lock: the client's next take says so after the timeout, stops
    the pool and analyses every rank not finished; the report is the one ``--jobs 1`` gives, with the note."""
    from advisor_core.cli import main
    from advisor_core.engine.lanes import SharedRankQueue

    client = os.getpid()
    real_take = SharedRankQueue.take_left

    def die_holding_the_lock(self):  # type: ignore[no-untyped-def]
        if os.getpid() != client:
            self._lock.acquire()
            os._exit(3)
        return real_take(self)

    out = {jobs: tmp_path / f"r{jobs}.json" for jobs in (1, 2)}
    main(["analyze", str(three_ranks), "--no-plugins", "--jobs", "1", "--format", "json", "-o", str(out[1]), "--quiet"])
    monkeypatch.setattr(SharedRankQueue, "take_left", die_holding_the_lock)
    monkeypatch.setattr(SharedRankQueue, "LOCK_TIMEOUT_S", 0.5)
    try:
        main(["analyze", str(three_ranks), "--no-plugins", "--jobs", jobs, "--format", "json", "-o", str(out[2]),
              "--quiet"])
    finally:
        for child in mp.active_children():
            child.terminate()
    one, two = (json.loads(out[j].read_text()) for j in (1, 2))
    notes = [d["message"] for d in two.pop("diagnostics") if d["code"] == "workers-failed"]
    one.pop("diagnostics")
    assert one == two
    assert len(notes) == 1 and notes[0].startswith("worker processes stopped (")
    assert notes[0].endswith("of 3 rank(s) analysed in this process instead")


def test_a_worker_lets_go_of_the_reads_it_inherited_once_its_rank_is_done(three_ranks: Path, monkeypatch) -> None:
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.discover.profiles import discover_profiles

    source = discover_profiles([three_ranks], DiagnosticSink()).ranks[0]
    monkeypatch.setattr(rankwork, "digest_rank", lambda rank, rules: rankwork.RankDigest(rank.rank_id))
    monkeypatch.setitem(readahead._pending, ("/another/lane/kernel_details.csv", "kernels", ("name",)),
                        readahead._Ahead())
    rankwork.run_rank_job(rankwork.RankJob(source, (), rankwork.PluginSpec(False, (), ())))
    assert readahead._pending == {}  # the table read for another lane is not held while this worker runs


def test_a_rank_whose_op_view_is_built_here_stays_in_this_lane(tmp_path: Path, monkeypatch) -> None:
    """A session asked whether its config agrees with a run without IR dumps (``session.mismatches``) before it
    analyses builds the op views of the first and the last rank here, to read the model's shape from: a worker
    given one of those ranks would read its kernel table again. (``analyze`` alone checks after the units.)"""
    from advisor_core.engine.session import Session, SessionOptions

    log = _log_kernel_reads(tmp_path / "reads.log", monkeypatch)
    # four ranks: the worker takes from the queue's left, where rank 0 would be unless this lane keeps it
    four_ranks = kitchen_sink_profile(tmp_path / "four", ranks=4, steps=1)
    config = four_ranks.parent / "config" / "kitchen-sink.yaml"
    reports = {}
    for jobs in (2, 1):
        session = Session([four_ranks, config], SessionOptions(autoload_plugins=False, jobs=jobs))
        assert session.mismatches == []
        assert [r.rank_id for r in session.run if r.holds_op_view_timeline()] == [0, 3]
        reports[jobs] = [f.model_dump(mode="json") for f in session.analyze().findings]
        reads = [line.split(" ", 2)[2] for line in log.read_text().splitlines()]
        log.unlink()
        assert sorted(reads) == sorted(str(p.resolve()) for p in _kernel_csvs(four_ranks))  # each table once
    assert reports[1] == reports[2]


def test_the_result_pipe_holds_a_whole_digest(monkeypatch) -> None:
    """A worker's send of a 1 MB digest is a copy, not a wait for the client's result thread (64 KB at a time)."""
    import fcntl
    from concurrent.futures import ProcessPoolExecutor

    if os.geteuid() != 0 and int(Path("/proc/sys/fs/pipe-max-size").read_text()) < rankwork.RESULT_PIPE_BYTES:
        pytest.skip("this machine lets an unprivileged process widen a pipe less than that")
    f_getpipe_sz = fcntl.F_GETPIPE_SZ
    pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("fork"))
    try:
        reader = pool._result_queue._reader
        before = fcntl.fcntl(reader.fileno(), f_getpipe_sz)
        rankwork._widen_result_pipe(pool)
        assert before < rankwork.RESULT_PIPE_BYTES == fcntl.fcntl(reader.fileno(), f_getpipe_sz)
    finally:
        pool.shutdown()
    rankwork._widen_result_pipe(types.SimpleNamespace())  # no such queue (another Python): left as it is

    def refused(*_args):  # type: ignore[no-untyped-def]
        raise PermissionError(1, "Operation not permitted")  # above /proc/sys/fs/pipe-max-size, unprivileged

    monkeypatch.setattr(fcntl, "fcntl", refused)
    pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("fork"))
    try:
        rankwork._widen_result_pipe(pool)
    finally:
        pool.shutdown()
