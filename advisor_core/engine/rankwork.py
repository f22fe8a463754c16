"""The per-rank unit of an analysis, run on every local core (or, later, a cluster).

For each profiled rank the unit reads the kernel table once into the rank's op view,
derives what every rule shares (step windows and breakdown), and calls the
``rank_evidence`` of each selected rule that has one — the part of a rule that needs
the kernel timeline, which stays where it was built, or that would otherwise run in the
client for one rank after another. What comes back is a
:class:`RankDigest`: the op view without its timeline, the derived values the unit
computed for the client (``Rank.cached(..., hand_over=True)``), each
rule's evidence, and the diagnostics and failures of that rank (from a pool worker, the
op view comes back in a file the client reads only if a rule asks for it:
:mod:`advisor_core.engine.spill`). The client adopts the digests in rank order, so the
report is the same whatever ran the units.

:func:`run_rank_units` runs them in this process (``workers <= 1``) or in this process
and a process pool together (``concurrent.futures``). On Linux the workers are forked
from this process, on its main thread, before its own lane starts: each begins as a
copy with pandas, pyarrow, the plugins and the rules imported (a fresh interpreter
importing them takes most of a second per worker), and no thread of this process is
in the middle of anything it could be holding a lock for. Elsewhere they are spawned.
A worker builds the plugin host from the same options (in a forked one, from modules
already imported) and reads its ranks' files itself; only the ranks'
:class:`RankSource` and the rule codes and options travel to it, as it starts (with
the queue it takes rank indices from: :mod:`advisor_core.engine.lanes`).
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from advisor_core.diagnostics import Diagnostic, DiagnosticSink
from advisor_core.engine.lanes import QueueStuck, SharedRankQueue

# Below this much kernel data in a run, worker processes cost more than they save.
AUTO_PARALLEL_MIN_BYTES = 48 << 20
CPU_PER_WORKER = 2


@dataclass(frozen=True)
class PluginSpec:
    """How the client loaded its plugins, so a worker loads the same ones."""

    autoload: bool | None
    load: tuple[str, ...] = ()
    block: tuple[str, ...] = ()


@dataclass(frozen=True)
class RankJob:
    """What a worker needs for one rank: where its files are, the rules and their options, the plugins."""

    source: Any  # advisor_core.discover.profiles.RankSource
    rules: tuple[tuple[str, Mapping[str, Any]], ...]
    plugins: PluginSpec


@dataclass
class RuleFailure:
    code: str
    message: str
    traceback: str


@dataclass
class RankDigest:
    """One rank's unit of work, as it travels back (small: no kernel rows)."""

    rank_id: int
    op_view: Any = None
    derived: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    failures: list[RuleFailure] = field(default_factory=list)
    tables: dict[Any, Any] = field(default_factory=dict)  # the rules' rank_tables as read here
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # "load", "derive", then per rule code


def rank_tables_of(rules: Iterable[Any]) -> tuple[str, ...]:
    """The per-rank tables the rules read in ``check`` (their ``rank_tables``), in a stable order."""
    return tuple(sorted({t for r in rules for t in getattr(r, "rank_tables", ()) if t != "kernels"}))


