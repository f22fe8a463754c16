"""The per-rank units on a Dask cluster (``analyze --scheduler tcp://HOST:PORT`` or ``local``).

The same unit the local pool runs (:func:`advisor_core.engine.rankwork.run_rank_job`)
becomes one Dask task per rank (:func:`rank_summary`); each worker reads its rank's
files from the shared path, and only the summary travels back: step breakdowns, the
rules' rank evidence and tables, diagnostics — not the op view. A rule that asks for a
rank's op view (one rank per pipeline stage for the built-in rules) gets it from one
more task (:func:`rank_op_view`), sent to the worker that ran the rank's unit: each worker
process keeps the op views (without timelines) of its last :data:`KEPT_OP_VIEWS` ranks, so
a fetch is a transfer, not a second read of the kernel table (on another worker, or after
the view was dropped, it is read again).
Nothing but the project's own functions and plain data (the rank's :class:`RankSource`,
rule codes and options) is sent; the address is checked before anything is started,
and every artifact path is resolved (symbolic links followed) and must lie inside its
rank directory, or that rank is not sent.

Faults, each said in one line and none a hang — every wait on the cluster is bounded:

* a malformed address, a scheduler that refuses the connection or whose host does not
  resolve: said at once; one that does not answer, or has no workers: said within
  ``timeout`` seconds (:class:`SchedulerError`, before any work);
* a worker lost mid-run (or while op views are fetched): Dask recomputes its tasks
  elsewhere, and the run names the worker;
* a rank whose files a worker cannot read: one error line for the rank (what the
  worker said about each file goes to the details, ``-v``);
* a rank whose task fails, or no task finishing for ``task_timeout`` seconds: the
  rank is named as not analysed and left out, the rest of the report goes on;
* an op view not fetched within ``task_timeout``: built on the client from the
  rank's files instead, with a warning.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from advisor_core.diagnostics import Diagnostic, DiagnosticSink, Severity
from advisor_core.engine.rankwork import PluginSpec, RankDigest, RankJob, default_workers, run_rank_job

DEFAULT_TIMEOUT_S = 30.0
MIN_TASK_TIMEOUT_S = 300.0  # a rank's unit at 3 M kernel rows takes minutes on a slow shared file system
SCHEMES = ("tcp", "tls")


class SchedulerError(RuntimeError):
    """The Dask cluster cannot be used at all (one line, said before any work)."""


@dataclass
class ClusterStats:
    """What the cluster did for one analysis (``bench/bench_cluster.py`` reads it)."""

    run_seconds: float = 0.0  # wall time of the per-rank phase (:meth:`DaskUnits.run`)
    unit_seconds: float = 0.0  # the units' own seconds, summed over ranks
    fetches: int = 0  # op views fetched back for rules
    fetch_seconds: float = 0.0  # wall time the client waited for them


KEPT_OP_VIEWS = 32  # per worker process; a view without its timeline is a few MB at 100 k kernel rows
_KEPT: "OrderedDict[tuple[Any, ...], Any]" = OrderedDict()


def rank_summary(job: RankJob) -> RankDigest:
    """A worker's task: the rank's unit, returned without its op view (what travels back to the client).

    ``op_view`` comes back as the address of the worker that keeps it (the client fetches it
    from there when a rule asks; ``True`` outside a worker), ``None`` when the rank's kernels
    could not be read there.
    """
    digest = run_rank_job(job)
    if digest.op_view is None:
        return digest
    _keep(job, digest.op_view)
    return replace(digest, op_view=_worker_address() or True)


def rank_op_view(job: RankJob) -> Any:
    """A worker's task: the rank's op view (without its timeline), for a rule that asks for that rank."""
    kept = _KEPT.get(_view_key(job))
    return kept if kept is not None else build_op_view_of(job)


def _view_key(job: RankJob) -> tuple[Any, ...]:
    """The rank's directory, the export it is read from, and its files' (mtime, size): a file changed since is
    read again."""
    stamps = []
    for kind, found in sorted((getattr(job.source, "artifacts", None) or {}).items()):
        try:
            st = Path(found.path).stat()
            stamps.append((kind, st.st_mtime_ns, st.st_size))
        except OSError:
            stamps.append((kind, None, None))
    return str(job.source.path), getattr(job.source, "source_mode", None), tuple(stamps)


def _keep(job: RankJob, view: Any) -> None:
    key = _view_key(job)
    _KEPT[key] = view
    _KEPT.move_to_end(key)
    while len(_KEPT) > KEPT_OP_VIEWS:
        _KEPT.popitem(last=False)


def _worker_address() -> str | None:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):  # not on a Dask worker
        return None


def build_op_view_of(job: RankJob) -> Any:
    """The op view of ``job``'s rank, read from its files here (a worker, or the client as a fallback)."""
    from advisor_core.engine.rankwork import _plugin_host, op_view_built_here
    from advisor_core.engine.session import table_loaders
    from advisor_core.model.run import Rank

    return op_view_built_here(Rank(job.source, table_loaders(_plugin_host(job.plugins)), DiagnosticSink()))


