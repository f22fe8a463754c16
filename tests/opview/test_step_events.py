"""step_events: the trace's step and overlap events found by a chunked scan equal those of the full trace reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def test_chunk_boundaries_do_not_lose_or_repeat_events(trace: Path, monkeypatch) -> None:
    monkeypatch.setattr(trace_steps, "_CHUNK", 4096)
    monkeypatch.setattr(trace_steps, "_OVERLAP", 2048)
    got = read_step_events(trace, None, DiagnosticSink())
    assert got[COLS].reset_index(drop=True).equals(_expected(trace))


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
