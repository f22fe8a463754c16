"""The per-rank unit of an analysis, run on every local core (or, later, a cluster).

For each profiled rank the unit reads the kernel table once into the rank's op view,
derives what every rule shares (step windows and breakdown), and calls the
``rank_evidence`` of each selected rule that has one — the part of a rule that needs
the kernel timeline, which stays where it was built. What comes back is a
:class:`RankDigest`: the op view without its timeline, the derived values, each
rule's evidence, and the diagnostics and failures of that rank. The client adopts
the digests in rank order, so the report is the same whatever ran the units.

:func:`run_rank_units` runs them in this process (``workers <= 1``) or in a process
pool (``concurrent.futures`` with the ``forkserver`` start method: workers fork from
a server that has imported pandas and pyarrow once, and no thread pool of this
process is inherited). A worker rebuilds the plugin host from the same options and
reads its rank's files itself; only the rank's :class:`RankSource` and the rule codes
and options travel to it.
"""

from __future__ import annotations

import os
import time
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from advisor_core.diagnostics import Diagnostic, DiagnosticSink

# Derived per-rank values the unit computes once for every rule (Rank.cached keys).
_DERIVED = ("step_windows", "step_breakdown")
# Below this much kernel data in a run, worker processes cost more than they save.
AUTO_PARALLEL_MIN_BYTES = 48 << 20


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
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # "load", "derive", then per rule code


def digest_rank(rank: Any, rules: Sequence[tuple[str, Any]]) -> RankDigest:
    """Run the unit on ``rank`` (a :class:`~advisor_core.model.run.Rank`) with instantiated ``rules``.

    The rank's op view is built (and kept on the rank, without its timeline, once the
    unit is done), the shared derived values computed, and each rule's
    ``rank_evidence`` called; a rule that raises is recorded as a failure, never stops
    the others.
    """
    from advisor_core.analyses.step_time import step_breakdown, step_windows

    sink = DiagnosticSink()
    digest = RankDigest(rank.rank_id)
    with rank.diagnostics_to(sink):
        t = time.perf_counter()
        view = rank.op_view()
        digest.seconds["load"] = time.perf_counter() - t
        t = time.perf_counter()
        step_windows(rank)
        step_breakdown(rank)
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
    digest.derived = {k: rank.cached(k, lambda: None) for k in _DERIVED}
    digest.diagnostics = list(sink)
    return digest


def _base_rank_evidence() -> Callable[..., Any]:
    from advisor_core.engine.rule import Rule

    return Rule.rank_evidence


# -- worker side -----------------------------------------------------------------------------------

_WORKER_HOSTS: dict[PluginSpec, Any] = {}


def run_rank_job(job: RankJob) -> RankDigest:
    """A worker's entry point: rebuild the rank from its source, then :func:`digest_rank`."""
    from advisor_core.engine.plugins import load_plugins
    from advisor_core.engine.runner import rule_options
    from advisor_core.engine.session import table_loaders
    from advisor_core.model.run import Rank

    host = _WORKER_HOSTS.get(job.plugins)
    if host is None:
        host = _WORKER_HOSTS[job.plugins] = load_plugins(autoload=job.plugins.autoload, load=job.plugins.load,
                                                          block=job.plugins.block)
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
    return digest


# -- client side -----------------------------------------------------------------------------------

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
        src = r.table_source("kernels") if r.has_table("kernels") else None
        if src is not None:
            try:
                total += src[0].stat().st_size
            except OSError:
                pass
    return total


def run_rank_units(
    ranks: Sequence[Any],
    rules: Sequence[tuple[str, Any, Mapping[str, Any]]],
    *,
    workers: int | None,
    plugins: PluginSpec | None,
    progress: Callable[[int, int], None] | None = None,
) -> list[RankDigest]:
    """The unit for every rank, in rank order.

    ``rules`` holds (code, rule instance, raw options). ``workers=None`` picks: every core
    when the run is large enough to gain from it (:data:`AUTO_PARALLEL_MIN_BYTES` of
    kernel tables), else this process. ``plugins=None`` (a host built by hand, as tests
    do) keeps the work in this process, since a worker could not rebuild it.
    """
    n = len(ranks)
    if workers is None:
        workers = default_workers() if n > 1 and kernel_bytes(ranks) >= AUTO_PARALLEL_MIN_BYTES else 1
    workers = min(workers, n)
    if workers <= 1 or plugins is None:
        out = []
        for i, r in enumerate(ranks):
            out.append(digest_rank(r, [(c, inst) for c, inst, _ in rules]))
            if progress:
                progress(i + 1, n)
        return out
    jobs = [RankJob(r._source, tuple((c, dict(raw)) for c, _, raw in rules), plugins) for r in ranks]
    import multiprocessing as mp

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["advisor_core.engine.rankwork", "advisor_core.opview.build",
                                "advisor_core.analyses.step_time"])
    results: dict[int, RankDigest] = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures: dict[Future[RankDigest], int] = {pool.submit(run_rank_job, j): i for i, j in enumerate(jobs)}
        done = 0
        for fut in _as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            done += 1
            if progress:
                progress(done, n)
    return [results[i] for i in range(n)]


def _as_completed(futures: Iterable[Future[Any]]) -> Iterable[Future[Any]]:
    from concurrent.futures import as_completed

    return as_completed(list(futures))


def adopt_digests(ranks: Mapping[int, Any], digests: Iterable[RankDigest], sink: DiagnosticSink) -> None:
    """Put each digest's op view and derived values on its rank and its diagnostics in ``sink``, in rank order."""
    for d in sorted(digests, key=lambda d: d.rank_id):
        rank = ranks[d.rank_id]
        rank.adopt_op_view(d.op_view)
        rank.adopt_derived(d.derived)
        sink.extend(d.diagnostics)
