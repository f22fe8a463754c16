"""MindData CPU utilisation samples: the one-call NumPy conversion means what the value-by-value one did."""

from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor_core.loaders.minddata import _busy_mean, _samples

_VALUE = st.one_of(st.integers(-(10**20), 10**20), st.floats(), st.booleans(), st.none(), st.text(max_size=2),
                   st.lists(st.integers(0, 3), max_size=2))


def _one_by_one(values: list, keep_other: bool) -> list[float]:
    if keep_other:
        return [float(v) if isinstance(v, (int, float)) else math.nan for v in values]
    return [float(v) for v in values if isinstance(v, (int, float))]


@settings(max_examples=500, deadline=None)
@given(st.lists(_VALUE, max_size=8), st.lists(_VALUE, max_size=8), st.booleans())
def test_samples_are_the_numbers_value_by_value(user: list, sys_: list, keep_other: bool) -> None:
    got = _samples(user, keep_other=keep_other)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.array(_one_by_one(user, keep_other), dtype=np.float64))
    u, s = _one_by_one(user, True), _one_by_one(sys_, True)
    n = min(len(u), len(s))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # inf - inf
        busy = (np.asarray(u[:n]) + np.asarray(s[:n])) if n else np.zeros(0)
        busy = busy[~np.isnan(busy)]
        want = float(busy.mean()) if len(busy) else None
        got_mean = _busy_mean(user, sys_)
    assert (got_mean is None and want is None) or got_mean == want or (math.isnan(got_mean) and math.isnan(want))


def test_a_plain_list_of_numbers() -> None:
    assert _samples([1, 2.5, True]).tolist() == [1.0, 2.5, 1.0]
    assert _samples([1, "x", None], keep_other=False).tolist() == [1.0]
    assert _busy_mean([10.0, 20.0, None], [1.0, 2.0, 3.0]) == 16.5
