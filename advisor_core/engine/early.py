"""What an analysis starts early, as soon as it knows its profile paths (before pandas is imported).

One discovery of the ranks (the same the run makes later; pandas-free) decides:

- **one rank**: it runs in this process, and the op view's read of its kernel CSV is the
  largest step. The read begins now on a thread (:mod:`advisor_core.loaders.readahead`):
  the same call for the same file and the same columns
  (:func:`~advisor_core.opview.columns.op_view_columns` of the same header) that the op
  view's build then claims. Only when asked (``advisor analyze``), and not with ``--jobs 1``
  (one core), a Dask scheduler or a database export the kernels may come from.
- **several ranks going to worker processes**: the worker server starts now
  (:func:`~advisor_core.engine.rankwork.prewarm`), its most-of-a-second start overlapping
  the client's own imports and set-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.readahead import Key, begin


def start_early(profile_paths: Sequence[Path], *, source: str, jobs: int | None, scheduler: str | None,
                read_ahead: bool, pool: bool, rule_modules: Sequence[str] = ()) -> list[Key]:
    """Begin what ``profile_paths`` call for (see the module docstring); the keys of the reads begun ahead.

    ``pool``: the work may go to worker processes (the plugins can be rebuilt there). Only ever
    a head start: whatever goes wrong here (a file gone between two looks) is left for the run's
    own discovery and reads to meet and say, so this never raises.
    """
    if scheduler or jobs == 1 or not profile_paths or not (read_ahead or pool):
        return []  # Dask runs the ranks elsewhere; one core has neither a pool nor cores to read ahead with
    try:
        return _start(profile_paths, source=source, jobs=jobs, read_ahead=read_ahead, pool=pool,
                      rule_modules=rule_modules)
    except Exception:  # noqa: BLE001 - a head start that fails is no start; the run proceeds as without
        return []


def _start(profile_paths: Sequence[Path], *, source: str, jobs: int | None, read_ahead: bool, pool: bool,
           rule_modules: Sequence[str]) -> list[Key]:
    from advisor_core.discover.profiles import discover_profiles

    quiet = DiagnosticSink()  # the run's own discovery and header reads say whatever there is to say
    found = discover_profiles([Path(p) for p in profile_paths], quiet, report_empty=False, source=source)
    if len(found.ranks) == 1:
        return _read_kernels_ahead(found.ranks[0], source, quiet) if read_ahead else []
    if pool and len(found.ranks) > 1:
        from advisor_core.engine.rankwork import prewarm

        size = sum(p.stat().st_size for r in found.ranks if (p := _kernel_file(r)) is not None)
        prewarm(len(found.ranks), size, jobs, rule_modules)
    return []


def _kernel_file(rank) -> Path | None:  # type: ignore[no-untyped-def]
    return rank.artifact("kernel_details") or rank.artifact("op_summary")


def _read_kernels_ahead(rank, source: str, quiet: DiagnosticSink) -> list[Key]:  # type: ignore[no-untyped-def]
    from advisor_core.loaders.csvtable import read_header
    from advisor_core.loaders.kernels import KERNELS
    from advisor_core.opview.columns import op_view_columns

    if source != "text" and any(kind.endswith("_db") for kind in rank.artifacts):
        return []  # the kernels may be read from the database export
    path = _kernel_file(rank)
    header = read_header(path, KERNELS, quiet, what=path.name) if path is not None else None
    if header is None:
        return []
    return [begin(path, KERNELS, op_view_columns(header.available))]
