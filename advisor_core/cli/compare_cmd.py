"""``advisor compare BEFORE AFTER``: did the fix work, and was the estimate right."""

from __future__ import annotations

from pathlib import Path

import click

from advisor_core.cli.common import print_diagnostics, read_saved_report, stderr_console, write_output
from advisor_core.cli.engine_cmds import EXIT_ERROR, _codes, _host, _settings, plugin_options


@click.command("compare")
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--before-config", type=click.Path(path_type=Path, dir_okay=False), help="Training YAML of BEFORE.")
@click.option("--after-config", type=click.Path(path_type=Path, dir_okay=False), help="Training YAML of AFTER.")
@click.option("--before-graphs", type=click.Path(path_type=Path), help="IR dump directory of BEFORE.")
@click.option("--after-graphs", type=click.Path(path_type=Path), help="IR dump directory of AFTER.")
@click.option("--report", "report", type=click.Path(path_type=Path, dir_okay=False),
              help="A saved `analyze --format json` report of BEFORE: its findings are the estimates compared.")
@click.option("--select", multiple=True, help="Rules whose findings are compared (codes, prefixes, names, tags).")
@click.option("--ignore", multiple=True, help="Rules left out.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown", "html"]), default="text",
              show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write here instead of stdout.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Cores for the per-rank work.")
@click.option("-v", "--verbose", is_flag=True, help="Also print informational diagnostics.")
@plugin_options
def compare_command(before: Path, after: Path, before_config: Path | None, after_config: Path | None,
                    before_graphs: Path | None, after_graphs: Path | None, report: Path | None,
                    select: tuple[str, ...], ignore: tuple[str, ...], fmt: str, output: Path | None,
                    jobs: int | None, verbose: bool, no_plugins: bool, plugin_flags: tuple[str, ...],
                    settings_file: Path | None) -> None:
    """Compare a run before a fix with the run after it.

    Each side is anything `analyze` accepts (a profile directory, a cluster parent, a
    run directory with IR dumps and config). Prints the steady-state step time before
    and after (warm-up steps detected and left out), the breakdown, each finding of
    BEFORE as gone, still there or changed with its estimated saving beside the
    measured change, new findings, the kernels whose time changed most, and the config
    diff. Exit code: 0 compared, 2 usage or input error.
    """
    from advisor_core.compare import compare_runs, render
    from advisor_core.compare.compare import ReportMismatch
    from advisor_core.engine.runner import SelectionError
    from advisor_core.engine.session import Session, SessionOptions

    for p, what in ((before, "BEFORE"), (after, "AFTER")):
        if not p.exists():
            raise click.UsageError(f"{what} {p} does not exist")
    if output is not None and not output.parent.is_dir():
        raise click.UsageError(f"--output {output}: directory {output.parent} does not exist")
    settings = _settings(settings_file)
    host = _host(no_plugins, plugin_flags, settings)
    saved = read_saved_report(report) if report is not None else None
    acted_on = saved.findings if saved is not None else None
    report_inputs = saved.inputs if saved is not None else None
    sessions = []
    for path, cfg, graphs in ((before, before_config, before_graphs), (after, after_config, after_graphs)):
        opts = SessionOptions(config=cfg, graphs=[graphs] if graphs else [], settings=settings, jobs=jobs)
        sessions.append(Session([path], opts, host=host))
    try:
        result = compare_runs(*sessions, before_label=str(before), after_label=str(after), before_findings=acted_on,
                              report_inputs=report_inputs, report_label=f"--report {report}",
                              select=_codes(select), ignore=_codes(ignore), workers=jobs)
    except SelectionError as exc:
        raise click.UsageError(str(exc)) from None
    except ReportMismatch as exc:
        stderr_console().print(f"advisor: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(EXIT_ERROR) from None
    write_output(render(result, fmt), output)
    for s in sessions:
        print_diagnostics(s.sink, verbose=verbose)
    if any(s.sink.has_errors for s in sessions) and (sessions[0].run is None or sessions[1].run is None):
        stderr_console().print("advisor: a side has no usable profile; nothing measured", markup=False)
        raise SystemExit(EXIT_ERROR)
