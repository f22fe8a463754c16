"""Issues from the IR: configured ops (``recompute: Bool(1)``) without a ``duplicated`` copy, and why."""

from __future__ import annotations

from typing import Any

from advisor_rules._common import cell_path_in_layer, layer_of_scope, pattern_for
from advisor_rules.rc001_recompute.issues import PASS_THROUGH, Issue, is_backward

# Plumbing a tensor flows through on its way to the backward; never named by a pattern.
_WALK = {"Depend", "TupleGetItem", "MakeTuple", "Load"}
_INSERTED = ("redistribution_op", "forward_op")  # parallel-inserted ops (tensor redistribution)


def from_ir(ir: Any) -> tuple[dict[tuple, Issue], set[tuple]]:
    """Issues the IR shows, and the (layer, cell path, attribute) it shows recomputed."""
    nodes = list(ir.iter_nodes())
    consumers: dict[int, list[Any]] = {}
    for n in nodes:
        for ref in n.operand_refs:
            p = ir.resolve(n, ref) if ref.kind in ("node", "crossref") else None
            if p is not None and hasattr(p, "op"):
                consumers.setdefault(id(p), []).append(n)
    dup_keys = {n.recompute_key for n in nodes if n.is_duplicated and n.recompute_key}
    configured = [n for n in nodes if n.is_recompute_configured and not n.is_duplicated and not is_backward(n)]
    conf_ids = {id(n) for n in configured}
    issues: dict[tuple, Issue] = {}

    def read_by_backward(x: Any) -> bool:
        return any(is_backward(c) for c in consumers.get(id(x), []))

    def where(x: Any) -> tuple[int | None, tuple[str, ...], str]:
        return layer_of_scope(x.scope), cell_path_in_layer(x.scope), x.instance_name or x.op.lower()

    # A primitive used twice in a cell (Linear's reshape in and out) is effective when any of
    # its calls in that layer is recomputed: judge per (layer, cell path, attribute).
    done = {where(x) for x in configured if x.recompute_key and x.recompute_key in dup_keys}
    effective = set(done)
    for x in configured:
        if where(x) in done:
            continue
        _, path, attr = where(x)
        # Walk forward through non-configured pass-through ops to the tensor backward reads.
        blockers: list[Any] = []
        frontier, seen = [x], {id(x)}
        while frontier:
            nxt = []
            for n in frontier:
                for c in consumers.get(id(n), []):
                    if is_backward(c) or id(c) in seen or c.is_duplicated:
                        continue
                    seen.add(id(c))
                    if id(c) in conf_ids:
                        continue
                    if c.op not in PASS_THROUGH and c.op not in _WALK and not (c.instance_name or "").startswith(_INSERTED):
                        continue  # a real consumer: its backward keeps what it needs itself
                    if read_by_backward(c) and c.op not in _WALK:
                        blockers.append(c)
                    else:
                        nxt.append(c)
            frontier = nxt
        key = (path, attr)
        if blockers:
            adds = sorted({pattern_for(cell_path_in_layer(b.scope), b.instance_name or b.op.lower())
                           for b in blockers if not (b.instance_name or "").startswith(_INSERTED)})
            names = ", ".join(sorted({f"{'.'.join(cell_path_in_layer(b.scope) + ((b.instance_name or b.op),))} ({b.op})"
                                      for b in blockers}))
            issue = issues.setdefault(key, Issue(path + (attr,), x.op, f"its output reaches the backward pass only through {names}, which is not recomputed", "blocked", adds))
            issue.blockers += blockers
            issue.chain += [x, *blockers]
        else:
            issue = issues.setdefault(key, Issue(path + (attr,), x.op, "no backward op needs its output, so recomputing it saves nothing", "not-needed"))
        issue.nodes.append(x)
        if where(x)[0] is not None:
            issue.layers.add(where(x)[0])
    # A recomputed cell whose every node is its kept output: the pattern named a one-op cell.
    cells: dict[tuple[str, ...], list[Any]] = {}
    for n in nodes:
        if (n.scope or "").startswith("recompute_") and not n.is_duplicated and cell_path_in_layer(n.scope):
            cells.setdefault(cell_path_in_layer(n.scope), []).append(n)
    for cell, members in cells.items():
        if all(m.cnode_attrs.get("recompute") is False for m in members):
            n = members[0]
            issue = issues.setdefault((cell, "<cell>"), Issue(cell, n.op, f"the pattern names the cell {'.'.join(cell)}, whose only node ({n.op}) is its output; a recomputed cell keeps its output", "cell-output"))
            issue.replace_pattern = (pattern_for(cell[:-1], cell[-1]), pattern_for(cell, n.instance_name or n.op.lower()))
            issue.nodes += members
            issue.layers |= {lay for lay in (layer_of_scope(m.scope) for m in members) if lay is not None}
    return issues, effective
