"""Benchmark ``advisor analyze`` at scale against the cost of reading the kernel table.

Single rank: simulated real-format profiles (MindSpore ``*_ascend_ms`` layout, full
46-column ``kernel_details.csv`` header, ``trace_view.json``, step trace, MindData and
memory files) of a 40-layer Llama-like network on one device, at about 200 k, 1 M and
4 M kernel rows (Cast, TransData and MatMul rows with shapes and formats: the
kitchen-sink scenario's faults). For each size the floor is a bare
``pyarrow.csv.read_csv`` of the same ``kernel_details.csv`` (default options, every
column) in a fresh process; ``advisor analyze`` runs in a fresh process too. Printed:
wall time as a ratio to the floor's, peak RSS as a ratio to the CSV's size (and to the
floor's RSS). Targets: time ≤ 1.5× the floor at 1 M and 4 M rows, RSS ≤ 1.5× the file.

Cluster: 16 ranks × ~100 k rows, ``--jobs 1`` against ``--jobs 2`` (target: ≤ 0.6×),
and the two JSON reports compared byte for byte.

The runs of what is compared (floor and analyze; ``--jobs 1`` and ``--jobs 2``) alternate, ``--repeat``
times, so a machine that slows down or speeds up during the bench slows both sides alike. Printed:
the ratio of the best runs of each side, and the median of the ratios of the runs made next to each
other (the machine is shared; run it quiet)::

    python bench/bench_analyze.py [--quick] [--keep DIR] [--code DIR] [--skip-cluster]

``--quick`` uses 100 k / 200 k rows and 4 × 50 k ranks (a smoke run). ``--code DIR`` runs
``analyze`` from another checkout (PYTHONPATH), to measure before/after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS_PER_STEP_40_LAYERS = 38_326  # kitchen-sink at 40 layers, dp1 mp1 pp1: kernel rows per step

FLOOR = r"""
import sys, time, resource
import pyarrow.csv as pacsv
t = time.perf_counter()
table = pacsv.read_csv(sys.argv[1])
el = time.perf_counter() - t
print(el, table.num_rows)
"""


def _spawn_measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Run ``cmd`` and return (wall s, peak RSS bytes of the process and its children, output)."""
    t = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as out:
        pid = os.fork()
        if pid == 0:  # child: exec the command with stdout/stderr to the file
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                os.execvpe(cmd[0], cmd, env or os.environ)
            finally:
                os._exit(127)
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - t
        out.seek(0)
        text = out.read()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {code}: {text[-3000:]}")
    return wall, usage.ru_maxrss * 1024, text


def _alternating(repeat: int, *fns):  # type: ignore[no-untyped-def]
    """Run ``fns`` in turn, ``repeat`` rounds, every other round in reverse order (what runs second in a round
    finds the page cache as the first left it): per fn its best run (least wall time) and its largest peak
    RSS; and per later fn the median, over the rounds, of its wall time over the first fn's in the same round."""
    rounds = []
    for r in range(repeat):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        runs = {i: fns[i]() for i in order}
        rounds.append([runs[i] for i in range(len(fns))])
    best = [min((r[i] for r in rounds), key=lambda run: run[0]) for i in range(len(fns))]
    peak = [max(r[i][1] for r in rounds) for i in range(len(fns))]
    paired = [statistics.median(r[i][0] / r[0][0] for r in rounds) for i in range(1, len(fns))]
    return best, peak, paired


def _simulate(out: Path, ranks: int, steps: int, layers: int, env: dict[str, str]) -> None:
    sets = ["parallel_config.model_parallel=1", "parallel_config.pipeline_stage=1", "parallel_config.micro_batch_num=1"]
    cmd = [sys.executable, "-m", "advisor_core", "simulate", "kitchen-sink", "-o", str(out), "--ranks", str(ranks),
           "--steps", str(steps), "--layers", str(layers), "--force"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, capture_output=True, env=env)


def _kernel_files(profile: Path) -> list[Path]:
    return sorted(profile.rglob("kernel_details.csv"))


def _rows(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b"")) - 1


def single_rank(base: Path, rows_wanted: int, repeat: int, env: dict[str, str], code_env: dict[str, str],
                timings: bool) -> dict:
    out = base / f"rank-{rows_wanted}"
    steps = max(1, round(rows_wanted / ROWS_PER_STEP_40_LAYERS))
    if not (out / "profile").exists():
        _simulate(out, 1, steps, 40, env)
    (csv,) = _kernel_files(out / "profile")
    size = csv.stat().st_size
    rows = _rows(csv)
    report = out / "report.json"
    # default --jobs: one rank stays in one process, with Arrow's reader on every core (as the floor's read_csv)
    cmd = [sys.executable, "-m", "advisor_core", "analyze", str(out / "profile"), "--format", "json", "-o", str(report),
           "--quiet"] + (["--timings"] if timings else [])
    best, peak, (paired,) = _alternating(repeat, lambda: _spawn_measured([sys.executable, "-c", FLOOR, str(csv)], env),
                                         lambda: _spawn_measured(cmd, code_env))
    (floor_s, _, _), (wall, _, text) = best
    floor_rss, rss = peak  # the largest of the runs, as for the cluster
    return {"rows": rows, "csv_mb": size / 1e6, "floor_s": floor_s, "floor_rss_mb": floor_rss / 1e6,
            "analyze_s": wall, "analyze_rss_mb": rss / 1e6, "time_ratio": wall / floor_s, "paired_ratio": paired,
            "rss_per_file": rss / size, "rss_per_floor_rss": rss / floor_rss, "timings": text if timings else ""}


