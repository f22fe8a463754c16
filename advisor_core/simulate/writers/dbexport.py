"""The profiler's SQLite export of one rank, made from its text export.

MindSpore ≥ 2.5 (``export_type=[db]``) writes ``ASCEND_PROFILER_OUTPUT/ascend_mindspore_profiler_{rank}.db``
and the communication analysis (``communication_analyzer.db``; torch_npu calls it ``analysis.db``). This module writes both from a rank's
text files, with the table and column names msprof-analyze queries
(``ascend-profile-formats.md`` §4.21, msprof-analyze ``prof_common/constant.py``): strings
interned in ``STRING_IDS``, times in ns, ``TASK`` ⨝ ``COMPUTE_TASK_INFO`` on ``globalTaskId``,
communication ops in ``COMMUNICATION_OP`` (their tasks in ``TASK`` through ``connectionId``),
steps in ``STEP_TIME``, memory in ``MEMORY_RECORD``; ``CommAnalyzerTime``/``Bandwidth``/``Matrix``
and ``StepTraceTime`` in ``communication_analyzer.db`` (ms and µs, as the JSON/CSV they mirror).

It reads the files with its own header knowledge (the simulator's and the real
``kernel_details.csv`` names), not through advisor's loaders, so a round trip through the
DB checks the loaders rather than repeating them. The simulator calls it for
``--export db|both``; tests use it to build a DB from a real text sample.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

SCHEMA_VERSION = "1.1.2"
APO = "ASCEND_PROFILER_OUTPUT"

# files whose content the DB carries: removed for a DB-only export
CONVERTED = ("kernel_details.csv", "op_statistic.csv", "step_trace_time.csv", "trace_view.json", "communication.json",
             "communication_matrix.json", "memory_record.csv", "operator_memory.csv", "npu_module_mem.csv")

_K = {  # COMPUTE_TASK_INFO / TASK column ← kernel_details.csv header alternatives
    "name": ("Name", "Op Name"),
    "opType": ("Type", "OP Type"),
    "taskType": ("Accelerator Core", "Task Type"),
    "opState": ("OP State",),
    "blockNum": ("Block Num", "Block Dim"),
    "mixBlockNum": ("Mix Block Num", "Mix Block Dim"),
    "hf32Eligible": ("HF32 Eligible",),
    "inputShapes": ("Input Shapes",),
    "inputDataTypes": ("Input Data Types",),
    "inputFormats": ("Input Formats",),
    "outputShapes": ("Output Shapes",),
    "outputDataTypes": ("Output Data Types",),
    "outputFormats": ("Output Formats",),
    "start": ("Start Time(us)", "Task Start Time(us)"),
    "duration": ("Duration(us)", "Task Duration(us)"),
    "deviceId": ("Device_id", "Device id", "Device ID"),
    "modelId": ("Model ID",),
    "taskId": ("Task ID",),
    "streamId": ("Stream ID",),
    "contextId": ("Context ID",),
}
_STRING_COLS = ("name", "opType", "taskType", "opState", "hf32Eligible", "inputShapes", "inputDataTypes", "inputFormats",
                "outputShapes", "outputDataTypes", "outputFormats")
_INT_COLS = ("blockNum", "mixBlockNum", "deviceId", "modelId", "taskId", "streamId", "contextId")
_COMM_CORES = {"HCCL", "COMMUNICATION"}
_DEC = pa.decimal128(24, 3)

PROFILER_TABLES = {
    "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
    "META_DATA": "name TEXT, value TEXT",
    "TASK": ("startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER PRIMARY KEY, "
             "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER"),
    "COMPUTE_TASK_INFO": ("name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockNum INTEGER, mixBlockNum INTEGER, "
                          "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, "
                          "inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, "
                          "attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER"),
    "COMMUNICATION_OP": ("opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, groupName INTEGER, "
                         "opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER, "
                         "count NUMERIC, opType INTEGER"),
    "STEP_TIME": "id INTEGER PRIMARY KEY, startNs INTEGER, endNs INTEGER",
    "MEMORY_RECORD": ("component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER, "
                      "totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER"),
    "ENUM_HCCL_DATA_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "ENUM_HCCL_LINK_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "ENUM_HCCL_TRANSPORT_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
    "HOST_INFO": "hostUid TEXT, hostName TEXT",
}
ANALYSIS_TABLES = {
    "CommAnalyzerTime": ("hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, elapse_time NUMERIC, "
                         "transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, idle_time NUMERIC, "
                         "step TEXT, type TEXT"),
    "CommAnalyzerBandwidth": ("hccl_op_name TEXT, group_name TEXT, transport_type TEXT, transit_size NUMERIC, "
                              "transit_time NUMERIC, bandwidth NUMERIC, large_packet_ratio NUMERIC, package_size NUMERIC, "
                              "count NUMERIC, total_duration NUMERIC, step TEXT, type TEXT"),
    # MindSpore/msprof form: one row per communication op and link (msprof-analyze aggregates it itself)
    "CommAnalyzerMatrix": ("hccl_op_name TEXT, group_name TEXT, src_rank INTEGER, dst_rank INTEGER, "
                           "transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, "
                           "step TEXT"),
    "StepTraceTime": ("step TEXT, computing NUMERIC, communication_not_overlapped NUMERIC, overlapped NUMERIC, "
                      "communication NUMERIC, free NUMERIC, stage NUMERIC, bubble NUMERIC, "
                      "communication_not_overlapped_and_exclude_receive NUMERIC, preparing NUMERIC"),
}
_SOURCE_OF = {"CommAnalyzerTime": "communication.json", "CommAnalyzerBandwidth": "communication.json",
              "CommAnalyzerMatrix": "communication_matrix.json", "StepTraceTime": "step_trace_time.csv"}
_ENUMS = {
    "ENUM_HCCL_DATA_TYPE": ["INT8", "INT16", "INT32", "FP16", "FP32", "INT64", "UINT64", "UINT8", "UINT16", "UINT32",
                            "FP64", "BFP16", "INT128", "RESERVED"],
    "ENUM_HCCL_LINK_TYPE": ["ON_CHIP", "HCCS", "PCIE", "ROCE", "SIO", "HCCS_SW", "STANDARD_ROCE", "RESERVED"],
    "ENUM_HCCL_TRANSPORT_TYPE": ["SDMA", "RDMA", "LOCAL", "INVALID_TYPE"],
}


class _Strings:
    """``STRING_IDS`` being built: ``ids(array)`` interns a column's distinct values at once."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def one(self, value: str) -> int:
        return self.values.setdefault(value, len(self.values))

    def ids(self, col: pa.ChunkedArray | pa.Array) -> np.ndarray:
        enc = pc.dictionary_encode(col).combine_chunks() if isinstance(col, pa.ChunkedArray) else pc.dictionary_encode(col)
        table = np.array([self.one(v) for v in enc.dictionary.to_pylist()], dtype=np.int64)
        idx = enc.indices.to_numpy(zero_copy_only=False)
        valid = ~enc.indices.is_null().to_numpy(zero_copy_only=False)
        out = np.full(len(enc), -1, dtype=np.int64)
        if len(table):
            out[valid] = table[idx[valid].astype(np.int64)]
        return out


