"""``advisor analyze``, ``rules``, ``explain``, ``plugins``: thin wrappers over the engine."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from advisor_core.cli.common import (
    check_output_path,
    print_diagnostics,
    stderr_console,
    stdout_console,
    wrap_text,
    write_output,
)
from advisor_core.engine.findings import Severity

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
FAIL_ON = ("high", "medium", "low", "never")


def plugin_options(f: Any) -> Any:
    """Flags shared by every command that loads plugins."""
    f = click.option("--settings", "settings_file", type=click.Path(path_type=Path, dir_okay=False),
                     help="Settings file (default: nearest advisor.toml or pyproject.toml [tool.advisor]).")(f)
    f = click.option("-p", "plugin_flags", multiple=True, metavar="NAME",
                     help="Load plugin NAME even with autoload off; '-p no:NAME' blocks it.")(f)
    f = click.option("--no-plugins", is_flag=True,
                     help="Do not autoload third-party plugins (also ADVISOR_DISABLE_PLUGIN_AUTOLOAD=1); built-ins still load.")(f)
    return f


def _split_plugin_flags(flags: tuple[str, ...]) -> tuple[list[str], list[str]]:
    load, block = [], []
    for f in flags:
        for part in f.split(","):
            part = part.strip()
            if part.startswith("no:"):
                block.append(part[3:])
            elif part:
                load.append(part)
    return load, block


def _settings(settings_file: Path | None):  # type: ignore[no-untyped-def]
    from advisor_core.engine.settings import SettingsError, load_settings

    try:
        return load_settings(settings_file)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


def _codes(values: tuple[str, ...]) -> list[str] | None:
    out = [c.strip() for v in values for c in v.split(",") if c.strip()]
    return out or None


def _host(no_plugins: bool, plugin_flags: tuple[str, ...], settings: Any):  # type: ignore[no-untyped-def]
    from advisor_core.engine.plugins import load_plugins

    return load_plugins(**_plugin_args(no_plugins, plugin_flags, settings))


def _plugin_args(no_plugins: bool, plugin_flags: tuple[str, ...], settings: Any) -> dict[str, Any]:
    """``load_plugins``' arguments for the plugin flags and settings."""
    load, block = _split_plugin_flags(plugin_flags)
    autoload = False if no_plugins else settings.plugins_autoload
    return {"autoload": autoload, "load": load + settings.plugins_load, "block": block + settings.plugins_block}


def exit_code(result: Any, fail_on: str) -> int:
    """2 for input/plugin/rule errors; else 1 when a finding is at or above ``fail_on``; else 0."""
    if result.errors or result.has_input_errors:
        return EXIT_ERROR
    if fail_on == "never":
        return EXIT_OK
    floor = Severity(fail_on).rank
    return EXIT_FINDINGS if any(f.severity.rank >= floor for f in result.findings) else EXIT_OK


def print_timings(result: Any, wall_s: float, console: Any) -> None:
    """``--timings``: seconds per load (summed over ranks) and per rule (its per-rank part included)."""
    lines = [f"timings (s): wall {wall_s:.2f}"]
    ranks = len(result.inputs.get("ranks") or [])
    # the trace's step events are scanned alongside the kernel read when Arrow has cores to spare
    for key, label in (("load", "loads: op views, rank tables"), ("derive", "step breakdowns")):
        if key in result.unit_seconds:
            lines.append(f"  {label:<38} {result.unit_seconds[key]:7.2f}  ({ranks} rank(s), summed)")
    for run in sorted(result.runs, key=lambda r: -r.seconds):
        if run.status != "skipped":
            lines.append(f"  rule {run.code:<33} {run.seconds:7.2f}  {run.status}")
    console.print("\n".join(lines), markup=False, highlight=False)


def check_output_flags(host: Any, fmt: str, output: Path | None) -> None:
    """Refuse a format or an output path that cannot work, before any analysis runs."""
    formats = host.formats()
    if fmt not in formats:
        raise click.UsageError(f"unknown --format {fmt!r}; available: {', '.join(sorted(formats))}")
    check_output_path(output)


