"""A JSON-able summary of discovered IR dumps (what ``advisor inspect`` prints).

Deterministic: paths are relative to the dump root (POSIX separators), ranks and stage kinds
appear in a fixed order, dict keys are sorted, lists are in counter order (files) or sorted
(histograms, skipped files). ``json.dumps(summary, sort_keys=True)`` is stable across runs.

Shape::

    {"root": str,
     "ranks": {"0" | "none": {
         "stages": {<kind>: [{"file", "stage", "name", "counter", "graph_id"}, ...]},
         "selected": {"final_frontend", "backend_kernel_graph", "parallel_graph",
                      "execution_order_csv": file (relative) or None},
         "parsed": {file: {"cnodes", "nodes", "subgraphs", "declared_cnodes",
                           "unparsed_lines", "format_version"} or {"error": "not readable"}},
         "op_histogram": {"final_frontend": {op: n}, "backend_kernel_graph": {op: n}},
         "skipped": [{"file", "reason"}]}},
     "skipped_counts": {reason: n}}

With ``parse=False`` nothing is read: ``parsed`` and ``op_histogram`` are empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor_core.ir.dumps import STAGE_KINDS, IRDumpFile, IRDumpSet, RankDumps
from advisor_core.ir.model import IRFile

__all__ = ["summarize_dumps"]


def _rel(path: Path, root: Path) -> str:
    base = root if root.is_dir() else root.parent
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _op_histogram(ir: IRFile | None) -> dict[str, int]:
    if ir is None:
        return {}
    counts: dict[str, int] = {}
    for node in ir.iter_nodes():
        counts[node.op] = counts.get(node.op, 0) + 1
    return dict(sorted(counts.items()))


def _file_entry(f: IRDumpFile, root: Path) -> dict[str, Any]:
    return {"file": _rel(f.path, root), "stage": f.stage, "name": f.name, "counter": f.counter,
            "graph_id": f.graph_id}


def _summarize_rank(rd: RankDumps, root: Path, parse: bool) -> dict[str, Any]:
    stages: dict[str, list[dict[str, Any]]] = {}
    for kind in STAGE_KINDS:
        files = rd.by_kind(kind)
        if files:
            stages[kind] = [_file_entry(f, root) for f in files]
    front = rd.final_frontend()
    back = rd.backend_kernel_graph()
    par = rd.parallel_graph()
    csv = rd.execution_order_csv()
    selected = {
        "final_frontend": _rel(front.path, root) if front else None,
        "backend_kernel_graph": _rel(back.path, root) if back else None,
        "parallel_graph": _rel(par.path, root) if par else None,
        "execution_order_csv": _rel(csv, root) if csv else None,
    }
    parsed: dict[str, Any] = {}
    histogram: dict[str, dict[str, int]] = {}
    if parse:
        for f in rd.files:
            ir = rd.parse(f)
            key = _rel(f.path, root)
            if ir is None:
                parsed[key] = {"error": "not readable (see diagnostics)"}
                continue
            parsed[key] = {
                "cnodes": ir.cnode_count,
                "nodes": ir.node_count,
                "subgraphs": len(ir.graphs),
                "declared_cnodes": ir.declared_cnode_count,
                "unparsed_lines": len(ir.unparsed),
                "format_version": ir.format_version,
            }
        histogram = {
            "final_frontend": _op_histogram(rd.parse(front)) if front else {},
            "backend_kernel_graph": _op_histogram(rd.parse(back)) if back else {},
        }
    skipped = sorted(({"file": _rel(s.path, root), "reason": s.reason} for s in rd.skipped),
                     key=lambda d: (d["file"], d["reason"]))
    return {
        "stages": stages,
        "selected": selected,
        "parsed": dict(sorted(parsed.items())),
        "op_histogram": histogram,
        "skipped": skipped,
    }


def summarize_dumps(dumps: IRDumpSet, *, parse: bool = True) -> dict[str, Any]:
    """Summarise every rank of ``dumps`` (see the module docstring for the shape)."""
    ranks: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for rd in dumps:
        ranks["none" if rd.rank is None else str(rd.rank)] = _summarize_rank(rd, dumps.root, parse)
        for s in rd.skipped:
            counts[s.reason] = counts.get(s.reason, 0) + 1
    return {"root": dumps.root.as_posix(), "ranks": ranks, "skipped_counts": dict(sorted(counts.items()))}
