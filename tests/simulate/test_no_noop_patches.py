"""No finding ever proposes a patch that changes nothing (every scenario, every rule).

A patch whose ``replace`` writes the value its ``test`` found (2 → 2 workers) is advice that
cannot help; it reached users once (issue 11, MD001). Each patch op sequence must change the
document: a ``replace`` to a different value, an ``add`` of a key that is absent.
"""

from __future__ import annotations

import pytest

from advisor_core.api import open_session
from advisor_core.simulate import SCENARIOS


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_patch_changes_the_config(scenario_runs, name):
    _, out = scenario_runs[name]
    result = open_session(out, plugins=False).analyze()
    checked = 0
    for f in result.findings:
        for p in f.patches:
            if p.safety.value == "display_only":  # model code (a shard() call): shown, never applied
                continue
            tested = {op.path: op.value for op in p.ops if op.op == "test"}
            changes = [op for op in p.ops if op.op in ("replace", "add", "remove")]
            assert changes, (f.code, p.title)
            for op in changes:
                if op.op == "replace":
                    assert op.path not in tested or tested[op.path] != op.value, (f.code, p.title, op.path, op.value)
                checked += 1
    if name in ("minddata-bottleneck", "unaligned", "recompute-ineffective", "kitchen-sink"):
        assert checked > 0  # scenarios whose fixes are config changes