def _read_text_csv(path: Path) -> pa.Table:
    """Every column as text (no type guessing: a µs timestamp must not pass through a float)."""
    with open(path, encoding="utf-8", newline="") as fh:
        import csv

        header = next(csv.reader(fh), [])
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        column_types={h: pa.string() for h in header}, strings_can_be_null=True, null_values=["N/A", ""]))


def _header_index(names: list[str], alternatives: tuple[str, ...]) -> str | None:
    return next((a for a in alternatives if a in names), None)


def _us_to_ns(col: pa.ChunkedArray) -> np.ndarray:
    """``"1750000000000000.123\\t"`` µs text → exact int ns (missing → -1)."""
    text = pc.utf8_trim(col, characters='\t" ')
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
    text = pc.if_else(pc.equal(text, "N/A"), pa.scalar(None, pa.string()), text)
    dec = pc.cast(text, _DEC)
    dec = dec.combine_chunks() if isinstance(dec, pa.ChunkedArray) else dec
    # a scale-3 decimal of µs is an integer count of ns: reinterpret the scale, no float
    ns = pc.cast(dec.view(pa.decimal128(24, 0)), pa.int64())
    return np.array(ns.to_pylist(), dtype=object)


def _ints(col: pa.ChunkedArray) -> np.ndarray:
    text = pc.utf8_trim(col, characters='\t" ')
    nums = pc.cast(pc.if_else(pc.match_substring_regex(text, r"^-?\d+$"), text, pa.scalar(None, pa.string())), pa.int64())
    return np.array(nums.to_pylist(), dtype=object)


