"""IR nodes as report locations: the IR line and the model-code line that created a node."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor_core.engine.findings import Location

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.ir.model import IRNode


def user_source(node: "IRNode") -> tuple[str, int, str] | None:
    """The model-code line that created ``node``: the innermost ``# In file`` frame outside MindSpore itself."""
    best = None
    for src in node.sources or []:
        f = src.file or ""
        if "/site-packages/mindspore/" in f or "/mindspore/ops/" in f or "/mindspore/nn/" in f:
            continue
        if src.line is None:
            continue
        if src.line_end is not None and src.line_end != src.line and best is not None:
            continue  # a function-definition span; the statement inside is more precise
        best = (f, int(src.line), (src.code or "").strip())
    return best


def source_location(node: "IRNode", note: str | None = None) -> Location | None:
    """A ``source`` location at the model-code line that created ``node`` (``None`` when the IR has none)."""
    src = user_source(node)
    if src is None:
        return None
    return Location(kind="source", path=src[0], line=src[1], note=note or src[2] or None)


def ir_location(path: str, node: "IRNode", note: str | None = None) -> Location:
    """An ``ir`` location of ``node`` in the IR file ``path``: its line, ``@graph:%index`` and scope."""
    idx = "return" if node.index is None else node.index
    return Location(kind="ir", path=path, line=node.line, node=f"@{node.graph}:%{idx}", op=node.scope, note=note)
