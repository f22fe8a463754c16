"""``advisor inspect``: what a profile holds, per rank, as a stable JSON-able report.

The report's shape is versioned (``schema_version``) and described by the JSON
Schema ``advisor_core/schemas/inspect.schema.json``; scripts may rely on it.
Building the report reads only what it needs: row counts of CSV files are line
counts, the time span comes from two kernel columns, steps from the step column
or the trace's ``ProfilerStep`` events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor_core import __version__
from advisor_core.analyses.step_time import step_breakdown, step_windows
from advisor_core.diagnostics import Diagnostic, DiagnosticSink
from advisor_core.model.run import Rank, Run

SCHEMA_VERSION = 1


def _json_value(v: Any) -> Any:
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if np.isnan(f) else round(f, 3)
    return v


def diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    return {
        "severity": d.severity.value,
        "code": d.code,
        "message": d.message,
        "path": d.path,
        "line": d.line,
        "column": d.column,
        "key": d.key,
    }


def _time_span(rank: Rank) -> dict[str, Any] | None:
    if rank.has_table("kernels"):
        k = rank.table("kernels", ["start_ns", "duration_us"])
        if k is not None and k["start_ns"].notna().any():
            start = k["start_ns"].dropna()
            end = (k["start_ns"] + (k["duration_us"].fillna(0.0) * 1000).round().astype("Int64")).dropna()
            return {"start_ns": int(start.min()), "end_ns": int(end.max()), "source": "kernels"}
    if rank.has_table("trace_events"):
        ev = rank.table("trace_events", ["ts_ns", "dur_us"])
        if ev is not None and ev["ts_ns"].notna().any():
            ts = ev["ts_ns"].dropna()
            end = (ev["ts_ns"] + (ev["dur_us"].fillna(0.0) * 1000).round().astype("Int64")).dropna()
            return {"start_ns": int(ts.min()), "end_ns": int(end.max()), "source": "trace_events"}
    return None


def _steps(rank: Rank) -> dict[str, Any] | None:
    w = step_windows(rank)
    cut = w.attrs.get("source", "ProfilerStep") if w is not None else None
    if w is not None and cut != "kernel_details Step ID":  # that one is said below, as the kernels' step_id
        return {"count": len(w), "ids": [int(s) for s in w["step"]],
                "source": _steps_source(rank) if cut == "ProfilerStep" else str(cut)}
    if rank.has_table("kernels") and "step_id" in (rank.columns("kernels") or []):
        k = rank.table("kernels", ["step_id"])
        if k is not None and k["step_id"].notna().any():
            ids = sorted(int(s) for s in k["step_id"].dropna().unique())
            return {"count": len(ids), "ids": ids, "source": "kernels step_id"}
    if rank.has_table("step_trace"):
        st = rank.table("step_trace")
        if st is not None and not st.empty and not bool(st["whole_run"].all()):
            ids = [int(s) for s in st["step"].dropna()]
            src = rank.table_source("step_trace")
            return {"count": len(ids), "ids": ids, "source": src[0].name if src else "step_trace"}
    if rank.has_table("host_queue"):
        hq = rank.table("host_queue")
        if hq is not None and not hq.empty:
            ids = [int(s) for s in hq["step"].dropna()]
            return {"count": len(ids), "ids": ids, "source": "host data queue (dataset pipeline steps)"}
    return None


def _steps_source(rank: Rank) -> str:
    src = rank.table_source("step_events")
    return f"{src[0].name} STEP_TIME" if src is not None and src[1] == "profiler_db" else "trace_view.json ProfilerStep#"


def _tables(rank: Rank) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    present: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for name, ld in sorted(rank._loaders.items()):
        src = rank.table_source(name)
        if src is None:
            missing.append({"table": name, "reason": f"no {' or '.join(ld.artifacts)} file"})
            continue
        cols = rank.columns(name)
        rows = rank.row_count(name) if cols is not None else None
        if cols is None:
            status = "unusable"
        else:
            status = "ok"
        present.append(
            {
                "table": name,
                "title": ld.title,
                "artifact": src[1],
                "path": str(src[0]),
                "status": status,
                "rows": rows,
                "columns": cols or [],
            }
        )
    return present, missing


def _breakdown(rank: Rank) -> list[dict[str, Any]]:
    df = step_breakdown(rank)
    if df is None:
        return []
    return [{k: _json_value(v) for k, v in rec.items()} for rec in df.to_dict("records")]


def inspect_rank(rank: Rank, sink: DiagnosticSink) -> dict[str, Any]:
    ident = rank.identity
    tables, missing = _tables(rank)
    span = _time_span(rank)
    if span is not None:
        span["span_us"] = round((span["end_ns"] - span["start_ns"]) / 1000.0, 3)
    return {
        "rank_id": ident.rank_id,
        "rank_source": ident.rank_source,
        "profile_dir": ident.profile_dir,
        "layout": ident.layout,
        "host": ident.host,
        "pid": ident.pid,
        "collected_at": ident.collected_at,
        "framework": ident.framework,
        "framework_version": ident.framework_version,
        "cann_version": ident.cann_version,
        "profiler": rank.settings.model_dump(exclude={"raw"}) if rank.settings else None,
        "parallel": rank.parallel.model_dump() if rank.parallel else None,
        "env": rank.env,
        "tables": tables,
        "missing": missing,
        "time_span": span,
        "steps": _steps(rank),
        "step_breakdown": _breakdown(rank),
        "diagnostics": [diagnostic_json(d) for d in sink if d.path and d.path.startswith(str(rank.path))],
    }


def _cluster(run: Run) -> dict[str, Any] | None:
    files = run.profiles.cluster_files
    if not files:
        return None
    out: dict[str, Any] = {"files": {k: str(v) for k, v in sorted(files.items())}}
    cst = run.cluster_step_trace()
    if cst is not None:
        rows = []
        for rec in cst.to_dict("records"):
            rows.append({k: _json_value(v) for k, v in rec.items()})
        out["step_trace"] = rows
    cc = run.cluster_communication()
    if cc is not None:
        out["communication_ops"] = int(len(cc))
        out["communication_ranks"] = sorted(int(r) for r in cc["rank"].dropna().unique())
    return out


def inspect_run(run: Run, inputs: list[Path], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole inspect report (see module docstring)."""
    ranks = [inspect_rank(r, run.diagnostics) for r in run]
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "advisor", "version": __version__},
        "inputs": [str(p) for p in inputs],
        "ranks": ranks,
        "superseded": [
            {"rank_id": s.identity.rank_id if s.identity else None, "profile_dir": str(s.path)}
            for s in run.profiles.superseded
        ],
        "cluster": _cluster(run),
    }
    if extra:
        report.update(extra)
    report["diagnostics"] = [diagnostic_json(d) for d in run.diagnostics]
    return report
