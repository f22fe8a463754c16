"""(A) The fix: shard strategies as text, and the consumer's strategy that needs no redistribution."""

from __future__ import annotations

import ast
from typing import Any

from advisor_rules._common import cell_path_in_layer


def strategy(node: Any) -> str | None:
    """The node's ``in_strategy`` (or ``strategy``) as a tuple literal, ``None`` when the IR has none."""
    if node is None:
        return None
    st = node.strategy or {}
    val = st.get("in_strategy") or st.get("strategy") or node.primitive_attrs.get("in_strategy")
    if val is None:
        return None
    return str(val).replace("[", "(").replace("]", ")")


def proposed_strategy(cs: str | None, axis: int | None, gather: int) -> str | None:
    """The consumer's in_strategy with the gathered axis split over the group."""
    if not cs or axis is None or gather <= 1:
        return None
    try:
        val = ast.literal_eval(cs)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(val, tuple) or not all(isinstance(t, tuple) for t in val):
        return None
    out = []
    for t in val:
        dims = list(t)
        a = axis if axis >= 0 else len(dims) + axis
        if 0 <= a < len(dims):
            dims[a] = dims[a] * gather
        out.append(tuple(dims))
    return str(tuple(out))


def node_name(node: Any) -> str:
    """``feed_forward.mul (Mul)``: cell path, instance name and op, for messages."""
    if node is None:
        return "its neighbour"
    path = cell_path_in_layer(node.scope)
    return f"{'.'.join(path) + '.' if path else ''}{node.instance_name or node.op} ({node.op})"
