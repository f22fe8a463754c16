"""CT002's backward-TransData lookup: the fragment index finds exactly the fragments a plain substring test finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor_rules.ct002_transdata.from_kernels import _fragment_index, _groups_named_in
from advisor_rules.ct002_transdata.groups import Group

# scope-like text from few characters, so fragments and names share pieces often
_piece = st.text(alphabet="ab/_-G", max_size=6)
_cell = st.lists(st.sampled_from(["", "a", "b-X", "layers-L/0-D", "ffn-F", "Grad_a"]), max_size=3).map("/".join)
_fragment = st.builds(lambda c, op: f"{c}/Grad_{op}/", _cell, st.text(alphabet="abMul_", min_size=0, max_size=4))


def _naive(name: str, grads: dict[str, Group]) -> list[Group]:
    return [g for frag, g in grads.items() if frag in name]


@settings(max_examples=300, deadline=None)
@given(st.lists(_fragment, max_size=6, unique=True), st.data())
def test_fragment_index_matches_substring_test(frags: list[str], data: st.DataObject) -> None:
    groups = [Group("sandwich", str(i % 3), "x") for i in range(3)]  # fragments share groups, as layers do
    grads = {f: groups[i % 3] for i, f in enumerate(frags)}
    parts = st.one_of(_piece, st.sampled_from(frags) if frags else _piece, _cell)
    name = "".join(data.draw(st.lists(parts, max_size=5)))
    assert _groups_named_in(name, _fragment_index(grads), list(grads.values())) == _naive(name, grads)


def test_fragment_found_after_a_longer_cell_and_twice_in_one_name() -> None:
    a, b = Group("sandwich", "a", "x"), Group("sandwich", "b", "y")
    grads = {"layers-L/0-D/ffn-F/Grad_Mul/": a, "0-D/ffn-F/Grad_Mul/": b, "/Grad_Add/": a}
    name = "Gradients/Default/net-N/layers-L/0-D/ffn-F/Grad_Mul/Grad_Add/TransData-op7"
    assert _groups_named_in(name, _fragment_index(grads), list(grads.values())) == [a, b, a]
