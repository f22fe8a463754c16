"""The ``step_events`` scan of ``trace_view.json``: alone, its hold on the GIL, and beside the kernel CSV read.

``advisor analyze`` runs ``read_step_events`` on a second thread while ``pyarrow.csv.read_csv``
reads the rank's ``kernel_details.csv`` on every core (``digest_rank``); a scan holding the GIL
or burning CPU slows that read. Measured on one rank directory (default: the 1 M-row bench rank):

* scan — ``read_step_events`` alone: best wall time of ``--repeat`` runs and its CPU time;
* GIL — a pure-Python thread counts how often it runs during the scan, as a share of how often
  it runs while the main thread sleeps (~100 %: the scan leaves the GIL free; ~0 %: it holds it);
* csv, csv+scan — ``read_csv`` alone, and with the scan on a second thread (best wall of the read).

The files are read once first so that all runs start from the page cache.

Usage: python bench/bench_trace_scan.py [--rank DIR] [--repeat K]
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.csv as pacsv

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.loaders.trace_steps import read_step_events

DEFAULT_RANK = Path("/work/benchdata/rank-1000000")


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    c0, t0 = _cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, _cpu() - c0


def _ticker_rate(fn: Callable[[], object]) -> float:
    """Runs per second of a thread doing ``time.sleep(0)`` in a loop while ``fn`` runs."""
    ticks, stop = [0], [False]

    def tick() -> None:
        while not stop[0]:
            ticks[0] += 1
            time.sleep(0)

    th = threading.Thread(target=tick)
    th.start()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    stop[0] = True
    th.join()
    return ticks[0] / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=Path, default=DEFAULT_RANK)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trace = next(args.rank.rglob("trace_view.json"))
    kernels = next(args.rank.rglob("kernel_details.csv"))
    for p in (trace, kernels):
        with open(p, "rb") as fh:
            while fh.read(64 << 20):
                pass

    def scan() -> None:
        read_step_events(trace, None, DiagnosticSink())

    def read_kernels() -> None:
        pacsv.read_csv(kernels)

    def both() -> None:
        th = threading.Thread(target=scan)
        th.start()
        read_kernels()
        th.join()

    alone = min(_timed(scan) for _ in range(args.repeat))
    idle = _ticker_rate(lambda: time.sleep(0.5))
    gil_free = _ticker_rate(scan) / idle
    csv = min(_timed(read_kernels) for _ in range(args.repeat))
    beside = min(_timed(both) for _ in range(args.repeat))
    print(f"trace_view.json {trace.stat().st_size / 1e6:.0f} MB, kernel_details.csv {kernels.stat().st_size / 1e6:.0f} MB")
    print(f"scan        {alone[0]:.3f} s wall  {alone[1]:.3f} s CPU")
    print(f"GIL         a Python thread ran at {gil_free:.0%} of its idle rate during the scan")
    print(f"csv         {csv[0]:.3f} s wall  {csv[1]:.3f} s CPU")
    print(f"csv+scan    {beside[0]:.3f} s wall  {beside[1]:.3f} s CPU  ({beside[0] / csv[0]:.2f}x the csv alone)")


if __name__ == "__main__":
    main()
