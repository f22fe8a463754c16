#!/usr/bin/env python3
"""Kernel table of a 1 M-row rank: from the SQLite export vs from ``kernel_details.csv``, each against its floor.

Generates the rank of ``bench_kernel_load.py`` (real A2 ``kernel_details.csv``, ~1 % HCCL rows), then
builds the DB export from it (``ascend_mindspore_profiler_0.db``: ``TASK``, ``COMPUTE_TASK_INFO``,
``COMMUNICATION_OP``, ``STRING_IDS``) and measures, each in a fresh child process (best of ``--repeat``
inside the child, imports excluded; wall time, CPU time of all the child's threads, peak RSS):

* CSV floor — ``pyarrow.csv.read_csv`` of the columns the kernel table needs;
* CSV path — ``rank.table("kernels")`` with ``--source text`` (the default columns);
* DB floor — ``sqlite3`` fetching the same columns (``COMPUTE_TASK_INFO`` ⨝ ``TASK`` plus
  ``COMMUNICATION_OP``, string ids undecoded) into Python rows, nothing else;
* DB path — ``rank.table("kernels")`` with ``--source db`` (the same default columns);
* both again as the Arrow table the op view is built from (``rank.arrow_table("kernels")``: text
  columns dictionary-encoded, no pandas copy) — what ``advisor analyze`` reads.

The children run in ``--rounds`` interleaved rounds (every mode once per round) and each mode keeps
its best round, so a burst of load from other processes on a shared machine does not land on one
path only. Printed: each path's ratio to its own floor, and DB path ÷ CSV path for wall and for CPU
time (target: ≤ 1.0, the DB is not slower).

Usage: python bench/bench_db_load.py [--rows 1000000] [--repeat 2] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from bench_kernel_load import NEEDED, generate  # noqa: E402

DB_FLOOR_SQL = [
    "SELECT t.startNs, t.endNs, t.streamId, c.name, c.opType, c.taskType, c.inputShapes, c.inputDataTypes, "
    "c.inputFormats, c.outputShapes, c.outputFormats FROM COMPUTE_TASK_INFO AS c JOIN TASK AS t "
    "ON t.globalTaskId = c.globalTaskId",
    "SELECT startNs, endNs, opName, opType FROM COMMUNICATION_OP",
]

CHILD = r"""
import json, resource, sys, time
mode, rank_dir, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
extra = json.loads(sys.argv[4])
import sqlite3
import pyarrow.csv as pacsv
import advisor_core.model.run, advisor_core.loaders.db_tables  # imports outside the timed region
from advisor_core.model.run import load_run
best, best_cpu, rows = float("inf"), float("inf"), None
for _ in range(repeat):
    t0, c0 = time.perf_counter(), time.process_time()
    if mode == "csv_floor":
        tbl = pacsv.read_csv(rank_dir + "/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                             convert_options=pacsv.ConvertOptions(include_columns=extra))
        rows = tbl.num_rows
        del tbl
    elif mode == "db_floor":
        con = sqlite3.connect("file:" + rank_dir + "/ASCEND_PROFILER_OUTPUT/ascend_mindspore_profiler_0.db?mode=ro",
                              uri=True)
        got = [con.execute(sql).fetchall() for sql in extra]
        rows = sum(len(g) for g in got)
        con.close()
        del got
    elif mode.endswith("_arrow"):  # what the op view reads: Arrow, text columns dictionary-encoded
        t = load_run(rank_dir, source=mode[:-6]).rank(0).arrow_table("kernels")
        rows = t.num_rows
        del t
    else:
        df = load_run(rank_dir, source=mode).rank(0).table("kernels")
        rows = len(df)
        del df
    best = min(best, time.perf_counter() - t0)
    best_cpu = min(best_cpu, time.process_time() - c0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
try:  # ru_maxrss survives exec on Linux (it would be the parent's peak): the child's own high-water mark
    peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    pass
print(json.dumps({"seconds": best, "cpu": best_cpu, "peak_rss": peak, "rows": rows}))
"""


def measure(mode: str, rank_dir: Path, repeat: int, extra: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(rank_dir), str(repeat), json.dumps(extra)],
                         check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def prepare(base: Path, rows: int) -> Path:
    from advisor_core.simulate.writers.dbexport import export_rank_db

    rank = base / "host_100_20260101120000000_ascend_ms"
    apo = rank / "ASCEND_PROFILER_OUTPUT"
    csv = apo / "kernel_details.csv"
    db = apo / "ascend_mindspore_profiler_0.db"
    if not (csv.is_file() and db.is_file()):
        apo.mkdir(parents=True, exist_ok=True)
        (rank / "profiler_info_0.json").write_text(json.dumps({"ms_version": "2.5.0", "profiler_parameters": {}}))
        t0 = time.perf_counter()
        generate(csv, rows)
        t1 = time.perf_counter()
        export_rank_db(rank, 0, 0, keep_text=True)
        print(f"generated {rows:,} rows in {t1 - t0:.1f} s, DB export in {time.perf_counter() - t1:.1f} s")
    print(f"kernel_details.csv {csv.stat().st_size / 2**20:,.0f} MiB, "
          f"ascend_mindspore_profiler_0.db {db.stat().st_size / 2**20:,.0f} MiB")
    return rank


MODES = ("csv_floor", "text", "db_floor", "db", "text_arrow", "db_arrow")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2, help="timed loads per child process (best kept)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of child processes (best kept)")
    ap.add_argument("--keep", type=Path, help="generate into this directory and keep the files")
    args = ap.parse_args()
    tmp = None
    if args.keep is None:
        tmp = tempfile.TemporaryDirectory()
        base = Path(tmp.name)
    else:
        base = args.keep
    rank = prepare(base, args.rows)
    extra = {"csv_floor": NEEDED, "db_floor": DB_FLOOR_SQL}
    res: dict[str, dict] = {}
    for _ in range(args.rounds):
        for mode in MODES:
            r = measure(mode, rank, args.repeat, extra.get(mode, []))
            best = res.setdefault(mode, r)
            best["seconds"] = min(best["seconds"], r["seconds"])
            best["cpu"] = min(best["cpu"], r["cpu"])
            best["peak_rss"] = max(best["peak_rss"], r["peak_rss"])
    for label, key, floor in (("CSV floor (pyarrow read_csv)", "csv_floor", None), ("CSV path (--source text)", "text", "csv_floor"),
                              ("DB floor (sqlite3 fetchall)", "db_floor", None), ("DB path (--source db)", "db", "db_floor"),
                              ("CSV, Arrow for the op view", "text_arrow", "csv_floor"),
                              ("DB, Arrow for the op view", "db_arrow", "db_floor")):
        r = res[key]
        ratio = f"{r['seconds'] / res[floor]['seconds']:5.2f}x its floor" if floor else " " * 16
        print(f"{label:<30} {r['seconds']:7.2f} s  {ratio}  CPU {r['cpu']:5.2f} s  "
              f"peak RSS {r['peak_rss'] / 2**20:6.0f} MiB  rows {r['rows']:,}")
    for what, db, text in (("pandas table", "db", "text"), ("Arrow table (what analyze reads)", "db_arrow", "text_arrow")):
        print(f"DB path / CSV path, {what}: wall {res[db]['seconds'] / res[text]['seconds']:.2f}, "
              f"CPU {res[db]['cpu'] / res[text]['cpu']:.2f} (target <= 1.0)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
