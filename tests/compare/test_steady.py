"""Warm-up detection: a leading prefix of outlying steps, never jitter, never more than half."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor_core.analyses.steady import steady_steps, step_stats


def test_warmup_steps_are_left_out_and_said() -> None:
    vals = [462_000, 215_000, 90_300, 90_100, 90_600, 90_200, 90_400]
    s = steady_steps(vals)
    assert s.warmup == (0, 1) and s.steps == (2, 3, 4, 5, 6)
    assert s.median_us == 90_300 and round(s.threshold_us) == 99_330
    assert s.describe(vals) == ("2 warm-up step(s) left out (step 1 462.0 ms, step 2 215.0 ms): longer than 99.3 ms = "
                                "median 90.3 ms of the later steps + max(3×MAD, 10 %)")
    assert step_stats([vals[i] for i in s.steps]) == {"mean": 90320.0, "median": 90300.0, "p90": 90520.0, "count": 5}


def test_jitter_and_a_slow_step_later_are_not_warmup() -> None:
    assert steady_steps([91_000, 90_000, 92_000, 90_500]).warmup == ()
    assert steady_steps([90_000, 91_000, 300_000, 90_000]).warmup == ()  # not at the start
    assert steady_steps([300_000, 90_000]).warmup == ()  # too few steps to tell


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1.0, 1e7), min_size=0, max_size=30))
def test_properties(vals: list[float]) -> None:
    s = steady_steps(vals)
    assert s.warmup == tuple(range(len(s.warmup)))  # a prefix
    assert len(s.warmup) <= len(vals) // 2
    assert sorted(s.warmup + s.steps) == list(range(len(vals)))
    if s.warmup:
        assert all(vals[i] > s.threshold_us for i in s.warmup)
