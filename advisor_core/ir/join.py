"""Join kernel names from profiling data to IR nodes through the full name with scope.

The key is the node's ``# Fullname with scope`` (``Default/network-WithLossCell/_backbone-Dense/
MatMul-op0``, :attr:`IRNode.scope`). What carries it:

* (a) Ascend ``kernel_details.csv`` ``Name``: the full name, or ``<launch op full name>/<device
  kernel name>`` when MindSpore found the framework launch op; with ``with_stack`` the stack is
  appended after the name;
* (b) ``execution_order/ms_execution_order_graph_<gid>.csv`` (data dump): one full name per line;
* (c) the MindSpore CPU profiler's ``FRAMEWORK/cpu_op_detail_info_0.csv`` ``full_op_name``.

``match_kind``:

Only node scopes ending in a kernel segment ``<Op>-op<k>`` take part (``Default`` alone, as
printed by early passes, matches nothing).

* ``exact``: the name equals a node's kernel full name;
* ``prefix``: the name starts with a node's kernel full name followed by a character that cannot continue a
  kernel name (``/``, space, ``(``, ``:`` ...): the launch-op form and with_stack suffixes. The
  longest such scope wins, so ``.../MatMul-op1`` never matches ``.../MatMul-op10``;
* ``none``: nothing in this IR carries the name.

What does **not** join (spec §3, §2.6, §4.4), and why a ``none`` row is expected:

* names are not stable across configurations: the same net gave ``Default/Cast-op0`` in a
  ``save_graphs`` run and ``Default/Cast-op4`` in a data-dump run (``ms_execution_order_graph_0.csv``
  starts ``Default/Cast-op4``). Join an IR and a profile **from the same run** only; across runs
  only the names that happen to coincide (e.g. ``Expand/_MatMulExt/MatMul-op0``) match;
* backend lowering renames ops: front-end ``PrimFunc_MatMulExt`` (``Default/MatMulExt-op0``)
  is ``Expand/_MatMulExt/MatMul-op0`` in the kernel graph; join profiles against the backend
  kernel graph (``graph_build``/``trace_code_graph``/``hwopt_d_end_graph``), not the front end;
* GE-generated kernels such as ``trans_TransData_13`` have no framework node and never join;
* a profile of a different script/net joins nothing or only coincidental generic names.

``join_kernels`` keeps one row per (kernel name, matching node): a name that matches several
nodes (the same scope in two subgraphs) gives several rows; a name matching none gives one
row with ``match_kind == "none"``. Rows follow the order of ``kernel_names``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir.model import IRFile, IRNode
from advisor_core.textio import read_text

__all__ = ["EXECUTION_ORDER_HEADER", "JOIN_COLUMNS", "join_kernels", "read_execution_order", "scope_index"]

EXECUTION_ORDER_HEADER = "NodeExecutionOrder-FullNameWithScope"
JOIN_COLUMNS = ["kernel_name", "graph", "index", "op", "scope", "match_kind"]

# A scope is a prefix of a kernel name only at a boundary: the next character cannot belong to
# the last scope segment (``MatMul-op1`` must not match ``MatMul-op10``).
_BOUNDARY = re.compile(r"[^\w.\-]")


def scope_index(ir: IRFile) -> dict[str, list[IRNode]]:
    """Kernel full name → nodes carrying it (file order).

    Only scopes that end in a kernel segment ``<Op>-op<k>`` (:attr:`IRNode.kernel_full_name`)
    are keys: early passes print bare scopes such as ``Default``, which would otherwise be a
    "prefix" of every kernel name.
    """
    index: dict[str, list[IRNode]] = {}
    for node in ir.iter_nodes():
        name = node.kernel_full_name
        if name:
            index.setdefault(name, []).append(node)
    return index


def _match(name: str, index: dict[str, list[IRNode]]) -> tuple[str, list[IRNode]]:
    nodes = index.get(name)
    if nodes:
        return "exact", nodes
    best: list[IRNode] | None = None
    for m in _BOUNDARY.finditer(name):
        candidate = index.get(name[: m.start()])
        if candidate:
            best = candidate  # later boundary = longer prefix
    if best:
        return "prefix", best
    return "none", []


def join_kernels(ir: IRFile, kernel_names: Iterable[str]) -> pd.DataFrame:
    """Match kernel names to IR nodes (see the module docstring).

    Columns: ``kernel_name`` (str), ``graph`` (subgraph key or None), ``index`` (nullable Int64;
    ``<NA>`` for Return and unmatched), ``op`` (normalised op or None), ``scope`` (the node's scope
    or None), ``match_kind`` (``exact``/``prefix``/``none``).
    """
    index = scope_index(ir)
    rows: list[tuple[str, str | None, int | None, str | None, str | None, str]] = []
    for raw in kernel_names:
        name = str(raw).strip()
        kind, nodes = _match(name, index)
        if not nodes:
            rows.append((name, None, None, None, None, kind))
            continue
        for node in nodes:
            rows.append((name, node.graph, node.index, node.op, node.scope, kind))
    df = pd.DataFrame(rows, columns=JOIN_COLUMNS)
    df["index"] = df["index"].astype("Int64")
    return df


def read_execution_order(path: Path, sink: DiagnosticSink) -> list[str]:
    """Kernel full names from ``ms_execution_order_graph_<gid>.csv``, in launch order.

    The file is a header ``NodeExecutionOrder-FullNameWithScope`` then one name per line. A
    file with another first line (e.g. ``ms_global_execution_order_graph_<gid>.csv``, which
    holds a single ``0``) gives an error diagnostic and ``[]``; unreadable files likewise.
    """
    path = Path(path)
    text = read_text(path, sink, what="execution-order CSV")
    if text is None:
        return []
    lines = text.splitlines()
    header = lines[0].strip().strip('"') if lines else ""
    if header != EXECUTION_ORDER_HEADER:
        sink.error(
            "exec-order-header",
            f"not an execution-order CSV: first line is {header[:60]!r}, expected {EXECUTION_ORDER_HEADER!r}",
            path,
            line=1,
        )
        return []
    return [ln.strip().strip('"') for ln in lines[1:] if ln.strip()]
