"""The normalised model: a :class:`Run` made of :class:`Rank` objects with tables on demand.

Nothing is read until asked: ``rank.table("kernels", ["name", "duration_us"])``
reads exactly those two columns of ``kernel_details.csv`` (or the CANN
``op_summary`` fallback) the first time and caches them. A table whose file is
absent returns ``None``; a file that cannot be used returns ``None`` and leaves a
diagnostic in ``run.diagnostics``.

Canonical tables and columns are documented in ``docs/tables.md`` (generated from
the loader specs); the main ones:

* ``kernels`` — per device task (``name``, ``type``, ``accelerator_core``,
  ``start_ns`` exact ns, ``duration_us`` …);
* ``op_statistic``, ``step_trace``, ``trace_events``, ``communication``,
  ``communication_bandwidth``, ``communication_matrix``, ``dataset``,
  ``minddata_pipeline``, ``minddata_summary``, ``minddata_cpu``, ``host_queue``,
  ``operator_memory``, ``memory_record``, ``npu_module_mem``, ``host_ops``.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.discover.profiles import ProfileSet, RankSource, discover_profiles
from advisor_core.loaders.registry import LoadedTable, TableLoader, builtin_loaders
from advisor_core.loaders.steps import read_cluster_step_trace
from advisor_core.loaders import communication as comm
from advisor_core.model.identity import ParallelLayout, ProfilerSettings, RankIdentity


class Rank:
    """One profiled rank: identity, layout, environment, and its tables on demand."""

    def __init__(self, source: RankSource, loaders: Mapping[str, TableLoader], sink: DiagnosticSink) -> None:
        self._source = source
        self._loaders = loaders
        self._sink = sink
        self._cache: dict[tuple[str, tuple[str, ...] | None], LoadedTable | None] = {}
        self._available: dict[str, list[str] | None] = {}
        self._op_view: Any = None
        self._derived: dict[str, Any] = {}
        self._handed_over: set[str] = set()  # derived keys a unit run elsewhere sends back (``cached(hand_over=True)``)
        self._routes: dict[str, tuple[TableLoader, Path, str] | None] = {}
        self._db_said: set[tuple[str, str | None]] = set()
        # a table or derived value may be read on a second thread while the kernels are (``prefetch``)
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()

    # -- metadata ---------------------------------------------------------------
    @property
    def identity(self) -> RankIdentity:
        assert self._source.identity is not None
        return self._source.identity

    @property
    def rank_id(self) -> int:
        rid = self.identity.rank_id
        assert rid is not None
        return rid

    @property
    def parallel(self) -> ParallelLayout | None:
        return self._source.parallel

    @property
    def settings(self) -> ProfilerSettings | None:
        return self._source.settings

    @property
    def env(self) -> dict[str, str]:
        return dict(self._source.env)

    @property
    def path(self) -> Path:
        return self._source.path

    @property
    def artifacts(self) -> dict[str, Path]:
        """Artifact kind → file, for every file found (nothing read)."""
        return {k: a.path for k, a in sorted(self._source.artifacts.items())}

    # -- tables -----------------------------------------------------------------
    def loader(self, name: str) -> TableLoader:
        try:
            return self._loaders[name]
        except KeyError:
            raise KeyError(f"unknown table {name!r}; known: {', '.join(sorted(self._loaders))}") from None

    def _route(self, name: str) -> tuple[TableLoader, Path, str] | None:
        """The loader and file a table is read with: the text export or the DB export.

        ``source_mode`` ``auto`` takes the DB when it holds the tables this one is made of
        (``TableLoader.db_tables``), else the text file — and the text file too when the DB's
        tables are empty or give fewer rows than it (one info line names both files, see
        :func:`~advisor_core.loaders.registry.db_shortfall`); ``text`` never reads a DB; ``db`` reads
        a table that has a DB origin from the DB only (tables with none, e.g. MindData's,
        still come from their files).
        """
        if name in self._routes:
            return self._routes[name]
        ld = self.loader(name)
        text = next(((ld, a.path, k) for k in ld.artifacts if (a := self._source.artifacts.get(k)) is not None), None)
        db = None
        mode = self._source.source_mode
        if ld.db is not None and mode != "text":
            from advisor_core.loaders.dbfile import lacking, report

            for k in ld.db.artifacts:
                art = self._source.artifacts.get(k)
                if art is None:
                    continue
                table, reason = lacking(art.path, ld.db_tables)
                if reason is None:
                    db = (ld.db, art.path, k)
                    break
                if table is not None and lacking(art.path, ld.db_tables[:1])[0] is not None \
                        and all(lacking(art.path, (t,))[0] is not None for t in ld.db_tables):
                    continue  # none of its tables: not collected (no communication on one device), not broken
                said = (str(art.path), table)
                if said not in self._db_said:  # once per file (unusable) or per missing DB table
                    self._db_said.add(said)
                    if text is not None and mode == "auto":
                        self._sink.warning("bad-db", f"{art.path.name}: {'table ' + table + ': ' if table else ''}"
                                           f"{reason}; {text[1].name} is read instead", art.path, key=table)
                    else:
                        report(self._sink, art.path, table, reason)
        if db is not None and text is not None and mode == "auto":
            from advisor_core.loaders.registry import db_shortfall

            short = db_shortfall(ld, db[1], db[2], text[1], text[2])
            if short is not None:  # an empty or partial DB table: the text export has more
                self._sink.info("db-partial", short, db[1], key=name)
                db = None
        route = db or (None if mode == "db" and ld.db is not None else text)
        self._routes[name] = route
        return route

    def _loader_for(self, name: str) -> TableLoader:
        route = self._route(name)
        return route[0] if route is not None else self.loader(name)

    def table_source(self, name: str) -> tuple[Path, str] | None:
        """The file (and artifact kind) a table would be read from, or ``None``."""
        route = self._route(name)
        return None if route is None else (route[1], route[2])

    def table_sources(self) -> dict[str, tuple[Path, str]]:
        """Table → the file it is read from, for every table this rank has (what ``inspect`` shows)."""
        return {n: src for n in sorted(self._loaders) if (src := self.table_source(n)) is not None}

    def has_table(self, name: str) -> bool:
        return name in self._loaders and self.table_source(name) is not None

    def usable(self, name: str, columns: Sequence[str] = ()) -> bool:
        """Is table ``name`` present with its required columns (and ``columns``)? Reads the header only."""
        return not self.unusable_because(name, columns)

    def unusable_because(self, name: str, columns: Sequence[str] = ()) -> str | None:
        """Why table ``name`` (with ``columns``) cannot be used on this rank, or ``None`` when it can."""
        if not self.has_table(name):
            return f"no {name} table"
        have = self.columns(name)
        if have is None:
            return f"{name} table unreadable"
        required = self._loader_for(name).required
        if any(c not in have for c in required):
            self._load(name, required)  # the loader says what is wrong with the file (once)
        lacking = [c for c in (*required, *columns) if c not in have]
        if lacking:
            src = self.table_source(name)
            return f"{src[0].name if src else name} lacks {', '.join(dict.fromkeys(lacking))}"
        return None

    def columns(self, name: str) -> list[str] | None:
        """Canonical columns the table's file actually has (header only when possible)."""
        if name in self._available:
            return self._available[name]
        src = self.table_source(name)
        if src is None:
            self._available[name] = None
            return None
        ld = self._loader_for(name)
        if ld.available is not None:
            cols = ld.available(src[0], src[1], self._sink)
        else:
            loaded = self._load(name, None)
            cols = list(loaded.frame.columns) if loaded is not None else None
        self._available[name] = cols
        return cols

    def _load(self, name: str, columns: tuple[str, ...] | None) -> LoadedTable | None:
        ld = self._loader_for(name)
        key_cols = columns if ld.projectable else None
        key = (name, key_cols)
        if key in self._cache:
            return self._cache[key]
        with self._lock_for(f"table:{name}"):  # a table being read on another thread (``prefetch``) is read once
            return self._load_locked(ld, name, key_cols)

    def _load_locked(self, ld: TableLoader, name: str, key_cols: tuple[str, ...] | None) -> LoadedTable | None:
        key = (name, key_cols)
        if key in self._cache:
            return self._cache[key]
        full = self._cache.get((name, None))
        if full is not None and key_cols is not None and all(c in full.frame.columns for c in key_cols):
            loaded: LoadedTable | None = LoadedTable(full.frame[list(key_cols)], full.record, full.missing)
        else:
            src = self.table_source(name)
            loaded = None if src is None else ld.read(src[0], src[1], key_cols, self._sink)
        self._cache[key] = loaded
        return loaded

    def table(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
        """The canonical table ``name`` restricted to ``columns`` (``None``: its default set)."""
        loaded = self._load(name, tuple(columns) if columns is not None else None)
        if loaded is None:
            return None
        frame = loaded.frame
        if columns is not None:
            present = [c for c in columns if c in frame.columns]
            frame = frame[present]
        return frame

    def arrow_table(self, name: str, columns: Sequence[str] | None = None) -> pa.Table | None:
        """The canonical table ``name`` as Arrow, text columns dictionary-encoded; not cached.

        Read straight from the file when the loader can (CSV), so no pandas copy is made;
        what the op view is built from.
        """
        src = self.table_source(name)
        if src is None:
            return None
        ld = self._loader_for(name)
        if ld.read_arrow is not None:
            return ld.read_arrow(src[0], src[1], tuple(columns) if columns is not None else None, self._sink)
        frame = self.table(name, columns)
        if frame is None:
            return None
        table = pa.Table.from_pandas(frame, preserve_index=False)
        return pa.table({c: (table[c].dictionary_encode() if pa.types.is_string(table[c].type)
                                 or pa.types.is_large_string(table[c].type) else table[c]) for c in table.column_names})

    def op_view(self) -> Any:
        """The rank's :class:`~advisor_core.opview.OpView` (distinct ops of its kernels), built once.

        ``None`` when the rank has no usable kernel table (absent, unreadable, or without
        ``name`` and ``duration_us``).
        """
        if callable(self._op_view):  # held elsewhere (a Dask worker): fetch it now
            self._op_view = self._op_view() or False
        if self._op_view is None and not self.usable("kernels"):
            self._op_view = False
        if self._op_view is None:
            from advisor_core.opview.build import build_op_view

            self._op_view = build_op_view(self) or False
        return self._op_view if self._op_view is not False else None

    @contextmanager
    def diagnostics_to(self, sink: DiagnosticSink) -> Iterator[None]:
        """Send the diagnostics of reads made inside the block to ``sink`` (a per-rank unit's own)."""
        saved, self._sink = self._sink, sink
        try:
            yield
        finally:
            self._sink = saved

    def cached(self, key: str, compute: Callable[[], Any], *, hand_over: bool = False) -> Any:
        """A value derived from this rank's tables (a step breakdown …), computed once.

        Derived analyses memoise here so that every rule asking gets the same object.
        ``hand_over=True`` marks a value the client needs too (small and picklable: no
        kernel rows): when the rank's unit runs in another process (a pool worker, a Dask
        worker) it comes back with the unit (:meth:`handed_over`, :meth:`adopt_derived`),
        and the client does not compute it again, one rank after another, after the units.
        """
        if hand_over:
            self._handed_over.add(key)
        if key in self._derived:
            return self._derived[key]
        with self._lock_for(key):  # a second thread asking for the same value waits for the first
            if key not in self._derived:
                self._derived[key] = compute()
        return self._derived[key]

    def handed_over(self) -> dict[str, Any]:
        """The derived values computed here with ``hand_over=True`` (see :meth:`cached`), by key."""
        return {k: self._derived[k] for k in sorted(self._handed_over) if k in self._derived}

    def _lock_for(self, key: str) -> threading.RLock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.RLock())

    def prefetch(self, name: str) -> threading.Thread | None:
        """Start reading table ``name`` (its default columns) on a second thread; join the thread returned.

        For a read that holds the interpreter (the trace scan) while another releases it (Arrow's CSV
        reader on every core): the two then overlap. ``None`` when the rank has no such table.
        """
        if not self.has_table(name):
            return None
        thread = threading.Thread(target=self._prefetch_quietly, args=(name,), name=f"prefetch-{name}", daemon=True)
        thread.start()
        return thread

    def _prefetch_quietly(self, name: str) -> None:
        try:
            self._load(name, None)
        except Exception:  # noqa: BLE001 - the reader that asks next reads it again and says what is wrong
            pass

    def adopt_derived(self, values: Mapping[str, Any]) -> None:
        """Cache derived values computed elsewhere (a worker process's :meth:`handed_over`) for this rank."""
        self._derived.update(values)
        self._handed_over.update(values)

    def loaded_tables(self, names: Iterable[str]) -> dict[tuple[str, tuple[str, ...] | None], LoadedTable | None]:
        """The cached reads of tables ``names`` (to hand over to another process)."""
        wanted = set(names)
        return {k: v for k, v in self._cache.items() if k[0] in wanted}

    def adopt_tables(self, loaded: Mapping[tuple[str, tuple[str, ...] | None], LoadedTable | None]) -> None:
        """Cache table reads made elsewhere (a worker process) for this rank."""
        for key, value in loaded.items():
            self._cache.setdefault(key, value)

    def adopt_op_view_loader(self, fetch: Callable[[], Any]) -> None:
        """The op view is held elsewhere (a Dask worker, a file a pool worker wrote); ``fetch()`` brings it the first
        time it is needed."""
        self._op_view = fetch

    def ensure_timeline(self) -> None:
        """Make the cached op view carry its kernel timeline again (rebuilt from the file if it was dropped)."""
        view = self.op_view()
        if view is not None and view.timeline is None:
            from advisor_core.opview.build import build_op_view

            self._op_view = build_op_view(self) or False

    def holds_op_view_timeline(self) -> bool:
        """Is the op view built here, kernel timeline included (a per-rank unit in this process reads nothing again)?"""
        return bool(self._op_view) and not callable(self._op_view) and self._op_view.timeline is not None

    def forget_op_view_loader(self) -> None:
        """The place holding the op view is gone: build it from the files again if it is asked for."""
        if callable(self._op_view):
            self._op_view = None

    def adopt_op_view(self, view: Any) -> None:
        """Cache an op view built elsewhere (a worker process) for this rank."""
        self._op_view = view if view is not None else False

    def record(self, name: str) -> BaseModel | None:
        """The scalar-field record that comes with some tables (MindData summary, CPU info)."""
        loaded = self._load(name, None)
        return None if loaded is None else loaded.record

    def row_count(self, name: str) -> int | None:
        """Rows in a table, counted cheaply when the loader can (CSV lines)."""
        src = self.table_source(name)
        if src is None:
            return None
        ld = self._loader_for(name)
        if ld.rows is not None:
            try:
                return ld.rows(src[0], src[1])
            except OSError:
                return None
        loaded = self._load(name, None)
        return None if loaded is None else len(loaded.frame)

    def __repr__(self) -> str:
        return f"Rank({self.rank_id}, {self.path})"