def digest_rank(rank: Any, rules: Sequence[tuple[str, Any]]) -> RankDigest:
    """Run the unit on ``rank`` (a :class:`~advisor_core.model.run.Rank`) with instantiated ``rules``.

    The rank's op view is built (and kept on the rank, without its timeline, once the
    unit is done), the shared derived values computed, the tables the rules read per
    rank (``Rule.rank_tables``) read, and each rule's ``rank_evidence`` called; a rule
    that raises is recorded as a failure, never stops the others.
    """
    from advisor_core.analyses.step_time import step_breakdown, step_windows

    sink = DiagnosticSink()
    digest = RankDigest(rank.rank_id)
    view = None
    with rank.diagnostics_to(sink):
        t = time.perf_counter()
        tables: tuple[str, ...] = ()
        try:
            # The step events come from a scan of trace_view.json that holds the interpreter while Arrow
            # reads the kernels on every core without it: overlap the two when Arrow has cores to spare.
            scan = rank.prefetch("step_events") if _arrow_cores() > 1 else None
            try:
                # The tables the rules read per rank, first: while a kernel table read ahead is still being
                # parsed (engine.ahead) this thread would only wait for it.
                tables = rank_tables_of(rule for _, rule in rules)
                for name in tables:
                    if rank.has_table(name):
                        rank.table(name)
                # A second analysis of the same run finds the op view kept without its timeline; the rules'
                # rank evidence reads kernel order, so it is rebuilt rather than given less than the first time.
                rank.ensure_timeline()
                view = rank.op_view()
            finally:
                if scan is not None:
                    scan.join()
            digest.seconds["load"] = time.perf_counter() - t
            t = time.perf_counter()
            step_windows(rank)
            step_breakdown(rank)
        except Exception as exc:  # noqa: BLE001 - one rank's failure stays its own
            digest.failures.append(RuleFailure("", f"the per-rank analysis of rank {rank.rank_id} failed: "
                                                   f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        digest.seconds["derive"] = time.perf_counter() - t
        for code, rule in rules:
            if type(rule).rank_evidence is _base_rank_evidence():
                continue
            t = time.perf_counter()
            try:
                digest.evidence[code] = rule.rank_evidence(rank)
            except Exception as exc:  # noqa: BLE001 - one rule's failure stays its own
                digest.failures.append(RuleFailure(code, f"rule {code} raised {type(exc).__name__} on rank "
                                                         f"{rank.rank_id}: {exc}", traceback.format_exc()))
            digest.seconds[code] = time.perf_counter() - t
    digest.op_view = view.without_timeline() if view is not None else None
    rank.adopt_op_view(digest.op_view)  # the timeline has served; keep the small part
    digest.derived = rank.handed_over()
    digest.tables = rank.loaded_tables(tables)
    digest.diagnostics = list(sink)
    return digest


def _arrow_cores() -> int:
    import pyarrow as pa

    return int(pa.cpu_count())


def _base_rank_evidence() -> Callable[..., Any]:
    from advisor_core.engine.rule import Rule

    return Rule.rank_evidence


# -- worker side -----------------------------------------------------------------------------------

def _init_worker(lane: _WorkerLane | None = None) -> None:
    """One core per worker: the pool runs one worker per core it may use, so Arrow's own threads would only contend.

    The collector runs rarely, as in the ``advisor`` process (see ``advisor_core.cli.run_main``). ``lane``:
    where this worker takes its ranks from (:func:`run_next_pool_job`).
    """
    import gc
    import sys

    import pyarrow as pa

    global _LANE
    _LANE = lane
    pa.set_cpu_count(1)
    gc.set_threshold(200_000, 30, 30)
    # A forked worker inherits the client's streams as they are: while the progress display is shown, rich's
    # proxy of stderr, which would redraw the client's bar from here. The worker writes to the real ones.
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__


@dataclass(frozen=True)
class _WorkerLane:
    """What a pool worker is given as it starts: the queue it takes rank indices from, the job of each
    index, and where it spills op views (``None``: in the digest)."""

    queue: SharedRankQueue
    jobs: tuple[RankJob, ...]
    spill_dir: str | None


_LANE: _WorkerLane | None = None


_WORKER_HOSTS: dict[PluginSpec, Any] = {}


def _plugin_host(spec: PluginSpec) -> Any:
    """The plugin host a worker builds once for ``spec`` (the same plugins as the client)."""
    from advisor_core.engine.plugins import load_plugins

    host = _WORKER_HOSTS.get(spec)
    if host is None:
        host = _WORKER_HOSTS[spec] = load_plugins(autoload=spec.autoload, load=spec.load, block=spec.block)
    return host


def run_rank_job(job: RankJob) -> RankDigest:
    """A worker's entry point: rebuild the rank from its source, then :func:`digest_rank`."""
    from advisor_core.engine.runner import rule_options
    from advisor_core.engine.session import table_loaders
    from advisor_core.model.run import Rank

    host = _plugin_host(job.plugins)
    registered = host.rules()
    sink = DiagnosticSink()
    rank = Rank(job.source, table_loaders(host), sink)
    rules = []
    for code, raw in job.rules:
        reg = registered.get(code)
        if reg is not None:
            cls = reg.cls
            rules.append((code, cls(rule_options(cls, raw))))
    digest = digest_rank(rank, rules)
    digest.diagnostics = list(sink) + digest.diagnostics
    # A forked worker inherits every read the client began ahead; its own is claimed now, the rest would only
    # hold memory the client has freed (and reuses) for as long as this worker runs.
    from advisor_core.loaders import readahead

    readahead.discard_paths(readahead.pending_paths())
    return digest


def run_next_pool_job() -> tuple[int, RankDigest] | None:
    """A pool worker's job: take the next rank from the left of the lanes' queue and run :func:`run_pool_job` on
    it; ``None`` when the queue is empty (another lane took the last)."""
    lane = _LANE
    if lane is None:
        raise RuntimeError("run_next_pool_job runs in a pool worker started with its lane (_init_worker)")
    i = lane.queue.take_left()
    if i is None:
        return None
    return i, run_pool_job(lane.jobs[i], lane.spill_dir)


def run_pool_job(job: RankJob, spill_dir: str | None) -> RankDigest:
    """A pool worker's entry point: :func:`run_rank_job`, the op view handed back through a file in ``spill_dir``
    (see :mod:`advisor_core.engine.spill`) rather than in the digest."""
    digest = run_rank_job(job)
    if spill_dir is not None and digest.op_view is not None:
        from advisor_core.engine.spill import spill_op_view

        digest.op_view = spill_op_view(digest.op_view, spill_dir, digest.rank_id)
    return digest


# -- client side -----------------------------------------------------------------------------------

def _context() -> Any:
    """Where workers come from: forked from this process on Linux when called on the main thread (see the
    module docstring), else spawned.

    Not fork on macOS (system libraries are not fork-safe there; Python's default is spawn) nor Windows; nor
    from another thread (a library caller's), where the main thread may be anywhere, holding any lock.
    """
    import multiprocessing as mp
    import sys

    forks = sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
    return mp.get_context("fork" if forks else "spawn")


def workers_are_forked() -> bool:
    """Would a pool started here fork its workers (and they inherit what this process holds)?"""
    return bool(_context().get_start_method() == "fork")


def pool_size(ranks: Sequence[Any], workers: int | None) -> int:
    """Worker processes the units of ``ranks`` get (1: this process); see :func:`run_rank_units`."""
    return lanes_for(len(ranks), lambda: kernel_bytes(ranks), workers)


def lanes_for(ranks: int, kernel_table_bytes: Callable[[], int], workers: int | None) -> int:
    """Lanes for ``ranks`` ranks whose kernel tables weigh ``kernel_table_bytes()`` (asked only with ``workers``
    unset): ``workers`` (``None``: every core when the run is large enough to gain from it), at most one a rank."""
    if workers is None:
        workers = default_workers() if ranks > 1 and kernel_table_bytes() >= AUTO_PARALLEL_MIN_BYTES else 1
    return max(1, min(workers, ranks))


def default_workers() -> int:
    """Worker processes for ``--jobs`` unset: the cores this process may use."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def kernel_bytes(ranks: Iterable[Any]) -> int:
    """Size of the ranks' kernel tables on disk (what the units will read)."""
    total = 0
    for r in ranks:
        path = _kernel_file(r)
        if path is not None:
            try:
                total += path.stat().st_size
            except OSError:
                pass
    return total


def _kernel_file(rank: Any) -> Any:
    """The file the rank's kernel table is read from (``None`` without one)."""
    src = rank.table_source("kernels") if rank.has_table("kernels") else None
    return src[0] if src is not None else None


def run_rank_units(
    ranks: Sequence[Any],
    rules: Sequence[tuple[str, Any, Mapping[str, Any]]],
    *,
    workers: int | None,
    plugins: PluginSpec | None,
    progress: Callable[[int, int], None] | None = None,
    cluster: Any = None,
) -> list[RankDigest]:
    """The unit for every rank, in rank order.

    ``workers`` is the number of cores the units may use: ``1`` runs them here on one
    core (Arrow's reader included), ``N ≥ 2`` on N single-threaded lanes: this process
    and a pool of N − 1 worker processes, the pool taking the largest ranks first and
    this process the smallest (it starts at once, while a worker is still starting up),
    from the two ends of one queue they share (:mod:`advisor_core.engine.lanes`): a lane
    takes its next rank itself when it is free, so the last ranks go to whichever lane
    is free first. ``None`` picks every core: a pool when the run is large enough to gain
    from it (:data:`AUTO_PARALLEL_MIN_BYTES` of kernel tables), else this process with
    Arrow's threads. ``plugins=None`` (a host built by hand, as tests do) keeps the work
    in this process, since a worker could not rebuild it. ``cluster`` (a
    :class:`~advisor_core.engine.dask_units.DaskUnits`) sends the units to Dask instead.
    """
    n = len(ranks)
    instances = [(code, inst) for code, inst, _ in rules]  # what digest_rank takes
    if cluster is not None:
        if plugins is None:
            from advisor_core.engine.dask_units import SchedulerError

            raise SchedulerError("--scheduler needs the plugins loaded from their entry points (a worker loads the same)")
        return cluster.run(ranks, rules, plugins, progress)
    single_core = workers == 1
    workers = pool_size(ranks, workers)
    if workers <= 1 or plugins is None or not _workers_can_start():
        out = []
        with _arrow_threads(1 if single_core else None):
            for i, r in enumerate(ranks):
                out.append(digest_rank(r, instances))
                if progress:
                    progress(i + 1, n)
        return out
    jobs = tuple(RankJob(r._source, tuple((c, dict(raw)) for c, _, raw in rules), plugins) for r in ranks)
    # largest ranks first, so no lane is left with a big one at the end
    # A forked worker inherits the table read ahead for it; a spawned one inherits nothing (then any read begun
    # ahead is this lane's).
    forks = workers_are_forked()
    by_size = sorted(range(n), key=lambda i: -kernel_bytes([ranks[i]]))
    order = _first_read_ahead(by_size, ranks, workers - 1 if forks else 0)
    # A rank whose op view this process has built (the config's check reads two when there are no IR dumps) is
    # this lane's, before it takes from the queue: a worker would read its kernel table again.
    built = [i for i in order if ranks[i].holds_op_view_timeline()]
    queued = [i for i in order if i not in built]
    ctx = _context()
    try:
        queue = SharedRankQueue(queued, ctx)
    except OSError as exc:  # no lock between processes here (no POSIX semaphores): every rank in this process
        queue, no_pool = SharedRankQueue(queued), exc
    else:
        no_pool = None
    from advisor_core.loaders import readahead

    if forks and no_pool is None:
        readahead.wait_all()  # no Arrow read may run in this process as it forks; the workers inherit the tables
    results: dict[int, RankDigest] = {}
    lock = threading.Lock()

    def finished(i: int, digest: RankDigest) -> None:
        with lock:
            results[i] = digest
            if progress:
                progress(len(results), n)

    # This process is one of the ``workers`` lanes. The pool's lanes take the largest ranks from the queue's left
    # (its results collected on a thread here), this process the smallest from its right, until none is left.
    spill = _spill_dir() if no_pool is None else None
    if no_pool is None:
        feeder = _PoolFeeder(workers - 1, ctx, _WorkerLane(queue, jobs, spill.path if spill is not None else None),
                             finished)
    else:
        feeder = _PoolFeeder.not_started(no_pool)
    started = feeder.error is None
    if forks and started:  # the workers claim these: they take the queue's left end first
        readahead.discard_paths([p for i in order[:workers - 1] if i not in built for p in _kernel_paths(ranks[i])])
    feeder.start()
    with _arrow_threads(1):
        for i in built:
            finished(i, digest_rank(ranks[i], instances))
        try:
            # Once the pool has stopped, a lock a dead worker left held is not waited for any longer.
            while (i := queue.take_right(give_up=feeder.stopped)) is not None:
                finished(i, digest_rank(ranks[i], instances))
        except QueueStuck:
            feeder.stop()  # then what is still queued is left to the loop below
    feeder.join()
    if feeder.error is not None and not isinstance(feeder.error, (BrokenProcessPool, OSError, QueueStuck)):
        raise feeder.error
    # What the workers took and did not finish (a worker died: killed, out of memory), or left queued when this
    # lane stopped taking: analysed here.
    missing = [i for i in range(n) if i not in results]
    for i in missing:
        finished(i, digest_rank(ranks[i], instances))
    if feeder.error is not None and (missing or not started):  # the report says what ran where
        count = missing if started else range(n)
        note = (f"worker processes stopped ({type(feeder.error).__name__}: {feeder.error or 'a worker died'}); "
                f"{len(count)} of {n} rank(s) analysed in this process instead")
        results[count[0]].diagnostics.insert(0, Diagnostic(severity="warning", code="workers-failed", message=note))
    if spill is not None:
        _attach_spilled(results, ranks, spill)
    return [results[i] for i in range(n)]


def _spill_dir() -> Any:
    """Where the pool's workers put the op views (:mod:`advisor_core.engine.spill`); ``None``: in the digests."""
    from advisor_core.engine.spill import SpillDir

    try:
        return SpillDir()
    except OSError:
        return None


def _attach_spilled(results: Mapping[int, RankDigest], ranks: Sequence[Any], spill: Any) -> None:
    """Each op view a worker spilled keeps the directory, and can be built here from the rank's files."""
    from advisor_core.engine.spill import SpilledOpView

    for i, digest in results.items():
        if isinstance(digest.op_view, SpilledOpView):
            digest.op_view.attach(spill, lambda rank=ranks[i]: op_view_built_here(rank))


def op_view_built_here(rank: Any) -> Any:
    """``rank``'s op view read from its files in this process, without its timeline (as a digest carries it)."""
    from advisor_core.opview.build import build_op_view

    view = build_op_view(rank)
    return view.without_timeline() if view is not None else None


def _kernel_paths(rank: Any) -> list[str]:
    path = _kernel_file(rank)
    return [os.path.realpath(path)] if path is not None else []


def _first_read_ahead(order: Sequence[int], ranks: Sequence[Any], pool_lanes: int) -> list[int]:
    """``order`` (the queue: the pool takes from the left, this process from the right) with the ranks whose
    kernel table was read ahead (:mod:`advisor_core.engine.ahead`) first for each lane: the pool's first
    ``pool_lanes`` from the left, then this process's first at the right end."""
    from advisor_core.loaders import readahead

    pending = readahead.pending_paths()
    if not pending:
        return list(order)
    ahead = [i for i in order if any(p in pending for p in _kernel_paths(ranks[i]))]
    pool_first, client_first = ahead[:pool_lanes], ahead[pool_lanes:pool_lanes + 1]
    rest = [i for i in order if i not in pool_first and i not in client_first]
    return pool_first + rest + client_first


# Jobs in flight per worker: one running, one waiting in its pipe, which it begins the moment the first ends.
JOBS_PER_WORKER = 2


class _PoolFeeder(threading.Thread):
    """Runs a pool of ``size`` worker processes that take their ranks from ``lane.queue`` (the left end), and
    hands each digest to ``finished`` (on this thread).

    A job names no rank: a worker takes one as it begins the job (:func:`run_next_pool_job`). So each worker
    is kept :data:`JOBS_PER_WORKER` jobs while the queue is not empty: the next one waits in its pipe, and the
    worker goes on with it at once, without a round trip through the client, whose own lane holds the
    interpreter its threads need; and still no rank waits in a busy lane's pipe while another lane is free.
    A job begun after the last rank was taken returns ``None``.

    The pool starts in the constructor, on the caller's thread, with the first jobs: with the ``fork`` start
    method that is when the workers are forked (all of them, at the first job), so the caller creates the
    feeder before it starts anything else. ``start()`` collects the results and keeps the workers fed from
    this thread. ``error`` is what stopped the pool (then the ranks its workers had taken are not finished;
    the caller analyses them).
    """

    def __init__(self, size: int, ctx: Any, lane: _WorkerLane, finished: Callable[[int, RankDigest], None]) -> None:
        super().__init__(name="advisor-pool-feeder", daemon=True)
        self._size, self._queue, self._finished = size, lane.queue, finished
        self.error: BaseException | None = None
        self._running: set[Future[tuple[int, RankDigest] | None]] = set()
        self._pool: ProcessPoolExecutor | None = None
        try:
            self._pool = ProcessPoolExecutor(max_workers=size, mp_context=ctx, initializer=_init_worker,
                                             initargs=(lane,))
            _widen_result_pipe(self._pool)
            with _forking():
                self._submit_while_queued()
        except BaseException as exc:  # noqa: BLE001 - as in run(): the client analyses what the pool did not
            self.error = exc
            if self._pool is not None:
                _stop(self._pool)
            self._pool = None

    @classmethod
    def not_started(cls, error: BaseException) -> _PoolFeeder:
        """A feeder whose pool could not be made (``error``): it runs nothing."""
        feeder = cls.__new__(cls)
        threading.Thread.__init__(feeder, name="advisor-pool-feeder", daemon=True)
        feeder.error, feeder._pool, feeder._running = error, None, set()
        return feeder

    def stopped(self) -> bool:
        """Has the pool stopped with an error (its workers gone)?"""
        return self.error is not None and not self.is_alive()

    def _submit_while_queued(self) -> None:
        """Top the workers up to :data:`JOBS_PER_WORKER` jobs each while a rank is queued: also when fewer are
        queued than jobs are out, since a job out may be a busy worker's (a job left over returns ``None``)."""
        assert self._pool is not None
        while len(self._running) < self._size * JOBS_PER_WORKER and len(self._queue) > 0:
            self._running.add(self._pool.submit(run_next_pool_job))

    def stop(self) -> None:
        """Stop the workers (the pool is then broken: :meth:`run` ends with that error)."""
        if self._pool is not None:
            for proc in _processes_of(self._pool):
                proc.terminate()

    def run(self) -> None:
        from concurrent.futures import FIRST_COMPLETED, wait

        if self._pool is None:
            return
        try:
            with self._pool:
                while True:
                    self._submit_while_queued()
                    if not self._running:
                        return
                    done, _ = wait(self._running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        self._running.discard(fut)
                        taken = fut.result()
                        if taken is not None:
                            self._finished(*taken)
        except BaseException as exc:  # noqa: BLE001 - handed to the client, which decides
            self.error = exc


RESULT_PIPE_BYTES = 1 << 20


def _widen_result_pipe(pool: ProcessPoolExecutor) -> None:
    """Let a digest (about 1 MB for a 100 k-row rank) fit in the pipe the workers send results through.

    In the 64 KB a Linux pipe holds by default, a worker's send waits for the client's result thread to
    drain each chunk, and that thread waits for the interpreter the client's own lane holds: 5–30 ms a
    rank. With room for the whole digest the send is a copy. Where the pipe cannot be widened (not Linux,
    a lower ``/proc/sys/fs/pipe-max-size``, a ``concurrent.futures`` without this queue) it stays as it is.
    """
    try:
        import fcntl

        set_size = fcntl.F_SETPIPE_SZ  # Linux only
        reader = pool._result_queue._reader  # type: ignore[attr-defined]
        fcntl.fcntl(reader.fileno(), set_size, RESULT_PIPE_BYTES)
    except (ImportError, AttributeError, OSError, ValueError):
        pass


@contextmanager
def _forking() -> Iterator[None]:
    """Around the first jobs, when a ``fork`` pool forks its workers.

    The objects this process holds are frozen out of the collector meanwhile (``gc.freeze``): a worker's
    collection then does not walk them, which would copy every page they sit on into the worker. And Python
    3.12+ warns on any fork of a process with threads, Arrow's idle thread pool included: this fork is made
    where none of them is busy (see the module docstring).
    """
    import gc
    import warnings

    gc.freeze()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks", category=DeprecationWarning)
            yield
    finally:
        gc.unfreeze()  # here only: the workers keep theirs frozen


def _processes_of(pool: ProcessPoolExecutor) -> list[Any]:
    """The pool's worker processes (``concurrent.futures`` keeps them by pid; ``None`` once the pool is broken)."""
    return list((getattr(pool, "_processes", None) or {}).values())


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop a pool that failed to start: the workers it forked before the failure are waiting for work that
    will not come, and the interpreter waits for them at exit."""
    processes = _processes_of(pool)
    for proc in processes:
        proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
    pool.shutdown(wait=False, cancel_futures=True)


@contextmanager
def _arrow_threads(count: int | None) -> Iterator[None]:
    """Arrow's CPU thread pool limited to ``count`` threads inside the block (``None``: unchanged)."""
    if count is None:
        yield
        return
    import pyarrow as pa

    saved = pa.cpu_count()
    pa.set_cpu_count(count)
    try:
        yield
    finally:
        pa.set_cpu_count(saved)


def _workers_can_start() -> bool:
    """Can worker processes run here? Forked ones always; spawned ones re-import ``__main__``.

    Spawned: not from a REPL, ``python -`` or ``python -c``, where the work then stays in this process.
    """
    import sys

    if workers_are_forked():
        return True
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return True
    path = getattr(main, "__file__", None)
    return bool(path) and os.path.isfile(path)


def adopt_digests(ranks: Mapping[int, Any], digests: Iterable[RankDigest], sink: DiagnosticSink) -> None:
    """Put each digest's op view and derived values on its rank and its diagnostics in ``sink``, in rank order."""
    for d in sorted(digests, key=lambda d: d.rank_id):
        rank = ranks[d.rank_id]
        if hasattr(d.op_view, "fetch"):  # left on a Dask worker: fetched when a rule asks
            d.op_view.sink = sink  # where a fetch that fails, or a worker lost meanwhile, is said
            rank.adopt_op_view_loader(d.op_view.fetch)
        else:
            rank.adopt_op_view(d.op_view)
        rank.adopt_derived(d.derived)
        rank.adopt_tables(d.tables)
        sink.extend(d.diagnostics)
