"""Read-only access to the profiler's SQLite export, with every failure said once.

The DB export (``ascend_mindspore_profiler_{rank}.db``, ``ascend_pytorch_profiler_{rank}.db``,
``analysis.db``/``communication_analyzer.db``) is opened through a ``mode=ro`` URI, so
nothing is ever written into the user's profile directory (no journal, no WAL file; a
WAL-mode database is read ``immutable`` or from a temporary copy, see :func:`_uri`).
A database that is not SQLite, truncated, corrupt, locked, or from a version without the
expected tables or columns yields one diagnostic naming the file and the table, and the
reader returns ``None``; the rest of the run goes on.

Strings are interned in ``STRING_IDS`` (``id``, ``value``); :func:`string_dictionary`
turns that table into an Arrow dictionary once per file, so a column of string ids
becomes a dictionary-encoded string column without a Python loop over rows.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from advisor_core.diagnostics import DiagnosticSink

# Read-only memory map of the file for the Arrow fetch (5-10 % faster at 1 M rows).
MMAP_BYTES = 1 << 30
# Below this many ids a fetch is not worth splitting across threads.
SPLIT_MIN_ROWS = 200_000
# Seconds to wait on a lock held by a process still writing the file.
LOCK_TIMEOUT_S = 2.0


class DbUnusable(Exception):
    """The database (or one of its tables) cannot be used; the message says why."""


_WAL_COPIES: dict[tuple[str, int, int, int, int], Path] = {}
_wal_lock = threading.Lock()


def _is_wal(path: Path) -> bool:
    """Is the file an SQLite database in WAL mode (header bytes 18-19 = 2, the file format)?"""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return len(head) == 20 and head.startswith(b"SQLite format 3\0") and head[18] == 2 and head[19] == 2


def _wal_copy(path: Path, wal: Path, wal_stat: os.stat_result) -> Path:
    """``path`` and its ``-wal`` copied into a private temporary directory (once per file version)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size, wal_stat.st_mtime_ns, wal_stat.st_size)
    with _wal_lock:
        hit = _WAL_COPIES.get(key)
        if hit is not None and hit.is_file():
            return hit
        try:
            tmp = Path(tempfile.mkdtemp(prefix="advisor-wal-"))
            atexit.register(shutil.rmtree, tmp, True)
            copy = tmp / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, tmp / wal.name)
        except OSError as exc:
            raise DbUnusable(f"has a write-ahead log ({wal.name}) that could not be copied aside to read it "
                             f"({exc.strerror or exc})") from None
        _WAL_COPIES[key] = copy
        return copy