def check_address(address: str) -> tuple[str, str | None, int | None]:
    """``address`` as Dask takes it, with its host and port (``("local", None, None)`` for a local cluster).

    Raises :class:`SchedulerError` (one line) for anything that is not ``local``,
    ``tcp://HOST:PORT``, ``tls://HOST:PORT`` or ``HOST:PORT``.
    """
    text = address.strip()
    if text == "local":
        return text, None, None
    usage = f"scheduler address {address!r} is not usable: {{}} (expected tcp://HOST:PORT, tls://HOST:PORT or local)"
    if "\x00" in text or any(c.isspace() for c in text):
        raise SchedulerError(usage.format("it contains spaces or control characters"))
    if "://" not in text:
        text = f"tcp://{text}"
    parts = urlsplit(text)
    if parts.scheme not in SCHEMES:
        raise SchedulerError(usage.format(f"scheme {parts.scheme}:// is not one advisor connects with"))
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        raise SchedulerError(usage.format("it has more than a host and a port"))
    try:
        port = parts.port
    except ValueError:
        raise SchedulerError(usage.format("the port is not a number from 1 to 65535")) from None
    if not parts.hostname:
        raise SchedulerError(usage.format("no host"))
    if port is None or port == 0:
        raise SchedulerError(usage.format("no port"))
    return text, parts.hostname, port


def probe(address: str, host: str, port: int, timeout: float) -> None:
    """Open (and close) a TCP connection to ``host:port`` within ``timeout`` seconds, or say why not.

    Nothing listening and a host without an address are said at once (Dask's connect
    would retry them until its timeout); no answer at all, after ``timeout``.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except ConnectionRefusedError:
        raise SchedulerError(f"the Dask scheduler at {address} refused the connection: nothing listens on "
                             f"{host}:{port} (start one with `dask scheduler --port {port}`)") from None
    except socket.gaierror as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler at {address}: host {host!r} has no address "
                             f"({exc.strerror or exc})") from None
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc.strerror or exc}"
        raise SchedulerError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({why})") from None


def handshake(address: str, timeout: float) -> None:
    """Open one Dask connection to an address that accepts TCP connections and close it, within ``timeout`` s.

    Dask's own connect waits for the peer's handshake without a bound: something that
    accepts the connection but is not a Dask scheduler (an HTTP server, a stalled
    process) would hang the client for ever.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect
    from distributed.security import Security

    async def hello() -> None:
        args = Security().get_connection_args("client")
        comm = await asyncio.wait_for(connect(address, timeout=timeout, **args), timeout)
        await comm.close()

    with ThreadPoolExecutor(1) as pool:  # a thread of its own: the caller may be running an event loop (Jupyter)
        try:
            pool.submit(asyncio.run, hello()).result()  # bounded by wait_for
        except TimeoutError:
            raise SchedulerError(f"no Dask scheduler at {address}: it accepted the connection but sent no Dask "
                                 f"handshake within {timeout:g} s") from None
        except OSError as exc:
            raise SchedulerError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s "
                                 f"({type(exc).__name__}: {exc})") from None
        except Exception as exc:  # noqa: BLE001 - something answered, but not as a Dask scheduler does
            raise SchedulerError(f"no Dask scheduler at {address}: what answers there does not speak Dask's "
                                 f"protocol ({type(exc).__name__} on its first reply)") from None


