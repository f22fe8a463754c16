"""``communication.json``, ``communication_matrix.json`` and ``cluster_communication.json``.

Structure (``ascend-profile-formats.md`` §4.7–4.9): ``{step: {"p2p"|"collective":
{op: {"Communication Time Info": {...}, "Communication Bandwidth Info": {link: {...}}}}}}``;
step keys are ``step`` or ``step<N>``; each group also has a ``Total Op Info``
entry, which is skipped; link types beyond RDMA/HCCS/PCIE/SDMA (``SIO``) are kept.
Times in the JSON are ms and become µs columns here; start timestamps are µs and
become exact ns.

Tables:

* ``communication`` — one row per (step, op): ``step``, ``group_kind`` (p2p |
  collective), ``op_name`` (``hcom_allReduce__123_0_1``), ``group`` (hash after ``@``),
  ``op_type`` (allreduce, allgather, …), ``start_ns``, ``elapse_us``, ``transit_us``,
  ``wait_us``, ``synchronization_us``, ``idle_us``, ``wait_ratio``, ``synchronization_ratio``,
  ``transit_size_mb`` (all links), ``rank`` (cluster file only).
* ``communication_bandwidth`` — one row per (step, op, link type).
* ``communication_matrix`` — one row per (step, op key, src-dst link).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.csvtable import us_text_to_ns
from advisor_core.textio import read_json

_OP_TYPES = (
    "send",
    "reduce",
    "invalid",
    "broadcast",
    "allreduce",
    "receive",
    "allgather",
    "reducescatter",
    "scatter",
    "alltoall",
    "alltoallv",
    "alltoallvc",
    "batchsendrecv",
)
_TOTAL = "Total Op Info"

COMMUNICATION_COLUMNS = (
    "rank",
    "step",
    "group_kind",
    "op_name",
    "group",
    "op_type",
    "start_ns",
    "elapse_us",
    "transit_us",
    "wait_us",
    "synchronization_us",
    "idle_us",
    "wait_ratio",
    "synchronization_ratio",
    "transit_size_mb",
)
BANDWIDTH_COLUMNS = (
    "rank",
    "step",
    "op_name",
    "group",
    "link_type",
    "transit_size_mb",
    "transit_us",
    "bandwidth_gbps",
    "large_packet_ratio",
)
MATRIX_COLUMNS = (
    "step",
    "group_kind",
    "op_key",
    "op_type",
    "rank_set",
    "src_rank",
    "dst_rank",
    "transport_type",
    "transit_size_mb",
    "transit_us",
    "bandwidth_gbps",
    "op_name",
)


def op_type_of(op_name: str) -> str:
    """Normalised collective type, longest match first (``hcom_allReduce__1`` → ``allreduce``)."""
    low = op_name.lower()
    for t in sorted(_OP_TYPES, key=len, reverse=True):
        if t in low:
            return t
    return "other"


def _step_number(key: str) -> int | None:
    m = re.fullmatch(r"step(\d*)", key.strip(), re.IGNORECASE)
    if not m:
        return None
    return int(m.group(1)) if m.group(1) else None


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _ms_to_us(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def _iter_ops(data: dict[str, Any], path: Path, sink: DiagnosticSink) -> Iterator[tuple[int | None, str, str, dict[str, Any]]]:
    for step_key, groups in data.items():
        if not isinstance(groups, dict):
            sink.warning("bad-structure", f"entry '{step_key}' is not an object; skipped", path, key=str(step_key))
            continue
        step = _step_number(str(step_key))
        if step is None and str(step_key).lower() != "step":
            sink.warning("bad-structure", f"unexpected step key '{step_key}'; read anyway", path, key=str(step_key))
        for kind, ops in groups.items():
            if not isinstance(ops, dict):
                continue
            for op_key, op in ops.items():
                if op_key == _TOTAL or not isinstance(op, dict):
                    continue
                yield step, str(kind), str(op_key), op


def _time_info_row(op: dict[str, Any]) -> dict[str, Any]:
    t = op.get("Communication Time Info") or {}
    start = t.get("Start Timestamp(us)")
    bw = op.get("Communication Bandwidth Info") or {}
    size = sum(_num(v, "Transit Size(MB)") or 0.0 for v in bw.values() if isinstance(v, dict))
    return {
        "start_ns": us_text_to_ns(str(start)) if start is not None else None,
        "elapse_us": _ms_to_us(_num(t, "Elapse Time(ms)")),
        "transit_us": _ms_to_us(_num(t, "Transit Time(ms)")),
        "wait_us": _ms_to_us(_num(t, "Wait Time(ms)")),
        "synchronization_us": _ms_to_us(_num(t, "Synchronization Time(ms)")),
        "idle_us": _ms_to_us(_num(t, "Idle Time(ms)") if "Idle Time(ms)" in t else _num(t, "Idel Time(ms)")),
        "wait_ratio": _num(t, "Wait Time Ratio"),
        "synchronization_ratio": _num(t, "Synchronization Time Ratio"),
        "transit_size_mb": size,
    }


def _split_op_key(op_key: str) -> tuple[str, str | None]:
    name, _, group = op_key.partition("@")
    return name, (group or None)


def comm_frames(
    records: list[dict[str, Any]], bw_records: list[dict[str, Any]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    comm = pd.DataFrame.from_records(records, columns=list(COMMUNICATION_COLUMNS))
    comm = comm.astype(
        {"rank": "Int64", "step": "Int64", "start_ns": "Int64", "group_kind": "string", "op_name": "string", "group": "string", "op_type": "string"}
    )
    for c in ("elapse_us", "transit_us", "wait_us", "synchronization_us", "idle_us", "wait_ratio", "synchronization_ratio", "transit_size_mb"):
        comm[c] = comm[c].astype("float64")
    bw = pd.DataFrame.from_records(bw_records, columns=list(BANDWIDTH_COLUMNS))
    bw = bw.astype({"rank": "Int64", "step": "Int64", "op_name": "string", "group": "string", "link_type": "string"})
    for c in ("transit_size_mb", "transit_us", "bandwidth_gbps", "large_packet_ratio"):
        bw[c] = bw[c].astype("float64")
    return comm, bw


def _bw_rows(op: dict[str, Any], base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    bw = op.get("Communication Bandwidth Info") or {}
    for link, v in bw.items():
        if not isinstance(v, dict):
            continue
        yield {
            **base,
            "link_type": str(link),
            "transit_size_mb": _num(v, "Transit Size(MB)"),
            "transit_us": _ms_to_us(_num(v, "Transit Time(ms)")),
            "bandwidth_gbps": _num(v, "Bandwidth(GB/s)"),
            "large_packet_ratio": _num(v, "Large Packet Ratio"),
        }


def read_communication(path: Path, sink: DiagnosticSink) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Per-rank ``communication.json`` → (ops, bandwidth) tables."""
    data = read_json(path, sink, what="communication.json")
    if data is None:
        return None
    if not isinstance(data, dict):
        sink.error("bad-structure", "communication.json is not a JSON object keyed by step", path)
        return None
    records: list[dict[str, Any]] = []
    bw_records: list[dict[str, Any]] = []
    for step, kind, op_key, op in _iter_ops(data, path, sink):
        name, group = _split_op_key(op_key)
        base = {"rank": None, "step": step, "op_name": name, "group": group}
        records.append({**base, "group_kind": kind, "op_type": op_type_of(name), **_time_info_row(op)})
        bw_records.extend(_bw_rows(op, base))
    return comm_frames(records, bw_records)


