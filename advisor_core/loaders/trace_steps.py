"""``trace_view.json`` → the events a step breakdown needs, without parsing the whole trace.

A rank's trace holds one event per device task and per host op — as many as the
kernel table has rows, hundreds of MB on a large run — but the step breakdown needs
only the ``ProfilerStep#<n>`` windows and the ``Overlap Analysis`` intervals
(``Computing``, ``Communication``, ``Communication(Not Overlapped)``, ``Free``), plus
the ``process_name``/``thread_name`` metadata that says which process an event
belongs to. This reader scans the file in fixed-size chunks (memory stays bounded)
for ``"name": "<one of those>"`` with one regular expression and decodes only the
event around each hit, so its cost is one pass over the bytes.

Columns: ``ph``, ``name``, ``pid``, ``tid``, ``ts_ns`` (Int64, exact), ``dur_us``,
``process_name``, ``thread_name`` — the same meaning as the ``trace_events`` table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.trace import _dur, _ts
from advisor_core.textio import probe_file

STEP_EVENT_COLUMNS = ("ph", "name", "pid", "tid", "ts_ns", "dur_us", "process_name", "thread_name")
OVERLAP_NAMES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
_WANTED = re.compile(
    rb'"name"\s*:\s*"(ProfilerStep#\d+|Computing|Communication|Communication\(Not Overlapped\)|Free'
    rb'|process_name|thread_name)"'
)
_CHUNK = 16 << 20
_OVERLAP = 64 << 10  # context kept between chunks: an event's start is never further back than half of it
_EVENT_WINDOWS = (1 << 10, 64 << 10)  # bytes decoded from an event's opening brace: small first, then more
_ROW_PHASES = {"X", "B", "E", "i", "I"}


def read_step_events(path: Path, columns: Sequence[str] | None, sink: DiagnosticSink) -> pd.DataFrame | None:
    """Step and overlap events of a Chrome trace (see module docstring); ``None`` when the file is unusable."""
    if probe_file(path, sink, what=path.name) is None:
        return None
    decoder = json.JSONDecoder(parse_float=str)
    events: list[dict[str, Any]] = []
    undecodable = 0
    try:
        with open(path, "rb") as fh:
            buf = b""
            first = True
            while True:
                data = fh.read(_CHUNK)
                at_end = len(data) < _CHUNK
                buf = buf + data if buf else data
                lo = 0 if first else _OVERLAP // 2
                hi = len(buf) if at_end else len(buf) - _OVERLAP // 2
                for m in _WANTED.finditer(buf, lo):  # a hit may end past ``hi``: only its start must be before
                    if m.start() >= hi:
                        break
                    ev = _enclosing_event(buf, m.start(), m.group(1).decode("ascii"), decoder)
                    if ev is None:
                        undecodable += 1
                    elif ev:
                        events.append(ev)
                if at_end:
                    break
                buf = buf[-_OVERLAP:]
                first = False
    except OSError as exc:
        sink.error("unreadable", f"{path.name} cannot be read: {exc.strerror or exc}", path)
        return None
    if undecodable:
        sink.warning("bad-structure", f"{undecodable} step/overlap event(s) in {path.name} could not be decoded; "
                     "skipped", path)
    return _frame(events, columns)


def _enclosing_event(buf: bytes, pos: int, name: str, decoder: json.JSONDecoder) -> dict[str, Any] | None:
    """The trace event whose ``name`` is at ``pos``.

    ``{}`` when the hit is the name inside another event's ``args`` (a ``thread_name``
    record naming the ``Computing`` thread); ``None`` when nothing around it decodes.
    """
    lo = pos
    for _ in range(16):  # nested ``args`` objects may come before the name
        lo = buf.rfind(b"{", 0, lo)
        if lo < 0:
            return None
        for window in _EVENT_WINDOWS:
            text = buf[lo:lo + window].decode("utf-8", "replace")
            try:
                obj, end = decoder.raw_decode(text)
                break
            except ValueError:
                continue
        else:
            continue
        closes_before = lo + len(text[:end].encode("utf-8")) <= pos
        if closes_before:
            if isinstance(obj, dict) and "ph" in obj:
                return None  # an earlier event, closed before the hit: the hit is not an event's name
            continue  # a nested object (``args``) before the name
        if isinstance(obj, dict) and "ph" in obj:
            return obj if obj.get("name") == name else {}
    return None


def _frame(events: list[dict[str, Any]], columns: Sequence[str] | None) -> pd.DataFrame:
    process_names: dict[Any, str] = {}
    thread_names: dict[tuple[Any, Any], str] = {}
    for ev in events:
        if ev.get("ph") != "M" or not isinstance(ev.get("args"), dict):
            continue
        if ev["name"] == "process_name":
            process_names[ev.get("pid")] = str(ev["args"].get("name", ""))
        elif ev["name"] == "thread_name":
            thread_names[(ev.get("pid"), ev.get("tid"))] = str(ev["args"].get("name", ""))
    rows = [ev for ev in events if ev.get("ph") in _ROW_PHASES]  # file order, as the full trace reader
    frame = pd.DataFrame({
        "ph": pd.array([ev.get("ph") for ev in rows], dtype="string"),
        "name": pd.array([ev.get("name") for ev in rows], dtype="string"),
        "pid": pd.array([None if ev.get("pid") is None else str(ev.get("pid")) for ev in rows], dtype="string"),
        "tid": pd.array([None if ev.get("tid") is None else str(ev.get("tid")) for ev in rows], dtype="string"),
        "ts_ns": pd.array([_ts(ev.get("ts")) for ev in rows], dtype="Int64"),
        "dur_us": pd.array([_dur(ev.get("dur")) for ev in rows], dtype="float64"),
        "process_name": pd.array([process_names.get(ev.get("pid")) for ev in rows], dtype="string"),
        "thread_name": pd.array([thread_names.get((ev.get("pid"), ev.get("tid"))) for ev in rows], dtype="string"),
    })
    order = [c for c in (columns if columns is not None else STEP_EVENT_COLUMNS) if c in frame.columns]
    return frame[order]