class Run:
    """A profiled run: its ranks, cluster-level tables, and every diagnostic raised."""

    def __init__(
        self,
        profiles: ProfileSet,
        sink: DiagnosticSink,
        loaders: Mapping[str, TableLoader] | None = None,
    ) -> None:
        self.diagnostics = sink
        self.profiles = profiles
        self.loaders: dict[str, TableLoader] = dict(loaders or builtin_loaders())
        self.ranks: dict[int, Rank] = {
            src.identity.rank_id: Rank(src, self.loaders, sink)  # type: ignore[union-attr,misc]
            for src in profiles.ranks
        }
        self._cluster_cache: dict[str, object] = {}
        # what the per-rank units gave, by the rules and options they ran with (advisor_core.engine.runner)
        self.units_done: dict[Any, Any] = {}

    def rank(self, rank_id: int) -> Rank:
        return self.ranks[rank_id]

    def __iter__(self) -> Iterable[Rank]:  # type: ignore[override]
        return iter(self.ranks[r] for r in sorted(self.ranks))

    @property
    def rank_ids(self) -> list[int]:
        return sorted(self.ranks)

    def table(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
        """The table of every rank stacked, with a leading ``rank`` column (HTA style)."""
        parts = []
        for rid in self.rank_ids:
            df = self.ranks[rid].table(name, columns)
            if df is not None:
                parts.append(df.assign(rank=rid)[["rank", *df.columns]])
        if not parts:
            return None
        return pd.concat(parts, ignore_index=True)

    def cluster_step_trace(self) -> pd.DataFrame | None:
        """``cluster_step_trace_time.csv`` when the run directory has one."""
        if "cluster_step_trace" not in self._cluster_cache:
            p = self.profiles.cluster_files.get("cluster_step_trace_time")
            self._cluster_cache["cluster_step_trace"] = read_cluster_step_trace(p, self.diagnostics) if p else None
        return self._cluster_cache["cluster_step_trace"]  # type: ignore[return-value]

    def cluster_communication(self) -> pd.DataFrame | None:
        """``cluster_communication.json`` ops (one row per op and rank) when present."""
        if "cluster_communication" not in self._cluster_cache:
            p = self.profiles.cluster_files.get("cluster_communication")
            res = comm.read_cluster_communication(p, self.diagnostics) if p else None
            self._cluster_cache["cluster_communication"] = res[0] if res else None
        return self._cluster_cache["cluster_communication"]  # type: ignore[return-value]


def load_run(
    *paths: str | Path,
    sink: DiagnosticSink | None = None,
    loaders: Mapping[str, TableLoader] | None = None,
    report_empty: bool = True,
    source: str = "auto",
) -> Run:
    """Discover the profiles under ``paths`` and return a lazily loaded :class:`Run`.

    ``loaders`` replaces the built-in table catalogue (plugins add theirs); the
    artifact patterns they bring are used by discovery. ``source`` (``auto``, ``text``, ``db``)
    says which export a table comes from when a rank has both (see :meth:`Rank._route`).
    """
    sink = sink if sink is not None else DiagnosticSink()
    patterns = tuple(p for ld in (loaders or {}).values() for p in ld.patterns)
    profiles = discover_profiles([Path(p) for p in paths], sink, report_empty=report_empty, patterns=patterns,
                                 source=source)
    return Run(profiles, sink, loaders)
