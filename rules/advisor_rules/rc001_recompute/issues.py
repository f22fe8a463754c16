"""The unit of RC001's verdict — one :class:`Issue` per configured op that is not recomputed — and IR node helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor_rules._common import cell_path_in_layer, layer_of_scope, tensor_bytes

# Ops that only forward a tensor: when one sits between a configured op and the backward and is
# not recomputed itself, it blocks the configured op (the seed's Reshape).
PASS_THROUGH = {"Reshape", "Cast", "Transpose", "ExpandDims", "Squeeze", "Flatten"}


@dataclass
class Issue:
    """One configured op (pattern) that is not recomputed, aggregated over layers."""

    op_path: tuple[str, ...]  # cell path + attribute (the pattern's parts)
    prim: str
    reason: str
    kind: str  # blocked | not-needed | cell-output
    add_patterns: list[str] = field(default_factory=list)  # what to add to make it effective
    replace_pattern: tuple[str, str] | None = None  # (old cell pattern, new primitive pattern)
    layers: set[int] = field(default_factory=set)
    nodes: list[Any] = field(default_factory=list)  # IR nodes: configured, not recomputed
    chain: list[Any] = field(default_factory=list)  # IR nodes recomputed once fixed (IR-only estimate)
    blockers: list[Any] = field(default_factory=list)  # IR nodes whose outputs stop being kept


def merge_issue(shown: Issue, derived: Issue) -> None:
    """Complete ``shown`` (the IR's issue) with what only ``derived`` (the config's) knows, in place.

    The IR shows what the compiler did with the current patterns; the config's layer structure
    also judges the patterns the fix introduces (a cell pattern renamed to its primitive, which
    can be blocked in turn). The fix needs both: the union of the patterns to add, the rename
    either one found, and both explanations.
    """
    added = [p for p in derived.add_patterns if p not in shown.add_patterns]
    shown.add_patterns = sorted(set(shown.add_patterns) | set(derived.add_patterns))
    if shown.replace_pattern is None:
        shown.replace_pattern = derived.replace_pattern
    if derived.reason.startswith(shown.reason):
        shown.reason = derived.reason
    elif added:
        shown.reason += f"; {derived.reason}"
    shown.layers |= derived.layers


def is_backward(n: Any) -> bool:
    """A backward node: it has a forward op, sits under ``Gradients/``, or is marked ``target_grad``."""
    scope = n.scope or ""
    return bool(n.forward_unique_id) or scope.startswith("Gradients/") or n.cnode_attrs.get("target_grad") is True


def ir_nodes_of(ir: Any, issue: Issue) -> list[Any]:
    """Forward IR nodes a config-derived issue is about (the op, or every node of the named cell)."""
    out = []
    for n in ir.iter_nodes():
        if layer_of_scope(n.scope) is None or n.is_duplicated or is_backward(n):
            continue
        cell = cell_path_in_layer(n.scope)
        if cell == issue.op_path if issue.replace_pattern else cell + (n.instance_name or n.op.lower(),) == issue.op_path:
            out.append(n)
    return out


def node_bytes(n: Any) -> float:
    """Bytes of the node's first output (0 when the IR does not say)."""
    t = n.out_types[0] if n.out_types else None
    return tensor_bytes(getattr(t, "shape", None), getattr(t, "dtype", None)) or 0.0