def cluster(base: Path, ranks: int, rows_per_rank: int, repeat: int, env: dict[str, str], code_env: dict[str, str]) -> dict:
    out = base / f"cluster-{ranks}x{rows_per_rank}"
    steps = max(1, round(rows_per_rank / ROWS_PER_STEP_40_LAYERS))
    if not (out / "profile").exists():
        _simulate(out, ranks, steps, 40, env)
    files = _kernel_files(out / "profile")
    rows = sum(_rows(p) for p in files)
    cmds = [[sys.executable, "-m", "advisor_core", "analyze", str(out / "profile"), "--format", "json", "-o",
             str(out / f"report-j{jobs}.json"), "--jobs", str(jobs), "--quiet"] for jobs in (1, 2)]
    best, peak, (paired,) = _alternating(repeat, *(lambda c=c: _spawn_measured(c, code_env) for c in cmds))
    same = (out / "report-j1.json").read_bytes() == (out / "report-j2.json").read_bytes()
    return {"ranks": len(files), "rows": rows, "j1_s": best[0][0], "j2_s": best[1][0], "ratio": best[1][0] / best[0][0],
            "paired_ratio": paired, "identical": same, "j1_rss_mb": peak[0] / 1e6, "j2_rss_mb": peak[1] / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", type=Path, help="keep (and reuse) the generated profiles under this directory")
    ap.add_argument("--code", type=Path, help="run analyze from this checkout instead (before/after)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", help="comma-separated single-rank row counts (default 200000,1000000,4000000)")
    ap.add_argument("--skip-cluster", action="store_true")
    args = ap.parse_args()
    # as installed: compiled bytecode (pip writes it; PYTHONDONTWRITEBYTECODE, set on some machines, would
    # compile every module of the checkout on each start), in a private cache that leaves the checkout alone
    installed = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    installed["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench_analyze_pycache_")
    env = dict(installed, PYTHONPATH=str(ROOT) + os.pathsep + str(ROOT / "rules"))
    code = args.code.resolve() if args.code else ROOT
    code_env = dict(installed, PYTHONPATH=str(code) + os.pathsep + str(code / "rules"))
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_analyze_"))
    base.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else (
        [100_000, 200_000] if args.quick else [200_000, 1_000_000, 4_000_000])
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; analyze from {code}")
    try:
        print("single rank (floor: pyarrow.csv.read_csv of the same kernel_details.csv, all columns):")
        print(f"{'rows':>10} {'csv MB':>8} {'floor s':>8} {'analyze s':>10} {'time/floor':>11} {'paired':>7} "
              f"{'RSS MB':>8} {'RSS/file':>9} {'RSS/floor RSS':>14}")
        for n in sizes:
            r = single_rank(base, n, args.repeat, env, code_env, timings=(n == 1_000_000 or n == sizes[-1]))
            print(f"{r['rows']:>10,} {r['csv_mb']:>8.1f} {r['floor_s']:>8.2f} {r['analyze_s']:>10.2f} "
                  f"{r['time_ratio']:>10.2f}x {r['paired_ratio']:>6.2f}x {r['analyze_rss_mb']:>8.0f} "
                  f"{r['rss_per_file']:>8.2f}x "
                  f"{r['rss_per_floor_rss']:>13.2f}x")
            if r["timings"]:
                print("    " + "\n    ".join(line for line in r["timings"].splitlines() if line.strip()))
            if args.keep is None:
                shutil.rmtree(base / f"rank-{n}", ignore_errors=True)
        if not args.skip_cluster:
            ranks, per = (4, 50_000) if args.quick else (16, 100_000)
            c = cluster(base, ranks, per, args.repeat, env, code_env)
            print(f"cluster: {c['ranks']} ranks, {c['rows']:,} kernel rows: --jobs 1 {c['j1_s']:.2f} s, "
                  f"--jobs 2 {c['j2_s']:.2f} s = {c['ratio']:.2f}x (paired median {c['paired_ratio']:.2f}x); "
                  f"JSON identical: {c['identical']}; "
                  f"peak RSS {c['j1_rss_mb']:.0f} / {c['j2_rss_mb']:.0f} MB")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
