"""The text of a node after ``= ``: operator, operands, attribute blocks (spec §2.3).

``split_head`` works on a logical line (multi-line constants already joined) and never raises.
Layout::

    <op>(<operands>)[ ]{instance name: X}[ ]primitive_attrs: {..}[ ]cnode_attrs: {..}
        [ ]cnode_primal_attrs: {..}[ ]{in_strategy: ..}

* The operator is the text up to the ``(`` that opens the operand list, after skipping a
  leading ``$(...)`` and any ``[...]`` (``%5[@FuncUnion(@a, @b)]()``, ``$(@g:n)(..)``).
* Operands are split on top-level commas (brackets and ``"..."`` respected).
* Blocks may follow each other with or without a space. Unknown ``name: {..}`` blocks are kept
  by name; text that fits no block is kept in ``tail`` and listed in ``problems``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from advisor_core.ir.attrs import split_top
from advisor_core.ir.values import OperandRef

__all__ = ["NodeHead", "classify_operand", "normalise_op", "split_head"]

_BLOCK_NAME = re.compile(r"^[A-Za-z_][\w ]*:$")
_OP_PREFIXES = ("PrimFunc_", "S_Prim_", "S-Prim-")
_NODE_REF = re.compile(r"^%(\d{1,18})$")
_PARAM_REF = re.compile(r"^%(para\d{1,18}_\S*)$")
_CROSS_REF = re.compile(r"^\$\(@(.+):([^:()]*)\)$")
_GRAPH_REF = re.compile(r"^@(\S+)$")


class NodeHead(NamedTuple):
    """Pieces of a node body (all raw text except ``operands`` which is a list of raw strings)."""

    raw_op: str
    operands: list[str]
    blocks: dict[str, str]
    instance_name: str | None
    strategy: str | None
    tail: str
    problems: list[str]


_TOKENS = re.compile(r'[()\[\]{}"]')


def _top_spans(body: str) -> list[tuple[str, int, int]]:
    """Top-level bracket groups as (opener, start, end); ``end`` is -1 for an unclosed group.

    One pass over the bracket characters; ``"..."`` strings are skipped, a stray closer at the
    top level is ignored.
    """
    spans: list[tuple[str, int, int]] = []
    depth = 0
    in_str = False
    start = 0
    opener = ""
    for m in _TOKENS.finditer(body):
        ch = m.group()
        if in_str:
            if ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "([{":
            if depth == 0:
                start = m.start()
                opener = ch
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((opener, start, m.start()))
    if depth > 0:
        spans.append((opener, start, -1))
    return spans


def split_head(body: str) -> NodeHead:
    """Split a node body (text after ``%k(name) = `` or the whole ``Return(..)..``)."""
    problems: list[str] = []
    spans = _top_spans(body)
    k = 0
    if body.startswith("$(") and spans and spans[0][1] == 1:
        k = 1
    while k < len(spans) and spans[k][0] == "[" and spans[k][2] >= 0:
        k += 1
    if k >= len(spans) or spans[k][0] != "(":
        problems.append("no operand list '(...)' after the operator")
        return NodeHead(body.strip(), [], {}, None, None, "", problems)
    _, open_at, close_at = spans[k]
    raw_op = body[:open_at].strip()
    if close_at < 0:
        problems.append("operand list is not closed (unbalanced brackets)")
        return NodeHead(raw_op, split_top(body[open_at + 1 :]), {}, None, None, "", problems)
    operands = split_top(body[open_at + 1 : close_at])
    blocks: dict[str, str] = {}
    instance: str | None = None
    strategy: str | None = None
    tail = ""
    pos = close_at + 1
    for opener, start, end in spans[k + 1 :]:
        prefix = body[pos:start].strip()
        if opener != "{" or end < 0 or (prefix and not _BLOCK_NAME.match(prefix)):
            tail = body[pos:]
            if end < 0:
                problems.append("attribute block is not closed (unbalanced brackets)")
            else:
                problems.append(f"text after the operands fits no attribute block: {tail[:60]!r}")
            break
        inner = body[start + 1 : end]
        if prefix:
            blocks[prefix[:-1].strip()] = inner
        else:
            stripped = inner.strip()
            if stripped.startswith("instance name:"):
                instance = stripped[len("instance name:") :].strip()
            elif stripped.startswith(("in_strategy", "strategy", "out_strategy")):
                strategy = stripped
            else:
                blocks[f"block_{len(blocks)}"] = inner
        pos = end + 1
    else:
        rest = body[pos:]
        if rest.strip():
            tail = rest
            problems.append(f"text after the operands fits no attribute block: {rest.strip()[:60]!r}")
    return NodeHead(raw_op, operands, blocks, instance, strategy, tail, problems)


def normalise_op(raw_op: str) -> tuple[str, str | None]:
    """(normalised op, direct callee graph) for a raw operator.

    ``PrimFunc_Cast``/``S_Prim_Cast``/``S-Prim-Cast`` → ``Cast``; ``Return``/``return`` →
    ``Return``; ``call @g`` and ``@g`` → (``call``, ``g``); calls through a value (``%5``,
    ``%5[@FuncUnion(@a, @b)]``, ``$(@g:n)``) → (``call``, ``None``).
    """
    if raw_op in ("Return", "return"):
        return "Return", None
    if raw_op.startswith("call @"):
        return "call", raw_op[6:].strip()
    if raw_op.startswith("@"):
        return "call", raw_op[1:]
    if raw_op.startswith(("%", "$(")):
        return "call", None
    for prefix in _OP_PREFIXES:
        if raw_op.startswith(prefix):
            return raw_op[len(prefix) :], None
    return raw_op, None


def classify_operand(text: str, graph: str) -> OperandRef:
    """What an operand refers to (see :class:`~advisor_core.ir.values.OperandRef`)."""
    c = text[:1]
    if c == "%":
        m = _NODE_REF.match(text)
        if m:
            return OperandRef("node", text, graph, int(m.group(1)))
        m = _PARAM_REF.match(text)
        if m:
            return OperandRef("param", text, None, None, m.group(1))
    elif c == "$":
        m = _CROSS_REF.match(text)
        if m:
            return OperandRef("crossref", text, m.group(1), None, m.group(2))
    elif c == "@":
        m = _GRAPH_REF.match(text)
        if m:
            return OperandRef("graph", text, m.group(1))
    return OperandRef("value", text)
