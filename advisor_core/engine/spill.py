"""Op views a pool worker hands back through a file, read by the client only when a rule asks for one.

A worker's digest (:class:`~advisor_core.engine.rankwork.RankDigest`) used to carry its
rank's op view through the pool's result pipe: about 5 MB of pickled text per 100 k-row
rank. The worker then waited on the pipe while the client's result thread drained it
64 KB at a time, each chunk waiting for the interpreter the client's own lane holds, and
the client unpickled every view although its cross-rank checks read few of them (one
representative rank per stage, and the ranks a finding names).

Now the worker writes the view to a file in a directory the client made for the units
(:class:`SpillDir`) and the digest carries a :class:`SpilledOpView`; the rank adopts its
:meth:`~SpilledOpView.fetch` as its op view loader, as it does for a view left on a Dask
worker. A worker that cannot write the file sends the view in the digest as before. A
file that cannot be read back (removed meanwhile) is said in the run's diagnostics and
the view built here from the rank's files instead. The directory goes when no rank
refers to it any more, or when the process exits.
"""

from __future__ import annotations

import atexit
import os
import pickle
import shutil
import tempfile
import weakref
from collections.abc import Callable
from typing import Any

from advisor_core.diagnostics import Diagnostic, DiagnosticSink

SPILL_PREFIX = "advisor-opviews-"
_OPEN: set[tuple[str, int]] = set()  # (directory, the process that made it) not removed yet


class SpillDir:
    """A temporary directory for one run's spilled op views (``path``), removed once nothing refers to it
    (every :class:`SpilledOpView` not fetched yet holds it, and its rank holds the view: in practice once the
    run is collected) or at the latest when the process exits."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix=SPILL_PREFIX)
        _remember(self.path)
        self._remove = weakref.finalize(self, _remove_tree, self.path, os.getpid())
        # At exit, _remove_leftovers: registered when the first directory is made, so it runs before the handler
        # that ends the advisor process without its teardown (advisor_core.cli.process_exit), which
        # weakref's own exit hook, registered by whichever library made a finalizer first, might not.
        self._remove.atexit = False


def spill_op_view(view: Any, directory: str, rank_id: int) -> Any:
    """In a worker: ``view`` written to a new file in ``directory``, as the :class:`SpilledOpView` that reads it;
    ``view`` itself when it cannot be written (the directory gone, the disk full)."""
    path = None
    try:
        fd, path = tempfile.mkstemp(prefix=f"rank{rank_id}-", suffix=".pickle", dir=directory)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(view, f, protocol=pickle.HIGHEST_PROTOCOL)
    except (OSError, pickle.PicklingError):
        if path is not None:
            _unlink(path)
        return view
    return SpilledOpView(path, rank_id)


class SpilledOpView:
    """A rank's op view in a file a worker wrote; :meth:`fetch` reads it (``Rank.op_view`` calls it once).

    The client attaches the directory and a fallback (:meth:`attach`) when it takes the digest;
    ``sink`` (set by :func:`~advisor_core.engine.rankwork.adopt_digests`) is where a failed read is said.
    """

    def __init__(self, path: str, rank_id: int) -> None:
        self.path = path
        self.rank_id = rank_id
        self.sink: DiagnosticSink | None = None
        self._directory: SpillDir | None = None
        self._rebuild: Callable[[], Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "rank_id": self.rank_id}  # what travels from the worker: the file's name

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["rank_id"])  # type: ignore[misc]

    def attach(self, directory: SpillDir, rebuild: Callable[[], Any]) -> None:
        """Keep ``directory`` while this view is not fetched; ``rebuild()`` builds the view if its file is lost."""
        self._directory, self._rebuild = directory, rebuild

    def fetch(self) -> Any:
        """The op view, read from its file (removed then); if that fails, rebuilt and the failure said."""
        try:
            with open(self.path, "rb") as f:
                view = pickle.load(f)
        except Exception as exc:  # noqa: BLE001 - a lost or damaged file: the rank's own files are still there
            view, why = None, f"{type(exc).__name__}: {exc}"
            try:
                view = self._rebuild() if self._rebuild is not None else None
            except Exception as again:  # noqa: BLE001 - said below; the rank then has no op view
                self._say(f"rank {self.rank_id}: its op view, kept by a worker process in {self.path}, could not be "
                          f"read back ({why}), nor built here from its files ({type(again).__name__}: {again})")
            else:
                self._say(f"rank {self.rank_id}: its op view, kept by a worker process in {self.path}, could not be "
                          f"read back ({why}); built here from its files instead")
        else:
            _unlink(self.path)
        self._directory = None
        return view

    def _say(self, message: str) -> None:
        if self.sink is not None:
            self.sink.add(Diagnostic(severity="warning", code="op-view-not-fetched", message=message))


def _remember(path: str) -> None:
    if not getattr(_remember, "registered", False):
        atexit.register(_remove_leftovers)
        _remember.registered = True  # type: ignore[attr-defined]
    _OPEN.add((path, os.getpid()))


def _remove_tree(path: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked worker holds a copy of this object too: the directory is not its to remove
        _OPEN.discard((path, owner))
        shutil.rmtree(path, ignore_errors=True)


def _remove_leftovers() -> None:
    for path, owner in list(_OPEN):
        _remove_tree(path, owner)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
