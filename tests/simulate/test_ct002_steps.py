"""CT002: weights converted in some steps only are not described as converted "on every step".

Real-derived from the simulator's transdata-excess run: the per-weight TransData kernels (``…-Linear/
TransData-op0/…``) are kept in step 1 only, as a run that converts its weights once at the first
step leaves them (the Step ID column says which step).
"""

from __future__ import annotations

import csv
import re
import shutil

from advisor_core.api import open_session

PARAM_TRANSDATA = re.compile(r"-Linear/TransData-op\d+/")


def _param_finding(path):
    found = [f for f in open_session(path, plugins=False).analyze(select=["CT002"]).findings if "weight(s)" in f.title]
    assert len(found) == 1, [f.title for f in found]
    return found[0]


def test_weights_converted_in_step_one_only(scenario_runs, tmp_path):
    _, src = scenario_runs["transdata-excess"]
    every = _param_finding(src)
    assert "by TransData on every step" in every.title
    run = tmp_path / "once"
    shutil.copytree(src, run)
    for kd in run.glob("profile/*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"):
        with open(kd, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        header, body = rows[0], rows[1:]
        step, name = header.index("Step ID"), header.index("Name")
        kept = [r for r in body if not (PARAM_TRANSDATA.search(r[name]) and r[step] != "1")]
        assert len(kept) < len(body)
        with open(kd, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows([header, *kept])
    once = _param_finding(run)
    assert once.title.startswith("14 weight(s) converted ND→FRACTAL_NZ by TransData in 1 of 2 profiled steps (step 1)")
    # converted once, at the first use: told as a one-off, never ranked as a per-step saving (issue 11)
    assert once.title.endswith(": a one-time conversion, not a per-step cost") and once.saving_us is None
    one_time = {e.name: e.value for e in once.evidence}["one_time_conversion"]
    assert abs(one_time / every.saving_us - 1) < 0.01  # step 1's conversions: one step's worth of the every-step run
