"""(A) Evidence from the parallel IR: the redistribution chains the auto-parallel pass inserted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor_rules._common import cell_path_in_layer, layer_of_scope

# Collective ops (a chain's communication; the rest of it moves data on the device).
COMM_OPS = {"AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "AlltoAllV", "_AlltoAll", "Send", "Receive", "Broadcast"}


@dataclass
class Chain:
    """One redistribution chain, by the op whose strategy disagrees (its cell path), over layers and stages."""

    key: str
    producer: Any
    consumer: Any
    ops: list[Any] = field(default_factory=list)
    layers: set[int] = field(default_factory=set)
    count: int = 0
    cells: set[str] = field(default_factory=set)  # consumer cell scopes (one per layer)
    consumer_scopes: set[str] = field(default_factory=set)
    gather: int = 1  # devices the tensor is gathered from
    concat_axis: int | None = None
    ir: Any = None


def find_chains(ir: Any) -> tuple[dict[str, Chain], set[str]]:
    """Redistribution chains by consumer cell path, and the kernel names of the graph's other nodes."""
    nodes = list(ir.iter_nodes())
    redis = [n for n in nodes if (n.instance_name or "").startswith("redistribution_op")]
    others = {n.kernel_full_name for n in nodes if n.kernel_full_name and not (n.instance_name or "").startswith("redistribution_op")}
    if not redis:
        return {}, others
    rset = {id(n) for n in redis}
    consumers: dict[int, list[Any]] = {}
    for n in nodes:
        for ref in n.operand_refs:
            p = ir.resolve(n, ref) if ref.kind == "node" else None
            if p is not None and hasattr(p, "op"):
                consumers.setdefault(id(p), []).append(n)
    heads: list[tuple[Any, Any, list[Any]]] = []
    for n in redis:
        prods = [ir.resolve(n, r) for r in n.operand_refs if r.kind == "node"]
        prods = [p for p in prods if p is not None and hasattr(p, "op")]
        if any(id(p) in rset for p in prods):
            continue  # not the chain's head
        ops, frontier, consumer = [n], [n], None
        while frontier:
            nxt = []
            for m in frontier:
                for c in consumers.get(id(m), []):
                    if id(c) in rset:
                        if c not in ops:
                            ops.append(c)
                            nxt.append(c)
                    elif c.op not in ("Depend", "UpdateState", "MakeTuple", "TupleGetItem") and consumer is None:
                        consumer = c
            frontier = nxt
        heads.append((next(iter(prods), None), consumer, ops))
    # A chain slicing an op's output back (StridedSlice after the op) belongs to the chain
    # that gathered that op's inputs: one mismatched op, one finding.
    gathered = {id(c) for _, c, _ in heads if c is not None}
    chains: dict[str, Chain] = {}
    for producer, consumer, ops in sorted(heads, key=lambda h: id(h[0]) in gathered):
        owner = producer if producer is not None and id(producer) in gathered else consumer
        key = ".".join(cell_path_in_layer(owner.scope if owner is not None else ops[0].scope)) or (owner.op if owner else ops[0].op)
        ch = chains.get(key)
        if ch is None:
            ch = chains[key] = Chain(key, producer, consumer)
        ch.ops.extend(o for o in ops if o not in ch.ops)
        if owner is consumer:
            ch.count += 1
        lay = layer_of_scope(ops[0].scope)
        if lay is not None:
            ch.layers.add(lay)
        if owner is not None and owner.kernel_full_name:
            ch.consumer_scopes.add(owner.kernel_full_name)
            ch.cells.add(owner.kernel_full_name.rpartition("/")[0])
        for o in ops:
            if o.op == "AllGather" and isinstance(o.primitive_attrs.get("rank_size"), int):
                ch.gather = max(ch.gather, int(o.primitive_attrs["rank_size"]))
            if o.op == "Concat":
                ax = o.primitive_attrs.get("axis")
                if isinstance(ax, int) and not isinstance(ax, bool):
                    ch.concat_axis = ax
    return chains, others
