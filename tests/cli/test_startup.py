"""The commands that read no profile start without the columnar stack.

``advisor --help``, ``rules``, ``explain`` and ``lint`` read rule docstrings and YAML only; importing
pandas/pyarrow/numpy/networkx would triple their start-up (see ``bench/bench_startup.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pandas", "pyarrow", "numpy", "networkx")
CONFIG = sorted((Path(__file__).resolve().parents[1] / "data").rglob("*.yaml"))[0]

_PROBE = """
import runpy, sys
sys.argv = ['advisor'] + sys.argv[1:]
try:
    runpy.run_module('advisor_core', run_name='__main__')
except SystemExit:
    pass
print('HEAVY=' + ','.join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--help"], ["rules"], ["explain", "MD001"], ["lint", str(CONFIG), "--fail-on", "never"]],
                         ids=["help", "rules", "explain", "lint"])
def test_no_columnar_stack_imported(args):
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args], capture_output=True, text=True,
                          timeout=120)
    heavy = [line[6:] for line in proc.stderr.splitlines() if line.startswith("HEAVY=")]
    assert heavy == [""], proc.stderr[-2000:]
    assert proc.stdout.strip(), proc.stderr[-2000:]
