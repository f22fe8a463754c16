"""CM001's per-op backward ends (``OpEnds``): one array per rank, read as the dict of dicts it replaces."""

from __future__ import annotations

import pickle

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor_rules.cm001_comm.tail import OpEnds, _backward_op_ends


def _as_dicts(last: pd.Series, scopes: list[str]) -> dict[str, dict[int, int]]:
    """The meaning: per op name, per window, the latest end of the ops with that name."""
    out: dict[str, dict[int, int]] = {}
    for (op, win), end in last.items():
        ends = out.setdefault(scopes[op], {})
        ends[win] = max(ends.get(win, 0), int(end))
    return out


_kernels = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(1, 10**15)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(kernels=_kernels, names=st.lists(st.sampled_from(["A/MatMul-op1", "A/Add-op2", "B/Mul-op3"]), min_size=6,
                                        max_size=6))
def test_op_ends_read_as_the_latest_end_per_name_and_window(kernels: list[tuple[int, int, int]],
                                                             names: list[str]) -> None:
    frame = pd.DataFrame(kernels, columns=["op", "win", "end"])
    last = frame.groupby(["op", "win"])["end"].max()  # as _backward_last_by_op gives it
    ends = _backward_op_ends(last, names, windows=4)
    expected = _as_dicts(last, names)
    for got in (ends, pickle.loads(pickle.dumps(ends))):
        assert len(got) == len(expected)
        assert {name: got.get(name) for name in expected} == expected
        assert got.get("C/Sub-op9") is None and got.get("C/Sub-op9", {}) == {}


def test_op_ends_of_a_rank_are_one_array_and_their_names_are_shared_between_ranks() -> None:
    last = pd.Series([5, 7, 9], index=pd.MultiIndex.from_tuples([(0, 0), (1, 0), (1, 2)], names=["op", "win"]))
    scope = "Gradients/Default/network-Net/dense-Dense/gradMatMul/MatMul-op7"
    ends = _backward_op_ends(last, [scope, scope + "x"], windows=3)
    assert ends.ends.tolist() == [[5, OpEnds.NONE, OpEnds.NONE], [7, OpEnds.NONE, 9]]
    assert ends.get(scope + "x") == {0: 7, 2: 9}
    one, two = (pickle.loads(pickle.dumps(ends)) for _ in range(2))
    assert one.names[0] is two.names[0]  # interned: a client holding many ranks keeps each name once


def test_an_op_without_a_name_is_left_out_not_written_into_another_row() -> None:
    last = pd.Series([5, 7], index=pd.MultiIndex.from_tuples([(0, 0), (1, 0)], names=["op", "win"]))
    ends = _backward_op_ends(last, ["Gradients/a/MatMul-op1", float("nan")], windows=1)
    assert ends.names == ["Gradients/a/MatMul-op1"] and ends.get("Gradients/a/MatMul-op1") == {0: 5}
