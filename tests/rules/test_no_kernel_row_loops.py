"""Rules reason about distinct ops: they never read the kernel table themselves nor iterate over its rows."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from advisor_core.engine.session import Session, SessionOptions
from advisor_core.simulate import simulate_scenario

ROOT = Path(__file__).resolve().parents[2]
RULE_SOURCES = sorted((ROOT / "rules").rglob("*.py")) + sorted((ROOT / "plugins").rglob("advisor_*/*.py"))
# Reading kernel rows directly, or walking rows one by one in Python.
FORBIDDEN = re.compile(r"""(?<!Need)\.(?:arrow_)?table\(\s*["']kernels["']|\.iterrows\(|\.to_dict\(\s*["']records["']\)|\.apply\(""")


@pytest.mark.parametrize("path", RULE_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_rule_sources_use_the_op_view(path: Path) -> None:
    hits = [f"{path.name}:{i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1)
            if FORBIDDEN.search(line)]
    assert not hits, "read kernels through rank.op_view(), never row by row:\n" + "\n".join(hits)


def test_no_rule_iterates_over_a_kernel_sized_frame(tmp_path: Path, monkeypatch) -> None:
    """Run every rule on an 8-rank run and watch every frame iterated row by row: none is longer than the op views."""
    out = tmp_path / "ks"
    simulate_scenario("kitchen-sink", out, layers=2, steps=3, ground_truth=False)
    iterated: list[int] = []
    for name in ("itertuples", "iterrows"):
        original = getattr(pd.DataFrame, name)

        def watch(self, *a, __orig=original, **kw):  # type: ignore[no-untyped-def]
            iterated.append(len(self))
            return __orig(self, *a, **kw)

        monkeypatch.setattr(pd.DataFrame, name, watch)
    session = Session([out], SessionOptions(jobs=1))
    result = session.analyze()
    assert not result.errors and len(result.findings) >= 8
    kernel_rows = min(r.op_view().rows for r in session.run)
    distinct = max(len(r.op_view().ops) for r in session.run)
    assert iterated and distinct < kernel_rows / 2
    assert max(iterated) <= distinct, (max(iterated), distinct, kernel_rows)
