"""The kernel table from the profiler's SQLite export, as Arrow (the op view's input) or pandas.

``COMPUTE_TASK_INFO`` ⨝ ``TASK`` on ``globalTaskId`` (compute tasks) plus one row per
``COMMUNICATION_OP`` (``accelerator_core`` ``HCCL``, as MindSpore's ``kernel_details.csv``
writes them), in start order. Only the requested columns are selected in SQL; the rows come
through the ADBC driver straight into Arrow buffers and every later step works on whole
NumPy columns: string ids become dictionary indices into ``STRING_IDS`` (one dictionary for
every text column), the communication rows are appended and the start order applied to
those integer columns, and only then are the output columns built — Arrow dictionary
columns for the op view, ``string[pyarrow]``/``Int64``/``float64`` for pandas, the dtypes
the CSV loader gives. (Ordering decoded Arrow columns instead, then casting dictionaries to
strings in one thread, made this path 1.1-1.5x slower than reading ``kernel_details.csv``;
see ``bench/bench_db_load.py``.)
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders import dbfile
from advisor_core.loaders.csvtable import ID_SENTINEL
from advisor_core.loaders.dbfile import DbUnusable

COMM_CORE = "HCCL"

# canonical kernel column → (DB table alias, column alternatives, kind)
# kinds: "int", "id" (sentinel → missing), "str" (STRING_IDS), derived ones handled apart.
KERNEL_COLUMNS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "device_id": ("t", ("deviceId",), "int"),
    "model_id": ("t", ("modelId",), "id"),
    "task_id": ("t", ("taskId",), "id"),
    "stream_id": ("t", ("streamId",), "id"),
    "context_id": ("t", ("contextId",), "id"),
    "name": ("c", ("name",), "str"),
    "type": ("c", ("opType",), "str"),
    "op_state": ("c", ("opState",), "str"),
    "accelerator_core": ("c", ("taskType",), "str"),
    "block_num": ("c", ("blockNum", "blockDim"), "int"),
    "mix_block_num": ("c", ("mixBlockNum", "mixBlockDim"), "int"),
    "hf32_eligible": ("c", ("hf32Eligible",), "str"),
    "input_shapes": ("c", ("inputShapes",), "str"),
    "input_dtypes": ("c", ("inputDataTypes",), "str"),
    "input_formats": ("c", ("inputFormats",), "str"),
    "output_shapes": ("c", ("outputShapes",), "str"),
    "output_dtypes": ("c", ("outputDataTypes",), "str"),
    "output_formats": ("c", ("outputFormats",), "str"),
}
KERNEL_DERIVED = ("step_id", "start_ns", "duration_us", "wait_us")
KERNEL_DB_ORIGIN: dict[str, str] = {
    **{k: f"{'TASK' if t == 't' else 'COMPUTE_TASK_INFO'}.{'|'.join(cols)}{' (STRING_IDS)' if kind == 'str' else ''}"
       for k, (t, cols, kind) in KERNEL_COLUMNS.items()},
    "step_id": "STEP_TIME window holding TASK.startNs",
    "start_ns": "TASK.startNs (COMMUNICATION_OP.startNs)",
    "duration_us": "(TASK.endNs − TASK.startNs) / 1000",
    "wait_us": "TASK.startNs − previous endNs on the same streamId, / 1000",
    "_note": ("Compute tasks are `COMPUTE_TASK_INFO` ⨝ `TASK` on `globalTaskId`; each communication op of "
              "`COMMUNICATION_OP` is one more row (`name` ← `opName`, `type` ← `opType`, `accelerator_core` `HCCL`, "
              "times from its `startNs`/`endNs`; ids, block dims, shapes and `wait_us` missing). Rows are in start "
              "order; strings are decoded from `STRING_IDS` as dictionary columns."),
}
KERNEL_DB_TABLES = ("TASK", "COMPUTE_TASK_INFO", "STRING_IDS")
# Rows per piece when text columns are materialised for pandas (pieces are decoded in parallel
# and keep each string buffer far below Arrow's 2 GiB offset limit).
_PIECE_ROWS = 1 << 18

_STRING = pa.string()
_DICT = pa.dictionary(pa.int32(), pa.string())


def _pick(cols: list[str], alternatives: tuple[str, ...]) -> str | None:
    return next((a for a in alternatives if a in cols), None)


def kernel_available(path: Path, sink: DiagnosticSink) -> list[str] | None:
    """Canonical kernel columns the DB can give (schema only)."""
    try:
        sch = dbfile.schema(path)
    except DbUnusable as exc:
        dbfile.report(sink, path, None, str(exc))
        return None
    missing = [t for t in KERNEL_DB_TABLES if t not in sch]
    if missing:
        dbfile.report(sink, path, missing[0], "table absent (a DB from another version, or a partial export)")
        return None
    have = {"t": sch["TASK"], "c": sch["COMPUTE_TASK_INFO"]}
    out = [k for k, (t, alts, _) in KERNEL_COLUMNS.items() if _pick(have[t], alts)]
    if {"startNs", "endNs"} <= set(have["t"]):
        out += ["start_ns", "duration_us"]
        if "streamId" in have["t"]:
            out.append("wait_us")
        if "STEP_TIME" in sch:
            out.append("step_id")
    return out


def kernel_rows(path: Path) -> int | None:
    """Rows of the kernel table (compute tasks plus communication ops), counted in SQL."""
    try:
        n = dbfile.query(path, "SELECT COUNT(*) FROM COMPUTE_TASK_INFO")[0][0]
        if "COMMUNICATION_OP" in dbfile.schema(path):
            n += dbfile.query(path, "SELECT COUNT(*) FROM COMMUNICATION_OP")[0][0]
    except DbUnusable:
        return None
    return int(n)


@dataclass
class _Columns:
    """The kernel table as NumPy columns, before it becomes Arrow or pandas.

    ``ints``: values (int64) and a missing mask (``None``: none missing); ``texts``: int32
    indices into ``dictionary``, -1 where missing; ``floats``: float64 with NaN.
    """

    n: int
    dictionary: pa.Array
    ints: dict[str, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)
    texts: dict[str, np.ndarray] = field(default_factory=dict)
    floats: dict[str, np.ndarray] = field(default_factory=dict)


def _ints(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """A fetched column as (int64 values, missing mask or ``None``); NULL-typed or REAL columns too."""
    if pa.types.is_null(col.type):
        return np.zeros(len(col), np.int64), np.ones(len(col), bool)
    nulls = col.null_count
    if not pa.types.is_integer(col.type):
        col = col.cast(pa.int64(), safe=False)
    if nulls:
        mask = col.is_null().to_numpy(zero_copy_only=False)
        return col.fill_null(0).to_numpy().astype(np.int64, copy=False), mask
    return col.to_numpy().astype(np.int64, copy=False), None


def _merge_masks(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a | b


def _fetch(path: Path, wanted: list[str], available: list[str], sch: dict[str, list[str]]) -> _Columns:
    """Compute tasks, then communication ops, each in its own start order; raises :class:`DbUnusable`."""
    have = {"t": sch["TASK"], "c": sch["COMPUTE_TASK_INFO"]}
    plain = [c for c in wanted if c in KERNEL_COLUMNS and c in available]
    need_stream = "wait_us" in wanted and "stream_id" not in plain
    strings = dbfile.string_ids(path)

    def column(c: str) -> str:
        tab, alts, _ = KERNEL_COLUMNS[c]
        return f"{tab}.{_pick(have[tab], alts)}"

    texts = [c for c in plain if KERNEL_COLUMNS[c][2] == "str"]
    numbers = [c for c in plain if c not in texts]
    packs = _Packing.of(strings, texts)
    select = ["t.startNs", "t.endNs", *(column(c) for c in numbers), *(["t.streamId"] if need_stream else []),
              *(packs.expression([column(c) for c in group]) for group in packs.groups)]
    sql = f"SELECT {', '.join(select)} FROM COMPUTE_TASK_INFO AS c JOIN TASK AS t ON t.globalTaskId = c.globalTaskId"
    # two subqueries: SQLite answers a lone MIN or MAX of the key from the index, both together by a full scan
    lo, hi = dbfile.query(path, "SELECT (SELECT MIN(globalTaskId) FROM COMPUTE_TASK_INFO), "
                                "(SELECT MAX(globalTaskId) FROM COMPUTE_TASK_INFO)")[0]
    fetched = dbfile.query_arrow(path, sql, split=("c.globalTaskId", lo, hi) if lo is not None else None)
    comm = _communication_ops(path, sch)
    first_pack = 2 + len(numbers) + int(need_stream)
    ids = {c: v for g, group in enumerate(packs.groups)
           for c, v in zip(group, packs.unpack(fetched.column(first_pack + g), len(group)))}

    n_task = fetched.num_rows
    n_comm = 0 if comm is None else comm.num_rows
    task_start, task_end = _ints(fetched.column(0))[0], _ints(fetched.column(1))[0]
    comm_start = _ints(comm.column(0))[0] if comm is not None else np.zeros(0, np.int64)
    comm_end = _ints(comm.column(1))[0] if comm is not None else np.zeros(0, np.int64)
    merge = _Merge(task_start, comm_start)
    dictionary = strings.dictionary
    hccl = strings.lookup(COMM_CORE)
    if hccl is None and n_comm and "accelerator_core" in plain:
        dictionary = pa.concat_arrays([dictionary, pa.array([COMM_CORE], _STRING)])
        hccl = len(dictionary) - 1
    out = _Columns(n_task + n_comm, dictionary)
    comm_text = {"name": comm.column(2), "type": comm.column(3)} if comm is not None else {}
    no_ids = (np.zeros(n_comm, np.int64), np.ones(n_comm, bool))  # a communication op has no ids, dims or stream
    for c in texts:
        if c in comm_text:
            extra = strings.indices(*_ints(comm_text[c]))
        else:
            extra = np.full(n_comm, hccl if c == "accelerator_core" else -1, np.int32)
        out.texts[c] = merge(strings.indices(*ids[c]), extra)
    for i, c in enumerate(numbers):
        values, mask = _ints(fetched.column(2 + i))
        if KERNEL_COLUMNS[c][2] == "id":
            mask = _merge_masks(mask, values == ID_SENTINEL)
        out.ints[c] = merge.masked(values, mask, *no_ids)
    if need_stream:
        values, mask = _ints(fetched.column(2 + len(numbers)))
        out.ints["_stream"] = merge.masked(values, _merge_masks(mask, values == ID_SENTINEL), *no_ids)
    out.ints["_start"] = (merge(task_start, comm_start), None)
    out.ints["_end"] = (merge(task_end, comm_end), None)
    return out


class _Packing:
    """Several string-id columns fetched as one integer: ``(id₁ << 2b) | (id₂ << b) | id₃``.

    The ADBC driver spends ~60 ns per value it converts, more than SQLite spends reading it, so
    three ids in one 63-bit value cut the fetch of the default kernel columns from 11 values a row
    to 6 (~10 % of the fetch). ``b`` bits hold every id of ``STRING_IDS`` and one more code, ``M``
    = 2ᵇ − 1, for NULL (``IFNULL(x, M) & M``: a NULL, a negative "none" id or one past the table
    all come back unknown — missing — as the unpacked path decodes them). A group of one column
    is fetched as it is.
    """

    def __init__(self, bits: int, per_value: int, texts: list[str]) -> None:
        self.bits = bits
        self.mask = (1 << bits) - 1
        self.groups = [texts[i:i + per_value] for i in range(0, len(texts), per_value)] if per_value > 1 \
            else [[c] for c in texts]

    @classmethod
    def of(cls, strings: dbfile.StringIds, texts: list[str]) -> "_Packing":
        ids = strings.ids
        if not len(ids) or int(ids[0]) < 0:
            return cls(63, 1, texts)
        bits = (int(ids[-1]) + 1).bit_length()  # room for every id and the NULL code above them
        return cls(bits, max(1, 63 // bits), texts)

    def expression(self, columns: list[str]) -> str:
        if len(columns) == 1:
            return columns[0]
        m, n = self.mask, len(columns)
        return "|".join(f"((IFNULL({c},{m})&{m})<<{self.bits * (n - 1 - i)})" if i < n - 1 else f"(IFNULL({c},{m})&{m})"
                        for i, c in enumerate(columns))

    def unpack(self, col: pa.ChunkedArray, n: int) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """The ``n`` id columns of one fetched value column: (ids, missing mask or ``None``) each."""
        values, mask = _ints(col)
        if n == 1:
            return [(values, mask)]
        # M decodes as unknown (it is above every id): no mask needed
        return [((values >> (self.bits * (n - 1 - i))) & self.mask, None) for i in range(n)]


class _Merge:
    """Puts compute-task rows and communication-op rows into one start order.

    Each part is usually in start order already (the profiler writes tasks in launch order,
    the ops are fetched sorted): then every column is scattered once into its merged
    position (O(n), no sort, no concatenate-then-gather); otherwise a stable argsort of the
    concatenated starts (ties keep compute tasks first, in id order).
    """

    def __init__(self, task_start: np.ndarray, comm_start: np.ndarray) -> None:
        c, k = task_start, comm_start
        self.n = len(c) + len(k)
        self.order: np.ndarray | None = None
        self.pos: tuple[np.ndarray, np.ndarray] | None = None
        if (len(c) > 1 and bool(np.any(c[1:] < c[:-1]))) or (len(k) > 1 and bool(np.any(k[1:] < k[:-1]))):
            self.order = np.argsort(np.concatenate([c, k]), kind="stable")
        elif len(k):
            self.pos = (np.arange(len(c)) + np.searchsorted(k, c, side="left"),  # ops strictly before each task
                        np.arange(len(k)) + np.searchsorted(c, k, side="right"))  # tasks at or before each op

    def __call__(self, task: np.ndarray, comm: np.ndarray) -> np.ndarray:
        if self.order is not None:
            return np.concatenate([task, comm])[self.order]
        if self.pos is None:
            return task
        out = np.empty(self.n, dtype=np.result_type(task, comm))
        out[self.pos[0]] = task
        out[self.pos[1]] = comm
        return out

    def masked(self, values: np.ndarray, mask: np.ndarray | None, comm_values: np.ndarray,
               comm_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if mask is None and not comm_mask.any():
            return self(values, comm_values), None
        return self(values, comm_values), self(np.zeros(len(values), bool) if mask is None else mask, comm_mask)


def _communication_ops(path: Path, sch: dict[str, list[str]]) -> pa.Table | None:
    cols = sch.get("COMMUNICATION_OP")
    if cols is None or not {"opName", "startNs", "endNs"} <= set(cols):
        return None
    op_type = "opType" if "opType" in cols else "NULL AS opType"
    return dbfile.query_arrow(path, f"SELECT startNs, endNs, opName, {op_type} FROM COMMUNICATION_OP "
                                    "ORDER BY startNs, rowid")


def _waits(start: np.ndarray, end: np.ndarray, stream: np.ndarray, missing: np.ndarray | None) -> np.ndarray:
    """Gap (ns) since the previous task on the same stream ended; 0 for a stream's first task; NaN without a stream."""
    valid = np.ones(len(start), bool) if missing is None else ~missing
    out = np.full(len(start), np.nan)
    if not valid.any():
        return out
    idx = np.flatnonzero(valid)
    sv = stream[idx]
    lo, hi = int(sv.min()), int(sv.max())
    if lo == hi:
        order = np.arange(len(sv))
    else:
        # rows come in start order: a stable sort by stream keeps each stream's tasks in start order
        # (few streams: 16-bit keys take NumPy's linear-time radix sort)
        keys = (sv - lo).astype(np.uint16) if hi - lo < 1 << 16 else sv
        order = np.argsort(keys, kind="stable")
    o = idx[order]
    w = np.zeros(len(o))
    same = sv[order][1:] == sv[order][:-1]
    gaps = start[o][1:] - end[o][:-1]
    w[1:] = np.where(same, np.maximum(gaps, 0), 0)
    out[o] = w
    return out