class DaskUnits:
    """A connection to a Dask cluster (or a local one) for the units of one analysis; close it when done."""

    def __init__(self, address: str, timeout: float = DEFAULT_TIMEOUT_S, task_timeout: float | None = None) -> None:
        target, host, port = check_address(address)  # before Dask is imported or anything started
        if host is not None and port is not None:
            probe(address, host, port, timeout)  # fails fast, before Dask is imported
        try:
            import distributed
        except ImportError:
            raise SchedulerError("--scheduler needs Dask: pip install 'ascend-advisor[dask]'") from None
        self.address = address
        self.timeout = timeout
        self.task_timeout = task_timeout if task_timeout is not None else max(10 * timeout, MIN_TASK_TIMEOUT_S)
        self._cluster = None
        self._known: set[str] = set()
        self.stats = ClusterStats()
        logging.getLogger("distributed").setLevel(logging.ERROR)
        try:
            if target == "local":
                # the scheduler's HTTP server always starts: bound to the loopback interface on a free port
                self._cluster = distributed.LocalCluster(
                    n_workers=default_workers(), threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
                self.client = distributed.Client(self._cluster, timeout=f"{timeout}s")
            else:
                handshake(target, timeout)
                self.client = distributed.Client(target, timeout=f"{timeout}s")
        except SchedulerError:
            self.close()
            raise
        except Exception as exc:  # noqa: BLE001 - whatever Dask raised, said in one line
            self.close()
            what = "start a local Dask cluster" if target == "local" else f"connect to the Dask scheduler at {address}"
            raise SchedulerError(f"could not {what} within {timeout:g} s ({type(exc).__name__}: {exc})") from None
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError):
            self.close()
            raise SchedulerError(f"the Dask scheduler at {address} has no workers (waited {timeout:g} s); "
                                 f"start some with `dask worker {address}`") from None

    def workers(self) -> set[str]:
        """Addresses of the cluster's workers now (the last known ones when the scheduler does not answer in time)."""
        try:
            info = self.client.sync(self.client.scheduler.identity, n_workers=-1, callback_timeout=self.timeout)
        except Exception:  # noqa: BLE001 - a scheduler that does not answer is said by the bounded waits
            return set(self._known)
        return set(info.get("workers", {}))

    def workers_lost(self) -> list[str]:
        """Workers known at the last call (or the run's start) that have left since."""
        now = self.workers()
        gone = sorted(self._known - now)
        self._known = now  # each lost worker is said once
        return gone

    def run(self, ranks: Sequence[Any], rules: Sequence[tuple[str, Any, Mapping[str, Any]]], plugins: PluginSpec,
            progress: Callable[[int, int], None] | None = None) -> list[RankDigest]:
        """Summaries of every rank's unit, in rank order (op views are fetched lazily; see module docstring)."""
        import distributed

        started = time.perf_counter()
        token = uuid.uuid4().hex[:8]
        self._known = self.workers()
        results: dict[int, RankDigest] = {}
        jobs: dict[int, RankJob] = {}
        for i, r in enumerate(ranks):
            try:
                jobs[i] = RankJob(checked_source(r._source), tuple((c, dict(raw)) for c, _, raw in rules), plugins)
            except SchedulerError as exc:
                results[i] = _lost(r, str(exc))
        summaries = {self.client.submit(rank_summary, job, key=f"advisor-unit-{token}-{ranks[i].rank_id}",
                                        pure=False, retries=1): i for i, job in jobs.items()}
        pending = set(summaries)
        while pending:
            try:
                done, pending = distributed.wait(list(pending), timeout=self.task_timeout,
                                                 return_when="FIRST_COMPLETED")
            except TimeoutError:
                break  # nothing finished for ``task_timeout`` seconds
            for fut in done:
                i = summaries[fut]
                try:
                    d = fut.result(timeout=self.timeout)
                except Exception as exc:  # noqa: BLE001 - a lost rank is reported, not fatal
                    results[i] = _lost(ranks[i], f"its task failed on the cluster ({type(exc).__name__}: {exc})")
                    continue
                d.op_view = _RemoteOpView(self, jobs[i], ranks[i], d.op_view) if d.op_view else None
                results[i] = _one_line_per_rank(ranks[i], d)
                if progress:
                    progress(len(results), len(ranks))
        for fut in pending:
            i = summaries[fut]
            fut.cancel()
            results[i] = _lost(ranks[i], f"no task finished on the cluster for {self.task_timeout:g} s")
        gone = self.workers_lost()
        if gone and results:
            lost = [ranks[i].rank_id for i, d in sorted(results.items()) if _is_lost(d)]
            tail = ("their ranks were recomputed elsewhere" if not lost else
                    f"their tasks were retried; rank(s) {', '.join(map(str, lost))} could not be analysed")
            results[min(results)].diagnostics.insert(0, Diagnostic(
                severity="warning", code="worker-lost",
                message=f"Dask worker(s) {', '.join(gone)} left during the run; {tail}"))
        self.stats.run_seconds = time.perf_counter() - started
        self.stats.unit_seconds = sum(sum(d.seconds.values()) for d in results.values())
        return [results[i] for i in range(len(ranks))]

    def close(self) -> None:
        """Disconnect (and stop the local cluster), waiting at most ``timeout`` seconds for each."""
        for obj in (getattr(self, "client", None), getattr(self, "_cluster", None)):
            if obj is not None:
                try:
                    obj.close(timeout=self.timeout)
                except Exception:  # noqa: BLE001 - closing must not mask the analysis's result
                    pass


