"""Graph views of a parsed IR file (networkx) and operand resolution helpers.

``to_networkx`` builds a ``MultiDiGraph``:

* IR nodes keyed ``(graph_key, index)``; a Return is keyed ``(graph_key, "return")``;
  attributes ``node`` (the :class:`IRNode`), ``op``, ``kind="node"``, ``graph``;
* parameters keyed ``("param", ref)`` where ``ref`` is the token without ``%``
  (``para3_block0.dense1.weight``, unique in a file); attributes ``param``, ``op="Parameter"``,
  ``kind="param"``;
* called/referenced graphs keyed ``("graph", name)``; attributes ``subgraph`` (the
  :class:`IRSubgraph` or ``None``), ``op="graph"``, ``kind="graph"``;
* an operand ``%k`` that names no node (doc excerpts omit lines) gets a placeholder node with
  ``kind="missing"``, ``node=None``, so operand positions stay complete.

Edges (parallel edges allowed, one per operand):

* ``kind="data"``: producer → consumer with ``operand_index`` (position in the operand list);
* ``kind="crossref"``: ``$(@g:n)`` target → consumer, with ``operand_index``;
* ``kind="call"``: consumer → ``("graph", g)`` for ``call @g``, ``@g(..)`` (``operand_index=-1``),
  a ``@g`` operand (``Partial(@g, ..)``, ``Switch``; its ``operand_index``) and the members of
  ``%5[@FuncUnion(@a, @b)]`` (``operand_index=-1``);
* ``kind="callee"``: ``%k`` → consumer when the consumer calls the value of node k
  (``%1 = %0(..)``), ``operand_index=-1``.

With ``graph_name`` only that subgraph's nodes are added as sources of edges; nodes of other
graphs reached through cross references are still added as edge endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

import networkx as nx

from advisor_core.ir.model import IRFile, IRNode, IRParam

__all__ = ["node_key", "producers", "to_networkx"]

_GRAPH_NAME_IN_OP = re.compile(r"@([^\s,()\[\]@]+)")


def node_key(node: IRNode) -> tuple[str, int | str]:
    """The networkx key of an IR node: ``(graph, index)`` or ``(graph, "return")``."""
    return (node.graph, node.index if node.index is not None else "return")


def _add_target(g: nx.MultiDiGraph, target: IRNode | IRParam) -> Hashable:
    if isinstance(target, IRParam):
        key: Hashable = ("param", target.ref)
        if key not in g:
            g.add_node(key, param=target, op="Parameter", kind="param")
        return key
    key = node_key(target)
    if key not in g:
        g.add_node(key, node=target, op=target.op, kind="node", graph=target.graph)
    return key


def _add_graph(g: nx.MultiDiGraph, ir: IRFile, name: str) -> Hashable:
    key = ("graph", name)
    if key not in g:
        g.add_node(key, subgraph=ir.graphs.get(name), op="graph", kind="graph")
    return key


def to_networkx(ir: IRFile, graph_name: str | None = None) -> nx.MultiDiGraph:
    """Build the data/call graph of ``ir`` (all subgraphs, or only ``graph_name``).

    Raises ``KeyError`` when ``graph_name`` is not a key of ``ir.graphs``.
    """
    g = nx.MultiDiGraph(path=ir.path, entry=ir.entry)
    subgraphs = [ir.graphs[graph_name]] if graph_name is not None else list(ir.graphs.values())
    for sub in subgraphs:
        for node in sub.nodes:
            _add_target(g, node)
    for sub in subgraphs:
        for node in sub.nodes:
            dst = node_key(node)
            raw_op = node.raw_op
            callee = node.callee
            if callee is not None:
                g.add_edge(dst, _add_graph(g, ir, callee), kind="call", operand_index=-1)
            elif raw_op.startswith("%"):
                head = raw_op[1:].split("[", 1)[0]
                if head.isdigit():
                    src = sub.node(int(head))
                    if src is not None:
                        g.add_edge(node_key(src), dst, kind="callee", operand_index=-1)
                for name in _GRAPH_NAME_IN_OP.findall(raw_op):
                    if name != "FuncUnion":
                        g.add_edge(dst, _add_graph(g, ir, name), kind="call", operand_index=-1)
            for pos, ref in enumerate(node.operand_refs):
                kind = ref.kind
                if kind == "value":
                    continue
                if kind == "graph":
                    g.add_edge(dst, _add_graph(g, ir, ref.graph or ""), kind="call", operand_index=pos)
                    continue
                target = ir.resolve(node, ref)
                if target is None:
                    if kind == "node":
                        missing = (node.graph, ref.index)
                        if missing not in g:
                            g.add_node(missing, node=None, op=None, kind="missing", graph=node.graph)
                        g.add_edge(missing, dst, kind="data", operand_index=pos)
                    continue
                g.add_edge(_add_target(g, target), dst, kind="crossref" if kind == "crossref" else "data",
                           operand_index=pos)
    return g


def producers(ir: IRFile, node: IRNode) -> list[IRNode | IRParam | None]:
    """What each operand of ``node`` comes from, in operand order.

    ``%k`` → node k of the same subgraph; ``%paraK_x`` → the parameter; ``$(@g:n)`` → the
    referenced node or parameter; constants, monads, graph values and unknown targets → ``None``.
    """
    return [ir.resolve(node, ref) for ref in node.operand_refs]

