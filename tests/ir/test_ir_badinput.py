"""Bad input: each case gives a diagnostic with code and file:line, and parsing completes."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir import parser as parser_module
from advisor_core.ir.parser import parse_ir_file, parse_ir_text

from irtest_support import REAL, codes

SAMPLE = REAL / "cast_roundtrip" / "ir_level2_full" / "21_validate_0076.ir"
MULTI = REAL / "doc_excerpts" / "doc_2_3_execute.ir"


def _lines() -> list[str]:
    return SAMPLE.read_text(encoding="utf-8").split("\n")


def _only(sink: DiagnosticSink, code: str):  # type: ignore[no-untyped-def]
    found = [d for d in sink if d.code == code]
    assert len(found) == 1, [d.render() for d in sink]
    return found[0]


def test_truncated_in_the_middle_of_a_node_line(tmp_path: Path) -> None:
    text = SAMPLE.read_text(encoding="utf-8")
    cut = text.index("PrimFunc_MatMulExt(%1,") + len("PrimFunc_MatMulExt(%1,")
    path = tmp_path / "cut_node.ir"
    path.write_text(text[:cut], encoding="utf-8")
    sink = DiagnosticSink()
    ir = parse_ir_file(path, sink)
    assert ir is not None
    assert codes(sink) == [("error", "ir-unbalanced-brackets", 54), ("error", "ir-truncated", 54),
                           ("warning", "ir-count-mismatch", None)]
    unbalanced = _only(sink, "ir-unbalanced-brackets")
    assert unbalanced.location() == f"{path}:54"
    assert "unbalanced brackets" in unbalanced.message
    assert "truncated" in _only(sink, "ir-truncated").message
    graph = ir.entry_graph
    assert [n.index for n in graph.nodes] == [0, 1, 2, 3]  # the cut node is kept, not dropped
    cut_node = graph.node(3)
    assert cut_node.op == "MatMulExt" and cut_node.operands == ["%1", ""]
    assert cut_node.problems == ["operand list is not closed (unbalanced brackets)"]
    assert graph.end_line is None and ir.unparsed == []


def test_truncated_in_the_middle_of_a_subgraph(tmp_path: Path) -> None:
    path = tmp_path / "cut_graph.ir"
    path.write_text("\n".join(_lines()[:56]) + "\n", encoding="utf-8")  # ends after %3's scope line
    sink = DiagnosticSink()
    ir = parse_ir_file(path, sink)
    assert ir is not None
    assert codes(sink) == [("error", "ir-truncated", 56), ("warning", "ir-count-mismatch", None)]
    d = _only(sink, "ir-truncated")
    assert d.render() == (f"{path}:56: error: file ends inside subgraph @16_1___main___CastNet_construct_67 "
                          "(opened at line 40): no closing '}'; the dump is truncated")
    assert ir.cnode_count == 4 and ir.declared_cnode_count == 10
    assert ir.entry_graph.node(3).scope == "Default/MatMulExt-op0"


def test_subgraph_not_closed_before_the_next_one() -> None:
    lines = MULTI.read_text(encoding="utf-8").split("\n")
    assert lines[80] == "}"
    del lines[80]  # the '}' closing the first subgraph (line 81)
    sink = DiagnosticSink()
    ir = parse_ir_text("\n".join(lines), "no_close.ir", sink)
    # Reported at 'indirect: 1' (line 83 once the '}' is gone): a form only seen between subgraphs.
    assert codes(sink) == [("error", "ir-unclosed-subgraph", 83)]
    d = sink.items[0]
    assert "subgraph @19_1___main___Net_construct_304 (opened at line 34) is not closed" in d.message
    assert len(ir.graphs) == 3 and ir.cnode_count == 12 and ir.unparsed == []
    first, second, _ = ir.graphs.values()
    assert first.end_line is None and second.indirect == 1 and second.attrs == {"defer_inline": "0", "undeterminate": "0"}


def test_line_that_fits_no_form() -> None:
    lines = _lines()
    lines.insert(47, "this line is not IR")  # after %1's type line
    sink = DiagnosticSink()
    ir = parse_ir_text("\n".join(lines), "junk.ir", sink)
    assert ir.unparsed == [(48, "this line is not IR")]
    d = _only(sink, "ir-unparsed-lines")
    assert d.render() == ("junk.ir:48: warning: 1 line(s) fit no IR line form and were skipped; "
                          "first at line 48: 'this line is not IR'")
    assert ir.cnode_count == 10  # nothing else lost
    assert ir.entry_graph.node(1).scope == "Default/Cast-op1"


def test_unparsed_lines_are_counted_and_reported_once() -> None:
    text = "garbage one\n# IR entry: @g\n%% junk\nsubgraph @g() {\n  %0(a) = Add(%1)\nstray\n}\nmore junk\n"
    sink = DiagnosticSink()
    ir = parse_ir_text(text, "x.ir", sink)
    assert ir.unparsed == [(1, "garbage one"), (3, "%% junk"), (6, "stray"), (8, "more junk")]
    d = _only(sink, "ir-unparsed-lines")
    assert d.line == 1 and d.message.startswith("4 line(s) fit no IR line form")
    assert ir.cnode_count == 1


def test_unbalanced_brackets_in_the_middle_does_not_swallow_the_file() -> None:
    lines = _lines()
    assert lines[69].startswith("  %5(CNode_64$h) = PrimFunc_ReLU(%4)")
    lines[69] = lines[69].replace("PrimFunc_ReLU(%4)", "PrimFunc_ReLU((%4)")
    sink = DiagnosticSink()
    ir = parse_ir_text("\n".join(lines), "unbalanced.ir", sink)
    d = _only(sink, "ir-unbalanced-brackets")
    assert (d.severity.value, d.line) == ("error", 70)
    assert d.location() == "unbalanced.ir:70"
    assert ir.cnode_count == 10 and ir.unparsed == []
    relu = ir.entry_graph.node(5)
    assert relu.end_line == 70 and relu.scope == "Default/ReLU-op0"  # its own lines still attached
    assert ir.entry_graph.node(6).op == "Cast"


def test_join_of_physical_lines_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parser_module, "MAX_JOIN_LINES", 10)
    rows = [f" [ {i}.0]" for i in range(50)]
    text = "\n".join(["subgraph @g() {", "  %0(c) = Add(Tensor(shape=[50], dtype=Float32, value=", *rows,
                      "  %1(d) = Neg(%0)", "}"])
    sink = DiagnosticSink()
    ir = parse_ir_text(text, "long.ir", sink)
    assert _only(sink, "ir-unbalanced-brackets").line == 2
    node = ir.node("g", 0)
    assert (node.line, node.end_line) == (2, 12)
    assert len(ir.unparsed) == 40 and ir.unparsed[0] == (13, " [ 10.0]")
    assert ir.node("g", 1).op == "Neg"


def test_unclosed_string_does_not_swallow_the_next_node() -> None:
    text = 'subgraph @g() {\n  %0(c) = getattr(%1, "mul)\n      : (<Func, NoShape>)\n  %1(d) = Neg(%0)\n}\n'
    sink = DiagnosticSink()
    ir = parse_ir_text(text, "str.ir", sink)
    assert _only(sink, "ir-unbalanced-brackets").line == 2
    assert [n.index for n in ir.iter_nodes()] == [0, 1]
    assert ir.node("g", 0).type_lines == ["      : (<Func, NoShape>)"]


def test_non_utf8_bytes(tmp_path: Path) -> None:
    path = tmp_path / "latin1.ir"
    body = ("subgraph @g() {\n  %0(c) = Add(%1)\n      # In file caf\xe9.py:1, 2~3/x/\n}\n").encode("latin-1")
    path.write_bytes(body)
    sink = DiagnosticSink()
    ir = parse_ir_file(path, sink)
    assert ir is not None and ir.cnode_count == 1 and ir.unparsed == []
    d = _only(sink, "not-utf8")
    assert (d.severity.value, d.line) == ("warning", 3)
    assert d.location() == f"{path}:3"
    assert ir.node("g", 0).sources[0].file == "caf\ufffd.py"


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.ir"
    path.write_bytes(b"")
    sink = DiagnosticSink()
    assert parse_ir_file(path, sink) is None
    assert codes(sink) == [("error", "empty-file", None)]
    assert sink.items[0].render() == f"{path}: error: IR dump is empty (0 bytes)"
    sink = DiagnosticSink()
    ir = parse_ir_text("  \n\n", "blank.ir", sink)
    assert codes(sink) == [("error", "empty-file", None)] and ir.graphs == {}


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "model.ir"
    path.write_bytes(b"\x08\x01\x12\x00\xff\xfe binary protobuf")
    sink = DiagnosticSink()
    assert parse_ir_file(path, sink) is None
    assert codes(sink) == [("error", "binary-file", None)]


def test_missing_file_and_directory(tmp_path: Path) -> None:
    sink = DiagnosticSink()
    assert parse_ir_file(tmp_path / "nope.ir", sink) is None
    assert parse_ir_file(tmp_path, sink) is None
    assert [c for _, c, _ in codes(sink)] == ["missing-file", "not-a-file"]


def test_not_an_ir_dump() -> None:
    sink = DiagnosticSink()
    ir = parse_ir_text("hello\nworld\n", "notes.txt", sink)
    assert [c for _, c, _ in codes(sink)] == ["ir-unparsed-lines", "ir-no-subgraph"]
    assert ir.graphs == {} and len(ir.unparsed) == 2


def test_windows_line_endings() -> None:
    sink = DiagnosticSink()
    ir = parse_ir_text("# IR entry: @g\r\nsubgraph @g() {\r\n  %0(c) = Add(%1)\r\n  Return(%0)\r\n}\r\n", "crlf.ir", sink)
    assert list(sink) == [] and ir.cnode_count == 2 and ir.entry == "g"
