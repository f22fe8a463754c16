"""What an analysis reads ahead: the kernel table of a lone rank, as the op view will ask for it.

A single-rank analysis runs its rank in this process, and the op view's read of the
kernel CSV is its largest step; before it, the process spends about half a second
importing pandas, the rules and their models on one core. :func:`read_ahead` (called
by ``advisor analyze`` before the plugins load) finds that file with a walk that stops
at a second rank, and begins the read on a thread (:mod:`advisor_core.loaders.readahead`);
the op view's build claims it. Nothing is read that the analysis would not read, in the
same way: the columns come from the same header and the same list
(:func:`~advisor_core.opview.columns.op_view_columns`). Not done when the ranks go to
worker processes or Dask, when ``--jobs 1`` keeps the work on one core, or when the
kernels may come from the SQLite export.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.readahead import Key, begin


def read_ahead(paths: Sequence[Path], *, source: str, jobs: int | None, scheduler: str | None) -> list[Key]:
    """Begin reading the op view's columns of the kernel table when ``paths`` hold one rank; the keys begun."""
    if scheduler or jobs == 1 or not paths or source == "db":
        return []
    from advisor_core.discover.profiles import lone_source
    from advisor_core.loaders.csvtable import read_header
    from advisor_core.loaders.kernels import KERNELS
    from advisor_core.opview.columns import op_view_columns

    rank = lone_source([Path(p) for p in paths])
    if rank is None:
        return []
    if source != "text" and any(kind.endswith("_db") for kind in rank.artifacts):
        return []  # the kernels may be read from the database export
    path = rank.artifact("kernel_details") or rank.artifact("op_summary")
    quiet = DiagnosticSink()  # the run's own header read says whatever there is to say
    header = read_header(path, KERNELS, quiet, what=path.name) if path is not None else None
    if header is None:
        return []
    return [begin(path, KERNELS, op_view_columns(header.available))]
