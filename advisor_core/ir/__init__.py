"""MindSpore IR text dumps (``*.ir``): parser, model, graphs, dump discovery, profile joins.

Entry points::

    from advisor_core.ir import parse_ir_file, find_ir_dumps, to_networkx, join_kernels

    ir = parse_ir_file(path, sink)               # IRFile | None
    for node in ir.nodes_by_op("Cast"): ...      # IRNode: op, operands, attrs, types, scope
    dumps = find_ir_dumps(dump_dir, sink)        # IRDumpSet → RankDumps per rank
    front = dumps.rank().final_frontend()        # IRDumpFile of 21_validate_*.ir
    g = to_networkx(dumps.rank().parse(front))   # networkx.MultiDiGraph

See ``advisor_core/ir/README.md`` for the grammar coverage and what joins to profiling data.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names are imported on first use (PEP 562) so that ``import advisor_core.ir.parser`` does not
# pull in pandas (join) or networkx (graph): the CLI and the parser stay quick to start.
_EXPORTS = {
    "advisor_core.ir.attrs": ("Bare", "Monad", "Raw", "TensorValue", "TypeName", "decode_block",
                              "decode_value", "render_value"),
    "advisor_core.ir.dumps": ("STAGE_KINDS", "IRDumpFile", "IRDumpSet", "RankDumps", "SkippedFile",
                              "classify_dump_name", "find_ir_dumps"),
    "advisor_core.ir.graph": ("node_key", "producers", "to_networkx"),
    "advisor_core.ir.join": ("join_kernels", "read_execution_order", "scope_index"),
    "advisor_core.ir.model": ("DeviceType", "IRFile", "IRNode", "IRParam", "IRSubgraph", "OperandRef",
                              "SourceLoc", "TensorType"),
    "advisor_core.ir.parser": ("parse_ir_file", "parse_ir_text"),
    "advisor_core.ir.summary": ("summarize_dumps",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'advisor_core.ir' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.ir.attrs import Bare, Monad, Raw, TensorValue, TypeName, decode_block, decode_value, render_value
    from advisor_core.ir.dumps import (
        STAGE_KINDS,
        IRDumpFile,
        IRDumpSet,
        RankDumps,
        SkippedFile,
        classify_dump_name,
        find_ir_dumps,
    )
    from advisor_core.ir.graph import node_key, producers, to_networkx
    from advisor_core.ir.join import join_kernels, read_execution_order, scope_index
    from advisor_core.ir.model import DeviceType, IRFile, IRNode, IRParam, IRSubgraph, OperandRef, SourceLoc, TensorType
    from advisor_core.ir.parser import parse_ir_file, parse_ir_text
    from advisor_core.ir.summary import summarize_dumps
