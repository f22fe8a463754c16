"""``trace_view.json`` → the events a step breakdown needs, without parsing the whole trace.

A rank's trace holds one event per device task and per host op — as many as the
kernel table has rows, hundreds of MB on a large run — but the step breakdown needs
only the ``ProfilerStep#<n>`` windows and the ``Overlap Analysis`` intervals
(``Computing``, ``Communication``, ``Communication(Not Overlapped)``, ``Free``), plus
the ``process_name``/``thread_name`` metadata that says which process an event
belongs to. This reader memory-maps the file (nothing is copied into Python; the
pages are the OS's file cache) and finds ``"name": "<one of those>"`` with Arrow's
RE2 kernel, which runs without the GIL: ``advisor analyze`` runs this scan on a second
thread while Arrow reads the kernel table on every core, and a scan holding the GIL
would stall that read. Only the event around each hit (~100 in a 1 M-row trace) is
decoded in Python, so the cost is one GIL-free pass over the bytes.

Columns: ``ph``, ``name``, ``pid``, ``tid``, ``ts_ns`` (Int64, exact), ``dur_us``,
``process_name``, ``thread_name`` — the same meaning as the ``trace_events`` table.
"""

from __future__ import annotations

import json
import mmap
import re
import struct
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.trace import _dur, _ts
from advisor_core.textio import probe_file

STEP_EVENT_COLUMNS = ("ph", "name", "pid", "tid", "ts_ns", "dur_us", "process_name", "thread_name")
OVERLAP_NAMES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
# One pattern for both engines: RE2 (in Arrow) finds where the next hit starts, Python's
# ``re`` re-matches it there for the name and the end. ``\s``/``\d`` are spelled out
# because the two engines' classes differ (RE2's ``\s`` lacks ``\v``).
_WS = r"[ \t\n\r\f\v]*"
_WANTED_PATTERN = (
    rf'"name"{_WS}:{_WS}"(ProfilerStep#[0-9]+|Computing|Communication|Communication\(Not Overlapped\)|Free'
    r'|process_name|thread_name)"'
)
_WANTED = re.compile(_WANTED_PATTERN.encode("ascii"))
_FIND_WANTED = pc.MatchSubstringOptions(_WANTED_PATTERN)
_WINDOW = 32 << 20  # bytes searched at a time, then let go of (see _hits)
_MATCH_SPAN = 64 << 10  # a "name": "<wanted>" pair longer than this (blanks) across a window edge is not found
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
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            for start, name in _hits(view):
                ev = _enclosing_event(view, start, name, decoder)
                if ev is None:
                    undecodable += 1
                elif ev:
                    events.append(ev)
    except (OSError, ValueError) as exc:  # ValueError: mmap of a file emptied since the probe
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        sink.error("unreadable", f"{path.name} cannot be read: {reason}", path)
        return None
    if undecodable:
        sink.warning("bad-structure", f"{undecodable} step/overlap event(s) in {path.name} could not be decoded; "
                     "skipped", path)
    return _frame(events, columns)


def _hits(view: mmap.mmap) -> list[tuple[int, str]]:
    """Start and name of each match of ``_WANTED`` in ``view``, as ``_WANTED.finditer(view)`` finds them.

    Arrow's RE2 kernel finds where the next match starts (GIL released; one pass over
    the bytes in all, each search beginning where the previous match ended); Python's
    ``re`` then matches only there, for the name and the end. Both engines run the same
    pattern, so the leftmost start they find is the same. The file is searched
    :data:`_WINDOW` bytes at a time (plus :data:`_MATCH_SPAN`, for a match across the
    edge) and the pages behind are let go, so the mapping does not keep a whole large
    trace resident (peak RSS) for a search that needs a few kilobytes of it.
    """
    hits: list[tuple[int, str]] = []
    data = rest = pa.py_buffer(view)  # zero-copy: Arrow reads the mapped pages
    size, pos, released = len(view), 0, 0
    try:
        while pos < size:
            window_end = min(size, pos + _WINDOW)
            stop = min(size, window_end + _MATCH_SPAN)
            offsets = pa.py_buffer(struct.pack("<qq", pos, stop))  # one large_binary value: view[pos:stop]
            rest = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, data])
            found = pc.find_substring_regex(rest, options=_FIND_WANTED)[0].as_py()
            if found < 0:
                pos = window_end  # none starts before the edge (a longer-than-_MATCH_SPAN one is not a name)
            else:
                m = _WANTED.match(view, pos + found)
                if m is None:  # cannot happen with one pattern in both engines; never loop forever on it
                    pos += found + 1
                    continue
                hits.append((m.start(), m.group(1).decode("ascii")))
                pos = m.end()
            released = _let_go(view, released, pos - _MATCH_SPAN)
    finally:
        del data, rest  # Arrow's hold on the mapping, even from a traceback: the mmap cannot close while it lasts
    return hits


def _let_go(view: mmap.mmap, released: int, upto: int) -> int:
    """Drop the mapped pages in ``[released, upto)`` (whole pages, once a window's worth) from this process's
    resident set; the file cache keeps them, and a later read maps them again. Returns the new mark."""
    upto -= upto % mmap.PAGESIZE
    if upto - released < _WINDOW:
        return released
    try:
        view.madvise(mmap.MADV_DONTNEED, released, upto - released)
    except (AttributeError, OSError, ValueError):  # no madvise here: the pages stay until the scan ends
        return upto
    return upto


def _enclosing_event(buf: bytes | mmap.mmap, pos: int, name: str, decoder: json.JSONDecoder) -> dict[str, Any] | None:
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
