"""Step time breakdown: ``step_trace_time.csv`` (9/10/11 columns), legacy syscnt traces, cluster CSV.

All three land in one canonical ``step_trace`` table (µs). Modern files give
``computing_us``, ``communication_not_overlapped_us``, ``free_us`` …; the legacy
MindSpore ≤ 2.3 ``step_trace_raw_{id}_detail_time.csv`` gives
``iteration_interval_us`` (step gap: waiting for data), ``fp_bp_us`` and
``tail_us`` (gradient AllReduce + update), converted from syscnt (10 ns). Columns
a producer does not write are NaN. ``total_us`` is the step's end-to-end time:
legacy ``total``; otherwise ``computing + communication(not overlapped) + free``.

MindSpore ≥ 2.5 writes a single row ``Step=0`` covering the whole collection;
``step`` is then 0 and ``whole_run`` is true for that row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.csvtable import Col, CsvTableSpec, read_csv_table

SYSCNT_NS = 10  # legacy step trace unit (MindInsight PER_MS_SYSCNT = 100000)

_BREAKDOWN = (
    Col("computing_us", ("Computing",), "float", "kernel time, µs"),
    Col("communication_not_overlapped_us", ("Communication(Not Overlapped)",), "float", "communication not hidden by compute, µs"),
    Col("overlapped_us", ("Overlapped",), "float", "communication hidden by compute, µs"),
    Col("communication_us", ("Communication",), "float", "all communication, µs"),
    Col("free_us", ("Free",), "float", "device idle (neither compute nor communication), µs"),
    Col("stage_us", ("Stage",), "float", "step time minus bubble, µs"),
    Col("bubble_us", ("Bubble",), "float", "pipeline receive (and, MindSpore, send) time, µs"),
    Col(
        "communication_not_overlapped_exclude_receive_us",
        ("Communication(Not Overlapped and Exclude Receive)",),
        "float",
        "uncovered communication minus bubble, µs",
    ),
    Col("preparing_us", ("Preparing",), "float", "framework step start → first device task, µs"),
)

STEP_TRACE_TIME = CsvTableSpec(
    name="step_trace",
    title="step time breakdown",
    columns=(
        Col("device_id", ("Device_id", "Device id", "Device ID"), "int"),
        Col("step", ("Step",), "int", "step number; empty when the collection had no steps"),
    )
    + _BREAKDOWN,
    required=("computing_us", "free_us"),
)

CLUSTER_STEP_TRACE_TIME = CsvTableSpec(
    name="cluster_step_trace",
    title="cluster step time breakdown",
    columns=(
        Col("step", ("Step",), "int"),
        Col("type", ("Type",), "str", "rank | stage"),
        Col("index", ("Index",), "str", "rank id, or the quoted rank-group tuple for stage rows"),
    )
    + _BREAKDOWN
    + (
        Col("dp_index", ("DP Index",), "int"),
        Col("pp_index", ("PP Index",), "int"),
        Col("tp_index", ("TP Index",), "int"),
    ),
    required=("type", "index", "computing_us"),
)

LEGACY_STEP_TRACE = CsvTableSpec(
    name="legacy_step_trace",
    title="legacy step trace (syscnt)",
    columns=(
        Col("step_num", ("step_num",), "str"),
        Col("start_point", ("start_point",), "float"),
        Col("end_point", ("end_point",), "float"),
        Col("total", ("total",), "float"),
        Col("fp_point", ("fp_point",), "float"),
        Col("bp_point", ("bp_point",), "float"),
        Col("iteration_interval", ("iteration_interval",), "float"),
        Col("fp_and_bp", ("fp_and_bp", "fp"), "float"),
        Col("tail", ("tail",), "float"),
    ),
    required=("step_num", "total"),
)

STEP_COLUMNS: tuple[str, ...] = (
    "step",
    "whole_run",
    "device_id",
    "total_us",
    *[c.name for c in _BREAKDOWN],
    "iteration_interval_us",
    "fp_bp_us",
    "tail_us",
)


def read_step_trace_time(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pd.DataFrame | None:
    """Modern ``step_trace_time.csv`` → canonical step table."""
    res = read_csv_table(path, STEP_TRACE_TIME, None, sink, what="step_trace_time.csv")
    if res is None:
        return None
    df = res.frame
    out = pd.DataFrame(index=df.index)
    step = df["step"] if "step" in df else pd.Series(pd.array([None] * len(df), dtype="Int64"))
    out["step"] = step.astype("Int64")
    # MindSpore writes one whole-collection row with Step=0; an empty Step means the same.
    out["whole_run"] = (len(df) == 1) & (step.isna() | (step == 0)).astype(bool)
    out["device_id"] = df["device_id"] if "device_id" in df else pd.array([None] * len(df), dtype="Int64")
    for c in _BREAKDOWN:
        out[c.name] = df[c.name] if c.name in df else np.nan
    comm = out["communication_not_overlapped_us"].fillna(0.0)
    out["total_us"] = out["computing_us"].fillna(0.0) + comm + out["free_us"].fillna(0.0)
    out["iteration_interval_us"] = np.nan
    out["fp_bp_us"] = np.nan
    out["tail_us"] = np.nan
    out = out[list(STEP_COLUMNS)]
    return out[list(columns)] if columns is not None else out


def read_legacy_step_trace(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pd.DataFrame | None:
    """MindSpore ≤ 2.3 ``step_trace_raw_{id}_detail_time.csv`` (syscnt) → canonical step table (µs).

    The last row (``step_num`` = ``-``) is MindSpore's own average and is dropped.
    """
    res = read_csv_table(path, LEGACY_STEP_TRACE, None, sink, what=path.name)
    if res is None:
        return None
    df = res.frame
    df = df[df["step_num"].notna() & df["step_num"].astype(str).str.fullmatch(r"\d+")].reset_index(drop=True)
    us = SYSCNT_NS / 1000.0
    out = pd.DataFrame(index=df.index)
    out["step"] = df["step_num"].astype(int).astype("Int64")
    out["whole_run"] = False
    out["device_id"] = pd.array([None] * len(df), dtype="Int64")
    out["total_us"] = df["total"] * us
    for c in _BREAKDOWN:
        out[c.name] = np.nan
    out["iteration_interval_us"] = df["iteration_interval"] * us if "iteration_interval" in df else np.nan
    out["fp_bp_us"] = df["fp_and_bp"] * us if "fp_and_bp" in df else np.nan
    out["tail_us"] = df["tail"] * us if "tail" in df else np.nan
    out = out[list(STEP_COLUMNS)]
    return out[list(columns)] if columns is not None else out


def read_cluster_step_trace(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``cluster_step_trace_time.csv`` with ``Type=rank`` and ``Type=stage`` rows."""
    res = read_csv_table(path, CLUSTER_STEP_TRACE_TIME, None, sink, what=path.name)
    return res.frame if res is not None else None
