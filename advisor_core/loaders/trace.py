"""``trace_view.json`` (Chrome trace) → an events table.

Accepted shapes: a top-level array (what torch_npu and MindSpore write) or an
object with ``traceEvents``. ``ts`` may be a string or a number, ``dur`` a number
or a string (MindSpore); both are parsed from their text so timestamps stay
exact (``ts_ns``). Processes are identified by their ``process_name`` metadata
(``Ascend Hardware``, ``HCCL``/``Communication``, ``Overlap Analysis``, ``CPU OP``,
``MindSpore``, ``Python``, ``CANN``, ``Scope Layer`` …), never by pid value; a
``process_labels`` of ``NPU <id>`` gives ``device_id``.

Columns: ``ph``, ``name``, ``cat``, ``pid``, ``tid``, ``ts_ns`` (Int64),
``dur_us`` (float64), ``process_name``, ``thread_name``, ``device_id`` (Int64),
``args`` (dict, only when asked for). Metadata (``ph == "M"``) and flow events
are folded into the names and not returned as rows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.csvtable import us_text_to_ns
from advisor_core.textio import parse_json_text, read_text

TRACE_COLUMNS = (
    "ph",
    "name",
    "cat",
    "pid",
    "tid",
    "ts_ns",
    "dur_us",
    "process_name",
    "thread_name",
    "device_id",
    "args",
)
_ROW_PHASES = {"X", "B", "E", "i", "I", "C"}
_NPU_LABEL = re.compile(r"NPU\s*(\d+)")


def _dur(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _ts(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value * 1000
    return us_text_to_ns(str(value))


def read_trace_view(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pd.DataFrame | None:
    """Events of a Chrome trace (see module docstring)."""
    text = read_text(path, sink, what=path.name)
    if text is None:
        return None
    # Floats come back as their text so microsecond timestamps are not rounded.
    data = parse_json_text(text, path, sink, what=path.name, parse_float=str)
    del text
    if data is None:
        return None
    if isinstance(data, dict):
        events = data.get("traceEvents")
        if not isinstance(events, list):
            sink.error("bad-structure", "trace JSON object has no 'traceEvents' list", path, key="traceEvents")
            return None
    elif isinstance(data, list):
        events = data
    else:
        sink.error("bad-structure", "trace is neither an array of events nor an object with 'traceEvents'", path)
        return None

    want = set(columns) if columns is not None else set(TRACE_COLUMNS)
    process_names: dict[Any, str] = {}
    thread_names: dict[tuple[Any, Any], str] = {}
    device_ids: dict[Any, int] = {}
    non_objects = 0
    for ev in events:
        if not isinstance(ev, dict):
            non_objects += 1
            continue
        if ev.get("ph") != "M":
            continue
        args = ev.get("args") or {}
        if not isinstance(args, dict):
            continue
        if ev.get("name") == "process_name":
            process_names[ev.get("pid")] = str(args.get("name", ""))
        elif ev.get("name") == "thread_name":
            thread_names[(ev.get("pid"), ev.get("tid"))] = str(args.get("name", ""))
        elif ev.get("name") == "process_labels":
            m = _NPU_LABEL.search(str(args.get("labels", "")))
            if m:
                device_ids[ev.get("pid")] = int(m.group(1))

    cols: dict[str, list[Any]] = {c: [] for c in TRACE_COLUMNS if c in want}
    bad_ts = 0
    for ev in events:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        if ph not in _ROW_PHASES:
            continue
        pid, tid = ev.get("pid"), ev.get("tid")
        ts = _ts(ev.get("ts"))
        if ts is None and ev.get("ts") is not None:
            bad_ts += 1
        if "ph" in cols:
            cols["ph"].append(ph)
        if "name" in cols:
            cols["name"].append(ev.get("name"))
        if "cat" in cols:
            cols["cat"].append(ev.get("cat"))
        if "pid" in cols:
            cols["pid"].append(str(pid) if pid is not None else None)
        if "tid" in cols:
            cols["tid"].append(str(tid) if tid is not None else None)
        if "ts_ns" in cols:
            cols["ts_ns"].append(ts)
        if "dur_us" in cols:
            cols["dur_us"].append(_dur(ev.get("dur")))
        if "process_name" in cols:
            cols["process_name"].append(process_names.get(pid))
        if "thread_name" in cols:
            cols["thread_name"].append(thread_names.get((pid, tid)))
        if "device_id" in cols:
            cols["device_id"].append(device_ids.get(pid))
        if "args" in cols:
            cols["args"].append(ev.get("args") if isinstance(ev.get("args"), dict) else {})
    if non_objects:
        sink.warning("bad-structure", f"{non_objects} trace entries are not JSON objects; skipped", path)
    if bad_ts:
        sink.warning("bad-value", f"{bad_ts} event timestamp(s) are not numbers; treated as missing", path, key="ts")
    frame = pd.DataFrame(cols)
    dtypes = {
        "ph": "string",
        "name": "string",
        "cat": "string",
        "pid": "string",
        "tid": "string",
        "ts_ns": "Int64",
        "dur_us": "float64",
        "process_name": "string",
        "thread_name": "string",
        "device_id": "Int64",
    }
    frame = frame.astype({k: v for k, v in dtypes.items() if k in frame.columns})
    order = [c for c in (columns if columns is not None else TRACE_COLUMNS) if c in frame.columns]
    return frame[order]