def _uri(path: Path) -> str:
    """The read-only URI a database is opened with; nothing is ever created beside ``path``.

    A database in WAL mode opened with ``mode=ro`` alone makes SQLite create ``-shm`` and
    ``-wal`` files beside it (https://sqlite.org/wal.html, "Read-Only Databases"). Without a
    non-empty ``-wal`` all the content is in the main file, and ``immutable=1`` reads it with no
    locking and no side file (https://sqlite.org/uri.html). A non-empty ``-wal`` holds committed
    transactions the main file lacks: the two are copied to a temporary directory and read there.
    A rollback-journal database keeps plain ``mode=ro`` (a lock held by a writer is then seen).
    """
    extra = ""
    if _is_wal(path):
        wal = path.with_name(path.name + "-wal")
        try:
            wal_stat: os.stat_result | None = wal.stat()
        except OSError:
            wal_stat = None
        if wal_stat is not None and wal_stat.st_size > 0:
            path = _wal_copy(path, wal, wal_stat)
        else:
            extra = "&immutable=1"
    return f"file:{quote(str(path.resolve()))}?mode=ro{extra}"


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection; raises :class:`DbUnusable` with a plain reason."""
    try:
        con = sqlite3.connect(_uri(path), uri=True, timeout=LOCK_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise DbUnusable(f"cannot be opened read-only ({exc})") from None
    try:
        yield con
    finally:
        con.close()


def _reason(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "not a database" in text:
        return "is not an SQLite database"
    if "malformed" in text or "corrupt" in text:
        return "is corrupt or truncated (SQLite: database disk image is malformed)"
    if "locked" in text or "busy" in text:
        return f"is locked by another process (waited {LOCK_TIMEOUT_S:g} s)"
    return f"cannot be read (SQLite: {text})"


_schema_cache: dict[tuple[str, float, int], dict[str, list[str]] | str] = {}
_schema_lock = threading.Lock()


def schema(path: Path) -> dict[str, list[str]]:
    """Table name → column names, read once per file version; raises :class:`DbUnusable`."""
    try:
        st = path.stat()
    except OSError as exc:
        raise DbUnusable(f"cannot be read ({exc.strerror})") from None
    key = (str(path), st.st_mtime, st.st_size)
    with _schema_lock:
        hit = _schema_cache.get(key)
    if isinstance(hit, str):
        raise DbUnusable(hit)
    if hit is not None:
        return hit
    try:
        with connect(path) as con:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
            out = {n: [r[1] for r in con.execute(f'PRAGMA table_info("{n}")')] for n in names}
    except sqlite3.Error as exc:
        reason = _reason(exc)
        with _schema_lock:
            _schema_cache[key] = reason
        raise DbUnusable(reason) from None
    except DbUnusable as exc:
        with _schema_lock:
            _schema_cache[key] = str(exc)
        raise
    with _schema_lock:
        _schema_cache[key] = out
    return out


def lacking(path: Path, tables: Sequence[str]) -> tuple[str | None, str | None]:
    """(table, reason) when the file cannot give ``tables``: unusable (table ``None``) or one absent."""
    try:
        have = schema(path)
    except DbUnusable as exc:
        return None, str(exc)
    missing = [t for t in tables if t not in have]
    if missing:
        return missing[0], "table absent (a DB from another version, or a partial export)"
    return None, None


def has_tables(path: Path, tables: Sequence[str]) -> bool:
    """Does the file hold every one of ``tables``? ``False`` for an unusable file (said elsewhere)."""
    try:
        have = schema(path)
    except DbUnusable:
        return False
    return all(t in have for t in tables)


def empty_tables(path: Path, tables: Sequence[str]) -> list[str]:
    """Those of ``tables`` with no row (an unusable file or absent table: not listed, said elsewhere)."""
    out = []
    for t in tables:
        try:
            if not query(path, f'SELECT EXISTS (SELECT 1 FROM "{t}")')[0][0]:
                out.append(t)
        except DbUnusable:
            pass
    return out


def query(path: Path, sql: str, params: Sequence[object] = ()) -> list[tuple]:
    """All rows of ``sql``; raises :class:`DbUnusable`."""
    try:
        with connect(path) as con:
            return con.execute(sql, tuple(params)).fetchall()
    except sqlite3.Error as exc:
        raise DbUnusable(_reason(exc)) from None


def query_arrow(path: Path, sql: str, split: tuple[str, int, int] | None = None) -> pa.Table:
    """The result of ``sql`` as an Arrow table; raises :class:`DbUnusable`.

    Through the ADBC SQLite driver (Apache Arrow's C driver: the rows go straight into Arrow
    buffers, 2.6x faster than ``sqlite3`` tuples at 1 M rows, see ``bench/bench_db_load.py``); a
    file the driver cannot type (a column whose values change type) falls back to ``sqlite3``.
    ``split`` = (integer column, low, high): fetch in one thread per core, each a range of that
    column (appended as a ``WHERE``), concatenated in range order.
    """
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:  # pragma: no cover - a dependency; the fallback keeps a broken install working
        adbc = None
    if adbc is not None:
        try:
            return _adbc_fetch(adbc, path, sql, split)
        except Exception:  # noqa: BLE001 - any driver failure: the stdlib reader says what is wrong
            pass
    try:
        with connect(path) as con:
            cur = con.execute(sql)
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
    except sqlite3.Error as exc:
        raise DbUnusable(_reason(exc)) from None
    cols = columns_of(rows, len(names))
    return pa.table({n: pa.array(c.tolist(), from_pandas=True) if len(c) else pa.array([], pa.int64())
                     for n, c in zip(names, cols)})


def _adbc_fetch(adbc: object, path: Path, sql: str, split: tuple[str, int, int] | None) -> pa.Table:
    def one(q: str) -> pa.Table:
        with adbc.connect(_uri(path)) as con, con.cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(f"PRAGMA mmap_size={MMAP_BYTES}")  # read pages in place, not copied into SQLite's cache
            cur.fetchall()
            cur.execute(q)
            return cur.fetch_arrow_table()

    parts = min(os.cpu_count() or 1, 4)
    if split is None or parts < 2 or split[2] - split[1] < SPLIT_MIN_ROWS:
        return one(sql)
    col, lo, hi = split
    edges = [lo + (hi + 1 - lo) * i // parts for i in range(parts)] + [hi + 1]
    queries = [f"{sql} WHERE {col} >= {a} AND {col} < {b}" for a, b in zip(edges, edges[1:])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parts) as pool:  # the driver fetches without the GIL
        tables = list(pool.map(one, queries))
    return pa.concat_tables(tables, promote_options="permissive")


def columns_of(rows: list[tuple], n: int) -> list[np.ndarray]:
    """Rows → one object array per column (``None`` kept), without a Python loop per value."""
    if not rows:
        return [np.empty(0, dtype=object) for _ in range(n)]
    arr = np.array(rows, dtype=object)
    return [arr[:, i] for i in range(n)]


def int_column(values: np.ndarray) -> pa.Array:
    """Object array of ints/``None`` → nullable int64 Arrow array."""
    return pa.array(values, type=pa.int64(), from_pandas=True)


def float_column(values: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.float64(), from_pandas=True)


class StringIds:
    """``STRING_IDS`` as an Arrow dictionary: ``decode(ids)`` → dictionary-encoded strings."""

    def __init__(self, ids: np.ndarray, values: list[str]) -> None:
        order = np.argsort(ids, kind="stable")
        self._ids = ids[order]
        self._dictionary = pa.array([values[i] for i in order], type=pa.string())
        # the profiler numbers its strings 0..n-1: then an id *is* the dictionary index
        self._dense = bool(len(self._ids)) and int(self._ids[0]) == 0 and int(self._ids[-1]) == len(self._ids) - 1

    @property
    def ids(self) -> np.ndarray:
        """The interned ids, sorted."""
        return self._ids

    @property
    def dictionary(self) -> pa.Array:
        """The strings in id order: what :meth:`indices` index into."""
        return self._dictionary

    def indices(self, ids: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
        """String ids (int64; ``missing`` marks NULLs) → int32 indices into :attr:`dictionary`, -1 where
        missing or not interned."""
        n = len(self._ids)
        if self._dense and missing is None and (not len(ids) or (int(ids.min()) >= 0 and int(ids.max()) < n)):
            return ids.astype(np.int32)  # every id interned: the ids are the indices
        if self._dense:
            known = (ids >= 0) & (ids < n)
            pos = ids
        else:
            pos = np.clip(np.searchsorted(self._ids, ids), 0, max(n - 1, 0))
            known = (self._ids[pos] == ids) if n else np.zeros(len(ids), bool)
        if missing is not None:
            known &= ~missing
        return np.where(known, pos, -1).astype(np.int32)

    def decode(self, ids: pa.Array) -> pa.DictionaryArray:
        """String ids (int64, nulls allowed) → dictionary array; an unknown id becomes null."""
        if self._dense:
            n = len(self._ids)
            known = pc.and_(pc.greater_equal(ids, 0), pc.less(ids, n))
            indices = pc.if_else(known, pc.cast(ids, pa.int32(), safe=False), pa.scalar(None, pa.int32()))
            return pa.DictionaryArray.from_arrays(indices, self._dictionary)
        raw = ids.to_numpy(zero_copy_only=False)
        valid = ~ids.is_null().to_numpy(zero_copy_only=False)
        filled = np.where(valid, raw, -1).astype(np.int64)
        pos = np.searchsorted(self._ids, filled)
        pos_c = np.clip(pos, 0, max(len(self._ids) - 1, 0))
        found = valid & (len(self._ids) > 0) & (self._ids[pos_c] == filled) if len(self._ids) else np.zeros(len(raw), bool)
        indices = pa.array(np.where(found, pos_c, 0).astype(np.int32), mask=~found)
        return pa.DictionaryArray.from_arrays(indices, self._dictionary)

    def lookup(self, value: str) -> int | None:
        """The id of ``value`` (for a SQL filter), ``None`` when it is not interned."""
        hit = np.flatnonzero(np.asarray(self._dictionary.to_pylist(), dtype=object) == value)
        return int(self._ids[hit[0]]) if len(hit) else None


_strings_cache: dict[tuple[str, float, int], StringIds] = {}


def string_ids(path: Path) -> StringIds:
    """The file's ``STRING_IDS`` table (cached per file version); raises :class:`DbUnusable`."""
    st = path.stat()
    key = (str(path), st.st_mtime, st.st_size)
    hit = _strings_cache.get(key)
    if hit is not None:
        return hit
    cols = schema(path).get("STRING_IDS")
    if cols is None or not {"id", "value"} <= set(cols):
        raise DbUnusable("has no STRING_IDS table (id, value)")
    rows = query(path, "SELECT id, value FROM STRING_IDS")
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    out = StringIds(ids, [str(r[1]) if r[1] is not None else "" for r in rows])
    _strings_cache.clear()  # one file's strings at a time: ranks are read one after another
    _strings_cache[key] = out
    return out


def report(sink: DiagnosticSink, path: Path, table: str | None, reason: str) -> None:
    """One error naming the file and the table."""
    where = f"table {table}: " if table else ""
    sink.error("bad-db", f"{path.name}: {where}{reason}", path, key=table)
