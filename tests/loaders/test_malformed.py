"""Bad input and format quirks: one generated case each, asserting the diagnostic and that the run went on."""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.model.run import load_run

KD_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aic_mac_ratio,aiv_vec_ratio\n"
)
KD_ROWS = [
    '1,4294967295,10,2,Default/MatMul-op0/aclnnMatmul_MatMulV2,MatMulV2,dynamic,AI_CORE,"1736413971558972.912\t",185.504,1.087,16,0,NO,"""4096,512;512,1024""",DT_BF16;DT_BF16,ND;ND,"""4096,1024""",DT_BF16,ND,N/A,0.824,0\n',
    '1,4294967295,N/A,N/A,hcom_allReduce__1_0_1,hcom_allReduce_,N/A,HCCL,"1736413971559972.000\t",900.5,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n',
    '2,4294967295,11,2,Default/Cast-op3/Cast,Cast,dynamic,AI_VECTOR_CORE,"1736413971560972.001\t",12.25,0.5,8,0,NO,"""4096,512""",DT_FLOAT,ND,"""4096,512""",DT_BF16,ND,N/A,0,0.5\n',
]
STEP_10 = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing\n"
    "1,1000.5,200.25,50,250.25,30,0,0,200.25,0\n"
    "2,1001.5,201.25,50,251.25,31,0,0,201.25,0\n"
)


def make_rank(root: Path, rank: int = 0, *, name: str | None = None) -> Path:
    d = root / (name or f"host_{100 + rank}_20260101120000{rank:03d}_ascend_ms")
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text(json.dumps({"ms_version": "2.5.0", "cann_version": "8.0.0", "profiler_parameters": {}}))
    (out / "kernel_details.csv").write_text(KD_HEADER + "".join(KD_ROWS), encoding="utf-8")
    (out / "step_trace_time.csv").write_text(STEP_10)
    (out / "trace_view.json").write_text(json.dumps([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "1736413971558972.912", "dur": 5}]))
    return d


def load(path: Path):
    sink = DiagnosticSink()
    run = load_run(path, sink=sink)
    return run, sink


def only(sink: DiagnosticSink, code: str):
    found = [d for d in sink if d.code == code]
    assert len(found) == 1, [d.render() for d in sink]
    return found[0]


def assert_rest_loaded(run, broken: str) -> None:
    """The run went on: every table other than the broken one still loads."""
    rank = run.rank(0)
    for table in ("kernels", "step_trace", "trace_events"):
        if table != broken:
            assert rank.table(table) is not None and len(rank.table(table)) > 0, table


# ---------------------------------------------------------------- bad input
def test_baseline_is_clean(tmp_path):
    run, sink = load(make_rank(tmp_path))
    assert [d.render() for d in sink if d.severity != Severity.INFO] == []
    assert_rest_loaded(run, "")


