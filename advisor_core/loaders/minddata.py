"""MindData (dataset pipeline) profiling: queue samples, MindSpore's summary, CPU use, host queue.

Tables (``ascend-profile-formats.md`` §4.11–4.13):

* ``minddata_pipeline`` — one row per pipeline op from ``minddata_pipeline_raw_{id}.csv``
  (or, when that is absent, from the raw ``pipeline_profiling_{id}.json``):
  ``op_id``, ``op_type`` (``MapOp``…), ``num_workers``, ``queue_sizes`` (list of sampled
  output-queue sizes), ``queue_average_size``, ``queue_length`` (capacity),
  ``queue_usage_rate`` (0–1), ``queue_empty_freq`` (0–1, share of samples at 0),
  ``sample_interval_ms``, ``parent_id``, ``children_ids`` (list). The root op has no
  queue (NaN / empty list).
* ``minddata_summary`` — one row per op from ``minddata_pipeline_summary_{id}.json``
  (or ``.csv``): ``op_id``, ``op_name`` (``Map``), ``pipeline_op`` (``Map(id=2)``),
  ``num_workers``, ``queue_average_size``, ``queue_utilization_pct``,
  ``queue_empty_freq_pct``, ``children_ids``, ``parent_id``, ``avg_cpu_pct``,
  ``avg_cpu_pct_per_worker``. MindSpore's ``-1`` (no metric) becomes NaN. The
  scalar and text fields (``per_batch_time`` …, ``bottleneck_warning``) are the
  :class:`MinddataSummary` record.
* ``minddata_cpu`` — per-op average CPU from ``minddata_cpu_utilization_{id}.json``;
  :class:`MinddataCpuInfo` carries ``cpu_processor_num`` and host idle share.
* ``host_queue`` — per-step host queue from ``device_queue_profiling_{id}.txt`` (sink
  mode) or ``dataset_iterator_profiling_{id}.txt`` (non-sink): ``step``,
  ``queue_size``, ``queue_capacity``, ``get_ms``, ``push_ms``, ``total_ms``.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.csvtable import Col, CsvTableSpec, read_csv_table
from advisor_core.textio import read_json, read_text

PIPELINE_RAW = CsvTableSpec(
    name="minddata_pipeline_raw",
    title="MindData pipeline queues",
    columns=(
        Col("op_id", ("op_id",), "int"),
        Col("op_type", ("op_type",), "str"),
        Col("num_workers", ("num_workers",), "int"),
        Col("output_queue_size", ("output_queue_size",), "str"),
        Col("output_queue_average_size", ("output_queue_average_size",), "float"),
        Col("output_queue_length", ("output_queue_length",), "int"),
        Col("output_queue_usage_rate", ("output_queue_usage_rate",), "float"),
        Col("sample_interval", ("sample_interval",), "int"),
        Col("parent_id", ("parent_id",), "int"),
        Col("children_id", ("children_id",), "str"),
    ),
    required=("op_id", "op_type"),
)

PIPELINE_COLUMNS = (
    "op_id",
    "op_type",
    "num_workers",
    "queue_sizes",
    "queue_average_size",
    "queue_length",
    "queue_usage_rate",
    "queue_empty_freq",
    "sample_interval_ms",
    "parent_id",
    "children_ids",
)
SUMMARY_COLUMNS = (
    "op_id",
    "op_name",
    "pipeline_op",
    "num_workers",
    "queue_average_size",
    "queue_utilization_pct",
    "queue_empty_freq_pct",
    "children_ids",
    "parent_id",
    "avg_cpu_pct",
    "avg_cpu_pct_per_worker",
)


class MinddataSummary(BaseModel):
    """Scalar and text fields of ``minddata_pipeline_summary_{id}`` (times in ms)."""

    model_config = ConfigDict(frozen=True)

    per_pipeline_time_ms: float | None = None
    per_push_queue_time_ms: float | None = None
    per_batch_time_ms: float | None = None
    cpu_analysis_details: list[str] = Field(default_factory=list)
    queue_analysis_details: list[str] = Field(default_factory=list)
    bottleneck_warning: list[str] = Field(default_factory=list)
    bottleneck_suggestion: list[str] = Field(default_factory=list)


class MinddataCpuInfo(BaseModel):
    """Host facts from ``minddata_cpu_utilization_{id}.json``."""

    model_config = ConfigDict(frozen=True)

    cpu_processor_num: int | None = None
    host_avg_idle_pct: float | None = None
    host_avg_user_pct: float | None = None
    host_avg_sys_pct: float | None = None
    sampling_interval_ms: float | None = None
    # The training process's own CPU (user + sys of /proc/<pid>/stat, % of one core: 150 = 1.5 cores), all its
    # threads — the pipeline's thread workers among them, not worker processes (python_multiprocessing).
    process_avg_cpu_pct: float | None = None


def _parse_int_list(text: Any) -> list[int]:
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return []
    if isinstance(text, list):
        return [int(x) for x in text]
    s = str(text).strip()
    if not s:
        return []
    try:
        val = json.loads(s)  # "[12, 40, 64]": JSON, and a tenth of literal_eval's cost
    except ValueError:
        try:
            val = ast.literal_eval(s)  # Python tuples and the like
        except (ValueError, SyntaxError):
            return []
    if isinstance(val, (list, tuple)):
        return [int(x) for x in val if isinstance(x, (int, float))]
    if isinstance(val, (int, float)):
        return [int(val)]
    return []


def _empty_freq(sizes: list[int]) -> float:
    return (sum(1 for s in sizes if s == 0) / len(sizes)) if sizes else float("nan")


def _pipeline_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(rows, columns=list(PIPELINE_COLUMNS))
    return df.astype(
        {
            "op_id": "Int64",
            "op_type": "string",
            "num_workers": "Int64",
            "queue_average_size": "float64",
            "queue_length": "Int64",
            "queue_usage_rate": "float64",
            "queue_empty_freq": "float64",
            "sample_interval_ms": "float64",
            "parent_id": "Int64",
        }
    )


def read_pipeline_raw(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``minddata_pipeline_raw_{id}.csv`` → ``minddata_pipeline`` table."""
    res = read_csv_table(path, PIPELINE_RAW, None, sink, what=path.name)
    if res is None:
        return None
    rows = []
    for rec in res.frame.to_dict("records"):
        sizes = _parse_int_list(rec.get("output_queue_size"))
        rows.append(
            {
                "op_id": rec.get("op_id"),
                "op_type": rec.get("op_type"),
                "num_workers": rec.get("num_workers"),
                "queue_sizes": sizes,
                "queue_average_size": rec.get("output_queue_average_size"),
                "queue_length": rec.get("output_queue_length"),
                "queue_usage_rate": rec.get("output_queue_usage_rate"),
                "queue_empty_freq": _empty_freq(sizes),
                "sample_interval_ms": rec.get("sample_interval"),
                "parent_id": rec.get("parent_id"),
                "children_ids": _parse_int_list(rec.get("children_id")),
            }
        )
    return _pipeline_frame(_nan_to_none(rows))


