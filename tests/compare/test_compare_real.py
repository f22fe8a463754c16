"""advisor compare on two real MindSpore 2.10 CPU runs that differ only in the map op's workers."""

from __future__ import annotations

from pathlib import Path

from advisor_core.compare import compare_runs, render
from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions

RUNS = Path(__file__).resolve().parents[1] / "data" / "mindspore-runs" / "md_workers"
HOST = load_plugins(autoload=False)


def test_one_worker_against_two() -> None:
    c = compare_runs(Session([RUNS / "w1"], SessionOptions(jobs=1), host=HOST),
                     Session([RUNS / "w2"], SessionOptions(jobs=1), host=HOST), before_label="w1", after_label="w2")
    assert (round(c.step_before.mean, 1), round(c.step_after.mean, 1)) == (158956.5, 78978.3)
    assert (c.step_before.steps, c.step_after.steps) == (46, 46)
    assert c.step_before.warmup.startswith("rank 0: 1 warm-up step(s) left out (step 2 484.0 ms)")
    assert round(c.step_change_us, 1) == 79978.3 and c.step_change_significant
    (o,) = c.findings
    assert (o.code, o.metric) == ("MD001", "data wait per step")
    assert (round(o.estimate_us, 1), round(o.before_us, 1), round(o.after_us, 1)) == (79478.3, 144913.0, 66043.5)
    assert round(o.measured_us, 1) == 78869.6 and round(o.ratio, 3) == 0.992
    assert round(c.breakdown_before.free) == 144913 and round(c.breakdown_after.free) == 66043
    assert c.not_comparable == [] and c.regressions == []
    text = render(c, "text")
    assert "    estimated 79.48 ms, measured 78.87 ms = 0.99 of the estimate" in text
