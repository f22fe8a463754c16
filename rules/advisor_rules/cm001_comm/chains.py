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


# Nodes that only route a value: MindSpore packs a Split's pieces for the Concat as
# ``Split → TupleGetItem ×n → MakeTuple → Concat`` (``InsertMakeTuple`` in ``step_parallel``), and
# orders nodes with ``Depend``/``UpdateState``. A chain is followed through them.
_PLUMBING = {"TupleGetItem", "MakeTuple", "Depend", "Load"}
_ORDER_ONLY = {"UpdateState"}


def _is_redis(n: Any) -> bool:
    return (n.instance_name or "").startswith("redistribution_op")


# Ops that keep the layout of their input (no strategy of their own in the IR): the producer whose
# layout the chain rearranges is found behind them (a Linear's output Reshape → its MatMul).
_LAYOUT_KEEPING = {"Reshape", "Cast", "ExpandDims", "Squeeze", "Flatten"}


def _sharded(node: Any, inputs: Any) -> Any:
    """``node``, or the op behind its layout-keeping ops that carries a shard strategy (else ``node``)."""
    p = node
    for _ in range(8):
        if p is None or p.strategy or p.primitive_attrs.get("in_strategy") is not None or p.op not in _LAYOUT_KEEPING:
            break
        ins = inputs(p)
        p = ins[0] if ins else None
    return p if p is not None and (p.strategy or p.primitive_attrs.get("in_strategy") is not None) else node


def find_chains(ir: Any) -> tuple[dict[str, Chain], set[str]]:
    """Redistribution chains by consumer cell path, and the kernel names of the graph's other nodes.

    Producers and consumers are found through plumbing (:data:`_PLUMBING`): a ``Depend`` passes
    its first operand only, ``UpdateState`` no data at all.
    """
    nodes = list(ir.iter_nodes())
    redis = [n for n in nodes if _is_redis(n)]
    others = {n.kernel_full_name for n in nodes if n.kernel_full_name and not _is_redis(n)}
    if not redis:
        return {}, others
    operands: dict[int, list[Any]] = {}
    consumers: dict[int, list[Any]] = {}
    for n in nodes:
        refs = n.operand_refs[:1] if n.op == "Depend" else ([] if n.op in _ORDER_ONLY else n.operand_refs)
        ins = [p for p in (ir.resolve(n, r) for r in refs if r.kind == "node") if p is not None and hasattr(p, "op")]
        operands[id(n)] = ins
        for p in ins:
            consumers.setdefault(id(p), []).append(n)

    def through(start: Any, step: dict[int, list[Any]]) -> list[Any]:
        """The nodes reached from ``start`` along ``step`` (operands or consumers), plumbing looked through."""
        out, frontier, seen = [], list(step.get(id(start), [])), {id(start)}
        while frontier:
            nxt = []
            for m in frontier:
                if id(m) in seen:
                    continue
                seen.add(id(m))
                if m.op in _PLUMBING and not _is_redis(m):
                    nxt.extend(step.get(id(m), []))
                elif m.op not in _ORDER_ONLY:
                    out.append(m)
            frontier = nxt
        return out

    heads: list[tuple[Any, Any, list[Any]]] = []
    for n in redis:
        prods = through(n, operands)
        if any(_is_redis(p) for p in prods):
            continue  # not the chain's head
        ops, frontier, consumer = [n], [n], None
        while frontier:
            nxt = []
            for m in frontier:
                for c in through(m, consumers):
                    if _is_redis(c):
                        if c not in ops:
                            ops.append(c)
                            nxt.append(c)
                    elif consumer is None:
                        consumer = c
            frontier = nxt
        heads.append((_sharded(next(iter(prods), None), lambda m: through(m, operands)), consumer, ops))
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