def render(result: Any, host: Any, fmt: str, output: Path | None, ctx: Any) -> None:
    formats = host.formats()
    if fmt not in formats:
        raise click.UsageError(f"unknown --format {fmt!r}; available: {', '.join(sorted(formats))}")
    _, formatter = formats[fmt]
    if fmt == "text" and output is None:
        formatter.print(result, ctx, stdout_console())
        return
    write_output(formatter.render(result, ctx), output)


@click.command("analyze")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--profile", "profiles", multiple=True, type=click.Path(path_type=Path), help="Profile directory (overrides classification).")
@click.option("--graphs", "graphs", multiple=True, type=click.Path(path_type=Path), help="IR dump directory (overrides classification).")
@click.option("--config", "config", type=click.Path(path_type=Path, dir_okay=False), help="Training YAML (overrides classification).")
@click.option("--select", "select", multiple=True, help="Rules to run: codes, prefixes, names, tags or ALL (comma-separated).")
@click.option("--extend-select", "extend_select", multiple=True, help="Added to the selection.")
@click.option("--ignore", "ignore", multiple=True, help="Rules not to run.")
@click.option("--format", "fmt", default=None, help="text, json, sarif, markdown, github, html (or a plugin's format).")
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None, help="Lowest severity that makes the exit code 1 [default: low].")
@click.option("--no-fixes", is_flag=True, help="Text format: do not print patch diffs.")
@click.option("-v", "--verbose", is_flag=True, help="Also print informational diagnostics.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Worker processes for the per-rank work [default: every core, when the run is large enough].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run the per-rank work on a Dask cluster: tcp://HOST:PORT, or 'local' for a local one "
                   "(also [tool.advisor] scheduler, ADVISOR_SCHEDULER; needs the dask extra).")
