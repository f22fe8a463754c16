"""Fuzzing: random text and mutated real dumps never make anything but diagnostics escape.

Each case parses, decodes every lazy field of every node, builds the networkx graph and joins
the node scopes back. Inputs are kept small (real files cut to their first 400 lines) so that a
few hundred cases run in seconds; no timing assertions.
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.ir.graph import to_networkx
from advisor_core.ir.join import join_kernels
from advisor_core.ir.model import IRFile
from advisor_core.ir.parser import parse_ir_text
from advisor_core.textio import decode_utf8

from irtest_support import REAL, real_ir_files

# Every code the parser (and the UTF-8 decoding in front of it) may emit.
KNOWN_CODES = {
    "empty-file", "not-utf8", "ir-unparsed-lines", "ir-unbalanced-brackets", "ir-truncated",
    "ir-unclosed-subgraph", "ir-no-subgraph", "ir-count-mismatch", "ir-duplicate-subgraph",
}
MAX_LINES = 400


def _exercise(ir: IRFile, sink: DiagnosticSink) -> None:
    assert isinstance(ir, IRFile)
    for d in sink:
        assert d.code in KNOWN_CODES, d.render()
        event(d.code)  # shown by --hypothesis-show-statistics: which paths the cases reached
        if d.severity != Severity.INFO and d.code != "empty-file":
            assert d.path is not None
    for node in ir.iter_nodes():
        node.decode_all()
        node.kernel_full_name, node.layer_scope, node.recompute_key, node.is_backend_cast  # noqa: B018
    to_networkx(ir)
    join_kernels(ir, [n.scope or "" for n in ir.iter_nodes()][:20])
    assert ir.cnode_count == sum(1 for _ in ir.iter_nodes())
    assert len(ir.unparsed) <= ir.line_count


@lru_cache(maxsize=None)
def _corpus() -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for path in real_ir_files():
        lines = path.read_text(encoding="utf-8").split("\n")[:MAX_LINES]
        out.append((path.name, tuple(lines)))
    return tuple(out)


_IR_SNIPPETS = [
    "subgraph @g() {", "}", "  %0(x) = PrimFunc_Cast(%para1_x, I64(42))", "      : (<Tensor[Float32], (8, 32)>)",
    "      # Fullname with scope: (Default/Cast-op0)", "  Return(%0)", "# IR entry: @g", "subgraph attr:",
    "jit config {", "[[ 1.0]", " [ 2.0]]), I64(1))", "#------------------------> 0", "# Order:", "%para1_x: <null>",
    "symbol engine details:", "  %1(y) = call @g(%0) {instance name: x} cnode_attrs: {a: Bool(1)", '"', "((((", "]]]",
]


@settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=60), st.sampled_from(_IR_SNIPPETS)), max_size=30))
def test_random_text_only_gives_diagnostics(lines: list[str]) -> None:
    sink = DiagnosticSink()
    ir = parse_ir_text("\n".join(lines), "random.ir", sink)
    _exercise(ir, sink)


_MUTATION = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, MAX_LINES), st.integers(1, 5)),
    st.tuples(st.just("duplicate"), st.integers(0, MAX_LINES), st.integers(1, 5)),
    st.tuples(st.just("insert"), st.integers(0, MAX_LINES), st.integers(0, 10_000)),
    st.tuples(st.just("cut_line"), st.integers(0, MAX_LINES), st.integers(0, 300)),
    st.tuples(st.just("swap"), st.integers(0, MAX_LINES), st.integers(0, MAX_LINES)),
    st.tuples(st.just("bytes"), st.integers(0, 10**9), st.binary(min_size=1, max_size=8)),
)


def _mutate(corpus, file_index: int, ops: list[tuple], truncate_at: int | None) -> bytes:  # type: ignore[no-untyped-def]
    lines = list(corpus[file_index % len(corpus)][1])
    donors = corpus
    inserted_bytes: list[tuple[int, bytes]] = []
    for op, a, b in ops:
        n = len(lines)
        if op == "delete" and n:
            del lines[a % n : a % n + b]
        elif op == "duplicate" and n:
            lines[a % n : a % n] = lines[a % n : a % n + b]
        elif op == "insert":
            donor = donors[b % len(donors)][1]
            lines.insert(a % (n + 1), donor[b % len(donor)])
        elif op == "cut_line" and n:
            lines[a % n] = lines[a % n][: b]
        elif op == "swap" and n:
            lines[a % n], lines[b % n] = lines[b % n], lines[a % n]
        elif op == "bytes":
            inserted_bytes.append((a, b))
    data = "\n".join(lines).encode("utf-8")
    for pos, chunk in inserted_bytes:
        p = pos % (len(data) + 1)
        data = data[:p] + chunk + data[p:]
    if truncate_at is not None and data:
        data = data[: truncate_at % len(data)]
    return data


@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    file_index=st.integers(0, 10_000),
    ops=st.lists(_MUTATION, min_size=1, max_size=6),
    truncate_at=st.one_of(st.none(), st.integers(0, 10**9)),
)
def test_mutated_real_files_only_give_diagnostics(file_index: int, ops: list[tuple], truncate_at: int | None) -> None:
    corpus = _corpus()
    data = _mutate(corpus, file_index, ops, truncate_at)
    sink = DiagnosticSink()
    text = decode_utf8(data, REAL / "mutated.ir", sink, what="IR dump")
    ir = parse_ir_text(text, REAL / "mutated.ir", sink)
    _exercise(ir, sink)
