"""What a session starts early, as soon as it knows its profile paths: the worker server.

When the per-rank work will go to worker processes (several ranks, a pool), the server
they fork from (:func:`~advisor_core.engine.rankwork.prewarm`: a fresh interpreter
importing pandas, pyarrow and the rules) takes most of a second to start; begun from
one pandas-free discovery of the ranks here, its start overlaps the client's own
imports and set-up instead of following them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from advisor_core.diagnostics import DiagnosticSink


def start_early(profile_paths: Sequence[Path], *, source: str, jobs: int | None, scheduler: str | None,
                pool: bool, rule_modules: Sequence[str] = ()) -> None:
    """Start the worker server when ``profile_paths`` hold several ranks for a pool.

    ``pool``: the work may go to worker processes (the plugins can be rebuilt there). Only ever
    a head start: whatever goes wrong here (a file gone between two looks) is left for the run's
    own discovery and reads to meet and say, so this never raises.
    """
    if scheduler or jobs == 1 or not profile_paths or not pool:
        return  # Dask runs the ranks elsewhere; one core has no pool
    try:
        _start(profile_paths, source=source, jobs=jobs, rule_modules=rule_modules)
    except Exception:  # noqa: BLE001 - a head start that fails is no start; the run proceeds as without
        return


def _start(profile_paths: Sequence[Path], *, source: str, jobs: int | None, rule_modules: Sequence[str]) -> None:
    from advisor_core.discover.profiles import discover_profiles

    quiet = DiagnosticSink()  # the run's own discovery says whatever there is to say
    found = discover_profiles([Path(p) for p in profile_paths], quiet, report_empty=False, source=source)
    if len(found.ranks) > 1:
        from advisor_core.engine.rankwork import prewarm

        kernels = (r.artifact("kernel_details") or r.artifact("op_summary") for r in found.ranks)
        prewarm(len(found.ranks), sum(p.stat().st_size for p in kernels if p is not None), jobs, rule_modules)
