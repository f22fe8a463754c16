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
- **several ranks**: nothing. The workers that share them are forked from this process
  once it has set up (:mod:`advisor_core.engine.rankwork`), with all it imported.

Nothing with ``--jobs 1`` (one core) or a Dask scheduler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.readahead import Key, begin


def begin_ahead(paths: Sequence[Path], *, source: str, jobs: int | None, scheduler: str | None,
               kernels: bool = True) -> list[Key]:
    """Begin what ``paths`` call for (see the module docstring); the keys of the reads begun.

    ``kernels=False``: the run may not read a kernel table (a selection of rules), so none is read ahead.
    """
    if scheduler or jobs == 1 or not paths:
        return []
    from advisor_core.discover.profiles import lone_source

    paths = [Path(p) for p in paths]
    rank = lone_source(paths)
    if rank is None:
        return []
    if not kernels:
        return []
    if source == "db" or (source != "text" and any(kind.endswith("_db") for kind in rank.artifacts)):
        return []  # the kernels may be read from the database export
    from advisor_core.loaders.csvtable import read_header
    from advisor_core.loaders.kernels import KERNELS
    from advisor_core.opview.columns import op_view_columns

    path = rank.artifact("kernel_details") or rank.artifact("op_summary")
    quiet = DiagnosticSink()  # the run's own header read says whatever there is to say
    header = read_header(path, KERNELS, quiet, what=path.name) if path is not None else None
    if header is None:
        return []
    return [begin(path, KERNELS, op_view_columns(header.available))]
