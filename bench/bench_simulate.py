"""Benchmark the simulator: a 64-rank × 10-step × 80-layer run and a 2-million-row single-rank profile.

Each figure is reported as wall time and as a ratio against a floor measured in the same run:
writing the same number of bytes with one plain ``write()`` per 8 MiB (what any generator must
at least pay for the output). Each measurement runs in a child process (fresh imports, no
cache carry-over); the machine is shared, so run it when it is quiet.

    PYTHONPATH=. python bench/bench_simulate.py [--quick] [--keep DIR]

``--quick`` shrinks both cases (8 ranks × 4 steps × 16 layers; 200 k rows) for a smoke run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time, json
from advisor_core.simulate import simulate_scenario
out, ranks, steps, layers, sets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
t = time.perf_counter()
r = simulate_scenario("clean", out, ranks=ranks, steps=steps, layers=layers, sets=sets, ground_truth=False)
print(json.dumps({"seconds": time.perf_counter() - t, "step_ms": r.mean_step_time_us / 1000, "world": r.workload.world}))
"""


def _child(out: Path, ranks: int, steps: int, layers: int, sets: list[str]) -> dict:
    import json

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), str(ranks), str(steps), str(layers), json.dumps(sets)],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _write_floor(nbytes: int, where: Path) -> float:
    """Seconds to write ``nbytes`` with plain write() calls of 8 MiB (incl. close)."""
    block = b"x" * (8 << 20)
    target = where / "floor.bin"
    t = time.perf_counter()
    with open(target, "wb") as fh:
        left = nbytes
        while left > 0:
            n = min(left, len(block))
            fh.write(block[:n])
            left -= n
    elapsed = time.perf_counter() - t
    target.unlink()
    return elapsed


def _rows(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b"")) - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", type=Path, help="keep the outputs under this directory")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench_sim_")) if args.keep is None else args.keep
    base.mkdir(parents=True, exist_ok=True)
    try:
        if args.quick:
            big = dict(ranks=8, steps=4, layers=16, sets=["parallel_config.model_parallel=2", "parallel_config.pipeline_stage=2",
                                                           "parallel_config.micro_batch_num=4"])
            one = dict(ranks=1, steps=12, layers=80, sets=["parallel_config.model_parallel=1", "runner_config.gradient_accumulation_steps=2"])
        else:
            big = dict(ranks=64, steps=10, layers=80, sets=["parallel_config.model_parallel=4", "parallel_config.pipeline_stage=8",
                                                             "parallel_config.micro_batch_num=8"])
            one = dict(ranks=1, steps=205, layers=80, sets=["parallel_config.model_parallel=1", "runner_config.gradient_accumulation_steps=2"])
        print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
        for label, case in (("cluster run", big), ("single-rank, many kernels", one)):
            out = base / label.split()[0]
            shutil.rmtree(out, ignore_errors=True)
            res = _child(out, case["ranks"], case["steps"], case["layers"], case["sets"])
            nbytes = _bytes(out)
            floor = _write_floor(nbytes, base)
            kd = sorted(out.rglob("kernel_details.csv"))
            rows = sum(_rows(p) for p in kd)
            print(f"{label}: {res['world']} rank(s) x {case['steps']} steps x {case['layers']} layers, "
                  f"kernel_details rows {rows:,} (largest file {_rows(kd[-1]) if kd else 0:,}), {nbytes / 1e9:.2f} GB written")
            print(f"    simulate: {res['seconds']:.1f} s   write() floor for the same bytes: {floor:.2f} s   "
                  f"ratio {res['seconds'] / floor:.1f}x   ({nbytes / 1e6 / res['seconds']:.0f} MB/s, step {res['step_ms']:.1f} ms)")
            if args.keep is None:
                shutil.rmtree(out, ignore_errors=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