def _nan_to_none(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        for k, v in list(r.items()):
            if v is pd.NA or (isinstance(v, float) and np.isnan(v)):
                r[k] = None
    return rows


def read_pipeline_profiling(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """Raw ``pipeline_profiling_{id}.json`` (op tree + queue samples) → ``minddata_pipeline``.

    Rows are emitted in BFS order from the root, with parents, as MindSpore's raw
    CSV writer does.
    """
    data = read_json(path, sink, what=path.name)
    if data is None:
        return None
    ops = data.get("op_info") if isinstance(data, dict) else None
    if not isinstance(ops, list):
        sink.error("bad-structure", "no 'op_info' list", path, key="op_info")
        return None
    interval = data.get("sampling_interval")
    by_id: dict[int, dict[str, Any]] = {}
    for op in ops:
        if isinstance(op, dict) and isinstance(op.get("op_id"), int):
            by_id[op["op_id"]] = op
    parent: dict[int, int] = {}
    for oid, op in by_id.items():
        for c in op.get("children") or []:
            parent[int(c)] = oid
    rows = []
    for oid in sorted(by_id):
        op = by_id[oid]
        q = ((op.get("metrics") or {}).get("output_queue") or {}) if isinstance(op.get("metrics"), dict) else {}
        sizes = [int(s) for s in q.get("size") or [] if isinstance(s, (int, float))]
        length = q.get("length")
        avg = float(np.mean(sizes)) if sizes else None
        rows.append(
            {
                "op_id": oid,
                "op_type": op.get("op_type"),
                "num_workers": op.get("num_workers"),
                "queue_sizes": sizes,
                "queue_average_size": avg,
                "queue_length": length,
                "queue_usage_rate": (avg / length) if (avg is not None and length) else None,
                "queue_empty_freq": _empty_freq(sizes) if sizes else None,
                "sample_interval_ms": interval,
                "parent_id": parent.get(oid),
                "children_ids": [int(c) for c in op.get("children") or []],
            }
        )
    return _pipeline_frame(rows)


_SUMMARY_SCALARS = {
    "per_pipeline_time": "per_pipeline_time_ms",
    "per_push_queue_time": "per_push_queue_time_ms",
    "per_batch_time": "per_batch_time_ms",
}
_SUMMARY_TEXTS = ("cpu_analysis_details", "queue_analysis_details", "bottleneck_warning", "bottleneck_suggestion")
_SUMMARY_LISTS = {
    "op_ids": "op_id",
    "op_names": "op_name",
    "pipeline_ops": "pipeline_op",
    "num_workers": "num_workers",
    "queue_average_size": "queue_average_size",
    "queue_utilization_pct": "queue_utilization_pct",
    "queue_empty_freq_pct": "queue_empty_freq_pct",
    "children_ids": "children_ids",
    "parent_id": "parent_id",
    "avg_cpu_pct": "avg_cpu_pct",
    "avg_cpu_pct_per_worker": "avg_cpu_pct_per_worker",
}


def _summary_from_dict(data: dict[str, Any], path: Path, sink: DiagnosticSink) -> tuple[pd.DataFrame, MinddataSummary]:
    ids = data.get("op_ids") or []
    n = len(ids)
    cols: dict[str, list[Any]] = {}
    for key, col in _SUMMARY_LISTS.items():
        values = list(data.get(key) or [])
        if key in data and len(values) != n:
            sink.warning(
                "bad-structure",
                f"'{key}' has {len(values)} entries for {n} ops; missing entries treated as unknown",
                path,
                key=key,
            )
        values = (values + [None] * n)[:n]
        cols[col] = values
    frame = pd.DataFrame(cols, columns=list(SUMMARY_COLUMNS))
    for c in ("queue_average_size", "queue_utilization_pct", "queue_empty_freq_pct", "avg_cpu_pct", "avg_cpu_pct_per_worker"):
        s = pd.to_numeric(frame[c], errors="coerce").astype("float64")
        frame[c] = s.where(s != -1)  # MindSpore writes -1 for "no metric" (the root op)
    for c in ("op_id", "num_workers", "parent_id"):
        s = pd.to_numeric(frame[c], errors="coerce")
        frame[c] = s.where(s != -1).astype("Int64")
    frame["children_ids"] = [_parse_int_list(v) for v in frame["children_ids"]]
    frame["op_name"] = frame["op_name"].astype("string")
    frame["pipeline_op"] = frame["pipeline_op"].astype("string")

    def scalar(key: str) -> float | None:
        v = data.get(key)
        if isinstance(v, list):
            v = v[0] if v else None
        try:
            return None if v is None else float(v)
        except (TypeError, ValueError):
            return None

    def texts(key: str) -> list[str]:
        v = data.get(key)
        if v is None:
            return []
        return [str(x) for x in (v if isinstance(v, list) else [v])]

    record = MinddataSummary(
        **{dst: scalar(src) for src, dst in _SUMMARY_SCALARS.items()},
        **{k: texts(k) for k in _SUMMARY_TEXTS},
    )
    return frame, record


def read_summary_json(path: Path, sink: DiagnosticSink) -> tuple[pd.DataFrame, MinddataSummary] | None:
    data = read_json(path, sink, what=path.name)
    if data is None:
        return None
    if not isinstance(data, dict) or "op_ids" not in data:
        sink.error("bad-structure", "not a MindData summary (no 'op_ids')", path, key="op_ids")
        return None
    return _summary_from_dict(data, path, sink)


def read_summary_csv(path: Path, sink: DiagnosticSink) -> tuple[pd.DataFrame, MinddataSummary] | None:
    """The CSV twin: one row per key, ``key,value1,value2,…``."""
    text = read_text(path, sink, what=path.name)
    if text is None:
        return None
    data: dict[str, Any] = {}
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        sink.error("bad-csv", f"{path.name} cannot be parsed as CSV ({exc})", path)
        return None
    for row in rows:
        if not row:
            continue
        key, values = row[0], row[1:]
        parsed: list[Any] = []
        for v in values:
            v = v.strip()
            try:
                parsed.append(ast.literal_eval(v) if key not in _SUMMARY_TEXTS else v)
            except (ValueError, SyntaxError):
                parsed.append(v)
        data[key] = parsed
    if "op_ids" not in data:
        sink.error("bad-structure", "not a MindData summary (no 'op_ids' row)", path, key="op_ids")
        return None
    return _summary_from_dict(data, path, sink)


def read_cpu_utilization(path: Path, sink: DiagnosticSink) -> tuple[pd.DataFrame, MinddataCpuInfo] | None:
    """Per-op average CPU (sys + user, %) and host facts."""
    data = read_json(path, sink, what=path.name)
    if data is None:
        return None
    if not isinstance(data, dict):
        sink.error("bad-structure", "not a JSON object", path)
        return None

    def mean(values: Any) -> float | None:
        vals = _samples(values, keep_other=False)
        return float(np.mean(vals)) if len(vals) else None

    rows = []
    for op in data.get("op_info") or []:
        if not isinstance(op, dict):
            continue
        m = op.get("metrics") or {}
        sys_, user = mean(m.get("sys_utilization")), mean(m.get("user_utilization"))
        rows.append(
            {
                "op_id": op.get("op_id"),
                "avg_sys_pct": sys_,
                "avg_user_pct": user,
                "avg_cpu_pct": (sys_ or 0.0) + (user or 0.0) if (sys_ is not None or user is not None) else None,
            }
        )
    frame = pd.DataFrame.from_records(rows, columns=["op_id", "avg_sys_pct", "avg_user_pct", "avg_cpu_pct"]).astype(
        {"op_id": "Int64", "avg_sys_pct": "float64", "avg_user_pct": "float64", "avg_cpu_pct": "float64"}
    )
    dev = data.get("device_info") or {}
    info = MinddataCpuInfo(
        cpu_processor_num=data.get("cpu_processor_num") if isinstance(data.get("cpu_processor_num"), int) else None,
        host_avg_idle_pct=mean(dev.get("idle_utilization")),
        host_avg_user_pct=mean(dev.get("user_utilization")),
        host_avg_sys_pct=mean(dev.get("sys_utilization")),
        sampling_interval_ms=data.get("sampling_interval") if isinstance(data.get("sampling_interval"), (int, float)) else None,
        process_avg_cpu_pct=_busy_mean((data.get("process_info") or {}).get("user_utilization"),
                                       (data.get("process_info") or {}).get("sys_utilization")),
    )
    return frame, info


def _samples(values: Any, *, keep_other: bool = True) -> np.ndarray:
    """The numbers of a utilisation list as float64; what is not a number (``None``, text, a list) as NaN
    (``keep_other``) or left out.

    The profiler writes tens of thousands of samples per op: a list of plain numbers
    converts in one NumPy call; anything else goes value by value.
    """
    if not values:
        return np.zeros(0)
    if isinstance(values, list):
        try:
            arr = np.asarray(values)
        except (ValueError, TypeError):  # ragged nesting
            arr = None
        if arr is not None and arr.ndim == 1 and arr.dtype.kind in "biuf":
            return arr.astype(np.float64)
    if keep_other:
        return np.array([float(v) if isinstance(v, (int, float)) else np.nan for v in values], dtype=np.float64)
    return np.array([float(v) for v in values if isinstance(v, (int, float))], dtype=np.float64)


def _busy_mean(user: Any, sys_: Any) -> float | None:
    """Mean of user + sys over the samples both lists have."""
    u, s = _samples(user), _samples(sys_)
    n = min(len(u), len(s))
    if not n:
        return None
    busy = u[:n] + s[:n]
    busy = busy[~np.isnan(busy)]
    return float(busy.mean()) if len(busy) else None


HOST_QUEUE_COLUMNS = ("step", "queue_size", "queue_capacity", "get_ms", "push_ms", "total_ms", "timestamp_ms")


def read_host_queue(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``device_queue_profiling`` / ``dataset_iterator_profiling`` text → per-step rows.

    Line format ``type sub_type step value [timestamp]``: type 0 = time (sub 0 get,
    1 push, 2 total; ms), type 1 = connector size (sub = capacity, value = size); the
    timestamp (ms, the host's clock) of the ``get`` record is ``timestamp_ms`` — in
    non-sink mode, when the training loop received the step's batch.
    """
    text = read_text(path, sink, what=path.name)
    if text is None:
        return None
    steps: dict[int, dict[str, Any]] = {}
    bad = 0
    first_bad: int | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            typ, sub, step, value = int(parts[0]), int(parts[1]), int(parts[2]), float(parts[3])
        except (ValueError, IndexError):
            bad += 1
            first_bad = first_bad or lineno
            continue
        row = steps.setdefault(step, {"step": step})
        if typ == 0:
            row[{0: "get_ms", 1: "push_ms", 2: "total_ms"}.get(sub, f"time_{sub}")] = value
            if sub == 0 and len(parts) > 4 and parts[4].lstrip("-").isdigit():
                row["timestamp_ms"] = int(parts[4])
        elif typ == 1:
            row["queue_capacity"] = sub
            row["queue_size"] = value
    if bad:
        sink.warning("malformed-rows", f"{bad} line(s) do not have the form 'type sub_type step value'; skipped", path, line=first_bad)
    frame = pd.DataFrame.from_records([steps[s] for s in sorted(steps)], columns=list(HOST_QUEUE_COLUMNS))
    return frame.astype(
        {"step": "Int64", "queue_size": "float64", "queue_capacity": "Int64", "get_ms": "float64", "push_ms": "float64",
         "total_ms": "float64", "timestamp_ms": "Int64"}
    )
