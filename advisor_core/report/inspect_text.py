"""Human rendering of the ``advisor inspect`` report (rich tables)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def _ms(us: Any) -> str:
    if us is None:
        return "–"
    return f"{us / 1000.0:,.3f}"


_APO = "ASCEND_PROFILER_OUTPUT/"


def _rel(path: str, base: str) -> str:
    prefix = base.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _layout_line(par: dict[str, Any] | None) -> str:
    if not par:
        return "unknown (no distributed_args, parallel_group_info or parallel_mode in the profile)"
    parts = []
    for key, label in (
        ("world_size", "world"),
        ("data_parallel", "dp"),
        ("tensor_parallel", "tp"),
        ("pipeline_stages", "pp"),
        ("expert_parallel", "ep"),
        ("context_parallel", "cp"),
    ):
        if par.get(key) is not None:
            parts.append(f"{label}={par[key]}")
    if par.get("parallel_mode"):
        parts.append(f"mode={par['parallel_mode']}")
    if par.get("sequence_parallel") is not None:
        parts.append(f"sp={'on' if par['sequence_parallel'] else 'off'}")
    if par.get("groups"):
        parts.append(f"{len(par['groups'])} comm groups")
    return (" ".join(parts) or "no sizes") + f"  [{par['source']}]"


def _fit_path(path: str, width: int) -> str:
    """``path`` as it fits ``width`` columns: folders between the first and the file shortened to ``…``, the
    file name always whole (``--format json`` has every path in full)."""
    if len(path) <= width or "/" not in path:
        return path
    parts = path.split("/")
    head = parts[0] if len(parts[0]) <= 14 else parts[0][:12] + "…"
    return "/".join([head, "…", parts[-1]]) if len(parts) > 2 else "/".join([head, parts[-1]])


def render_inspect(report: dict[str, Any], console: Console) -> None:
    ranks = report["ranks"]
    if not ranks and not report.get("cluster"):
        console.print("[bold red]No profile data found.[/]")
    for r in ranks:
        fw = " ".join(x for x in (r.get("framework"), r.get("framework_version")) if x) or "framework unknown"
        cann = f", CANN {r['cann_version']}" if r.get("cann_version") else ""
        console.rule(f"[bold]Rank {r['rank_id']}[/]  ({r['rank_source']})")
        console.print(f"[dim]{r['profile_dir']}[/]  layout={r['layout']}")
        console.print(f"framework: {fw}{cann}" + (f"   collected: {r['collected_at']}" if r.get("collected_at") else ""))
        console.print(f"parallel:  {_layout_line(r.get('parallel'))}")
        prof = r.get("profiler")
        if prof:
            bits = [f"{k}={v}" for k, v in prof.items() if v not in (None, [], {})]
            if bits:
                console.print("profiler:  " + ", ".join(bits))
        steps = r.get("steps")
        span = r.get("time_span")
        line = f"steps:     {steps['count']} ({steps['source']})" if steps else "steps:     none found"
        if span:
            line += f"   time span {_ms(span['span_us'])} ms ({span['source']})"
        console.print(line)

        # a status column of nothing but "ok" costs the width a file name needs at 80 columns
        all_ok = all(tb["status"] == "ok" for tb in r["tables"])
        caption = "files in ASCEND_PROFILER_OUTPUT/ unless a folder is shown" + ("; every table read" if all_ok else "")
        t = Table(title="Tables", title_justify="left", show_edge=False, pad_edge=False, caption=caption,
                  caption_justify="left")
        t.add_column("table")
        t.add_column("rows", justify="right")
        if not all_ok:
            t.add_column("status")
        t.add_column("file", overflow="fold")
        for tb in r["tables"]:
            status = Text(tb["status"], style="green" if tb["status"] == "ok" else "red")
            cells = [tb["table"], "–" if tb["rows"] is None else f"{tb['rows']:,}"] + ([] if all_ok else [status])
            shown = _fit_path(_rel(tb["path"], r["profile_dir"]).removeprefix(_APO), console.width - 36)
            t.add_row(*cells, shown)
        console.print(t)

        bd = r.get("step_breakdown") or []
        if bd:
            b = Table(title=f"Per-step breakdown (ms) — {bd[0].get('source')}", title_justify="left", show_edge=False)
            cols = [
                ("step", "step"),
                ("total_us", "total"),
                ("computing_us", "computing"),
                ("communication_not_overlapped_us", "comm not overlapped"),
                ("free_us", "free"),
                ("preparing_us", "preparing"),
                ("iteration_interval_us", "step gap"),
                ("fp_bp_us", "fp+bp"),
                ("tail_us", "tail"),
            ]
            shown = [(k, h) for k, h in cols if k == "step" or any(row.get(k) is not None for row in bd)]
            for _, h in shown:
                b.add_column(h, justify="right")
            for row in bd[:50]:
                b.add_row(*[("all" if row[k] is None else str(row[k])) if k == "step" else _ms(row.get(k)) for k, _ in shown])
            if len(bd) > 50:
                b.caption = f"… {len(bd) - 50} more steps (see --format json)"
            console.print(b)
        if r["missing"]:
            console.print("[dim]not in this profile: " + ", ".join(m["table"] for m in r["missing"]) + "[/]")
    cl = report.get("cluster")
    if cl:
        console.rule("[bold]Cluster analysis output[/]")
        for k, v in cl["files"].items():
            console.print(f"{k}: [dim]{v}[/]")
        if cl.get("step_trace"):
            t = Table(show_edge=False)
            for h in ("type", "index", "computing", "comm not overlapped", "free", "stage"):
                t.add_column(h, justify="right")
            for row in cl["step_trace"]:
                t.add_row(
                    str(row.get("type")),
                    str(row.get("index")),
                    _ms(row.get("computing_us")),
                    _ms(row.get("communication_not_overlapped_us")),
                    _ms(row.get("free_us")),
                    _ms(row.get("stage_us")),
                )
            console.print(t)
        if cl.get("communication_ops") is not None:
            console.print(f"communication ops: {cl['communication_ops']} over ranks {cl.get('communication_ranks')}")
    ir = report.get("ir_dumps")
    if ir:
        render_ir_summary(ir, console)
    if report.get("superseded"):
        console.print(
            "[dim]older profiler directories set aside: "
            + ", ".join(f"rank {s['rank_id']}: {s['profile_dir']}" for s in report["superseded"])
            + "[/]"
        )


def render_ir_summary(ir: dict[str, Any], console: Console) -> None:
    """The ``ir_dumps`` section: per rank, stages with file counts, the selected graphs, op histograms."""
    console.rule("[bold]IR graph dumps[/]")
    console.print(f"[dim]{ir.get('root', '')}[/]")
    for rank_key, info in sorted(ir.get("ranks", {}).items()):
        label = "rank ?" if rank_key == "none" else f"rank {rank_key}"
        stages = info.get("stages") or {}
        console.print(
            f"[bold]{label}[/]: " + ", ".join(f"{kind} ×{len(files)}" for kind, files in sorted(stages.items()))
        )
        parsed = info.get("parsed") or {}
        hist = info.get("op_histogram") or {}
        for role, fname in sorted((info.get("selected") or {}).items()):
            if not fname:
                continue
            p = parsed.get(fname, {})
            line = f"  {role}: {fname}"
            if p:
                line += f" — {p.get('cnodes')} cnodes, {p.get('unparsed_lines', 0)} unparsed lines"
            ops = hist.get(role) or {}
            if ops:
                top = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
                line += "; ops: " + ", ".join(f"{k} {v}" for k, v in top)
            console.print(line)
        unparsed = sum(p.get("unparsed_lines", 0) for p in parsed.values())
        if parsed:
            console.print(f"  parsed {len(parsed)} files, {unparsed} unparsed lines in all")
        skipped = info.get("skipped") or []
        if skipped:
            console.print(f"  [dim]skipped {len(skipped)} non-IR files (actor_set, .dot, .pb)[/]")