def read_cluster_communication(path: Path, sink: DiagnosticSink) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """``cluster_communication.json``: ``{rank set: {step: {op: {rank: {...}}}}}`` → (ops, bandwidth)."""
    data = read_json(path, sink, what="cluster_communication.json")
    if data is None:
        return None
    if not isinstance(data, dict):
        sink.error("bad-structure", "cluster_communication.json is not a JSON object keyed by rank set", path)
        return None
    records: list[dict[str, Any]] = []
    bw_records: list[dict[str, Any]] = []
    for rank_set, steps in data.items():
        if not isinstance(steps, dict):
            continue
        for step_key, ops in steps.items():
            if not isinstance(ops, dict):
                continue
            step = _step_number(str(step_key))
            for op_key, per_rank in ops.items():
                if op_key == _TOTAL or not isinstance(per_rank, dict):
                    continue
                name, group = _split_op_key(str(op_key))
                for rank, op in per_rank.items():
                    if not isinstance(op, dict):
                        continue
                    try:
                        rid: int | None = int(rank)
                    except ValueError:
                        rid = None
                    base = {"rank": rid, "step": step, "op_name": name, "group": group}
                    records.append({**base, "group_kind": str(rank_set), "op_type": op_type_of(name), **_time_info_row(op)})
                    bw_records.extend(_bw_rows(op, base))
    return comm_frames(records, bw_records)


def read_communication_matrix(path: Path, sink: DiagnosticSink) -> pd.DataFrame | None:
    """``communication_matrix.json`` → one row per link of each op entry."""
    data = read_json(path, sink, what="communication_matrix.json")
    if data is None:
        return None
    if not isinstance(data, dict):
        sink.error("bad-structure", "communication_matrix.json is not a JSON object keyed by step", path)
        return None
    rows: list[dict[str, Any]] = []
    for step, kind, op_key, links in _iter_ops(data, path, sink):
        name, group = _split_op_key(op_key)
        for link, v in links.items():
            if not isinstance(v, dict):
                continue
            src, _, dst = str(link).partition("-")
            rows.append(
                {
                    "step": step,
                    "group_kind": kind,
                    "op_key": op_key,
                    "op_type": name.split("-")[0],
                    "rank_set": group,
                    "src_rank": int(src) if src.isdigit() else None,
                    "dst_rank": int(dst) if dst.isdigit() else None,
                    "transport_type": v.get("Transport Type"),
                    "transit_size_mb": _num(v, "Transit Size(MB)"),
                    "transit_us": _ms_to_us(_num(v, "Transit Time(ms)")),
                    "bandwidth_gbps": _num(v, "Bandwidth(GB/s)"),
                    "op_name": v.get("Op Name") or v.get("op_name"),
                }
            )
    return matrix_frame(rows)


def matrix_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Matrix records → the canonical ``communication_matrix`` frame (shared with the DB reader)."""
    df = pd.DataFrame.from_records(rows, columns=list(MATRIX_COLUMNS))
    return df.astype(
        {
            "step": "Int64",
            "src_rank": "Int64",
            "dst_rank": "Int64",
            "group_kind": "string",
            "op_key": "string",
            "op_type": "string",
            "rank_set": "string",
            "transport_type": "string",
            "op_name": "string",
            "transit_size_mb": "float64",
            "transit_us": "float64",
            "bandwidth_gbps": "float64",
        }
    )
