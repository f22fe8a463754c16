"""Property-based tests of the CSV/JSON parsers (hypothesis)."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.loaders.csvtable import normalize_header, read_csv_table, snake_case, us_text_to_ns
from advisor_core.loaders.kernels import KERNELS
from advisor_core.loaders.trace import read_trace_view

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

micro = st.integers(min_value=0, max_value=9 * 10**15)  # µs; int64 ns ends at 9.22e15 µs (year 2262)
frac = st.integers(min_value=0, max_value=999)


@given(micro, frac, st.sampled_from(["", "\t", " ", "\t\t"]), st.booleans())
def test_us_text_to_ns_is_exact(whole, f, tail, quoted):
    text = f"{whole}.{f:03d}{tail}"
    if quoted:
        text = f'"{text}"'
    expected = int(Decimal(f"{whole}.{f:03d}") * 1000)
    assert us_text_to_ns(text) == expected


@given(micro, st.text(alphabet="0123456789", min_size=0, max_size=2))
def test_us_text_to_ns_short_fractions(whole, f):
    text = f"{whole}.{f}" if f else f"{whole}"
    assert us_text_to_ns(text) == int(Decimal(text) * 1000)


@given(st.text(min_size=1, max_size=30).filter(lambda s: not s.strip().lstrip("-").replace(".", "", 1).isdigit()))
def test_us_text_to_ns_rejects_garbage(text):
    assert us_text_to_ns(text) is None or text.strip().strip('"').strip()


@given(st.sampled_from(["Block Dim", "Block Num", "Step Id", "Step ID", "Device_id", "Device ID", "Avg. time (us)"]))
def test_normalize_header_is_spelling_insensitive(h):
    assert normalize_header(h) == normalize_header(h.upper()) == normalize_header(f"  {h.lower()} ")


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_() %/", min_size=1, max_size=25))
def test_snake_case_is_identifier_like(h):
    s = snake_case(h)
    assert s == "" or (s.replace("_", "").isalnum() and not s.startswith("_") and not s.endswith("_"))


# A random kernel table written with random header spellings must read back exactly.
SPELLINGS = {c.name: c.headers for c in KERNELS.columns}
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz/-_0123456789", min_size=1, max_size=20)
row = st.fixed_dictionaries(
    {
        "name": names,
        "start": st.tuples(micro, frac),
        "dur": st.floats(min_value=0, max_value=1e7, allow_nan=False).map(lambda x: round(x, 3)),
        "task": st.one_of(st.none(), st.integers(0, 2**31)),
        "shape": st.lists(st.lists(st.integers(1, 9999), min_size=1, max_size=4), min_size=0, max_size=3),
    }
)


@SETTINGS
@given(st.lists(row, min_size=1, max_size=30), st.data())
def test_kernel_table_roundtrip(tmp_path_factory, rows, data):
    pick = {k: data.draw(st.sampled_from(v)) for k, v in SPELLINGS.items()}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([pick["name"], pick["start_ns"], pick["duration_us"], pick["task_id"], pick["input_shapes"]])
    for r in rows:
        shape = ";".join(",".join(map(str, s)) for s in r["shape"])
        w.writerow(
            [
                r["name"],
                f"{r['start'][0]}.{r['start'][1]:03d}\t",
                r["dur"],
                "N/A" if r["task"] is None else r["task"],
                f'"{shape}"' if shape else "N/A",
            ]
        )
    path = Path(tmp_path_factory.mktemp("kd")) / "kernel_details.csv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    sink = DiagnosticSink()
    res = read_csv_table(path, KERNELS, ["name", "start_ns", "duration_us", "task_id", "input_shapes"], sink)
    assert not sink.of(Severity.ERROR)
    df = res.frame
    assert df["name"].tolist() == [r["name"] for r in rows]
    assert df["start_ns"].tolist() == [r["start"][0] * 1000 + r["start"][1] for r in rows]
    assert df["duration_us"].tolist() == [r["dur"] for r in rows]
    assert [None if pd.isna(v) else v for v in df["task_id"]] == [r["task"] for r in rows]
    expect_shapes = [";".join(",".join(map(str, s)) for s in r["shape"]) or None for r in rows]
    assert [None if pd.isna(v) else v for v in df["input_shapes"]] == expect_shapes


@SETTINGS
@given(
    st.lists(
        st.fixed_dictionaries({"name": names, "ts": st.tuples(micro, frac), "dur": st.floats(0, 1e6, allow_nan=False), "as_str": st.booleans()}),
        min_size=0,
        max_size=20,
    ),
    st.booleans(),
)
def test_trace_roundtrip(tmp_path_factory, events, wrap):
    evs = []
    raw_numbers = {}
    for i, e in enumerate(events):
        ts_text = f"{e['ts'][0]}.{e['ts'][1]:03d}"
        if e["as_str"]:
            ts = ts_text
        else:
            ts = f"@@{i}@@"
            raw_numbers[ts] = ts_text
        evs.append({"ph": "X", "name": e["name"], "pid": 1, "tid": 2, "ts": ts, "dur": str(e["dur"]) if e["as_str"] else e["dur"]})
    body = json.dumps({"traceEvents": evs} if wrap else evs)
    for k, v in raw_numbers.items():
        body = body.replace(f'"{k}"', v)
    path = Path(tmp_path_factory.mktemp("tv")) / "trace_view.json"
    path.write_text(body)
    sink = DiagnosticSink()
    df = read_trace_view(path, ["name", "ts_ns", "dur_us"], sink)
    assert not sink.has_errors
    assert df["name"].tolist() == [e["name"] for e in events]
    assert df["ts_ns"].tolist() == [e["ts"][0] * 1000 + e["ts"][1] for e in events]
    assert df["dur_us"].tolist() == [float(e["dur"]) for e in events]


@SETTINGS
@given(st.binary(min_size=0, max_size=400))
def test_random_bytes_never_raise(tmp_path_factory, blob):
    d = Path(tmp_path_factory.mktemp("junk"))
    for name in ("kernel_details.csv", "trace_view.json"):
        (d / name).write_bytes(blob)
    sink = DiagnosticSink()
    read_csv_table(d / "kernel_details.csv", KERNELS, None, sink)
    read_trace_view(d / "trace_view.json", None, sink)
    for diag in sink:
        assert diag.path is not None and diag.message


def test_timestamps_beyond_int64_are_reported_not_raised(tmp_path):
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Start Time(us),Duration(us)\na,99999999999999999.5,1\nb,1736413971558972.912,2\n")
    sink = DiagnosticSink()
    df = read_csv_table(path, KERNELS, ["name", "start_ns"], sink).frame
    assert pd.isna(df["start_ns"][0]) and df["start_ns"][1] == 1736413971558972912
    (diag,) = [d for d in sink if d.code == "bad-value"]
    assert diag.key == "Start Time(us)" and diag.line == 2
