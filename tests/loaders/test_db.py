"""The SQLite export read as a first-class source: the same tables as the text export.

A DB is built by hand from real ``kernel_details.csv`` samples (msprof-analyze's test data, strings
interned through ``STRING_IDS``); read back, it must give the text loader's kernel table value for
value. Plus: the ``blockDim`` → ``blockNum`` rename, SQL projection, and which export a rank reads.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.model.run import load_run
from advisor_core.simulate.writers.dbexport import export_rank_db

SAMPLES = ["ut__advisor__advisor_backend__compute_advice", "ut__advisor__compute_advice__data"]
# columns only the text export carries as written: the CANN wait time (the DB route derives it from
# the task intervals) and the step id (the DB route takes it from STEP_TIME, absent without a trace)
DERIVED = {"wait_us", "step_id"}


def _rank_from_sample(tmp_path: Path, msprof: Path, sample: str) -> Path:
    d = tmp_path / "host_100_20260101120000000_ascend_ms"
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (d / "profiler_info_0.json").write_text(json.dumps({"ms_version": "2.5.0", "profiler_parameters": {}}))
    shutil.copy(msprof / sample / "kernel_details.csv", d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    export_rank_db(d, 0, 0, keep_text=True)
    return d


def _same(a: pd.Series, b: pd.Series) -> bool:
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    both_missing = a.isna().to_numpy() & b.isna().to_numpy()
    eq = (a.astype(object).where(a.notna(), None) == b.astype(object).where(b.notna(), None)).to_numpy()
    return bool((eq | both_missing).all())


@pytest.mark.parametrize("sample", SAMPLES)
def test_real_sample_through_string_ids_gives_the_text_table(tmp_path, msprof, sample):
    d = _rank_from_sample(tmp_path, msprof, sample)
    text = load_run(d, source="text").rank(0)
    db = load_run(d, source="db").rank(0)
    assert text.table_source("kernels")[1] == "kernel_details"
    assert db.table_source("kernels")[1] == "profiler_db"
    # the DB route returns tasks in start order; the sample's rows are not all in that order
    t = text.table("kernels", text.columns("kernels")).sort_values(["start_ns", "name"], kind="stable")
    k = db.table("kernels", [c for c in text.columns("kernels") if c in db.columns("kernels")])
    k = k.sort_values(["start_ns", "name"], kind="stable")
    assert len(k) == len(t) > 0
    compared = [c for c in t.columns if c in k.columns and c not in DERIVED]
    assert {"name", "type", "accelerator_core", "start_ns", "duration_us", "input_shapes", "output_dtypes",
            "block_num", "stream_id"} <= set(compared)
    # communication ops live in COMMUNICATION_OP: name, type, times; their ids, dims and shapes are not in it
    comm = t["accelerator_core"].isin(["HCCL", "COMMUNICATION"]).to_numpy()
    for col in compared:
        rows = slice(None) if col in ("name", "type", "accelerator_core", "start_ns", "duration_us") else ~comm
        assert _same(k[col][rows], t[col][rows]), col
        assert k[col].dtype == t[col].dtype, col
    # the strings really went through STRING_IDS
    con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_0.db")
    n_strings = con.execute("SELECT COUNT(*) FROM STRING_IDS").fetchone()[0]
    name_type = con.execute("SELECT typeof(name) FROM COMPUTE_TASK_INFO LIMIT 1").fetchone()[0]
    con.close()
    assert name_type == "integer"
    assert n_strings == len(pd.unique(pd.concat([t[c].dropna().astype(str) for c in
                                                 ("name", "type", "accelerator_core")]))) + \
        len(set().union(*[set(t[c].dropna().astype(str)) for c in t.columns
                          if c.startswith(("input_", "output_", "op_state", "hf32"))]) -
            set(pd.concat([t[c].dropna().astype(str) for c in ("name", "type", "accelerator_core")])))


def test_real_sample_op_view_is_the_same(tmp_path, msprof):
    d = _rank_from_sample(tmp_path, msprof, SAMPLES[0])
    a = load_run(d, source="text").rank(0).op_view().ops
    b = load_run(d, source="db").rank(0).op_view().ops
    cols = ["name", "type", "accelerator_core", "count", "total_us", "min_us", "max_us", "in_shapes", "out_dtypes"]
    a = a.sort_values(["name", "total_us"]).reset_index(drop=True)
    b = b.sort_values(["name", "total_us"]).reset_index(drop=True)
    assert len(a) == len(b) == 201
    for c in cols:
        assert a[c].astype(str).tolist() == b[c].astype(str).tolist(), c


def test_block_dim_and_block_num_both_read(tmp_path, msprof):
    d = _rank_from_sample(tmp_path, msprof, SAMPLES[1])
    db = d / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_0.db"
    want = load_run(d, source="db").rank(0).table("kernels", ["block_num"])["block_num"].tolist()
    text = load_run(d, source="text").rank(0).table("kernels", ["start_ns", "block_num"]).sort_values("start_ns")
    assert want == text["block_num"].tolist()
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE COMPUTE_TASK_INFO RENAME COLUMN blockNum TO blockDim")  # CANN before the rename
    con.commit()
    con.close()
    assert load_run(d, source="db").rank(0).table("kernels", ["block_num"])["block_num"].tolist() == want
    assert want[:3] == [20, 40, 40]


def test_only_the_columns_asked_for_are_queried(tmp_path, msprof, monkeypatch):
    from advisor_core.loaders import dbfile

    d = _rank_from_sample(tmp_path, msprof, SAMPLES[1])
    seen: list[str] = []
    real = dbfile.query_arrow
    monkeypatch.setattr(dbfile, "query_arrow", lambda path, sql, split=None: seen.append(sql) or real(path, sql, split))
    rank = load_run(d, source="db").rank(0)
    df = rank.table("kernels", ["name", "duration_us"])
    assert list(df.columns) == ["name", "duration_us"]
    assert seen[0] == ("SELECT t.startNs, t.endNs, c.name FROM COMPUTE_TASK_INFO AS c JOIN TASK AS t "
                       "ON t.globalTaskId = c.globalTaskId")


def test_auto_prefers_the_db_and_says_so(tmp_path, msprof):
    d = _rank_from_sample(tmp_path, msprof, SAMPLES[1])
    sink = DiagnosticSink()
    rank = load_run(d, sink=sink).rank(0)
    assert rank.table_source("kernels")[0].name == "ascend_mindspore_profiler_0.db"
    info = [x for x in sink if x.code == "db-and-text"]
    assert len(info) == 1 and "read from the DB export (ascend_mindspore_profiler_0.db, communication_analyzer.db)" in info[0].message
    # a table the DB does not hold (no StepTraceTime rows written without a step_trace_time.csv: the table is
    # there, empty) — and MindData's files are always text
    assert load_run(d, source="text").rank(0).table_source("kernels")[0].name == "kernel_details.csv"


def test_db_only_cli_inspect_names_the_db(tmp_path, msprof):
    from click.testing import CliRunner

    from advisor_core.cli import cli

    d = _rank_from_sample(tmp_path, msprof, SAMPLES[1])
    (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()
    res = CliRunner().invoke(cli, ["inspect", str(d), "--format", "json", "--no-ir"], catch_exceptions=False)
    report = json.loads(res.stdout)
    (rank,) = report["ranks"]
    tables = {t["table"]: t for t in rank["tables"]}
    assert tables["kernels"]["artifact"] == "profiler_db"
    assert tables["kernels"]["rows"] == 29
    assert tables["kernels"]["path"].endswith("ASCEND_PROFILER_OUTPUT/ascend_mindspore_profiler_0.db")


@pytest.mark.parametrize("source, file, rows", [("auto", "kernel_details.csv", 591), ("text", "kernel_details.csv", 591),
                                                 ("db", "ascend_mindspore_profiler_0.db", 19)])
def test_cli_source_with_an_empty_compute_task_table(tmp_path, msprof, source, file, rows):
    from click.testing import CliRunner

    from advisor_core.cli import cli

    d = _rank_from_sample(tmp_path, msprof, SAMPLES[0])
    con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_0.db")
    con.execute("DELETE FROM COMPUTE_TASK_INFO")  # the tasks lost, the 19 communication ops kept
    con.commit()
    con.close()
    res = CliRunner().invoke(cli, ["inspect", str(d), "--format", "json", "--no-ir", "--source", source],
                             catch_exceptions=False)
    report = json.loads(res.stdout)
    (rank,) = report["ranks"]
    tables = {t["table"]: t for t in rank["tables"]}
    assert (Path(tables["kernels"]["path"]).name, tables["kernels"]["rows"]) == (file, rows)
    if source != "text":  # the tables the DB holds in full still come from it
        assert Path(tables["op_statistic"]["path"]).name == "ascend_mindspore_profiler_0.db"
    said = [x["message"] for x in report["diagnostics"] if x["code"] == "db-partial"]
    if source == "auto":
        assert said == ["kernels: ascend_mindspore_profiler_0.db: COMPUTE_TASK_INFO is empty (19 against 591 rows); "
                        "read from kernel_details.csv instead (--source db to force the DB)"]
    else:
        assert said == []


def test_auto_reads_the_text_when_the_db_has_fewer_rows(tmp_path, msprof):
    d = _rank_from_sample(tmp_path, msprof, SAMPLES[0])
    con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_0.db")
    con.execute("DELETE FROM COMPUTE_TASK_INFO WHERE globalTaskId % 2 = 0")
    con.commit()
    con.close()
    sink = DiagnosticSink()
    rank = load_run(d, sink=sink).rank(0)
    assert rank.table_source("kernels")[0].name == "kernel_details.csv"
    assert len(rank.table("kernels", ["name"])) == 591
    (msg,) = [x.message for x in sink if x.code == "db-partial"]
    assert msg.startswith("kernels: ascend_mindspore_profiler_0.db: fewer rows than the text export (")
    # complete again (as written): the DB is read, and nothing is said
    d2 = _rank_from_sample(tmp_path / "complete", msprof, SAMPLES[0])
    sink2 = DiagnosticSink()
    assert load_run(d2, sink=sink2).rank(0).table_source("kernels")[0].name == "ascend_mindspore_profiler_0.db"
    assert not [x for x in sink2 if x.code == "db-partial"]


def test_split_fetch_gives_the_single_fetch(tmp_path, msprof, monkeypatch):
    from advisor_core.loaders import dbfile

    d = _rank_from_sample(tmp_path, msprof, SAMPLES[0])
    whole = load_run(d, source="db").rank(0).table("kernels")
    monkeypatch.setattr(dbfile, "SPLIT_MIN_ROWS", 10)
    monkeypatch.setattr(dbfile.os, "cpu_count", lambda: 3)
    split = load_run(d, source="db").rank(0).table("kernels")
    pd.testing.assert_frame_equal(split, whole)
    assert len(whole) == 591


def _files(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


def _inspect_kernels(d: Path) -> dict:
    from click.testing import CliRunner

    from advisor_core.cli import cli

    res = CliRunner().invoke(cli, ["inspect", str(d), "--format", "json", "--no-ir"], catch_exceptions=False)
    (rank,) = json.loads(res.stdout)["ranks"]
    return {t["table"]: t for t in rank["tables"]}["kernels"]


def test_wal_mode_db_leaves_the_profile_directory_as_it_was(tmp_path, msprof):
    d = _rank_from_sample(tmp_path, msprof, SAMPLES[1])
    (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()
    for db in (d / "ASCEND_PROFILER_OUTPUT").glob("*.db"):
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        con.close()  # the last connection checkpoints: no -wal, no -shm, the header says WAL
    before = _files(d)
    kernels = _inspect_kernels(d)
    assert kernels["artifact"] == "profiler_db" and kernels["rows"] == 29
    assert load_run(d, source="db").rank(0).table("kernels", ["name"])["name"].iloc[0] is not None
    after = _files(d)
    assert sorted(after) == sorted(before)  # no -shm (32 KB) or -wal (0 B) left beside the databases
    assert after == before


def test_wal_content_not_yet_in_the_db_file_is_read_from_a_copy(tmp_path, msprof):
    d = _rank_from_sample(tmp_path / "a", msprof, SAMPLES[1])
    (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()
    db = d / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_0.db"
    first = load_run(d, source="db").rank(0).table("kernels", ["name"])["name"].iloc[0]
    live = tmp_path / "live"
    shutil.copytree(d, live)
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE STRING_IDS SET value = 'CommittedOnlyInTheWal' WHERE value = ?", (first,))
    writer.commit()
    for suffix in ("", "-wal"):  # the files as a crashed or still-running writer leaves them
        shutil.copyfile(db.with_name(db.name + suffix), live / "ASCEND_PROFILER_OUTPUT" / (db.name + suffix))
    writer.close()
    assert (live / "ASCEND_PROFILER_OUTPUT" / (db.name + "-wal")).stat().st_size > 0
    before = _files(live)
    names = load_run(live, source="db").rank(0).table("kernels", ["name"])["name"]
    assert names.iloc[0] == "CommittedOnlyInTheWal" and first not in set(names)
    assert _inspect_kernels(live)["rows"] == 29
    assert _files(live) == before


def test_packed_string_ids_read_as_unpacked_ones(tmp_path, msprof, monkeypatch):
    from advisor_core.loaders import db_kernels

    d = _rank_from_sample(tmp_path, msprof, SAMPLES[0])
    con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler_0.db")
    top = con.execute("SELECT MAX(id) FROM STRING_IDS").fetchone()[0]
    # a NULL, a negative "none" marker and an id past the table: all three read as missing
    con.execute("UPDATE COMPUTE_TASK_INFO SET opType = NULL WHERE globalTaskId = (SELECT MIN(globalTaskId) "
                "FROM COMPUTE_TASK_INFO)")
    con.execute("UPDATE COMPUTE_TASK_INFO SET inputShapes = -1, outputFormats = ? WHERE globalTaskId = "
                "(SELECT MAX(globalTaskId) FROM COMPUTE_TASK_INFO)", (top + 3,))
    con.commit()
    con.close()
    sql: list[str] = []
    real = db_kernels.dbfile.query_arrow
    monkeypatch.setattr(db_kernels.dbfile, "query_arrow", lambda p, q, split=None: sql.append(q) or real(p, q, split))
    packed = load_run(d, source="db").rank(0).table("kernels")
    # 9-bit ids (this sample interns < 511 strings): seven text columns in one value, the eighth as it is
    assert sql[0].count("IFNULL") == 7 and sql[0].endswith(", c.outputFormats FROM COMPUTE_TASK_INFO AS c JOIN TASK "
                                                          "AS t ON t.globalTaskId = c.globalTaskId")
    monkeypatch.setattr(db_kernels._Packing, "of", classmethod(lambda cls, strings, texts: cls(63, 1, texts)))
    plain = load_run(d, source="db").rank(0).table("kernels")
    assert "IFNULL" not in sql[-1]
    pd.testing.assert_frame_equal(packed, plain)
    assert int(packed["type"].isna().sum()) == 1  # the NULL (communication ops have their type)
    last = packed[packed["accelerator_core"] != "HCCL"].sort_values("start_ns").iloc[-1]
    assert pd.isna(last["input_shapes"]) and pd.isna(last["output_formats"]) and pd.notna(last["name"])


def test_merge_puts_compute_tasks_before_communication_ops_at_the_same_start():
    from advisor_core.loaders.db_kernels import _Merge

    task, comm = np.array([10, 20, 20, 30]), np.array([5, 20, 35])
    merge = _Merge(task, comm)  # both parts in start order: scattered, not sorted
    assert merge.order is None and merge(task, comm).tolist() == [5, 10, 20, 20, 20, 30, 35]
    assert merge(np.array([1, 2, 3, 4]), np.array([-1, -2, -3])).tolist() == [-1, 1, 2, 3, -2, 4, -3]
    values, mask = merge.masked(np.array([1, 2, 3, 4]), None, np.zeros(3, np.int64), np.ones(3, bool))
    assert mask.tolist() == [True, False, False, False, True, False, True]
    unsorted = _Merge(np.array([20, 10]), np.array([10]))  # a part out of order: a stable sort, the same rule
    assert unsorted.order is not None and unsorted(np.array([1, 2]), np.array([-1])).tolist() == [2, -1, 1]


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NAMES = st.text(alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters="/_-.:"), min_size=1,
                 max_size=24)
_ROW = st.tuples(_NAMES, st.sampled_from(["MatMulV2", "Cast", "TransData", "hcom_allReduce_"]),
                 st.sampled_from(["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "HCCL", "AI_CPU"]),
                 st.integers(0, 10**9), st.integers(0, 5 * 10**7),
                 st.lists(st.integers(1, 70000), min_size=0, max_size=4), st.integers(0, 48))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_ROW, min_size=1, max_size=30))
def test_any_kernel_rows_round_trip_through_the_db(tmp_path_factory, rows):
    d = tmp_path_factory.mktemp("h") / "host_100_20260101120000000_ascend_ms"
    apo = d / "ASCEND_PROFILER_OUTPUT"
    apo.mkdir(parents=True)
    (d / "profiler_info_0.json").write_text("{}")
    lines = ["Step ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,"
             "Input Shapes,Input Data Types"]
    base = 1736413971558972912
    for i, (name, typ, core, start, dur, shape, block) in enumerate(rows):
        comm = core == "HCCL"
        t = base + start
        lines.append(",".join([
            "1", "N/A" if comm else str(i), "N/A" if comm else "2", name, typ, core, f'"{t // 1000}.{t % 1000:03d}\t"',
            f"{dur // 1000}.{dur % 1000:03d}", "0" if comm else str(block),
            "N/A" if comm else '"""' + ",".join(map(str, shape)) + '"""', "N/A" if comm else "DT_BF16"]))
    (apo / "kernel_details.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    export_rank_db(d, 0, 0, keep_text=True)
    cols = ["name", "type", "accelerator_core", "start_ns", "duration_us", "block_num", "input_shapes", "input_dtypes",
            "task_id"]
    t = load_run(d, source="text").rank(0).table("kernels", cols)
    k = load_run(d, source="db").rank(0).table("kernels", cols)
    order_t = t.assign(_i=range(len(t))).sort_values(["start_ns", "_i"], kind="stable").drop(columns="_i")
    comm = order_t["accelerator_core"].eq("HCCL").to_numpy()
    assert len(k) == len(t)
    for col in cols:
        rows_ = slice(None) if col in ("name", "type", "accelerator_core", "start_ns", "duration_us") else ~comm
        a, b = k[col].reset_index(drop=True)[rows_], order_t[col].reset_index(drop=True)[rows_]
        assert a.astype(object).where(a.notna(), None).tolist() == b.astype(object).where(b.notna(), None).tolist(), col
