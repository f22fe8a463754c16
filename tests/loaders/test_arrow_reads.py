"""The Arrow read of a CSV table (``read_csv_table(..., arrow=True)``, what the op view builds from).

Its text columns come back dictionary-encoded with one dictionary per column, whatever the
number of blocks the reader cut the file into. The reader does not check UTF-8 row by row:
each column's one dictionary is checked instead, and a file with bad bytes takes the same
slow path (and warning) as the pandas read.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from unittest import mock

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.loaders import csvtable
from advisor_core.loaders.csvtable import read_csv_table
from advisor_core.loaders.kernels import KERNELS

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
COLUMNS = ["name", "type", "duration_us", "input_shapes"]
HEADER = ["Name", "Type", "Duration(us)", "Input Shapes"]
# Names a real profile has: ASCII scope paths, and cell names in other scripts.
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz/-_0123456789\u8f6c\u6362\u00e9", min_size=1, max_size=12)
# A few shapes that repeat (so one is met both quoted and not), and any others.
SHAPE = st.one_of(st.sampled_from(["1,2", "4096,4096;4096", "8"]),
                  st.lists(st.lists(st.integers(1, 99), min_size=1, max_size=3), min_size=1, max_size=2).map(
                      lambda s: ";".join(",".join(map(str, d)) for d in s)))


def _write(path: Path, rows: list[tuple[str, str, float, str, bool]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for name, typ, dur, shape, quoted in rows:
        w.writerow([name, typ, dur, f'"{shape}"' if quoted else shape])  # MindSpore quotes shapes; some tools not
    path.write_text(buf.getvalue(), encoding="utf-8")


def _decoded(table: pa.Table, column: str) -> list[object]:
    return table.column(column).cast(pa.string()).to_pylist()


@SETTINGS
@given(st.lists(st.tuples(NAME, st.sampled_from(["MatMul", "Cast", "TransData"]),
                          st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 3)), SHAPE, st.booleans()),
                min_size=1, max_size=40),
       st.sampled_from([64, 256, 1 << 20]))
def test_arrow_read_matches_the_pandas_read_with_one_dictionary_per_column(tmp_path_factory, rows, block):
    path = Path(tmp_path_factory.mktemp("kd")) / "kernel_details.csv"
    _write(path, rows)
    sink = DiagnosticSink()
    with mock.patch.object(csvtable, "READ_BLOCK_BYTES", block):  # small blocks: many chunks, a dictionary each
        table = read_csv_table(path, KERNELS, COLUMNS, sink, arrow=True).arrow
        frame = read_csv_table(path, KERNELS, COLUMNS, sink).frame
    assert not list(sink)
    assert _decoded(table, "name") == frame["name"].tolist() == [r[0] for r in rows]
    assert _decoded(table, "input_shapes") == frame["input_shapes"].tolist() == [r[3] for r in rows]
    assert table.column("duration_us").to_pylist() == [r[2] for r in rows]
    for column in ("name", "type", "input_shapes"):
        chunks = table.column(column).chunks
        dictionary = chunks[0].dictionary
        assert all(c.dictionary.equals(dictionary) for c in chunks)
        # a quoted and an unquoted spelling of one shape are one value: codes tell values apart
        assert len(dictionary) == len(set(dictionary.to_pylist()))


def test_bad_utf8_in_a_dictionary_column_is_replaced_with_a_warning(tmp_path):
    path = tmp_path / "kernel_details.csv"
    path.write_bytes(b"Name,Type,Duration(us),Input Shapes\n"
                     b'Default/Cast-op1/Cast,Cast,1.5,"""1,2"""\n'
                     b'Default/\xff\xfe-op2/Cast,Cast,2.5,"""3,4"""\n')
    sink = DiagnosticSink()
    table = read_csv_table(path, KERNELS, COLUMNS, sink, arrow=True).arrow
    assert _decoded(table, "name") == ["Default/Cast-op1/Cast", "Default/\ufffd\ufffd-op2/Cast"]
    assert _decoded(table, "input_shapes") == ["1,2", "3,4"]
    assert table.column("duration_us").to_pylist() == [1.5, 2.5]
    (diag,) = [d for d in sink if d.code == "not-utf8"]
    assert diag.severity == Severity.WARNING and diag.line == 3
    assert "kernel_details.csv is not valid UTF-8 (byte 0xff" in diag.message
    table.validate(full=True)


def test_rows_with_the_wrong_field_count_are_counted_once_in_a_file_with_bad_utf8(tmp_path):
    path = tmp_path / "kernel_details.csv"
    path.write_bytes(b"Name,Type,Duration(us),Input Shapes\n"
                     b'Default/\xff-op1/Cast,Cast,1.5,"""1,2"""\n'
                     b"Default/Cast-op2/Cast,Cast\n"
                     b'Default/Cast-op3/Cast,Cast,2.5,"""3,4""",extra\n'
                     b'Default/Cast-op4/Cast,Cast,3.5,"""5,6"""\n')
    for arrow in (True, False):
        sink = DiagnosticSink()
        res = read_csv_table(path, KERNELS, COLUMNS, sink, arrow=arrow)
        durations = res.arrow.column("duration_us").to_pylist() if arrow else res.frame["duration_us"].tolist()
        assert durations == [1.5, 3.5]
        (malformed,) = [d for d in sink if d.code == "malformed-rows"]
        assert malformed.message.startswith("kernel_details.csv: 2 row(s) with the wrong number of fields")
        assert res.skipped_rows == 2
