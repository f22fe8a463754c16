"""The rules issue's common bar, end to end on the simulator (see :mod:`advisor_core.verify`).

For every scenario: each ground-truth problem is found (recall 100 %), nothing above ``low``
is reported that the ground truth does not hold, every matched finding's estimate is within
70–130 % of the measured cost, and applying a finding's patches and simulating again moves the
step time (and, for RC001, the peak memory) by 70–130 % of the estimate, never for the worse.
"""

from __future__ import annotations

import pytest

from advisor_core.simulate import SCENARIOS
from advisor_core.verify import check_scenario, within_band


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_closed_loop(scenario: str, tmp_path) -> None:
    check = check_scenario(scenario, tmp_path)
    assert check.ok, "\n" + check.table()


def test_clean_scenario_reports_nothing_above_low(tmp_path) -> None:
    check = check_scenario("clean", tmp_path, resimulate=False)
    assert [f.severity.value for f in check.findings if f.severity.value != "low"] == []


def test_every_patched_finding_was_resimulated(tmp_path) -> None:
    check = check_scenario("recompute-ineffective", tmp_path)
    (rc,) = [c for c in check.checks if c.code == "RC001"]
    assert rc.patched and rc.resim_us is not None and rc.resim_memory_bytes is not None
    # recompute trades time for memory: the step gets slower and the peak lower
    assert rc.resim_us < 0 < rc.resim_memory_bytes


@pytest.mark.parametrize(
    "measured, estimate, noise, ok",
    [(100.0, 100.0, 0.0, True), (70.0, 100.0, 0.0, True), (69.0, 100.0, 0.0, False), (130.0, 100.0, 0.0, True),
     (131.0, 100.0, 0.0, False), (-2.0, 1.0, 5.0, True), (-2.0, 1.0, 1.0, False), (-80.0, -100.0, 0.0, True),
     (5.0, 0.0, 1.0, False)],
)
def test_band(measured: float, estimate: float, noise: float, ok: bool) -> None:
    assert within_band(measured, estimate, noise) is ok