def _shape_text(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.utf8_trim(col, characters='"')


def _kernels(apo: Path, con: sqlite3.Connection, strings: _Strings, device_id: int) -> None:
    path = apo / "kernel_details.csv"
    if not path.is_file():
        return
    table = _read_text_csv(path)
    names = table.column_names
    col = {k: (table.column(h) if (h := _header_index(names, alts)) else None) for k, alts in _K.items()}
    n = table.num_rows
    start = _us_to_ns(col["start"])  # type: ignore[arg-type]
    dur = _us_to_ns(col["duration"])  # type: ignore[arg-type]
    end = np.array([s + d if s is not None and d is not None else None for s, d in zip(start, dur)], dtype=object)
    sid = {k: (strings.ids(_shape_text(c) if k.endswith("Shapes") else c) if (c := col[k]) is not None else np.full(n, -1))
           for k in _STRING_COLS}
    ints = {k: (_ints(c) if (c := col[k]) is not None else np.full(n, None, dtype=object)) for k in _INT_COLS}
    core = col["taskType"]
    is_comm = (np.isin(np.array(core.to_pylist(), dtype=object), list(_COMM_CORES)) if core is not None
               else np.zeros(n, bool))
    gid = np.arange(n, dtype=np.int64)

    def sv(a: np.ndarray) -> list[Any]:
        return [None if x is None or (isinstance(x, (int, np.integer)) and x < 0) else int(x) for x in a]

    comp = np.flatnonzero(~is_comm)
    dev = [device_id if d is None else d for d in ints["deviceId"]]
    task_rows = zip(sv(start), sv(end), dev, [None] * n, gid.tolist(), [None] * n, sv(sid["taskType"]),
                    ints["contextId"], ints["streamId"], ints["taskId"], ints["modelId"])
    conn_ids = np.full(n, None, dtype=object)
    comm_idx = np.flatnonzero(is_comm)
    conn_ids[comm_idx] = np.arange(len(comm_idx)) + 1_000_000
    task_rows = [(*r[:3], conn_ids[i], *r[4:]) for i, r in enumerate(task_rows)]
    con.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", task_rows)
    cols = {k: sv(sid[k]) for k in _STRING_COLS}
    cti = [(cols["name"][i], int(gid[i]), ints["blockNum"][i], ints["mixBlockNum"][i], cols["taskType"][i],
            cols["opType"][i], cols["inputFormats"][i], cols["inputDataTypes"][i], cols["inputShapes"][i],
            cols["outputFormats"][i], cols["outputDataTypes"][i], cols["outputShapes"][i], None, cols["opState"][i],
            cols["hf32Eligible"][i]) for i in comp.tolist()]
    con.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", cti)
    ops = [(cols["name"][i], None if start[i] is None else int(start[i]),
            None if end[i] is None else int(end[i]), int(conn_ids[i]), None, j, 0, 0, None, None, None,
            cols["opType"][i]) for j, i in enumerate(comm_idx.tolist())]
    con.executemany("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", ops)


def _steps(apo: Path, con: sqlite3.Connection) -> None:
    path = apo / "trace_view.json"
    if not path.is_file():
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    rows = []
    for ev in events:
        name = ev.get("name", "") if isinstance(ev, dict) else ""
        if name.startswith("ProfilerStep#") and ev.get("ph") == "X":
            start = int(_us_to_ns(pa.chunked_array([[str(ev["ts"])]]))[0])
            dur = int(_us_to_ns(pa.chunked_array([[str(ev.get("dur", 0))]]))[0])
            rows.append((int(name.split("#", 1)[1]), start, start + dur))
    con.executemany("INSERT OR REPLACE INTO STEP_TIME VALUES (?,?,?)", sorted(rows))


def _memory(apo: Path, con: sqlite3.Connection, strings: _Strings, device_id: int) -> None:
    path = apo / "memory_record.csv"
    if not path.is_file():
        return
    t = _read_text_csv(path)

    def mb(name: str) -> list[Any]:
        # MindSpore's "MB" is KB / 1000 (ascend-profile-formats.md §5): bytes = MB × 1000 × 1024
        if name not in t.column_names:
            return [None] * t.num_rows
        return [None if v in (None, "", "N/A") else round(float(v) * 1_024_000) for v in t.column(name).to_pylist()]

    comp = t.column("Component").to_pylist()
    ts = _us_to_ns(t.column("Timestamp(us)"))
    rows = zip([strings.one(c or "") for c in comp], [None if x is None else int(x) for x in ts],
               mb("Total Allocated(MB)"), mb("Total Reserved(MB)"), mb("Total Active(MB)"),
               [None] * t.num_rows, [device_id] * t.num_rows)
    con.executemany("INSERT INTO MEMORY_RECORD VALUES (?,?,?,?,?,?,?)", list(rows))


def _step_text(key: str) -> str:
    return key


def _communication(apo: Path, con: sqlite3.Connection) -> None:
    path = apo / "communication.json"
    if path.is_file() and _has_table(con, "CommAnalyzerTime"):
        data = json.loads(path.read_text(encoding="utf-8"))
        times, bands = [], []
        for step, groups in data.items():
            for kind, ops in (groups or {}).items():
                for key, op in (ops or {}).items():
                    if key == "Total Op Info" or not isinstance(op, dict):
                        continue
                    name, _, group = key.partition("@")
                    t = op.get("Communication Time Info") or {}
                    times.append((name, group, t.get("Start Timestamp(us)"), t.get("Elapse Time(ms)"),
                                  t.get("Transit Time(ms)"), t.get("Wait Time(ms)"), t.get("Synchronization Time(ms)"),
                                  t.get("Idle Time(ms)", t.get("Idel Time(ms)")), _step_text(step), kind))
                    for link, b in (op.get("Communication Bandwidth Info") or {}).items():
                        if isinstance(b, dict):
                            bands.append((name, group, link, b.get("Transit Size(MB)"), b.get("Transit Time(ms)"),
                                          b.get("Bandwidth(GB/s)"), b.get("Large Packet Ratio"), None, None, None,
                                          _step_text(step), kind))
        con.executemany("INSERT INTO CommAnalyzerTime VALUES (?,?,?,?,?,?,?,?,?,?)", times)
        con.executemany("INSERT INTO CommAnalyzerBandwidth VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", bands)
    path = apo / "communication_matrix.json"
    if path.is_file() and _has_table(con, "CommAnalyzerMatrix"):
        data = json.loads(path.read_text(encoding="utf-8"))
        rows, seen = [], set()
        for step, groups in data.items():
            for kind, ops in (groups or {}).items():
                for key, links in (ops or {}).items():
                    name, _, group = key.partition("@")
                    if name.endswith("-total"):  # an aggregate: its ops appear under top1/middle/bottom
                        continue
                    for link, v in (links or {}).items():
                        if not isinstance(v, dict) or not v.get("Op Name"):
                            continue
                        src, _, dst = link.partition("-")
                        row_key = (step, v["Op Name"], group, src, dst)
                        if row_key in seen:
                            continue
                        seen.add(row_key)
                        rows.append((v["Op Name"], group, int(src), int(dst), v.get("Transport Type"),
                                     v.get("Transit Size(MB)"), v.get("Transit Time(ms)"), v.get("Bandwidth(GB/s)"),
                                     _step_text(step)))
        con.executemany("INSERT INTO CommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?)", rows)


_STEP_TRACE = (("Step", "step"), ("Computing", "computing"), ("Communication(Not Overlapped)", "communication_not_overlapped"),
               ("Overlapped", "overlapped"), ("Communication", "communication"), ("Free", "free"), ("Stage", "stage"),
               ("Bubble", "bubble"),
               ("Communication(Not Overlapped and Exclude Receive)", "communication_not_overlapped_and_exclude_receive"),
               ("Preparing", "preparing"))


def _step_trace(apo: Path, con: sqlite3.Connection) -> None:
    import csv

    path = apo / "step_trace_time.csv"
    if not path.is_file():
        return
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        vals: list[Any] = [r.get("Step") or None]
        for header, _ in _STEP_TRACE[1:]:
            v = r.get(header)
            vals.append(None if v in (None, "", "N/A") else float(v))
        out.append(tuple(vals))
    con.executemany("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?)", out)


def _has_table(con: sqlite3.Connection, name: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def _create(path: Path, tables: dict[str, str]) -> sqlite3.Connection:
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    for name, cols in tables.items():
        con.execute(f"CREATE TABLE {name} ({cols})")
    return con


def export_rank_db(rank_dir: Path, rank_id: int, device_id: int, *, keep_text: bool = True) -> list[Path]:
    """Write the rank's ``ascend_mindspore_profiler_{rank}.db`` and ``analysis.db`` from its text files.

    With ``keep_text=False`` the converted text files are removed (a DB-only export, as
    ``export_type=[db]`` leaves it); MindData's files, which the DB does not carry, stay.
    """
    apo = rank_dir / APO
    prof = apo / f"ascend_mindspore_profiler_{rank_id}.db"
    con = _create(prof, PROFILER_TABLES)
    strings = _Strings()
    with con:
        _kernels(apo, con, strings, device_id)
        _steps(apo, con)
        _memory(apo, con, strings, device_id)
        con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, v) for v, i in strings.values.items()])
        con.executemany("INSERT INTO META_DATA VALUES (?,?)", [("SCHEMA_VERSION", SCHEMA_VERSION),
                                                               ("SCHEMA_VERSION_MAJOR", SCHEMA_VERSION.split(".")[0])])
        for table, names in _ENUMS.items():
            con.executemany(f"INSERT INTO {table} VALUES (?,?)", list(enumerate(names)))
        con.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?,?)", (rank_id, device_id))
        host = rank_dir.name.split("_")[0]
        con.execute("INSERT INTO HOST_INFO VALUES (?,?)", (str(int(hashlib.sha1(host.encode()).hexdigest()[:15], 16)), host))
    con.close()
    analysis = apo / "communication_analyzer.db"  # MindSpore's name (torch_npu: analysis.db)
    # a table MindSpore would not write (no communication on a single device) is left out, not left empty
    tables = {name: cols for name, cols in ANALYSIS_TABLES.items()
              if (apo / _SOURCE_OF[name]).is_file()}
    con = _create(analysis, tables)
    with con:
        if "CommAnalyzerTime" in tables or "CommAnalyzerMatrix" in tables:
            _communication(apo, con)
        if "StepTraceTime" in tables:
            _step_trace(apo, con)
    con.close()
    if not keep_text:
        for name in CONVERTED:
            (apo / name).unlink(missing_ok=True)
    return [prof, analysis]
