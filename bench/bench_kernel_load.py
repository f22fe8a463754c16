#!/usr/bin/env python3
"""Kernel-table load and ``advisor inspect`` against the floor of a bare pyarrow read.

Generates a ``kernel_details.csv`` in the real A2 format (46 columns, PipeUtilization
metrics, start times with the trailing TAB, triple-quoted shapes, HCCL rows full of
``N/A``) with N rows (default 2,000,000), then measures, each in a fresh child process
so that peak RSS is the process's own:

* floor — ``pyarrow.csv.read_csv`` of the columns the product's kernel table needs
  (``include_columns``), nothing else;
* kernels — ``load_run(dir).rank(0).table("kernels")``: header aliasing, projection,
  exact ns start times, quote stripping, N/A → missing, conversion to pandas;
* inspect — ``advisor inspect --format json`` on the rank directory.

Time is the best of ``--repeat`` runs (wall clock inside the child, imports excluded);
peak RSS is ``ru_maxrss`` of the child (imports included, for all three alike).
Targets (issue 2): kernels ≤ 1.5× the floor's time; peak RSS ≤ 1.5× the file size.

Usage: python bench/bench_kernel_load.py [--rows N] [--repeat K] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
    "Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
    "Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),"
    "aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,"
    "aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,"
    "aiv_icache_miss_rate,cube_utilization(%)\n"
)
KERNELS = [
    ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", '"""8192,4096;4096,4096"""', "DT_BF16;DT_BF16", "ND;ND", '"""8192,4096"""'),
    ("aclnnFlashAttentionScore_FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", '"""1,32,4096,128;1,32,4096,128"""', "DT_BF16;DT_BF16", "ND;ND", '"""1,32,4096,128"""'),
    ("aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE", '"""8192,4096"""', "DT_FLOAT", "ND", '"""8192,4096"""'),
    ("trans_TransData_13", "TransData", "AI_CORE", '"""4096,4100"""', "DT_BF16", "ND", '"""257,256,16,16"""'),
    ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", '"""8192,4096;8192,4096"""', "DT_BF16;DT_BF16", "ND;ND", '"""8192,4096"""'),
]
HCCL = "hcom_allReduce__{i}_0_1"
# The columns rules use by default (advisor_core.loaders.kernels.KERNEL_DEFAULT_COLUMNS), as file headers.
NEEDED = [
    "Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
    "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Formats",
]


def generate(path: Path, rows: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    t = 1736413971558972912  # ns
    tail = ",".join(["0.5"] * 23)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER)
        buf = []
        for i in range(rows):
            step = 1 + i * 10 // rows
            dur = rng.randint(2_000, 900_000)  # ns
            t += dur + rng.randint(500, 3_000)
            start = f"{t // 1000}.{t % 1000:03d}"
            if i % 97 == 0:
                buf.append(
                    f'{step},4294967295,N/A,N/A,{HCCL.format(i=i)},hcom_allReduce_,N/A,HCCL,"{start}\t",{dur / 1000:.3f},0,0,'
                    + ",".join(["N/A"] * 34)
                    + "\n"
                )
            else:
                name, typ, core, ishape, idt, ifmt, oshape = KERNELS[i % len(KERNELS)]
                buf.append(
                    f'{step},4294967295,{i % 65536},2,{name},{typ},dynamic,{core},"{start}\t",{dur / 1000:.3f},{rng.random():.3f},'
                    f"20,0,NO,{ishape},{idt},{ifmt},{oshape},DT_BF16,ND,N/A,{dur / 1000:.3f},{dur * 2},{tail}\n"
                )
            if len(buf) >= 50_000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))


CHILD = r"""
import json, resource, sys, time
mode, path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
needed = json.loads(sys.argv[4])
import pyarrow.csv as pacsv
if mode != "floor":
    import advisor_core.model.run, advisor_core.cli  # imports outside the timed region
best = float("inf")
rows = None
for _ in range(repeat):
    t0 = time.perf_counter()
    if mode == "floor":
        tbl = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(include_columns=needed))
        rows = tbl.num_rows
        del tbl
    elif mode == "kernels":
        from advisor_core.model.run import load_run
        df = load_run(path).rank(0).table("kernels")
        rows = len(df)
        del df
    else:
        import io, contextlib
        from advisor_core.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
            code = main(["inspect", "--format", "json", "--no-ir", path])
        rows = json.loads(out.getvalue())["ranks"][0]["tables"][0]["rows"]
    best = min(best, time.perf_counter() - t0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": best, "peak_rss": peak, "rows": rows}))
"""


def measure(mode: str, target: str, repeat: int) -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, target, str(repeat), json.dumps(NEEDED)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="generate into this directory and keep the file")
    args = ap.parse_args()

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="advisor-bench-"))
    rank_dir = tmp / "bench_1_20260101000000000_ascend_ms"
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    (rank_dir / "profiler_info_0.json").write_text('{"ms_version": "2.5.0"}')
    csv_path = out / "kernel_details.csv"
    t0 = time.perf_counter()
    if not csv_path.exists():
        generate(csv_path, args.rows)
    size = csv_path.stat().st_size
    print(f"kernel_details.csv: {args.rows:,} rows, {size / 1e6:,.1f} MB (generated in {time.perf_counter() - t0:.1f} s)")
    print(f"projection: {len(NEEDED)} of 46 columns; best of {args.repeat} runs; cores: {os.cpu_count()}")

    floor = measure("floor", str(csv_path), args.repeat)
    kern = measure("kernels", str(rank_dir), args.repeat)
    insp = measure("inspect", str(rank_dir), max(1, args.repeat - 1))
    assert floor["rows"] == kern["rows"] == insp["rows"] == args.rows, (floor, kern, insp)

    print(f"{'':28}{'time (s)':>10}{'× floor':>10}{'peak RSS (MB)':>16}{'× file size':>14}")
    for label, m in (("floor: pyarrow read_csv", floor), ("kernel table load", kern), ("advisor inspect", insp)):
        print(
            f"{label:28}{m['seconds']:>10.3f}{m['seconds'] / floor['seconds']:>10.2f}"
            f"{m['peak_rss'] / 1e6:>16.1f}{m['peak_rss'] / size:>14.2f}"
        )
    ok_time = kern["seconds"] <= 1.5 * floor["seconds"]
    ok_mem = kern["peak_rss"] <= 1.5 * size and insp["peak_rss"] <= 1.5 * size
    print(f"target kernel load ≤ 1.5× floor: {'met' if ok_time else 'NOT met'}; peak RSS ≤ 1.5× file size: {'met' if ok_mem else 'NOT met'}")
    if not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
