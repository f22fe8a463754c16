"""CT002's per-stream kernel order: the radix path equals numpy's stable argsort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor_rules.ct002_transdata.from_kernels import _stable_order


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-1, 40), st.integers(-(2**40), 2**40)), max_size=300))
def test_stable_order_equals_a_stable_argsort(values) -> None:
    streams = np.array(values, dtype=np.int64)
    assert _stable_order(streams).tolist() == np.argsort(streams, kind="stable").tolist()