def _step_windows_ns(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = dbfile.query(path, "SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs")
    a = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return a[:, 0], a[:, 1], a[:, 2]


def _step_ids(path: Path, start: np.ndarray, sink: DiagnosticSink) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        ids, lo, hi = _step_windows_ns(path)
    except (DbUnusable, ValueError, TypeError) as exc:
        dbfile.report(sink, path, "STEP_TIME", str(exc))
        return np.zeros(len(start), np.int64), np.ones(len(start), bool)
    if not len(lo):
        return np.zeros(len(start), np.int64), np.ones(len(start), bool)
    i = np.searchsorted(lo, start, side="right") - 1
    ic = np.clip(i, 0, len(lo) - 1)
    inside = (i >= 0) & (start < hi[ic])
    return np.where(inside, ids[ic], 0), (None if inside.all() else ~inside)


def _read(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> tuple[_Columns, list[str]] | None:
    """The requested kernel columns as NumPy, and their order; ``None`` after one diagnostic."""
    available = kernel_available(path, sink)
    if available is None:
        return None
    if not {"name", "start_ns", "duration_us"} <= set(available):
        lacking = [c for c in ("name", "start_ns", "duration_us") if c not in available]
        dbfile.report(sink, path, "COMPUTE_TASK_INFO", f"lacks the columns for {', '.join(lacking)}")
        return None
    wanted = list(dict.fromkeys(columns if columns is not None else available))
    sch = dbfile.schema(path)
    try:
        cols = _fetch(path, wanted, available, sch)
    except DbUnusable as exc:
        dbfile.report(sink, path, "COMPUTE_TASK_INFO", str(exc))
        return None
    start, end = cols.ints.pop("_start")[0], cols.ints.pop("_end")[0]
    stream = cols.ints.pop("_stream", None) or cols.ints.get("stream_id")
    if "start_ns" in wanted:
        cols.ints["start_ns"] = (start, None)
    if "duration_us" in wanted:
        cols.floats["duration_us"] = (end - start) / 1000.0
    if "wait_us" in wanted and stream is not None:
        cols.floats["wait_us"] = _waits(start, end, *stream) / 1000.0
    if "step_id" in wanted and "STEP_TIME" in sch:
        cols.ints["step_id"] = _step_ids(path, start, sink)
    return cols, wanted


def _kind(name: str) -> str:
    """Output kind of a column the DB lacks: text, int or float."""
    if name in KERNEL_COLUMNS:
        return "str" if KERNEL_COLUMNS[name][2] == "str" else "int"
    return "int" if name in ("step_id", "start_ns") else "float"


def read_kernels_arrow(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pa.Table | None:
    """The kernel table as Arrow (text columns dictionary-encoded over ``STRING_IDS``), ``columns`` only."""
    got = _read(path, columns, sink)
    if got is None:
        return None
    cols, wanted = got
    out: dict[str, pa.Array] = {}
    for c in wanted:
        if c in cols.texts:
            idx = cols.texts[c]
            missing = idx < 0
            indices = pa.array(idx, mask=missing) if missing.any() else pa.array(idx)
            out[c] = pa.DictionaryArray.from_arrays(indices, cols.dictionary)
        elif c in cols.ints:
            values, mask = cols.ints[c]
            out[c] = pa.array(values, mask=mask)
        elif c in cols.floats:
            out[c] = pa.array(cols.floats[c])
        else:
            kind = _kind(c)
            out[c] = pa.nulls(cols.n, _DICT if kind == "str" else (pa.int64() if kind == "int" else pa.float64()))
    return pa.table(out) if out else pa.table({})


def read_kernels_frame(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pd.DataFrame | None:
    """The kernel table as the CSV loader's pandas frame: text ``string[pyarrow]``, ints ``Int64``, floats."""
    got = _read(path, columns, sink)
    if got is None:
        return None
    cols, wanted = got
    texts = _texts(cols)
    out: dict[str, object] = {}
    for c in wanted:
        if c in texts:
            out[c] = texts[c]
        elif c in cols.ints:
            values, mask = cols.ints[c]
            out[c] = pd.arrays.IntegerArray(values, mask if mask is not None else np.zeros(cols.n, bool))
        elif c in cols.floats:
            out[c] = cols.floats[c]
        else:
            kind = _kind(c)
            out[c] = (pd.array([None] * cols.n, dtype=pd.StringDtype("pyarrow")) if kind == "str"
                      else pd.array([None] * cols.n, dtype="Int64") if kind == "int" else np.full(cols.n, np.nan))
    index = pd.RangeIndex(cols.n)
    # copy=False: every column owns fresh buffers already
    return pd.DataFrame(out, index=index, copy=False) if out else pd.DataFrame(index=index)


def _texts(cols: _Columns) -> dict[str, pd.arrays.ArrowStringArray]:
    """Every text column as ``string[pyarrow]``: the dictionary taken in pieces, in parallel."""
    if not cols.texts:
        return {}
    jobs = [(c, a) for c in cols.texts for a in range(0, max(cols.n, 1), _PIECE_ROWS)]
    # pandas keeps its Arrow strings as large_string: taking from a large_string dictionary saves a cast
    dictionary = cols.dictionary.cast(pa.large_string())

    def piece(job: tuple[str, int]) -> pa.Array:
        c, a = job
        idx = cols.texts[c][a:a + _PIECE_ROWS]
        missing = idx < 0
        return dictionary.take(pa.array(idx, mask=missing) if missing.any() else pa.array(idx))

    workers = min(os.cpu_count() or 1, 4)
    if workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(workers) as pool:  # Arrow's take runs without the GIL
            pieces = list(pool.map(piece, jobs))
    else:
        pieces = [piece(j) for j in jobs]
    by_col: dict[str, list[pa.Array]] = {}
    for (c, _), p in zip(jobs, pieces):
        by_col.setdefault(c, []).append(p)
    return {c: pd.arrays.ArrowStringArray(pa.chunked_array(ps, pa.large_string())) for c, ps in by_col.items()}
