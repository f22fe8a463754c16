"""Start-up cost of the commands that read no profile: ``--help``, ``rules``, ``explain``, ``lint``.

Each command runs in a fresh interpreter (``python -m advisor_core``) and is timed against the
floor measured in the same run: a bare ``python -c pass``. Printed per command: the median wall
time of ``--repeat`` runs, the ratio to the floor, and whether pandas, pyarrow, numpy or networkx
were imported (they should not be: these commands read YAML and rule docstrings only).

    python bench/bench_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "pyarrow", "numpy", "networkx")

_PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['advisor'] + sys.argv[1:]\n"
    "try:\n"
    "    runpy.run_module('advisor_core', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "print('HEAVY=' + ','.join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)\n"
)


def _lint_target() -> str:
    return str(sorted((ROOT / "tests" / "data").rglob("*.yaml"))[0])


def _installed_env() -> dict[str, str]:
    """The environment of an installed package: compiled bytecode (pip writes it at install time).

    ``PYTHONDONTWRITEBYTECODE`` (set on some machines) would compile every module of a source
    checkout on each start; a private cache directory stands in for the installed ``.pyc`` files
    and leaves the checkout untouched.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = _PYCACHE
    return env


_PYCACHE = tempfile.mkdtemp(prefix="advisor-bench-pycache-")


def _time(args: list[str], repeat: int) -> tuple[float, str]:
    times, heavy = [], ""
    subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=_installed_env())  # fills the bytecode cache
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=_installed_env())
        times.append(time.perf_counter() - t0)
        for line in proc.stderr.splitlines():
            if line.startswith("HEAVY="):
                heavy = line[6:]
    return statistics.median(times), heavy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    floor, _ = _time([sys.executable, "-c", "pass"], a.repeat)
    print(f"floor: python -c pass  {floor * 1000:7.0f} ms   (each command: bytecode compiled, as installed; "
          f"median of {a.repeat})")
    probe = _PROBE.format(heavy=HEAVY)
    for label, cmd in (("--help", ["--help"]), ("rules", ["rules"]), ("explain MD001", ["explain", "MD001"]),
                       ("lint CONFIG", ["lint", _lint_target(), "--fail-on", "never"])):
        wall, heavy = _time([sys.executable, "-c", probe, *cmd], a.repeat)
        print(f"{label:<14} {wall * 1000:7.0f} ms  {wall / floor:5.1f}x floor  heavy modules: {heavy or 'none'}")


if __name__ == "__main__":
    main()
