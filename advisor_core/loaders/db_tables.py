"""Canonical tables read from the profiler's SQLite export.

The same tables, column names, units and dtypes as the text loaders give, so a rule
cannot tell which export it was handed (``docs/tables.md`` lists the DB origin of
each column). Queries project the requested columns in SQL; interned strings
(``STRING_IDS``) are decoded in Arrow as dictionary columns.

Profiler DB (``ascend_{mindspore,pytorch}_profiler[_{rank}].db``, times in ns):

* ``kernels`` ← ``COMPUTE_TASK_INFO`` ⨝ ``TASK`` on ``globalTaskId`` (compute tasks) and
  ``COMMUNICATION_OP`` (one row per communication op, ``accelerator_core`` ``HCCL`` as
  MindSpore's ``kernel_details.csv`` writes it), in start order. ``duration_us`` =
  (``endNs`` − ``startNs``) / 1000; ``wait_us`` = gap since the previous task on the same
  stream ended; ``step_id`` = the ``STEP_TIME`` window holding the start.
  ``blockDim``/``blockNum`` and ``mixBlockDim``/``mixBlockNum`` are both accepted
  (read in :mod:`advisor_core.loaders.db_kernels`).
* ``op_statistic`` ← the compute tasks grouped by ``opType`` and ``taskType`` in SQL.
* ``step_events`` ← ``STEP_TIME`` (``ProfilerStep#<id>`` windows).
* ``memory_record`` ← ``MEMORY_RECORD``. (``operator_memory`` is not read from the DB:
  ``OP_MEMORY`` is torch_npu's, MindSpore's export has no such table; it comes from
  ``operator_memory.csv``.)

Each reader's ``*_DB_ORIGIN`` maps a canonical column to where it comes from (what
``docs/tables.md`` shows); a column it does not name comes back empty from the DB, which
``tests/loaders/test_db_origins.py`` checks against a simulated DB export.

Communication DB (``analysis.db``; MindSpore also ``communication_analyzer.db``), times
in ms as in ``communication.json``:

* ``communication`` ← ``CommAnalyzerTime`` (+ transit sizes summed from ``CommAnalyzerBandwidth``);
* ``communication_bandwidth`` ← ``CommAnalyzerBandwidth``; ``communication_matrix`` ← ``CommAnalyzerMatrix``;
* ``step_trace`` ← ``StepTraceTime`` (µs, the columns of ``step_trace_time.csv``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders import dbfile
from advisor_core.loaders.db_kernels import (  # noqa: F401 - the kernel table's DB route, re-exported
    COMM_CORE,
    KERNEL_DB_ORIGIN,
    KERNEL_DB_TABLES,
    kernel_available,
    kernel_rows,
    read_kernels_arrow,
    read_kernels_frame,
)
from advisor_core.loaders.db_kernels import _step_windows_ns
from advisor_core.loaders.dbfile import DbUnusable


def _decode(strings: dbfile.StringIds, ids: np.ndarray) -> pa.DictionaryArray:
    return strings.decode(dbfile.int_column(ids))


# -- op statistic ------------------------------------------------------------------------------------------------

OP_STATISTIC_DB_ORIGIN = {
    "op_type": "COMPUTE_TASK_INFO.opType (STRING_IDS); COMMUNICATION_OP.opType for the communication ops",
    "core_type": "COMPUTE_TASK_INFO.taskType (STRING_IDS); `HCCL` for the communication ops",
    "count": "COUNT(*) per (opType, taskType)",
    "total_time_us": "Σ (TASK.endNs − TASK.startNs) / 1000 (COMMUNICATION_OP.endNs − startNs)",
    "min_time_us": "MIN(endNs − startNs) / 1000",
    "avg_time_us": "total_time_us / count, rounded to 3 decimals as op_statistic.csv writes it",
    "max_time_us": "MAX(endNs − startNs) / 1000",
    "ratio_pct": "100 × total_time_us / Σ total_time_us, 3 decimals",
    "_note": "Compute tasks (`COMPUTE_TASK_INFO` ⨝ `TASK`) and `COMMUNICATION_OP` rows grouped in SQL.",
}


def read_op_statistic(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """Per (op type, core) totals of the compute tasks, grouped in SQL (µs, like ``op_statistic.csv``)."""
    if kernel_available(path, sink) is None:
        return None
    tasks = ("SELECT c.opType AS op, c.taskType AS core, t.endNs - t.startNs AS d FROM COMPUTE_TASK_INFO AS c "
             "JOIN TASK AS t ON t.globalTaskId = c.globalTaskId")
    try:
        comm_cols = dbfile.schema(path).get("COMMUNICATION_OP") or []
        if {"opType", "startNs", "endNs"} <= set(comm_cols):
            # communication ops count as their own type on core HCCL, as in op_statistic.csv
            tasks += " UNION ALL SELECT opType, NULL, endNs - startNs FROM COMMUNICATION_OP"
        rows = dbfile.query(path, f"SELECT op, core, COUNT(*), SUM(d), MIN(d), MAX(d) FROM ({tasks}) GROUP BY op, core")
        strings = dbfile.string_ids(path)
    except DbUnusable as exc:
        dbfile.report(sink, path, "COMPUTE_TASK_INFO", str(exc))
        return None
    cols = dbfile.columns_of(rows, 6)
    count = cols[2].astype(np.int64)
    total = cols[3].astype(np.int64)
    grand = int(total.sum()) or 1
    frame = pd.DataFrame({
        "device_id": pd.array([None] * len(rows), dtype="Int64"),
        "model_name": pd.array([None] * len(rows), dtype=pd.StringDtype("pyarrow")),
        "op_type": pd.array(pc.cast(_decode(strings, cols[0]), pa.string()).to_pylist(), dtype=pd.StringDtype("pyarrow")),
        "core_type": pd.array([COMM_CORE if c is None else c for c in
                               pc.cast(_decode(strings, cols[1]), pa.string()).to_pylist()], dtype=pd.StringDtype("pyarrow")),
        "count": pd.array(count, dtype="Int64"),
        "total_time_us": total / 1000.0,
        "min_time_us": cols[4].astype(np.int64) / 1000.0,
        # formatted as op_statistic.csv writes it (three decimals, half away from zero on the text)
        "avg_time_us": [float(f"{v:.3f}") for v in total / np.maximum(count, 1) / 1000.0],
        "max_time_us": cols[5].astype(np.int64) / 1000.0,
        "ratio_pct": np.round(100.0 * total / grand, 3),
    })
    return frame.sort_values(["total_time_us", "op_type"], ascending=[False, True], ignore_index=True)


# -- steps -------------------------------------------------------------------------------------------------------

def _coverage(pos: np.ndarray, deltas: list[np.ndarray], starts_ends: list[tuple[np.ndarray, np.ndarray]]
              ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Distinct boundary positions and, per interval set, how many intervals cover [pos_i, pos_i+1)."""
    cover = []
    for s, e in starts_ends:
        d = np.zeros(len(pos), dtype=np.int64)
        np.add.at(d, np.searchsorted(pos, s), 1)
        np.add.at(d, np.searchsorted(pos, e), -1)
        cover.append(np.cumsum(d))
    return pos, cover