def test_missing_file_is_absence_not_error(tmp_path):
    d = make_rank(tmp_path)
    (d / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv").unlink()
    run, sink = load(d)
    assert not sink.has_errors
    assert run.rank(0).table("step_trace") is None
    assert_rest_loaded(run, "step_trace")


def test_missing_path(tmp_path):
    run, sink = load(tmp_path / "nope")
    d = only(sink, "missing-path")
    assert d.render() == f"{tmp_path / 'nope'}: error: path does not exist"
    assert run.rank_ids == []


def test_empty_file(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    p.write_bytes(b"")
    run, sink = load(d)
    assert run.rank(0).table("kernels") is None
    diag = only(sink, "empty-file")
    assert diag.render() == f"{p}: error: kernel_details.csv is empty (0 bytes)"
    assert_rest_loaded(run, "kernels")


def test_truncated_csv(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    p.write_text(KD_HEADER + KD_ROWS[0] + KD_ROWS[1] + KD_ROWS[2][:60], encoding="utf-8")
    run, sink = load(d)
    df = run.rank(0).table("kernels")
    assert len(df) == 2  # the cut row is dropped, the others kept
    diag = only(sink, "malformed-rows")
    assert diag.path == str(p) and diag.line == 4
    assert "1 row(s) with the wrong number of fields were skipped (line 4: expected 23 fields, got 8; file looks truncated)" in diag.message
    assert_rest_loaded(run, "kernels")


def test_truncated_json(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/trace_view.json"
    p.write_text('[{"ph": "X", "name": "a", "ts": "1.0", "dur": 1}, {"ph": "X", "na')
    run, sink = load(d)
    assert run.rank(0).table("trace_events") is None
    diag = only(sink, "truncated")
    assert diag.path == str(p) and diag.line == 1
    assert diag.message.startswith("trace_view.json is truncated: the JSON ends before it is complete")
    assert_rest_loaded(run, "trace_events")


def test_binary_file(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    run, sink = load(d)
    assert run.rank(0).table("step_trace") is None
    diag = only(sink, "binary-file")
    assert diag.render() == f"{p}: error: step_trace_time.csv is binary (contains NUL bytes), not text"
    assert_rest_loaded(run, "step_trace")


def test_utf16_file(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
    p.write_bytes(STEP_10.encode("utf-16"))
    run, sink = load(d)
    assert run.rank(0).table("step_trace") is None
    assert only(sink, "wrong-encoding").message == "step_trace_time.csv is UTF-16 encoded; expected UTF-8"


def test_wrongly_encoded_values_are_replaced_with_a_warning(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    row = KD_ROWS[2].replace("Default/Cast-op3/Cast", "Default/\u8f6c\u6362-op3/Cast")
    p.write_bytes(KD_HEADER.encode() + KD_ROWS[0].encode() + row.encode("gbk"))
    run, sink = load(d)
    df = run.rank(0).table("kernels")
    assert len(df) == 2
    assert "\ufffd" in df.loc[1, "name"]
    diag = only(sink, "not-utf8")
    assert diag.severity == Severity.WARNING and diag.line == 3
    assert "kernel_details.csv is not valid UTF-8 (byte 0x" in diag.message
    assert_rest_loaded(run, "")


def test_unreadable_file(tmp_path, monkeypatch):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    real_open = builtins.open

    def guarded(file, *a, **kw):
        if str(file) == str(p):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **kw)

    # Tests may run as root, where chmod 000 does not stop reads: simulate EACCES.
    monkeypatch.setattr(builtins, "open", guarded)
    run, sink = load(d)
    assert run.rank(0).table("kernels") is None
    assert only(sink, "unreadable").render() == f"{p}: error: kernel_details.csv cannot be read: permission denied"
    monkeypatch.setattr(builtins, "open", real_open)
    assert_rest_loaded(run, "kernels")


def test_directory_where_a_file_should_be(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
    p.unlink()
    p.mkdir()
    run, sink = load(d)
    assert run.rank(0).table("step_trace") is None
    assert "not a regular file" in only(sink, "not-a-file").message


def test_missing_required_column(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    text = (KD_HEADER + "".join(KD_ROWS)).replace("Duration(us)", "Dur")
    p.write_text(text)
    run, sink = load(d)
    assert run.rank(0).table("kernels") is None
    diag = only(sink, "missing-column")
    assert diag.line == 1
    assert diag.message.startswith("kernel_details.csv lacks required column(s) 'Duration(us)' (header has: Step Id, Model ID")
    assert_rest_loaded(run, "kernels")


def test_bad_number_in_numeric_column(tmp_path):
    d = make_rank(tmp_path)
    p = d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    p.write_text(KD_HEADER + KD_ROWS[0] + KD_ROWS[1].replace(",900.5,", ",abc,") + KD_ROWS[2])
    run, sink = load(d)
    df = run.rank(0).table("kernels")
    assert df["duration_us"].tolist()[0] == 185.504 and pd.isna(df["duration_us"].tolist()[1])
    diag = only(sink, "bad-value")
    assert diag.line == 3 and diag.key == "Duration(us)"
    assert diag.message == "kernel_details.csv: 1 value(s) in column 'Duration(us)' are not numbers (first: 'abc' at line 3); treated as missing"


def test_symlink_loop(tmp_path):
    d = make_rank(tmp_path / "run")
    (tmp_path / "run" / "loop").symlink_to(tmp_path / "run")
    (tmp_path / "run" / "self").symlink_to(tmp_path / "run" / "self")
    run, sink = load(tmp_path / "run")
    assert run.rank_ids == [0]
    loops = [x for x in sink if x.code == "symlink-loop"]
    assert {Path(x.path).name for x in loops} == {"loop", "self"}
    assert_rest_loaded(run, "")
    _ = d


def test_directory_with_no_profile(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "notes.txt").write_text("hello")
    run, sink = load(tmp_path / "empty")
    assert run.rank_ids == []
    diag = only(sink, "no-profile")
    assert diag.path == str(tmp_path / "empty")
    assert diag.message.startswith("no profiler output found")


def _db_rank(tmp_path: Path) -> tuple[Path, Path]:
    """A rank whose kernels are only in the DB export (made from KD_ROWS), step trace still in text."""
    from advisor_core.simulate.writers.dbexport import export_rank_db

    d = make_rank(tmp_path)
    export_rank_db(d, 0, 0, keep_text=True)
    (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()
    return d, d / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_0.db"


def _kernels_refused(d: Path, db: Path, message: str, table: str | None) -> None:
    before = db.read_bytes()
    run, sink = load(d)
    rank = run.rank(0)
    assert rank.table("kernels") is None
    assert rank.op_view() is None
    diag = only(sink, "bad-db")
    assert diag.severity == Severity.ERROR
    assert diag.path == str(db)
    assert diag.key == table
    assert diag.message == message
    # the rest of the run went on, from the text files
    assert rank.table("step_trace")["computing_us"].tolist() == [1000.5, 1001.5]
    # read-only: the file is untouched and no journal or WAL was left beside it
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.glob(db.name + "*")) == [db.name]


def test_db_not_sqlite(tmp_path):
    d, db = _db_rank(tmp_path)
    db.write_bytes(b"Step Id,Model ID\n1,2\n" * 50)
    _kernels_refused(d, db, "ascend_mindspore_profiler_0.db: is not an SQLite database", None)


def test_db_truncated(tmp_path):
    d, db = _db_rank(tmp_path)
    db.write_bytes(db.read_bytes()[: 3 * 4096 + 100])
    _kernels_refused(d, db, "ascend_mindspore_profiler_0.db: is corrupt or truncated "
                            "(SQLite: database disk image is malformed)", None)


def test_db_header_only(tmp_path):
    d, db = _db_rank(tmp_path)
    db.write_bytes(b"SQLite format 3\x00")
    _kernels_refused(d, db, "ascend_mindspore_profiler_0.db: is not an SQLite database", None)


def test_db_corrupt_pages(tmp_path):
    d, db = _db_rank(tmp_path)
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page after the header
    db.write_bytes(bytes(data))
    _kernels_refused(d, db, "ascend_mindspore_profiler_0.db: is corrupt or truncated "
                            "(SQLite: database disk image is malformed)", None)


def test_db_missing_table(tmp_path):
    import sqlite3

    d, db = _db_rank(tmp_path)
    con = sqlite3.connect(db)
    con.execute("DROP TABLE COMPUTE_TASK_INFO")
    con.commit()
    con.close()
    _kernels_refused(d, db, "ascend_mindspore_profiler_0.db: table COMPUTE_TASK_INFO: table absent "
                            "(a DB from another version, or a partial export)", "COMPUTE_TASK_INFO")


def test_db_renamed_column(tmp_path):
    import sqlite3

    d, db = _db_rank(tmp_path)
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE TASK RENAME COLUMN startNs TO start_ns")
    con.commit()
    con.close()
    _kernels_refused(d, db, "ascend_mindspore_profiler_0.db: table COMPUTE_TASK_INFO: lacks the columns for "
                            "start_ns, duration_us", "COMPUTE_TASK_INFO")


def test_db_locked(tmp_path):
    import sqlite3

    d, db = _db_rank(tmp_path)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a profiler still writing the file
    try:
        run, sink = load(d)
        assert run.rank(0).table("kernels") is None
        diag = only(sink, "bad-db")
        assert diag.message == "ascend_mindspore_profiler_0.db: is locked by another process (waited 2 s)"
        assert run.rank(0).table("step_trace")["computing_us"].tolist() == [1000.5, 1001.5]
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_db_broken_with_text_beside_it(tmp_path):
    from advisor_core.simulate.writers.dbexport import export_rank_db

    d = make_rank(tmp_path)
    (db, _) = export_rank_db(d, 0, 0, keep_text=True)
    db.write_bytes(b"not a database at all" * 40)
    run, sink = load(d)
    assert run.rank(0).table("kernels")["name"].tolist()[0] == "Default/MatMul-op0/aclnnMatmul_MatMulV2"
    diag = only(sink, "bad-db")
    assert diag.severity == Severity.WARNING
    assert diag.message == ("ascend_mindspore_profiler_0.db: is not an SQLite database; kernel_details.csv is read "
                            "instead")


def test_source_text_without_text_export(tmp_path):
    d, db = _db_rank(tmp_path)
    sink = DiagnosticSink()
    run = load_run(d, sink=sink, source="text")
    assert run.rank(0).table("kernels") is None
    assert "text-source-absent" not in {x.code for x in sink}  # step_trace.csv is text: not DB-only


def test_mixed_frameworks_refused(tmp_path):
    make_rank(tmp_path, 0)
    pt = tmp_path / "h_9_20260101120000000_ascend_pt"
    (pt / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (pt / "profiler_info_1.json").write_text("{}")
    run, sink = load(tmp_path)
    assert run.rank_ids == [0]
    assert "cannot be analysed together" in only(sink, "mixed-frameworks").message


def test_newest_directory_per_rank(tmp_path):
    old = make_rank(tmp_path, 0, name="host_1_20260101120000000_ascend_ms")
    new = make_rank(tmp_path, 0, name="host_2_20260101130000000_ascend_ms")
    run, sink = load(tmp_path)
    assert run.rank(0).path == new
    assert [s.path for s in run.profiles.superseded] == [old]
    assert "using the newest, host_2_20260101130000000_ascend_ms" in only(sink, "newest-chosen").message


def test_hostname_with_underscores(tmp_path):
    d = make_rank(tmp_path, 3, name="my_host_name_4242_20260101120000123_ascend_ms")
    ident = load(d)[0].rank(3).identity
    assert (ident.host, ident.pid, ident.collected_at) == ("my_host_name", 4242, "20260101120000123")


def _lone_profiler_info(d: Path) -> None:
    (d / "profiler_info_0.json").unlink()
    (d / "profiler_info.json").write_text('{"rank_id": 5}')


def _no_info_device_column(d: Path) -> None:
    (d / "profiler_info_0.json").unlink()
    _kd_with_device(d, 6)


def _no_info_trace_label(d: Path) -> None:
    (d / "profiler_info_0.json").unlink()
    _trace_label(d, 7)


@pytest.mark.parametrize(
    "setup, rank_id, source",
    [
        (_lone_profiler_info, 5, "profiler_info.json rank_id"),
        (_no_info_device_column, 6, "kernel_details.csv Device_id"),
        (_no_info_trace_label, 7, "trace_view.json process label NPU 7"),
    ],
    ids=["lone-profiler_info", "Device_id", "NPU-label"],
)
def test_rank_id_fallbacks_warn(tmp_path, setup, rank_id, source):
    d = make_rank(tmp_path, 0, name="rankless")
    setup(d)
    run, sink = load(d)
    assert run.rank_ids == [rank_id]
    assert run.rank(rank_id).identity.rank_source == source
    warn = only(sink, "rank-from-fallback")
    assert warn.severity == Severity.WARNING and warn.path == str(d)


def test_rank_from_directory_name(tmp_path):
    d = make_rank(tmp_path, 0, name="profile")
    (d / "profiler_info_0.json").unlink()
    wrapper = tmp_path / "rank_4"
    wrapper.mkdir()
    d.rename(wrapper / "profile")
    run, sink = load(tmp_path)
    assert run.rank_ids == [4]
    assert run.rank(4).identity.rank_source == "directory name"


def _kd_with_device(d: Path, dev: int) -> None:
    p = d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    lines = p.read_text().splitlines(keepends=True)
    p.write_text("Device_id," + lines[0] + "".join(f"{dev}," + ln for ln in lines[1:]))


def _trace_label(d: Path, dev: int) -> None:
    p = d / "ASCEND_PROFILER_OUTPUT/trace_view.json"
    p.write_text(json.dumps([{"ph": "M", "name": "process_labels", "pid": 9, "args": {"labels": f"NPU {dev}"}}, {"ph": "X", "name": "k", "pid": 9, "tid": 1, "ts": 1, "dur": 1}]))


# ---------------------------------------------------------------- quirks
def _kernels_from(tmp_path: Path, text: str, columns=None):
    d = tmp_path / "h_1_20260101120000000_ascend_ms"
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (d / "profiler_info_0.json").write_text("{}")
    (d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").write_text(text)
    run, sink = load(d)
    assert not sink.has_errors, [x.render() for x in sink]
    return run.rank(0).table("kernels", columns)


def test_quirk_trailing_tab_and_old_untabbed_start_times(tmp_path):
    text = "Name,Start Time(us),Duration(us)\na,\"1736413971558972.912\t\",1\nb,1699529622790614.8,2\nc,1699529622790614,3\n"
    df = _kernels_from(tmp_path, text, ["name", "start_ns"])
    assert df["start_ns"].tolist() == [1736413971558972912, 1699529622790614800, 1699529622790614000]


def test_quirk_more_than_three_decimals_fall_back_exactly(tmp_path):
    text = "Name,Start Time(us),Duration(us)\na,1736413971558972.9125,1\n"
    df = _kernels_from(tmp_path, text, ["start_ns"])
    assert df["start_ns"].tolist() == [1736413971558972912]


def test_quirk_quoted_shapes_and_na(tmp_path):
    text = 'Name,Duration(us),Input Shapes,Task ID\na,1,"""8,16;16""",N/A\nb,2,N/A,7\n'
    df = _kernels_from(tmp_path, text, ["input_shapes", "task_id"])
    assert df["input_shapes"].tolist()[0] == "8,16;16" and pd.isna(df["input_shapes"][1])
    assert pd.isna(df["task_id"][0]) and df["task_id"][1] == 7


@pytest.mark.parametrize("block", ["Block Dim", "Block Num"])
@pytest.mark.parametrize("step", ["Step Id", "Step ID"])
def test_quirk_header_aliases(tmp_path, block, step):
    text = f"{step},Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),{block}\n3,a,MatMul,AI_CORE,10.5,4,24\n"
    df = _kernels_from(tmp_path, text, ["step_id", "name", "type", "accelerator_core", "start_ns", "duration_us", "block_num"])
    assert df.iloc[0].tolist() == [3, "a", "MatMul", "AI_CORE", 10500, 4.0, 24]


def test_quirk_optional_device_id(tmp_path):
    with_dev = _kernels_from(tmp_path / "a", "Device_id,Name,Duration(us)\n2,a,1\n", ["device_id", "name"])
    without = _kernels_from(tmp_path / "b", "Name,Duration(us)\na,1\n", ["device_id", "name"])
    assert with_dev["device_id"].tolist() == [2]
    assert without["device_id"].isna().all() and without["name"].tolist() == ["a"]


@pytest.mark.parametrize("prefix, mac, vec", [("aic_", "aic_mac_ratio", "aiv_vec_ratio"), ("", "mac_ratio", "vec_ratio")])
def test_quirk_metric_prefixes(tmp_path, prefix, mac, vec):
    text = f"Name,Duration(us),{mac},{vec}\na,1,0.8,0.3\n"
    df = _kernels_from(tmp_path, text, ["aic_mac_ratio", "aiv_vec_ratio"])
    assert df.iloc[0].tolist() == [0.8, 0.3]


@pytest.mark.parametrize(
    "header, row, device, step",
    [
        (
            "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive)",
            "1,100,20,5,25,3,0,0,20",
            None,
            1,
        ),
        (
            "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing",
            ",100,20,5,25,3,0,0,20,7",
            None,
            None,
        ),
        (
            "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing",
            "3,1,100,20,5,25,3,0,0,20,7",
            3,
            1,
        ),
    ],
    ids=["9-columns", "10-columns-empty-step", "11-columns"],
)
def test_quirk_step_trace_column_generations(tmp_path, header, row, device, step):
    d = make_rank(tmp_path)
    (d / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv").write_text(header + "\n" + row + "\n")
    run, sink = load(d)
    assert not sink.has_errors
    st = run.rank(0).table("step_trace")
    rec = st.iloc[0]
    assert rec["computing_us"] == 100 and rec["communication_not_overlapped_us"] == 20 and rec["free_us"] == 3
    assert rec["total_us"] == 123
    assert (pd.isna(rec["device_id"]) if device is None else rec["device_id"] == device)
    assert (pd.isna(rec["step"]) if step is None else rec["step"] == step)
    assert (pd.isna(rec["preparing_us"]) if "Preparing" not in header else rec["preparing_us"] == 7)


def test_quirk_mindspore_single_whole_run_row(tmp_path):
    d = make_rank(tmp_path)
    (d / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv").write_text(STEP_10.splitlines()[0] + "\n0,500,10,0,10,5,0,0,10,0\n")
    st = load(d)[0].rank(0).table("step_trace")
    assert st["whole_run"].tolist() == [True]


@pytest.mark.parametrize("header", ["Avg. time (us)", "Avg. time(us)"])
def test_quirk_dataset_avg_time_header(tmp_path, header):
    d = make_rank(tmp_path)
    (d / "ASCEND_PROFILER_OUTPUT/dataset.csv").write_text(f"Operation,Stage,Occurrences,{header},Custom Info\nGetNext,run,10,12.5,\n")
    df = load(d)[0].rank(0).table("dataset")
    assert df[["operation", "occurrences", "avg_time_us"]].iloc[0].tolist() == ["GetNext", 10, 12.5]


@pytest.mark.parametrize("wrap", [False, True], ids=["bare-array", "traceEvents-object"])
@pytest.mark.parametrize("dur", [2.5, "2.5"], ids=["dur-number", "dur-string"])
@pytest.mark.parametrize("ts", ["1736413971558972.912", "raw-number"], ids=["ts-string", "ts-number"])
def test_quirk_trace_view_shapes(tmp_path, wrap, dur, ts):
    d = make_rank(tmp_path)
    events = [
        {"ph": "M", "name": "process_name", "pid": 5, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_labels", "pid": 5, "args": {"labels": "NPU 0"}},
        {"ph": "X", "name": "k", "pid": 5, "tid": 1, "ts": ts, "dur": dur},
    ]
    body = json.dumps({"traceEvents": events} if wrap else events)
    if ts == "raw-number":  # a JSON number Python's float cannot hold exactly
        body = body.replace('"raw-number"', "1736413971558972.912")
    (d / "ASCEND_PROFILER_OUTPUT/trace_view.json").write_text(body)
    run, sink = load(d)
    assert not sink.has_errors
    ev = run.rank(0).table("trace_events")
    assert ev[["name", "ts_ns", "dur_us", "process_name", "device_id"]].iloc[0].tolist() == [
        "k",
        1736413971558972912,
        2.5,
        "Ascend Hardware",
        0,
    ]


def test_quirk_legacy_step_trace_syscnt(tmp_path):
    d = tmp_path / "profiler"
    d.mkdir()
    (d / "step_trace_raw_0_detail_time.csv").write_text(
        "step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,fp_and_bp,tail,stream_10_0,stream_10_0_start_point,stream_10_0_end_point\n"
        "1,1000,9001000,9000000,7280000,8500000,7280000,1220000,500000,10000,8500000,8510000\n"
        "2,9001000,10808000,1807000,9026000,10400000,25000,1374000,408000,10000,10400000,10410000\n"
        "-,0,0,5403500,0,0,3652500,1297000,454000,0,0,0\n"
    )
    run, sink = load(d)
    assert not sink.has_errors
    st = run.rank(0).table("step_trace")
    assert st["step"].tolist() == [1, 2]  # the '-' average row is dropped
    # syscnt = 10 ns: 7,280,000 syscnt = 72.8 ms (the seed's ResNet-50 step gap).
    assert st["iteration_interval_us"].tolist() == [72800.0, 250.0]
    assert st["total_us"].tolist() == [90000.0, 18070.0]
    assert run.rank(0).identity.rank_source == "file names (_0)"
