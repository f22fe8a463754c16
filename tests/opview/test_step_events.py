"""step_events: the trace's step and overlap events found by the scan equal those of the full trace reader,
and those of the chunked Python-regex scan it replaced (kept here only as the reference)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders import trace_steps
from advisor_core.loaders.trace import read_trace_view
from advisor_core.loaders.trace_steps import read_step_events
from advisor_core.simulate import simulate_scenario

COLS = ["ph", "name", "ts_ns", "dur_us", "process_name", "thread_name"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("steps") / "run"
    simulate_scenario("allreduce-rearrangement", out, layers=2, steps=3, ground_truth=False)
    return sorted(out.rglob("trace_view.json"))[0]


def _expected(path: Path):  # type: ignore[no-untyped-def]
    full = read_trace_view(path, None, DiagnosticSink())
    keep = full["name"].str.match(r"^ProfilerStep#\d+$") | (full["process_name"] == "Overlap Analysis")
    return full.loc[keep, COLS].reset_index(drop=True)


def test_same_events_as_the_full_reader(trace: Path) -> None:
    sink = DiagnosticSink()
    got = read_step_events(trace, None, sink)
    exp = _expected(trace)
    assert not list(sink)
    assert len(exp) > 10 and set(exp["name"].str.slice(0, 12)) >= {"ProfilerStep", "Computing", "Free"}
    assert got[COLS].reset_index(drop=True).equals(exp)


def test_names_inside_args_and_broken_events(tmp_path: Path) -> None:
    events = [
        {"ph": "M", "name": "process_name", "pid": 6, "tid": 0, "args": {"name": "Overlap Analysis"}},
        {"ph": "M", "name": "thread_name", "pid": 6, "tid": 4, "args": {"name": "Free"}},  # "Free" inside args
        {"args": {"k": {"name": "x"}}, "ph": "X", "name": "Free", "pid": 6, "tid": 4, "ts": "10.500", "dur": 2.0},
        {"ph": "X", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 9, "dur": "30.25"},
    ]
    text = json.dumps(events)
    p = tmp_path / "trace_view.json"
    p.write_text(text[:-1] + ', {"ph": "X", "name": "Computing", "pid": 6, "ts": 1')  # truncated last event
    sink = DiagnosticSink()
    got = read_step_events(p, None, sink)
    assert list(got["name"]) == ["Free", "ProfilerStep#7"]
    assert list(got["ts_ns"]) == [10500, 9000] and list(got["dur_us"]) == [2.0, 30.25]
    assert list(got["process_name"].fillna("-")) == ["Overlap Analysis", "-"]
    assert list(got["thread_name"].fillna("-")) == ["Free", "-"]
    (d,) = list(sink)
    assert d.severity.value == "warning" and "1 step/overlap event(s) in trace_view.json could not be decoded" in d.message


def test_not_a_trace(tmp_path: Path) -> None:
    p = tmp_path / "trace_view.json"
    p.write_bytes(b"")
    sink = DiagnosticSink()
    assert read_step_events(p, None, sink) is None
    assert "empty" in list(sink)[0].message


# --- the chunked Python-regex scan this reader replaced: the reference for the property test below ---

_REFERENCE_WANTED = re.compile(  # the old pattern, verbatim: ``\s``/``\d`` as Python's ``re`` reads them
    rb'"name"\s*:\s*"(ProfilerStep#\d+|Computing|Communication|Communication\(Not Overlapped\)|Free'
    rb'|process_name|thread_name)"'
)


def _reference_read(path: Path, chunk: int, overlap: int) -> tuple[Any, list[str]]:
    """The old ``read_step_events`` loop: ``re`` over ``chunk``-byte reads, ``overlap`` bytes of context kept."""
    decoder = json.JSONDecoder(parse_float=str)
    events: list[dict[str, Any]] = []
    undecodable = 0
    with open(path, "rb") as fh:
        buf, first = b"", True
        while True:
            data = fh.read(chunk)
            at_end = len(data) < chunk
            buf = buf + data if buf else data
            lo = 0 if first else overlap // 2
            hi = len(buf) if at_end else len(buf) - overlap // 2
            for m in _REFERENCE_WANTED.finditer(buf, lo):
                if m.start() >= hi:
                    break
                ev = trace_steps._enclosing_event(buf, m.start(), m.group(1).decode("ascii"), decoder)
                if ev is None:
                    undecodable += 1
                elif ev:
                    events.append(ev)
            if at_end:
                break
            buf, first = buf[-overlap:], False
    messages = [f"{undecodable} step/overlap event(s) in {path.name} could not be decoded; skipped"] if undecodable else []
    return trace_steps._frame(events, None), messages


_WANTED_NAMES = ["ProfilerStep#1", "ProfilerStep#20", "Computing", "Communication", "Communication(Not Overlapped)",
                 "Free", "process_name", "thread_name"]
_OTHER_NAMES = ["aclnnCast", "ProfilerStep#", "ProfilerStep#x", "Computing2", "Free ", "free", "Overlap Analysis"]
_NUMBER = st.one_of(st.integers(-5, 10**6), st.sampled_from(["1750000000000250.125", "30.25", "", "x"]))


@st.composite
def _event(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(_WANTED_NAMES + _OTHER_NAMES))
    fields: dict[str, Any] = {"ph": draw(st.sampled_from(["X", "M", "B", "E", "i", "C", "s"])), "name": name}
    for key in draw(st.lists(st.sampled_from(["pid", "tid", "ts", "dur"]), unique=True)):
        fields[key] = draw(_NUMBER)
    inner = st.dictionaries(st.sampled_from(["name", "k", "Task Type"]), st.sampled_from(_WANTED_NAMES + _OTHER_NAMES),
                            max_size=2)
    args = draw(st.one_of(st.none(), inner, st.dictionaries(st.sampled_from(["name", "nested"]),
                                                              st.one_of(inner, st.sampled_from(_WANTED_NAMES)),
                                                              max_size=2)))
    if args is not None:
        fields["args"] = args
    if draw(st.integers(0, 3)) == 0:  # a long kernel event
        fields["cat"] = "Default/network-LlamaForCausalLM/" * draw(st.integers(0, 8))
    order = draw(st.permutations(list(fields)))  # ``args`` (with its own "name"s) may come before the event's name
    return {k: fields[k] for k in order}


_SEPARATORS = [(",", ":"), (", ", ": "), (",", " :\t "), (",", "\n:\r\n"), (",", ":\x0b"), (",", "\x0c:")]


@st.composite
def _trace_text(draw: st.DrawFn) -> tuple[bytes, int]:
    """A trace's bytes and its longest event's length."""
    sep = draw(st.sampled_from(_SEPARATORS))  # \x0b and \x0c: matched by the scan, rejected by JSON (undecodable)
    events = [json.dumps(ev, separators=sep) for ev in draw(st.lists(_event(), min_size=3, max_size=30))]
    between = draw(st.sampled_from([",", ", ", ",\n"]))  # one line, or one event per line
    body = "[" + between.join(events) + "]"
    if draw(st.booleans()):
        body = '{"traceEvents": ' + body + ', "displayTimeUnit": "ns"}'
    raw = body.encode("utf-8")
    if draw(st.booleans()):  # truncated: a run killed while writing
        raw = raw[:draw(st.integers(1, len(raw)))]
    return raw, max((len(e.encode("utf-8")) for e in events), default=0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=_trace_text(), data=st.data())
def test_same_frame_and_diagnostics_as_the_chunked_regex_scan(tmp_path: Path, trace: tuple[bytes, int],
                                                               data: st.DataObject) -> None:
    """The reference's overlap is twice the longest event (there its chunking did not change what it found) and
    its reads advance by less than an event, so its chunk ends fall inside names, hits and events."""
    text, longest = trace
    overlap = 2 * (longest + 8)
    chunk = data.draw(st.integers(overlap + 1, overlap + longest), label="chunk")
    p = tmp_path / "trace_view.json"
    p.write_bytes(text)
    exp, exp_messages = _reference_read(p, chunk, overlap)
    # the scan's own windows, shrunk to the trace's size: their edges fall inside names and hits too
    window = data.draw(st.integers(1, max(1, len(text))), label="window")
    sink = DiagnosticSink()
    with patch.object(trace_steps, "_WINDOW", window), patch.object(trace_steps, "_MATCH_SPAN", _LONGEST_MATCH):
        got = read_step_events(p, None, sink)
    assert got is not None
    assert list(got.dtypes) == list(exp.dtypes) and got.equals(exp)
    assert [d.message for d in sink] == exp_messages


# the longest ``"name"<blanks>:<blanks>"<wanted>"`` the generated traces hold (separators below)
_LONGEST_MATCH = len('"name"') + len("\n:\r\n") + len('"Communication(Not Overlapped)"')


def test_a_hit_across_a_window_edge_is_found_once(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": "k" * 8, "pid": 1, "args": {"x": "y" * 30}}] * 9
    events[4] = {"ph": "X", "name": "Communication(Not Overlapped)", "pid": 1, "tid": 1, "ts": 5, "dur": 1}
    text = json.dumps(events).encode()
    p = tmp_path / "trace_view.json"
    p.write_bytes(text)
    at = text.index(b'"name": "Communication(Not')
    for edge in (at - 1, at, at + 1, at + 12, at + 30):  # the window ends before, on and inside the hit
        with patch.object(trace_steps, "_WINDOW", edge), patch.object(trace_steps, "_MATCH_SPAN", _LONGEST_MATCH):
            got = read_step_events(p, None, DiagnosticSink())
        assert list(got["name"]) == ["Communication(Not Overlapped)"], edge
        assert list(got["ts_ns"]) == [5000]


def test_a_name_split_by_the_reference_chunks(tmp_path: Path) -> None:
    """The property test's boundary case, pinned: the reference's first read ends inside the hit's ``"name"``."""
    events = [{"ph": "X", "name": "k" * 8, "pid": 1, "args": {"x": "y" * 30}}] * 9
    events[2] = {"ph": "X", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 5, "dur": 1}
    text = json.dumps(events).encode()
    longest = max(len(json.dumps(ev)) for ev in events)
    overlap = 2 * (longest + 8)
    chunk = text.index(b'"name": "ProfilerStep#3"') + 3
    assert overlap < chunk <= overlap + longest  # within the property test's range
    p = tmp_path / "trace_view.json"
    p.write_bytes(text)
    exp, _ = _reference_read(p, chunk, overlap)
    got = read_step_events(p, None, DiagnosticSink())
    assert list(exp["name"]) == list(got["name"]) == ["ProfilerStep#3"]
    assert list(got["ts_ns"]) == [5000]
