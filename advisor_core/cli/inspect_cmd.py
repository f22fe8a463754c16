"""``advisor inspect PATH... [--format text|json]``."""

from __future__ import annotations

import io
from pathlib import Path

import click

from advisor_core.cli.common import check_output_path, dump_json, print_diagnostics, stdout_console, write_output
from advisor_core.diagnostics import DiagnosticSink


@click.command("inspect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--no-ir", is_flag=True, help="Do not look for IR graph dumps.")
@click.option("--source", type=click.Choice(["auto", "text", "db"]), default="auto", show_default=True,
              help="Which profiler export to read when a rank has both (the DB where it holds a table, by default).")
@click.option("-v", "--verbose", is_flag=True, help="Also print informational diagnostics.")
def inspect_command(paths: tuple[Path, ...], fmt: str, output: Path | None, no_ir: bool, source: str, verbose: bool) -> None:
    """Show what profiler output (and IR dumps) PATH holds, per rank.

    For each rank: the artifacts found with row counts, steps and time span,
    framework and versions, parallel layout, the per-step breakdown (computing,
    communication not overlapped, free, preparing), and what is missing.
    Exit code 2 when nothing usable was found or an input could not be read.
    """
    from advisor_core.discover.inputs import classify_inputs
    from advisor_core.inspect import diagnostic_json, inspect_run
    from advisor_core.model.run import load_run

    check_output_path(output)
    sink = DiagnosticSink()
    scan = DiagnosticSink()
    classified = classify_inputs(list(paths), scan)  # where things are; load_run says what is wrong with them
    sink.extend(d for d in scan if d.code.startswith("scan-") or d.code == "symlink-loop")
    run = load_run(*(classified.profiles or paths), sink=sink, report_empty=False, source=source)
    extra = {}
    if not no_ir:
        extra = _ir_section(classified.graphs or [p for p in paths if p.is_dir()], sink)
    report = inspect_run(run, list(paths), extra=extra)
    nothing = not report["ranks"] and not report.get("cluster") and not report.get("ir_dumps")
    if nothing and not sink.has_errors:
        sink.error(
            "no-profile",
            "no profiler output or IR dumps found (looked for *_ascend_ms / *_ascend_pt directories, "
            "ASCEND_PROFILER_OUTPUT/, legacy profiler files, cluster_analysis_output/ and *.ir dumps)",
            paths[0],
        )
        report["diagnostics"] = [diagnostic_json(d) for d in sink]
    if fmt == "json":
        write_output(dump_json(report), output)
    elif not nothing:  # nothing found: the error line on stderr says so, stdout stays empty
        from advisor_core.report.inspect_text import render_inspect

        if output is not None:
            buf = io.StringIO()
            render_inspect(report, stdout_console(buf))
            write_output(buf.getvalue(), output)
        else:
            render_inspect(report, stdout_console())
    print_diagnostics(sink, verbose=verbose)
    raise SystemExit(2 if (sink.has_errors or nothing) else 0)


def _ir_section(paths: list[Path], sink: DiagnosticSink) -> dict:
    """IR dumps found under the IR roots discovery found (empty when there are none)."""
    try:
        from advisor_core.ir.dumps import find_ir_dumps
        from advisor_core.ir.summary import summarize_dumps
    except ImportError:
        return {}
    found = {}
    for p in paths:
        if not p.is_dir():
            continue
        dumps = find_ir_dumps(p, sink)
        if dumps is not None and getattr(dumps, "ranks", None):
            found[str(p)] = summarize_dumps(dumps)
    if not found:
        return {}
    if len(found) == 1:
        return {"ir_dumps": next(iter(found.values()))}
    return {"ir_dumps": {"ranks": {f"{k} {rk}": v for k, s in found.items() for rk, v in s.get("ranks", {}).items()}}}
