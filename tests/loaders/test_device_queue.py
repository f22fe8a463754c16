"""The device queue's GetNext records, in the three files that hold them, read back as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.device_queue import read_device_queue

RECORDS = st.lists(st.tuples(st.integers(0, 10**15), st.integers(0, 10**6), st.integers(0, 64)), min_size=1, max_size=30)


def _write(path: Path, kind: str, recs: list[tuple[int, int, int]]) -> None:
    if kind == "minddata_aicpu":  # MindSpore <= 2.3: a header, then space-separated µs
        body = "node_name start_time end_time queue_size\n" + "".join(
            f"GetNext_dequeue_wait {s} {s + w} {q}\n" for s, w, q in recs)
    elif kind == "aicpu_mi":  # CANN: CSV, times with msprof's trailing tab
        body = "Device_id,Node Name,Start Time(us),End Time(us),Queue Size\n" + "".join(
            f"0,GetNext_dequeue_wait,{s}\t,{s + w}\t,{q}\n" for s, w, q in recs)
    else:  # GPU: ns
        body = "".join(f"GetNext {s * 1000} {(s + w) * 1000} {q}\n" for s, w, q in recs)
    path.write_text(body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recs=RECORDS, kind=st.sampled_from(["minddata_aicpu", "aicpu_mi", "minddata_getnext_profiling"]))
def test_records_round_trip(tmp_path, recs, kind):
    path = tmp_path / f"{kind}.txt"
    _write(path, kind, recs)
    sink = DiagnosticSink()
    df = read_device_queue(path, kind, sink)
    assert not list(sink)
    want = sorted(recs, key=lambda r: r[0])
    assert df["step"].tolist() == list(range(1, len(recs) + 1))
    assert df["start_us"].tolist() == pytest.approx([float(s) for s, _, _ in want])
    assert df["wait_us"].tolist() == pytest.approx([float(w) for _, w, _ in want])
    assert df["queue_size"].tolist() == [float(q) for _, _, q in want]


def test_other_nodes_are_left_out_and_bad_lines_named(tmp_path):
    path = tmp_path / "minddata_aicpu_0.txt"
    path.write_text("node_name start_time end_time queue_size\nGetNext_dequeue_wait 10 30 0\n"
                    "Other_node 5 6 1\nGetNext_dequeue_wait 50 x 0\nGetNext_dequeue_wait 40 41 2\n")
    sink = DiagnosticSink()
    df = read_device_queue(path, "minddata_aicpu", sink)
    assert df[["start_us", "wait_us", "queue_size"]].values.tolist() == [[10.0, 20.0, 0.0], [40.0, 1.0, 2.0]]
    (d,) = list(sink)
    assert d.line == 4 and "1 line(s)" in d.message and d.path == str(path)