@click.option("--scheduler-timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="Seconds to reach the scheduler and find a worker.")
@click.option("--source", type=click.Choice(["auto", "text", "db"]), default="auto", show_default=True,
              help="Which profiler export to read when a rank has both: the SQLite DB where it holds a table "
                   "(auto), only the text files, or only the DB.")
@click.option("--timings", is_flag=True, help="Print seconds per load and per rule on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display on stderr.")
@plugin_options
def analyze_command(paths: tuple[Path, ...], profiles: tuple[Path, ...], graphs: tuple[Path, ...], config: Path | None,
                    select: tuple[str, ...], extend_select: tuple[str, ...], ignore: tuple[str, ...], fmt: str | None,
                    output: Path | None, fail_on: str | None, no_fixes: bool, verbose: bool, jobs: int | None,
                    scheduler: str | None, scheduler_timeout: float, source: str, timings: bool, quiet: bool,
                    no_plugins: bool, plugin_flags: tuple[str, ...], settings_file: Path | None) -> None:
    """Find what is slow in a training run, ranked by the time it would win.

    Each PATH is classified automatically — profile directory, cluster parent,
    IR dump directory, training YAML, or a run directory holding several of
    these; --profile/--graphs/--config override. Exit code: 0 no finding at or
    above --fail-on, 1 findings, 2 usage or input error (or a plugin/rule failed).
    """
    from advisor_core.engine.ahead import begin_ahead

    settings = _settings(settings_file)
    if not paths and not profiles and not graphs and not config:
        raise click.UsageError("give at least one PATH (or --profile/--graphs/--config)")
    scheduler = scheduler or os.environ.get("ADVISOR_SCHEDULER") or settings.scheduler
    # What the run's first part (imports, the plugins) overlaps: a lone rank's kernel table read on Arrow's
    # threads. With a selection the rules may not read kernels at all (which needs them is known only once they
    # are loaded): then no read is begun that the run might have to wait for to no use.
    every_rule = not _codes(select) and settings.select in (None, ["ALL"])
    ahead = begin_ahead(list(profiles) or list(paths), source=source, jobs=jobs, scheduler=scheduler,
                        kernels=every_rule)

    from advisor_core.engine.dask_units import SchedulerError
    from advisor_core.engine.runner import SelectionError
    from advisor_core.engine.session import Session, SessionOptions
    from advisor_core.report.base import RenderContext

    host = _host(no_plugins, plugin_flags, settings)
    check_output_flags(host, fmt or settings.format, output)
    session = Session(
        list(paths),
        SessionOptions(profiles=list(profiles), graphs=list(graphs), config=config, settings=settings, jobs=jobs,
                       scheduler=scheduler, scheduler_timeout=scheduler_timeout, source=source, read_ahead=ahead),
        host=host,
    )
    sel = _codes(select)
    if sel is None and extend_select:
        sel = list(settings.select or ["ALL"])
    if sel is not None:
        sel = sel + (_codes(extend_select) or [])
    from advisor_core.cli.progress import RunProgress

    if not session.profile_paths and not session.graph_paths and session.config_path is None:
        print_diagnostics(session.sink, verbose=verbose)  # each given path: why it holds nothing
        if not session.sink.has_errors:  # else that line said it already: one line per problem
            stderr_console().print("advisor: nothing to analyse: no profiler output, IR dumps or training config "
                                   "found", markup=False, highlight=False)
        raise SystemExit(EXIT_ERROR)
    err = stderr_console()
    started = time.perf_counter()
    try:
        with RunProgress(err, enabled=not quiet) as progress:
            result = session.analyze(select=sel, ignore=_codes(ignore), progress=progress,
                                     summaries=(fmt or settings.format) == "html")
    except SelectionError as exc:
        raise click.UsageError(str(exc)) from None
    except SchedulerError as exc:
        stderr_console().print(f"advisor: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(EXIT_ERROR) from None
    if timings:
        print_timings(result, time.perf_counter() - started, err)
    ctx = RenderContext(inputs=result.inputs, fail_on=fail_on or settings.fail_on, show_fixes=not no_fixes)
    render(result, host, fmt or settings.format, output, ctx)
    print_diagnostics(session.sink, verbose=verbose)
    _print_errors(result)
    raise SystemExit(exit_code(result, fail_on or settings.fail_on))


def _print_errors(result: Any) -> None:
    err = stderr_console()
    for e in result.errors:
        err.print(f"advisor: {e.message}", style="bold red", markup=False, highlight=False, soft_wrap=True)


@click.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@plugin_options
def rules_command(fmt: str, no_plugins: bool, plugin_flags: tuple[str, ...], settings_file: Path | None) -> None:
    """List every registered rule: code, name, the tags --select accepts, severity, fix, plugin and summary.

    `advisor explain CODE` gives a rule's help page and the evidence it needs; --format
    json lists everything.
    """
    settings = _settings(settings_file)
    host = _host(no_plugins, plugin_flags, settings)
    rules = host.rules()
    rows = [
        {
            "code": code,
            "name": r.cls.name,
            "plugin": r.plugin.name,
            "distribution": r.plugin.distribution,
            "severity": r.cls.severity.value,
            "needs": r.cls.requires.describe(),
            "fix": r.cls.fix_availability,
            "tags": list(r.cls.tags),
            "summary": r.cls.summary,
        }
        for code, r in rules.items()
    ]
    if fmt == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        from rich.table import Table

        console = stdout_console()
        title = f"{len(rows)} rule(s); --select/--ignore take codes, prefixes, names or tags"
        if console.width >= 120:
            t = Table(title=title, title_justify="left")
            for h, kw in (("code", {"no_wrap": True}), ("name", {}), ("tags", {}), ("severity", {"no_wrap": True}),
                          ("fix", {"no_wrap": True}), ("plugin", {}), ("summary", {"ratio": 1})):
                t.add_column(h, overflow="fold", **kw)
            for r in rows:
                t.add_row(r["code"], r["name"], ", ".join(r["tags"]), r["severity"], r["fix"], r["plugin"], r["summary"])
            console.print(t)
        else:  # narrow: one entry per rule, nothing cut
            console.print(title, markup=False, highlight=False)
            for r in rows:
                console.print(f"{r['code']:<7}{r['name']}  [{', '.join(r['tags'])}]", markup=False, highlight=False)
                line = f"{r['summary']} ({r['severity']}; fix {r['fix']}; {r['plugin']})"
                console.print(wrap_text(line, console.width, lead=" " * 7, hang=" " * 7), markup=False,
                              highlight=False, soft_wrap=True)
    _report_plugin_failures(host)
    raise SystemExit(EXIT_ERROR if host.failed else EXIT_OK)


@click.command("explain")
@click.argument("code")
@plugin_options
def explain_command(code: str, no_plugins: bool, plugin_flags: tuple[str, ...], settings_file: Path | None) -> None:
    """Print a rule's help page: what, why, example, fix, evidence and options."""
    settings = _settings(settings_file)
    host = _host(no_plugins, plugin_flags, settings)
    rules = host.rules()
    match = rules.get(code.upper()) or next((r for r in rules.values() if r.cls.name == code), None)
    if match is None:
        raise click.UsageError(f"no rule {code!r}; `advisor rules` lists them")
    cls = match.cls
    width = stdout_console().width  # the header lines are laid out for it; the help page keeps its own layout
    out = [wrap_text(f"{cls.code} {cls.name} — {cls.summary}", width, hang="  "), ""]
    out.append(wrap_text(f"plugin: {match.plugin.label()}   default severity: {cls.severity.value}   "
                         f"fix: {cls.fix_availability}", width, hang="  "))
    out.append(wrap_text(f"evidence (any of): {cls.requires.describe()}", width, hang="  "))
    fields = cls.Options.model_fields
    if fields:
        out.append(wrap_text(f"options ([rules.{cls.code}] in advisor.toml, [tool.advisor.rules.{cls.code}] in "
                             "pyproject.toml):", width, hang="  "))
        for name, fi in fields.items():
            desc = f" — {fi.description}" if fi.description else ""
            out.append(wrap_text(f"{name} = {fi.default!r}{desc}", width, lead="  ", hang="    "))
    out.append("")
    out.append(cls.help_text())
    sys.stdout.write("\n".join(out) + "\n")
    raise SystemExit(EXIT_OK)


@click.command("plugins")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@plugin_options
def plugins_command(fmt: str, no_plugins: bool, plugin_flags: tuple[str, ...], settings_file: Path | None) -> None:
    """List plugins: name, distribution, version, status, hooks implemented."""
    settings = _settings(settings_file)
    host = _host(no_plugins, plugin_flags, settings)
    host.rules()  # surfaces registration errors
    host.formats()
    rows = [
        {
            "name": r.name,
            "distribution": r.distribution,
            "version": r.version,
            "builtin": r.builtin,
            "status": r.status,
            "hooks": r.hooks,
            "error": r.error,
            "detail": r.detail,
        }
        for r in host.records
    ]
    if fmt == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        from rich.table import Table

        # laid out for 80 columns: the version beside its distribution, a note column only when there is a note
        notes = any(r["error"] or r["detail"] for r in rows)
        t = Table(title=f"{len(rows)} plugin(s)", title_justify="left", show_edge=False, pad_edge=False)
        for h in ("name", "distribution", "status", "hooks") + (("note",) if notes else ()):
            t.add_column(h, overflow="fold")
        for r in rows:
            dist = r["distribution"] + (f" {r['version']}" if r["version"] else "") if r["distribution"] else "core"
            cells = [r["name"], dist, r["status"], ", ".join(h.replace("advisor_", "") for h in r["hooks"])]
            t.add_row(*cells, *([r["error"] or r["detail"] or ""] if notes else []))
        stdout_console().print(t)
    _report_plugin_failures(host)
    raise SystemExit(EXIT_ERROR if host.failed else EXIT_OK)


def _report_plugin_failures(host: Any) -> None:
    err = stderr_console()
    for rec in host.failed:
        err.print(f"advisor: failed to load plugin {rec.label()}: {rec.error}", style="bold red", markup=False,
                  highlight=False, soft_wrap=True)