def _segments(pos: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge the covered elementary segments [pos_i, pos_i+1) where ``mask`` into maximal intervals."""
    m = mask[:-1] if len(mask) else mask
    if not len(m) or not m.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    edge = np.diff(np.concatenate([[0], m.astype(np.int8), [0]]))
    first = np.flatnonzero(edge == 1)
    last = np.flatnonzero(edge == -1)
    return pos[first], pos[last]


def overlap_intervals(comp: tuple[np.ndarray, np.ndarray], comm: tuple[np.ndarray, np.ndarray], lo: int, hi: int
                      ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """CANN's overlap analysis: merged compute, merged communication, communication not under compute,
    and free time (neither) inside [lo, hi), as (starts, ends) in ns."""
    pos = np.unique(np.concatenate([comp[0], comp[1], comm[0], comm[1], [lo, hi]]))
    _, (c, k) = _coverage(pos, [], [comp, comm])
    inside = (pos >= lo) & (pos < hi)
    return {
        "Computing": _segments(pos, c > 0),
        "Communication": _segments(pos, k > 0),
        "Communication(Not Overlapped)": _segments(pos, (k > 0) & (c == 0)),
        "Free": _segments(pos, (c == 0) & (k == 0) & inside),
    }


STEP_EVENTS_DB_ORIGIN = {
    "ph": "`X` (complete events)",
    "name": "ProfilerStep#<STEP_TIME.id>; the interval kind for an Overlap Analysis row",
    "ts_ns": "STEP_TIME.startNs; an interval's start",
    "dur_us": "(STEP_TIME.endNs − startNs) / 1000; an interval's length",
    "process_name": "`Step` for a STEP_TIME window, `Overlap Analysis` for an interval computed from TASK and "
                    "COMMUNICATION_OP",
    "thread_name": "the interval kind (Computing, Communication, Communication(Not Overlapped), Free)",
}


def read_step_events(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``STEP_TIME`` windows as ``ProfilerStep#<id>`` events, and the overlap analysis of the tasks.

    The text export's trace carries CANN's ``Overlap Analysis`` events; the DB does not, so
    they are computed here from the task intervals the same way: compute tasks
    (``COMPUTE_TASK_INFO`` ⨝ ``TASK``) merged, communication ops (``COMMUNICATION_OP``)
    merged, their difference, and the free time between the first step's start and the
    last step's end.
    """
    from advisor_core.loaders.trace_steps import STEP_EVENT_COLUMNS

    try:
        ids, lo, hi = _step_windows_ns(path)
    except DbUnusable as exc:
        dbfile.report(sink, path, "STEP_TIME", str(exc))
        return None
    except (ValueError, TypeError):
        dbfile.report(sink, path, "STEP_TIME", "id/startNs/endNs are not all integers")
        return None
    names = [f"ProfilerStep#{i}" for i in ids]
    procs = ["Step"] * len(ids)
    threads: list[str | None] = [None] * len(ids)
    starts, ends = [lo], [hi]
    if len(ids) and kernel_available(path, DiagnosticSink()) is not None:
        try:
            comp = dbfile.query(path, "SELECT t.startNs, t.endNs FROM COMPUTE_TASK_INFO AS c JOIN TASK AS t "
                                      "ON t.globalTaskId = c.globalTaskId")
            sch = dbfile.schema(path)
            comm = (dbfile.query(path, "SELECT startNs, endNs FROM COMMUNICATION_OP")
                    if {"startNs", "endNs"} <= set(sch.get("COMMUNICATION_OP", [])) else [])
        except DbUnusable as exc:
            dbfile.report(sink, path, "TASK", str(exc))
            comp, comm = [], []
        c = np.array(comp, dtype=np.int64).reshape(-1, 2)
        k = np.array(comm, dtype=np.int64).reshape(-1, 2)
        parts = overlap_intervals((c[:, 0], c[:, 1]), (k[:, 0], k[:, 1]), int(lo.min()), int(hi.max()))
        for thread, (s, e) in parts.items():
            names += [thread] * len(s)
            procs += ["Overlap Analysis"] * len(s)
            threads += [thread] * len(s)
            starts.append(s)
            ends.append(e)
    ts = np.concatenate(starts)
    te = np.concatenate(ends)
    n = len(ts)
    frame = pd.DataFrame({
        "ph": pd.array(["X"] * n, dtype="string"),
        "name": pd.array(names, dtype="string"),
        "pid": pd.array([None] * n, dtype="string"),
        "tid": pd.array([None] * n, dtype="string"),
        "ts_ns": pd.array(ts, dtype="Int64"),
        "dur_us": (te - ts) / 1000.0,
        "process_name": pd.array(procs, dtype="string"),
        "thread_name": pd.array(threads, dtype="string"),
    })
    order = [c for c in (columns if columns is not None else STEP_EVENT_COLUMNS) if c in frame.columns]
    return frame[order]


STEP_TRACE_DB = {
    "step": "step", "computing_us": "computing", "communication_not_overlapped_us": "communication_not_overlapped",
    "overlapped_us": "overlapped", "communication_us": "communication", "free_us": "free", "stage_us": "stage",
    "bubble_us": "bubble",
    "communication_not_overlapped_exclude_receive_us": "communication_not_overlapped_and_exclude_receive",
    "preparing_us": "preparing",
}


STEP_TRACE_DB_ORIGIN = {
    **{k: f"StepTraceTime.{v}" for k, v in STEP_TRACE_DB.items()},
    "whole_run": "true when StepTraceTime has one row whose step is missing or 0 (a whole-run profile)",
    "total_us": "computing + communication_not_overlapped + free",
}


def read_step_trace(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``StepTraceTime`` (µs) → the canonical step table (what ``step_trace_time.csv`` gives)."""
    from advisor_core.loaders.steps import STEP_COLUMNS

    try:
        cols = dbfile.schema(path).get("StepTraceTime")
        if cols is None:
            dbfile.report(sink, path, "StepTraceTime", "table absent")
            return None
        present = {k: v for k, v in STEP_TRACE_DB.items() if v in cols}
        if "computing_us" not in present:
            dbfile.report(sink, path, "StepTraceTime", "lacks column computing")
            return None
        rows = dbfile.query(path, f"SELECT {', '.join(present.values())} FROM StepTraceTime ORDER BY rowid")
    except DbUnusable as exc:
        dbfile.report(sink, path, "StepTraceTime", str(exc))
        return None
    raw = dbfile.columns_of(rows, len(present))
    data = dict(zip(present, raw))
    n = len(rows)
    out = pd.DataFrame(index=pd.RangeIndex(n))
    step = pd.to_numeric(pd.Series(data.get("step", np.full(n, None)), dtype="object").astype("string")
                         .str.extract(r"(\d+)", expand=False), errors="coerce")
    out["step"] = pd.array(step, dtype="Int64")
    out["whole_run"] = (n == 1) & (out["step"].isna() | (out["step"] == 0)).astype(bool)
    out["device_id"] = pd.array([None] * n, dtype="Int64")
    for canon in STEP_TRACE_DB:
        if canon == "step":
            continue
        out[canon] = pd.to_numeric(pd.Series(data[canon]), errors="coerce").astype("float64") if canon in data else np.nan
    comm = out["communication_not_overlapped_us"].fillna(0.0)
    out["total_us"] = out["computing_us"].fillna(0.0) + comm + out["free_us"].fillna(0.0)
    out["iteration_interval_us"] = np.nan
    out["fp_bp_us"] = np.nan
    out["tail_us"] = np.nan
    return out[list(STEP_COLUMNS)]


# -- communication -----------------------------------------------------------------------------------------------

_STEP_KEY = re.compile(r"^step(\d*)$", re.IGNORECASE)


def _step_of(value: Any) -> int | None:
    m = _STEP_KEY.match(str(value).strip()) if value is not None else None
    return int(m.group(1)) if m and m.group(1) else None


def _table_rows(path: Path, table: str, required: Sequence[str], sink: DiagnosticSink,
                optional: Sequence[str] = ()) -> list[dict[str, Any]] | None:
    """Rows of ``table`` as dicts (optional columns the file lacks come back as ``None``)."""
    try:
        cols = dbfile.schema(path).get(table)
        if cols is None:
            dbfile.report(sink, path, table, "table absent (a DB from another version, or a partial export)")
            return None
        lacking = [c for c in required if c not in cols]
        if lacking:
            dbfile.report(sink, path, table, f"lacks column(s) {', '.join(lacking)} (a DB from another version?)")
            return None
        names = [*required, *(c for c in optional if c in cols)]
        rows = dbfile.query(path, f"SELECT {', '.join(names)} FROM {table} ORDER BY rowid")
    except DbUnusable as exc:
        dbfile.report(sink, path, table, str(exc))
        return None
    return [{**dict.fromkeys(optional), **dict(zip(names, r))} for r in rows]


def _ms_us(v: Any) -> float | None:
    return None if v is None else float(v) * 1000.0


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


COMMUNICATION_DB_ORIGIN = {
    "step": "CommAnalyzerTime.step", "group_kind": "CommAnalyzerTime.type",
    "op_name": "CommAnalyzerTime.hccl_op_name", "group": "CommAnalyzerTime.group_name",
    "op_type": "from hccl_op_name", "start_ns": "CommAnalyzerTime.start_timestamp (µs → ns)",
    "elapse_us": "CommAnalyzerTime.elapse_time × 1000", "transit_us": "CommAnalyzerTime.transit_time × 1000",
    "wait_us": "CommAnalyzerTime.wait_time × 1000",
    "synchronization_us": "CommAnalyzerTime.synchronization_time × 1000",
    "idle_us": "CommAnalyzerTime.idle_time × 1000", "wait_ratio": "wait / (wait + transit)",
    "synchronization_ratio": "synchronization / (synchronization + transit)",
    "transit_size_mb": "Σ CommAnalyzerBandwidth.transit_size of the op",
}
BANDWIDTH_DB_ORIGIN = {
    "step": "CommAnalyzerBandwidth.step", "op_name": "CommAnalyzerBandwidth.hccl_op_name",
    "group": "CommAnalyzerBandwidth.group_name", "link_type": "CommAnalyzerBandwidth.transport_type",
    "transit_size_mb": "CommAnalyzerBandwidth.transit_size", "transit_us": "CommAnalyzerBandwidth.transit_time × 1000",
    "bandwidth_gbps": "CommAnalyzerBandwidth.bandwidth", "large_packet_ratio": "CommAnalyzerBandwidth.large_packet_ratio",
    "_note": "One row per (step, op, group, transport type): the per-package-size rows of a real export repeat "
             "the link totals and are read once.",
}


def read_communication(path: Path, which: int, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``CommAnalyzerTime``/``CommAnalyzerBandwidth`` → the ``communication`` (0) or bandwidth (1) table."""
    from advisor_core.loaders import communication as comm
    from advisor_core.loaders.csvtable import us_text_to_ns

    bw_rows = _table_rows(path, "CommAnalyzerBandwidth", ("hccl_op_name", "group_name", "transport_type", "transit_size",
                                                          "transit_time", "bandwidth", "step"), sink,
                          optional=("large_packet_ratio",))
    if bw_rows is None:
        return None
    bw_records: list[dict[str, Any]] = []
    sizes: dict[tuple[Any, Any, Any], float] = {}
    seen: set[tuple[Any, ...]] = set()
    for r in bw_rows:
        key = (r["step"], r["hccl_op_name"], r["group_name"], r["transport_type"])
        if key in seen:  # one row per package size in a real export: the link totals repeat
            continue
        seen.add(key)
        op = (r["step"], r["hccl_op_name"], r["group_name"])
        sizes[op] = sizes.get(op, 0.0) + (float(r["transit_size"]) if r["transit_size"] is not None else 0.0)
        bw_records.append({"rank": None, "step": _step_of(r["step"]), "op_name": r["hccl_op_name"],
                           "group": r["group_name"] or None, "link_type": r["transport_type"],
                           "transit_size_mb": _f(r["transit_size"]), "transit_us": _ms_us(r["transit_time"]),
                           "bandwidth_gbps": _f(r["bandwidth"]), "large_packet_ratio": _f(r["large_packet_ratio"])})
    if which == 1:
        return comm.comm_frames([], bw_records)[1]
    time_rows = _table_rows(path, "CommAnalyzerTime", ("hccl_op_name", "group_name", "start_timestamp", "elapse_time",
                                                       "transit_time", "wait_time", "synchronization_time", "step",
                                                       "type"), sink, optional=("idle_time",))
    if time_rows is None:
        return None
    records = []
    for r in time_rows:
        wait, sync, transit = _ms_us(r["wait_time"]), _ms_us(r["synchronization_time"]), _ms_us(r["transit_time"])
        # communication.json's ratios, from the same ms values (msprof: wait / (wait + transit))
        wr = None if wait is None or transit is None or wait + transit == 0 else round(wait / (wait + transit), 4)
        sr = None if sync is None or transit is None or sync + transit == 0 else round(sync / (sync + transit), 4)
        start = r["start_timestamp"]
        records.append({
            "rank": None, "step": _step_of(r["step"]), "group_kind": r["type"], "op_name": r["hccl_op_name"],
            "group": r["group_name"] or None, "op_type": comm.op_type_of(str(r["hccl_op_name"])),
            "start_ns": us_text_to_ns(str(start)) if start is not None else None,
            "elapse_us": _ms_us(r["elapse_time"]), "transit_us": transit, "wait_us": wait,
            "synchronization_us": sync, "idle_us": _ms_us(r["idle_time"]), "wait_ratio": wr,
            "synchronization_ratio": sr,
            "transit_size_mb": sizes.get((r["step"], r["hccl_op_name"], r["group_name"]), 0.0),
        })
    return comm.comm_frames(records, [])[0]


MATRIX_DB_ORIGIN = {
    "step": "CommAnalyzerMatrix.step",
    "group_kind": "CommAnalyzerMatrix.type, else `p2p` for send/receive ops and `collective` for the rest",
    "op_key": "hccl_op_name@group_name", "op_type": "from hccl_op_name", "rank_set": "CommAnalyzerMatrix.group_name",
    "src_rank": "CommAnalyzerMatrix.src_rank", "dst_rank": "CommAnalyzerMatrix.dst_rank",
    "transport_type": "CommAnalyzerMatrix.transport_type", "transit_size_mb": "CommAnalyzerMatrix.transit_size",
    "transit_us": "CommAnalyzerMatrix.transit_time × 1000", "bandwidth_gbps": "CommAnalyzerMatrix.bandwidth",
    "op_name": "CommAnalyzerMatrix.op_name (torch_npu's layout), else hccl_op_name (MindSpore's raw op name)",
}


def read_communication_matrix(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``CommAnalyzerMatrix`` → the ``communication_matrix`` table.

    Two layouts exist: torch_npu's (``step``, ``type``, ``op_name``; ``hccl_op_name`` the aggregate
    key such as ``allreduce-top1``) and MindSpore's/msprof's, one row per op and link with the raw op
    name in ``hccl_op_name``. Either way a row becomes one link of one op entry; the JSON's
    ``-top1``/``-middle``/``-total`` aggregates are not rebuilt from the raw form.
    """
    from advisor_core.loaders import communication as comm

    rows = _table_rows(path, "CommAnalyzerMatrix", ("hccl_op_name", "group_name", "src_rank", "dst_rank",
                                                    "transport_type", "transit_size", "transit_time", "bandwidth"),
                       sink, optional=("step", "type", "op_name"))
    if rows is None:
        return None
    out = []
    for r in rows:
        name, group = str(r["hccl_op_name"]), r["group_name"] or None
        raw = r.get("op_name") is None and "__" in name
        kind = r.get("type") or ("p2p" if comm.op_type_of(name) in ("send", "receive", "batchsendrecv") else "collective")
        out.append({
            "step": _step_of(r.get("step")), "group_kind": kind, "op_key": f"{name}@{group}" if group else name,
            "op_type": comm.op_type_of(name) if raw else name.split("-")[0], "rank_set": group,
            "src_rank": int(r["src_rank"]) if str(r["src_rank"]).isdigit() else None,
            "dst_rank": int(r["dst_rank"]) if str(r["dst_rank"]).isdigit() else None,
            "transport_type": r["transport_type"], "transit_size_mb": _f(r["transit_size"]),
            "transit_us": _ms_us(r["transit_time"]), "bandwidth_gbps": _f(r["bandwidth"]),
            "op_name": name if raw else r.get("op_name"),
        })
    return comm.matrix_frame(out)


# -- memory ------------------------------------------------------------------------------------------------------

MEMORY_RECORD_DB_ORIGIN = {
    "component": "MEMORY_RECORD.component (STRING_IDS)", "timestamp_ns": "MEMORY_RECORD.timestamp",
    "total_allocated_mb": "MEMORY_RECORD.totalAllocated / 1024000 (MindSpore's MB)",
    "total_reserved_mb": "MEMORY_RECORD.totalReserved / 1024000",
    "total_active_mb": "MEMORY_RECORD.totalActive / 1024000",
    "stream_ptr": "MEMORY_RECORD.streamPtr",
    "device_type": "NPU:<MEMORY_RECORD.deviceId>",
}


def read_memory_record(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``MEMORY_RECORD`` (bytes, ns) → ``memory_record`` (MB as the CSV writes them, ns)."""
    rows = _table_rows(path, "MEMORY_RECORD", ("component", "timestamp", "totalReserved"), sink,
                       optional=("totalAllocated", "totalActive", "streamPtr", "deviceId"))
    if rows is None:
        return None
    try:
        strings = dbfile.string_ids(path)
    except DbUnusable as exc:
        dbfile.report(sink, path, "STRING_IDS", str(exc))
        return None
    comp = pc.cast(strings.decode(pa.array([r["component"] for r in rows], pa.int64())), pa.string()).to_pylist()
    frame = pd.DataFrame({
        "component": pd.array(comp, dtype=pd.StringDtype("pyarrow")),
        "timestamp_ns": pd.array([r["timestamp"] for r in rows], dtype="Int64"),
        "total_allocated_mb": [_mb(r["totalAllocated"]) for r in rows],
        "total_reserved_mb": [_mb(r["totalReserved"]) for r in rows],
        "total_active_mb": [_mb(r["totalActive"]) for r in rows],
        "stream_ptr": pd.array([None if r["streamPtr"] is None else str(r["streamPtr"]) for r in rows],
                               dtype=pd.StringDtype("pyarrow")),
        "device_type": pd.array([None if r.get("deviceId") is None else f"NPU:{r['deviceId']}" for r in rows],
                                dtype=pd.StringDtype("pyarrow")),
    })
    frame = frame.astype({c: "float64" for c in ("total_allocated_mb", "total_reserved_mb", "total_active_mb")})
    return frame[[c for c in (columns or frame.columns) if c in frame.columns]]


def _mb(b: Any) -> float | None:
    # MindSpore's memory files write "MB" as KB / 1000 (ascend-profile-formats.md §5)
    return None if b is None else float(b) / 1_024_000
