"""What an analysis begins ahead, while its own start-up (pandas, the plugins, the rules) imports on one core.

``advisor analyze`` calls :func:`begin_ahead` before it loads the plugins. A bare walk of
the paths (:mod:`advisor_core.discover.profiles`, stopping as soon as it knows enough)
decides:

- **one rank**: it runs in this process, and the op view's read of its kernel CSV is its
  largest step. The read begins on a thread (:mod:`advisor_core.loaders.readahead`); the
  op view's build claims it. Nothing is read that the analysis would not read, in the same
  way: the columns come from the same header and the same list
  (:func:`~advisor_core.opview.columns.op_view_columns`). Not when the kernels may come
  from the SQLite export.
- **several ranks going to worker processes** (``--jobs`` ≥ 2, or unset with
  :data:`~advisor_core.engine.rankwork.AUTO_PARALLEL_MIN_BYTES` of kernel tables and more
  than one core; at most :data:`MAX_RANKS_WALKED` ranks): the first rank of each lane — the
  largest kernel tables, one per lane, at most :data:`MAX_READ_AHEAD` and
  :data:`READ_AHEAD_BUDGET_BYTES` of them — is read the same way, but one after another on
  one core (the other is this process's start-up, which the fork waits for). The workers are forked from
  this process once it has set up (:mod:`advisor_core.engine.rankwork`), after these reads
  have ended: each lane, this process included, claims its own, and starts with it read.

Nothing with ``--jobs 1`` (one core) or a Dask scheduler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.readahead import Key, begin, begin_in_turn


def begin_ahead(paths: Sequence[Path], *, source: str, jobs: int | None, scheduler: str | None,
               kernels: bool = True) -> list[Key]:
    """Begin what ``paths`` call for (see the module docstring); the keys of the reads begun.

    ``kernels=False``: the run may not read a kernel table (a selection of rules), so none is read ahead.
    """
    if scheduler or jobs == 1 or not paths or not kernels:
        return []
    from advisor_core.discover.profiles import lone_source

    paths = [Path(p) for p in paths]
    rank = lone_source(paths)
    if rank is not None:
        return _read_kernels_ahead([rank], source)
    return _read_kernels_ahead(_first_of_each_lane(paths, jobs), source)


MAX_RANKS_WALKED = 256  # beyond, the bare walk costs more than a first rank's read saves
# The client holds every table read ahead until it forks: at most this many, and beyond the first, this many
# bytes of CSV in all (a 64-core machine would otherwise read 64 of the largest ranks into one process).
MAX_READ_AHEAD = 4
READ_AHEAD_BUDGET_BYTES = 2 << 30


def _first_of_each_lane(paths: Sequence[Path], jobs: int | None) -> list[Any]:
    """The rank each lane of a pool starts with (the largest kernel tables, as the lanes take them), or none."""
    from advisor_core.discover.profiles import kernel_table_size, scout_sources
    from advisor_core.engine.rankwork import default_workers, lanes_for, workers_are_forked

    if (jobs if jobs is not None else default_workers()) < 2:
        return []  # one core: no pool, so no need to walk
    sources = scout_sources(paths, MAX_RANKS_WALKED)
    if not sources:
        return []
    sizes = {id(src): kernel_table_size(src) for src in sources}
    lanes = lanes_for(len(sources), lambda: sum(sizes.values()), jobs)  # as rankwork.pool_size will decide
    if lanes < 2:
        return []  # the run stays in this process: its own loop reads as it goes
    if not workers_are_forked():
        lanes = 1  # spawned workers inherit nothing: only this process's own lane can claim a read
    largest = sorted(sources, key=lambda src: (-sizes[id(src)], str(src.path)))
    picked: list[Any] = []
    total = 0
    for src in largest[:min(lanes, MAX_READ_AHEAD)]:
        if picked and total + sizes[id(src)] > READ_AHEAD_BUDGET_BYTES:
            break
        picked.append(src)
        total += sizes[id(src)]
    return picked


def _read_kernels_ahead(ranks: Sequence[Any], source: str) -> list[Key]:
    """Begin the kernel reads of ``ranks``: one on every core (a lone rank's: the run waits for it), several one
    after another on one core (a pool's lanes': the start-up they overlap, and the fork after it, waits for
    this process's main thread, which reads on every core would slow)."""
    from advisor_core.loaders.csvtable import read_header
    from advisor_core.loaders.kernels import KERNELS
    from advisor_core.opview.columns import op_view_columns

    reads = []
    for rank in ranks:
        if source == "db" or (source != "text" and any(kind.endswith("_db") for kind in rank.artifacts)):
            continue  # the kernels may be read from the database export
        path = rank.artifact("kernel_details") or rank.artifact("op_summary")
        quiet = DiagnosticSink()  # the run's own header read says whatever there is to say
        header = read_header(path, KERNELS, quiet, what=path.name) if path is not None else None
        if header is not None:
            reads.append((path, KERNELS, op_view_columns(header.available)))
    if len(reads) == 1:
        return [begin(*reads[0])]
    return begin_in_turn(reads)
