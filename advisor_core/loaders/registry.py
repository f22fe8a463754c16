"""The table catalogue: which artifact each table comes from and how it is read.

A :class:`TableLoader` turns one artifact file into one canonical DataFrame (and,
for a few tables, a pydantic record of scalar fields). Built-in loaders are
listed in :data:`BUILTIN_LOADERS`; plugins contribute more through the
``advisor_register_loaders`` hook, so a third party can teach the core a new
file kind without touching it. Loaders know nothing of rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.discover.artifacts import ArtifactPattern
from advisor_core.loaders import communication as comm
from advisor_core.loaders import device_queue as dql
from advisor_core.loaders import minddata as mdl
from advisor_core.loaders import readahead, steps
from advisor_core.loaders.csvtable import CsvTableSpec, count_rows, read_csv_table, read_header
from advisor_core.loaders.kernels import KERNEL_DEFAULT_COLUMNS, KERNELS, OP_STATISTIC
from advisor_core.loaders.misc_tables import (
    CPU_OP_DETAIL,
    DATASET,
    MEMORY_RECORD,
    NPU_MODULE_MEM,
    OPERATOR_MEMORY,
)
from advisor_core.loaders.trace import TRACE_COLUMNS, read_trace_view
from advisor_core.loaders.trace_steps import STEP_EVENT_COLUMNS, read_step_events


@dataclass
class LoadedTable:
    """A table as read: the frame, an optional record of scalar fields, columns the file lacked."""

    frame: pd.DataFrame
    record: BaseModel | None = None
    missing: list[str] = field(default_factory=list)


Reader = Callable[[Path, str, "Sequence[str] | None", DiagnosticSink], "LoadedTable | None"]
ArrowReader = Callable[[Path, str, "Sequence[str] | None", DiagnosticSink], "pa.Table | None"]


@dataclass(frozen=True)
class TableLoader:
    """How one canonical table is produced.

    ``artifacts`` lists artifact kinds in preference order (the first present is
    read). ``projectable`` readers honour the requested column list themselves
    (CSV: projection pushed into the reader); others are read whole and cached.
    ``available`` answers "which canonical columns does this file have" without
    reading rows (CSV header), or ``None`` when that needs a full read.
    ``patterns`` are extra artifact file-name patterns a plugin loader brings.
    ``required`` columns must all be in the file for it to be read at (see
    :meth:`~advisor_core.model.run.Rank.usable`). ``read_arrow`` (optional) reads the same columns as a :class:`pyarrow.Table` with
    text columns dictionary-encoded — the op view's input; without it the pandas frame
    is converted.
    """

    name: str
    title: str
    artifacts: tuple[str, ...]
    columns: tuple[str, ...]
    read: Reader
    projectable: bool = False
    available: Callable[[Path, str, DiagnosticSink], "list[str] | None"] | None = None
    rows: Callable[[Path, str], "int | None"] | None = None
    default_columns: tuple[str, ...] | None = None
    patterns: tuple[ArtifactPattern, ...] = ()
    doc: str = ""
    read_arrow: ArrowReader | None = None
    required: tuple[str, ...] = ()  # columns without which the table cannot be read at all
    # The same table from the SQLite export: a loader whose artifacts are DB files, and the
    # DB tables it needs (a DB without them is not "complete" for this table).
    db: "TableLoader | None" = None
    db_tables: tuple[str, ...] = ()
    db_origin: dict[str, str] = field(default_factory=dict)  # canonical column → DB table.column (docs)


def _csv_loader(
    spec: CsvTableSpec,
    artifacts: tuple[str, ...],
    *,
    default_columns: tuple[str, ...] | None = None,
    title: str | None = None,
) -> TableLoader:
    def read(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
        cols = columns if columns is not None else default_columns
        res = read_csv_table(path, spec, cols, sink, what=path.name)
        if res is None:
            return None
        return LoadedTable(res.frame, missing=res.missing)

    def read_arrow(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> pa.Table | None:
        cols = columns if columns is not None else default_columns
        ahead = readahead.claim(path, spec, cols, sink)
        res = ahead.result if ahead is not None else read_csv_table(path, spec, cols, sink, what=path.name, arrow=True)
        return None if res is None else res.arrow

    def available(path: Path, kind: str, sink: DiagnosticSink) -> list[str] | None:
        h = read_header(path, spec, sink, what=path.name)
        return None if h is None else h.available

    return TableLoader(
        name=spec.name,
        title=title or spec.title,
        artifacts=artifacts,
        columns=spec.canonical_names,
        read=read,
        projectable=True,
        available=available,
        rows=lambda path, kind: count_rows(path),
        default_columns=default_columns,
        doc=spec.doc,
        read_arrow=read_arrow,
        required=spec.required,
    )


def _read_steps(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    if kind == "legacy_step_trace":
        df = steps.read_legacy_step_trace(path, None, sink)
    else:
        df = steps.read_step_trace_time(path, None, sink)
    return None if df is None else LoadedTable(df)


_COMM_PARSED: dict[tuple[str, float, int], "tuple[pd.DataFrame, pd.DataFrame] | None"] = {}


def _read_comm(which: int) -> Reader:
    """``communication.json`` gives two tables: parse it once for both (the last file parsed is kept)."""

    def read(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
        try:
            st = path.stat()
            key: tuple[str, float, int] | None = (str(path), st.st_mtime, st.st_size)
        except OSError:
            key = None
        if key is not None and key in _COMM_PARSED:
            res = _COMM_PARSED.pop(key)  # the other table was read: nothing left to share
        else:
            res = comm.read_communication(path, sink)
            _COMM_PARSED.clear()
            if key is not None:
                _COMM_PARSED[key] = res
        return None if res is None else LoadedTable(res[which])

    return read


def _read_matrix(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    df = comm.read_communication_matrix(path, sink)
    return None if df is None else LoadedTable(df)


def _read_trace(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    df = read_trace_view(path, columns, sink)
    return None if df is None else LoadedTable(df)


def _read_step_events(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    df = read_step_events(path, columns, sink)
    return None if df is None else LoadedTable(df)


def _read_pipeline(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    if kind == "pipeline_profiling":
        df = mdl.read_pipeline_profiling(path, sink)
    else:
        df = mdl.read_pipeline_raw(path, sink)
    return None if df is None else LoadedTable(df)


def _read_summary(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    res = mdl.read_summary_csv(path, sink) if kind.endswith("_csv") else mdl.read_summary_json(path, sink)
    return None if res is None else LoadedTable(res[0], record=res[1])


def _read_cpu(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    res = mdl.read_cpu_utilization(path, sink)
    return None if res is None else LoadedTable(res[0], record=res[1])


def _read_host_queue(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    df = mdl.read_host_queue(path, sink)
    return None if df is None else LoadedTable(df)


def _read_device_queue(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
    df = dql.read_device_queue(path, kind, sink)
    return None if df is None else LoadedTable(df)


# -- the SQLite export ---------------------------------------------------------------------------------------------

PROFILER_DB = ("profiler_db",)
ANALYSIS_DB = ("analysis_db",)


def _db_kernels() -> TableLoader:
    from advisor_core.loaders import db_tables as dbt

    def read_arrow(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> pa.Table | None:
        return dbt.read_kernels_arrow(path, columns if columns is not None else KERNEL_DEFAULT_COLUMNS, sink)

    def read(path: Path, kind: str, columns: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
        frame = dbt.read_kernels_frame(path, columns if columns is not None else KERNEL_DEFAULT_COLUMNS, sink)
        return None if frame is None else LoadedTable(frame)

    return TableLoader("kernels", KERNELS.title, PROFILER_DB, KERNELS.canonical_names, read, projectable=True,
                       available=lambda path, kind, sink: dbt.kernel_available(path, sink),
                       rows=lambda path, kind: dbt.kernel_rows(path), read_arrow=read_arrow,
                       required=KERNELS.required)


def _db_simple(name: str, title: str, artifacts: tuple[str, ...], columns: tuple[str, ...],
               fn: Callable[[Path, DiagnosticSink, "Sequence[str] | None"], "pd.DataFrame | None"]) -> TableLoader:
    def read(path: Path, kind: str, cols: Sequence[str] | None, sink: DiagnosticSink) -> LoadedTable | None:
        df = fn(path, sink, cols)
        return None if df is None else LoadedTable(df)

    return TableLoader(name, title, artifacts, columns, read)


def _with_db(text: TableLoader, db: TableLoader, tables: tuple[str, ...], origin: dict[str, str]) -> TableLoader:
    return replace(text, db=db, db_tables=tables, db_origin=origin)


def _db_routes(loaders: tuple[TableLoader, ...]) -> tuple[TableLoader, ...]:
    from advisor_core.loaders import db_tables as dbt

    routes = {
        "kernels": (_db_kernels(), dbt.KERNEL_DB_TABLES, dbt.KERNEL_DB_ORIGIN),
        "op_statistic": (_db_simple("op_statistic", OP_STATISTIC.title, PROFILER_DB, OP_STATISTIC.canonical_names,
                                    lambda p, sink, cols: dbt.read_op_statistic(p, sink)),
                         dbt.KERNEL_DB_TABLES, dbt.OP_STATISTIC_DB_ORIGIN),
        "step_events": (_db_simple("step_events", "step windows", PROFILER_DB, STEP_EVENT_COLUMNS,
                                   lambda p, sink, cols: dbt.read_step_events(p, cols, sink)),
                        ("STEP_TIME",), dbt.STEP_EVENTS_DB_ORIGIN),
        "step_trace": (_db_simple("step_trace", "step time breakdown", ANALYSIS_DB, steps.STEP_COLUMNS,
                                  lambda p, sink, cols: dbt.read_step_trace(p, sink)),
                       ("StepTraceTime",), dbt.STEP_TRACE_DB_ORIGIN),
        "communication": (_db_simple("communication", "communication ops", ANALYSIS_DB, comm.COMMUNICATION_COLUMNS,
                                     lambda p, sink, cols: dbt.read_communication(p, 0, sink)),
                          ("CommAnalyzerTime", "CommAnalyzerBandwidth"), dbt.COMMUNICATION_DB_ORIGIN),
        "communication_bandwidth": (
            _db_simple("communication_bandwidth", "communication bandwidth", ANALYSIS_DB, comm.BANDWIDTH_COLUMNS,
                       lambda p, sink, cols: dbt.read_communication(p, 1, sink)),
            ("CommAnalyzerBandwidth",), dbt.BANDWIDTH_DB_ORIGIN),
        "communication_matrix": (
            _db_simple("communication_matrix", "communication matrix", ANALYSIS_DB, comm.MATRIX_COLUMNS,
                       lambda p, sink, cols: dbt.read_communication_matrix(p, sink)),
            ("CommAnalyzerMatrix",), dbt.MATRIX_DB_ORIGIN),
        "memory_record": (_db_simple("memory_record", MEMORY_RECORD.title, PROFILER_DB, MEMORY_RECORD.canonical_names,
                                     lambda p, sink, cols: dbt.read_memory_record(p, cols, sink)),
                          ("MEMORY_RECORD", "STRING_IDS"), dbt.MEMORY_RECORD_DB_ORIGIN),
    }
    return tuple(_with_db(ld, *routes[ld.name]) if ld.name in routes else ld for ld in loaders)


_TEXT_LOADERS: tuple[TableLoader, ...] = (
    _csv_loader(KERNELS, ("kernel_details", "op_summary"), default_columns=KERNEL_DEFAULT_COLUMNS),
    _csv_loader(OP_STATISTIC, ("op_statistic",)),
    TableLoader(
        "step_trace",
        "step time breakdown",
        ("step_trace_time", "legacy_step_trace"),
        steps.STEP_COLUMNS,
        _read_steps,
        rows=lambda path, kind: count_rows(path) - (1 if kind == "legacy_step_trace" else 0),
        doc=steps.__doc__ or "",
    ),
    TableLoader("trace_events", "trace events", ("trace_view",), TRACE_COLUMNS, _read_trace, projectable=True),
    TableLoader("step_events", "step windows and overlap intervals", ("trace_view",), STEP_EVENT_COLUMNS,
                _read_step_events, doc="ProfilerStep#<n> and Overlap Analysis events of trace_view.json, "
                "found without parsing the whole trace"),
    TableLoader("communication", "communication ops", ("communication",), comm.COMMUNICATION_COLUMNS, _read_comm(0)),
    TableLoader("communication_bandwidth", "communication bandwidth", ("communication",), comm.BANDWIDTH_COLUMNS, _read_comm(1)),
    TableLoader("communication_matrix", "communication matrix", ("communication_matrix",), comm.MATRIX_COLUMNS, _read_matrix),
    _csv_loader(DATASET, ("dataset",)),
    TableLoader(
        "minddata_pipeline",
        "MindData pipeline queues",
        ("minddata_pipeline_raw", "pipeline_profiling"),
        mdl.PIPELINE_COLUMNS,
        _read_pipeline,
    ),
    TableLoader(
        "minddata_summary",
        "MindData pipeline summary",
        ("minddata_pipeline_summary_json", "minddata_pipeline_summary_csv"),
        mdl.SUMMARY_COLUMNS,
        _read_summary,
    ),
    TableLoader("minddata_cpu", "MindData CPU use", ("minddata_cpu_utilization",), ("op_id", "avg_sys_pct", "avg_user_pct", "avg_cpu_pct"), _read_cpu),
    TableLoader("host_queue", "host data queue", ("device_queue_profiling", "dataset_iterator_profiling"), mdl.HOST_QUEUE_COLUMNS, _read_host_queue),
    TableLoader("device_queue", "device data queue (GetNext)", ("minddata_aicpu", "aicpu_mi", "minddata_getnext_profiling"),
                dql.DEVICE_QUEUE_COLUMNS, _read_device_queue, doc=dql.__doc__ or ""),
    _csv_loader(OPERATOR_MEMORY, ("operator_memory",)),
    _csv_loader(MEMORY_RECORD, ("memory_record",)),
    _csv_loader(NPU_MODULE_MEM, ("npu_module_mem",)),
    _csv_loader(CPU_OP_DETAIL, ("cpu_op_detail",)),
)


BUILTIN_LOADERS: tuple[TableLoader, ...] = _db_routes(_TEXT_LOADERS)


def db_shortfall(ld: TableLoader, db: Path, db_kind: str, text: Path, text_kind: str) -> str | None:
    """Why table ``ld`` should come from the text file although the DB holds its tables, or ``None``.

    The DB falls short when one of the tables it is made of is empty, or when it gives fewer
    rows than the text file, while the text file has rows (for instance an export whose
    ``COMPUTE_TASK_INFO`` is empty: its kernel table would be the communication ops alone).
    The reason is a sentence naming both files.
    """
    from advisor_core.loaders import dbfile

    if ld.db is None:
        return None
    text_rows = ld.rows(text, text_kind) if ld.rows is not None else None
    if text_rows is not None and text_rows <= 0:
        return None
    if text_rows is None:
        try:
            if text.stat().st_size <= 2:  # "{}" / "[]": nothing in it either
                return None
        except OSError:
            return None
    empty = dbfile.empty_tables(db, [t for t in ld.db_tables if t != "STRING_IDS"])
    db_rows = ld.db.rows(db, db_kind) if ld.db.rows is not None else None
    if empty:
        why = f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty"
    elif db_rows is not None and text_rows is not None and db_rows < text_rows:
        why = "fewer rows than the text export"
    else:
        return None
    counts = (f" ({db_rows:,} against {text_rows:,} rows)" if db_rows is not None and text_rows is not None else "")
    return (f"{ld.name}: {db.name}: {why}{counts}; read from {text.name} instead (--source db to force the DB)")


def builtin_loaders() -> dict[str, TableLoader]:
    return {ld.name: ld for ld in BUILTIN_LOADERS}