class _RemoteOpView:
    """A rank's op view built by a worker when first asked for (Rank.op_view calls :meth:`fetch`).

    The wait is bounded by the cluster's ``task_timeout``; a fetch that fails or times out
    builds the view here from the rank's files instead, and says so in ``sink`` (set by
    :func:`~advisor_core.engine.rankwork.adopt_digests`), as does a worker lost meanwhile.
    """

    def __init__(self, units: DaskUnits, job: RankJob, rank: Any, holder: Any = True) -> None:
        self._units = units
        self._job = job
        self._holder = holder if isinstance(holder, str) else None  # the worker that keeps the view
        self._rank_id = rank.rank_id
        self._path = rank.path
        self.sink: DiagnosticSink | None = None

    def fetch(self) -> Any:
        units = self._units
        started = time.perf_counter()
        try:
            where = {"workers": [self._holder], "allow_other_workers": True} if self._holder else {}
            fut = units.client.submit(rank_op_view, self._job, pure=False, retries=1, **where)
            try:
                view = fut.result(timeout=units.task_timeout)
            finally:
                fut.cancel()  # a timed-out task must not keep a worker busy; a finished one is released
        except Exception as exc:  # noqa: BLE001 - the client can build the view itself
            why = (f"no result within {units.task_timeout:g} s" if isinstance(exc, TimeoutError)
                   else f"{type(exc).__name__}: {exc}")
            self._say("warning", "op-view-not-fetched", f"rank {self._rank_id} ({self._path}): its op view was not "
                                                        f"fetched from the Dask cluster ({why}); built here from its "
                                                        "files instead")
            view = build_op_view_of(self._job)
        units.stats.fetches += 1
        units.stats.fetch_seconds += time.perf_counter() - started
        gone = units.workers_lost()
        if gone:
            self._say("warning", "worker-lost", f"Dask worker(s) {', '.join(gone)} left while op views were fetched; "
                                                "their tasks were recomputed elsewhere")
        return view

    def _say(self, severity: str, code: str, message: str) -> None:
        if self.sink is not None:
            self.sink.add(Diagnostic(severity=severity, code=code, message=message))


def checked_source(source: Any) -> Any:
    """The rank's source with resolved absolute paths (a worker has another working directory), checked
    before it is sent.

    The rank directory must be NUL-free, and every artifact — symbolic links followed —
    must lie inside it: the workers read exactly the files discovery found there, nothing
    else. Raises :class:`SchedulerError` naming the artifact otherwise. Whether the
    workers can read the files is theirs to say (in the rank's diagnostics).
    """
    if "\x00" in str(source.path):
        raise SchedulerError(f"{source.path!r}: not a usable profile path")
    root = Path(os.path.abspath(source.path)).resolve()

    def inside(p: Path) -> Path:
        path = Path(os.path.abspath(p)).resolve()
        if path != root and root not in path.parents:
            raise SchedulerError(f"artifact {p} resolves to {path}, outside its rank directory {root}; "
                                 "not sent to the cluster")
        return path

    artifacts = {k: replace(a, path=inside(a.path)) for k, a in source.artifacts.items()}
    return replace(source, path=root, artifacts=artifacts)


def _one_line_per_rank(rank: Any, digest: RankDigest) -> RankDigest:
    """The worker's errors about the rank's files as one error line for the rank; each error as a detail (``-v``)."""
    errors = [d for d in digest.diagnostics if d.severity == Severity.ERROR]
    if not errors:
        return digest
    unread = digest.op_view is None and rank.has_table("kernels")
    files = list(dict.fromkeys(d.path or "?" for d in errors))
    if unread:  # the kernel table's error first: it is why the rank is not analysed
        src = rank.table_source("kernels")
        kernel = str(src[0]) if src else None
        errors = sorted(errors, key=lambda d: str(d.path) != kernel)
    detail = f"{errors[0].message}; -v lists them all" if len(errors) > 1 else errors[0].message
    head = Diagnostic(severity="error", code="rank-not-analysed" if unread else "rank-files-unreadable",
                      message=f"rank {rank.rank_id} ({rank.path}): {'not analysed' if unread else 'analysed in part'}: "
                              f"the Dask worker could not read {len(files)} of its files ({detail})")
    details = [d.model_copy(update={"severity": Severity.INFO, "message": f"rank {rank.rank_id}: {d.message}"})
               if d.severity == Severity.ERROR else d for d in digest.diagnostics]
    digest.diagnostics = [head] + details
    return digest


def _lost(rank: Any, why: str) -> RankDigest:
    d = RankDigest(rank.rank_id)
    d.diagnostics.append(Diagnostic(severity="error", code="rank-not-analysed",
                                    message=f"rank {rank.rank_id} ({rank.path}): not analysed: {why}"))
    return d


def _is_lost(digest: RankDigest) -> bool:
    return any(d.code == "rank-not-analysed" for d in digest.diagnostics)
