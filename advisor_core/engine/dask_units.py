"""The per-rank units on a Dask cluster (``analyze --scheduler tcp://HOST:PORT`` or ``local``).

The same unit the local pool runs (:func:`advisor_core.engine.rankwork.run_rank_job`)
becomes one Dask task per rank (:func:`rank_summary`); each worker reads its rank's
files from the shared path, and only the summary travels back: step breakdowns, the
rules' rank evidence and tables, diagnostics — not the op view. A rule that asks for a
rank's op view (one rank per pipeline stage for the built-in rules) gets it from one
more task (:func:`rank_op_view`), so nothing is held on the workers between tasks. Nothing but the project's own
functions and plain data (the rank's :class:`RankSource`, rule codes and options) is
sent; paths are resolved and checked before submission.

Faults: a scheduler that cannot be reached, or has no workers, is one error line
within ``timeout`` seconds; a worker lost mid-run has its tasks recomputed by Dask
(and is named in one line); a rank whose files a worker cannot read reports that in
its diagnostics; a rank whose task fails or stalls beyond ``stall_timeout`` is named
and left out, the rest of the report goes on.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from advisor_core.diagnostics import Diagnostic, DiagnosticSink
from advisor_core.engine.rankwork import PluginSpec, RankDigest, RankJob, default_workers, run_rank_job

DEFAULT_TIMEOUT_S = 30.0


class SchedulerError(RuntimeError):
    """The Dask cluster cannot be used at all (one line, said before any work)."""


def rank_summary(job: RankJob) -> RankDigest:
    """A worker's task: the rank's unit, returned without its op view (what travels back to the client)."""
    return replace(run_rank_job(job), op_view=None)


def rank_op_view(job: RankJob) -> Any:
    """A worker's task: the rank's op view (without its timeline), for a rule that asks for that rank."""
    from advisor_core.engine.session import table_loaders
    from advisor_core.model.run import Rank

    from advisor_core.engine.rankwork import _plugin_host

    rank = Rank(job.source, table_loaders(_plugin_host(job.plugins)), DiagnosticSink())
    view = rank.op_view()
    return view.without_timeline() if view is not None else None


class DaskUnits:
    """A connection to a Dask cluster (or a local one) for the units of one analysis; close it when done."""

    def __init__(self, address: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        try:
            import distributed
        except ImportError:
            raise SchedulerError("--scheduler needs Dask: pip install 'ascend-advisor[dask]'") from None
        self.address = address
        self.timeout = timeout
        self._cluster = None
        logging.getLogger("distributed").setLevel(logging.ERROR)
        try:
            if address == "local":
                self._cluster = distributed.LocalCluster(
                    n_workers=default_workers(), threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None, silence_logs=logging.ERROR)
                self.client = distributed.Client(self._cluster, timeout=f"{timeout}s")
            else:
                self.client = distributed.Client(address, timeout=f"{timeout}s")
        except (OSError, TimeoutError) as exc:
            self.close()
            raise SchedulerError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s "
                                 f"({type(exc).__name__}: {exc})") from None
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError):
            self.close()
            raise SchedulerError(f"the Dask scheduler at {address} has no workers (waited {timeout:g} s); "
                                 f"start some with `dask worker {address}`") from None

    def workers(self) -> set[str]:
        return set(self.client.scheduler_info().get("workers", {}))

    def run(self, ranks: Sequence[Any], rules: Sequence[tuple[str, Any, Mapping[str, Any]]], plugins: PluginSpec,
            progress: Callable[[int, int], None] | None = None, stall_timeout: float | None = None) -> list[RankDigest]:
        """Summaries of every rank's unit, in rank order (op views are fetched lazily; see module docstring)."""
        import distributed

        stall = stall_timeout if stall_timeout is not None else max(10 * self.timeout, 300.0)
        token = uuid.uuid4().hex[:8]
        before = self.workers()
        jobs = [RankJob(_checked_source(r._source), tuple((c, dict(raw)) for c, _, raw in rules), plugins)
                for r in ranks]
        summaries = {self.client.submit(rank_summary, j, key=f"advisor-unit-{token}-{r.rank_id}", pure=False,
                                        retries=1): i for i, (j, r) in enumerate(zip(jobs, ranks))}
        results: dict[int, RankDigest] = {}
        pending = set(summaries)
        while pending:
            done, pending = distributed.wait(list(pending), timeout=stall, return_when="FIRST_COMPLETED")
            if not done:
                break  # nothing finished for ``stall`` seconds
            for fut in done:
                i = summaries[fut]
                try:
                    d = fut.result()
                except Exception as exc:  # noqa: BLE001 - a lost rank is reported, not fatal
                    results[i] = _lost(ranks[i], f"its task failed on the cluster ({type(exc).__name__}: {exc})")
                    continue
                d.op_view = _RemoteOpView(self.client, jobs[i])
                results[i] = d
                if progress:
                    progress(len(results), len(ranks))
        for fut in pending:
            i = summaries[fut]
            fut.cancel()
            results[i] = _lost(ranks[i], f"no result after {stall:g} s without progress on the cluster")
        gone = sorted(before - self.workers())
        if gone and results:
            first = min(results)
            results[first].diagnostics.insert(0, Diagnostic(
                severity="warning", code="worker-lost",
                message=f"Dask worker(s) {', '.join(gone)} left during the run; their ranks were recomputed elsewhere"))
        return [results[i] for i in range(len(ranks))]

    def close(self) -> None:
        """Disconnect (and stop the local cluster)."""
        for obj in (getattr(self, "client", None), self._cluster):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - closing must not mask the analysis's result
                    pass


class _RemoteOpView:
    """A rank's op view built by a worker when first asked for (Rank.op_view calls :meth:`fetch`)."""

    def __init__(self, client: Any, job: RankJob) -> None:
        self._client = client
        self._job = job

    def fetch(self) -> Any:
        return self._client.submit(rank_op_view, self._job, pure=False, retries=1).result()


def _checked_source(source: Any) -> Any:
    """The rank's source with absolute paths (a worker has another working directory), checked before it is sent.

    The rank directory must be absolute-able and NUL-free, and every artifact must lie
    inside it: the workers read exactly the files discovery found, nothing else. Whether
    they can read them is theirs to say (in the rank's diagnostics).
    """
    root = Path(os.path.abspath(source.path))
    if "\x00" in str(root):
        raise SchedulerError(f"{source.path!r}: not a usable profile path")

    def inside(p: Path) -> Path:
        path = Path(os.path.abspath(p))
        if path != root and root not in path.parents:
            raise SchedulerError(f"{p}: artifact outside its rank directory {root}; not sent to the cluster")
        return path

    artifacts = {k: replace(a, path=inside(a.path)) for k, a in source.artifacts.items()}
    return replace(source, path=root, artifacts=artifacts)


def _lost(rank: Any, why: str) -> RankDigest:
    d = RankDigest(rank.rank_id)
    d.diagnostics.append(Diagnostic(severity="error", code="rank-not-analysed",
                                    message=f"rank {rank.rank_id} was not analysed: {why}", path=str(rank.path)))
    return d
