"""The diagnostic sink keeps what is said in order, once; something said later can go where it belongs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from advisor_core.diagnostics import DiagnosticSink


def test_said_later_in_its_place_and_once() -> None:
    sink = DiagnosticSink()
    sink.warning("first", "a file")
    at = sink.mark()
    sink.warning("rank", "rank 1's table", "k.csv", line=3)
    later = DiagnosticSink()
    later.error("inputs-disagree", "the width")
    later.warning("rank", "rank 1's table", "k.csv", line=3)  # said already: not again
    later.error("inputs-disagree", "the width")
    sink.insert_at(at, later)
    assert [d.code for d in sink] == ["first", "inputs-disagree", "rank"]
    sink.error("inputs-disagree", "the width")  # and not after either
    assert len(sink) == 3


@given(st.lists(st.sampled_from("abcd"), max_size=8), st.lists(st.sampled_from("cdef"), max_size=8),
       st.lists(st.sampled_from("aef"), max_size=8))
def test_inserting_is_saying_in_that_order(before: list[str], after: list[str], inserted: list[str]) -> None:
    """Inserted at a mark, the diagnostics read as if they had been said there (each distinct one once)."""
    sink, straight = DiagnosticSink(), DiagnosticSink()
    for code in before:
        sink.info(code, code)
        straight.info(code, code)
    at = sink.mark()
    for code in after:
        sink.info(code, code)
    said = DiagnosticSink()
    for code in inserted:
        said.info(code, code)
    sink.insert_at(at, said)
    for code in inserted + after:
        straight.info(code, code)
    assert {d.code for d in sink} == {d.code for d in straight}
    assert len(sink) == len(straight)
    # what was said before the mark stays first, in order; the inserted ones not said before come next
    fresh = [c for c in dict.fromkeys(inserted) if c not in before and c not in after]
    assert [d.code for d in sink][:len(set(before)) + len(fresh)] == list(dict.fromkeys(before)) + fresh
