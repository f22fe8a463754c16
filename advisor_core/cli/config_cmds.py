"""``advisor lint`` (pre-merge config checks) and ``advisor fix`` (apply config patches atomically)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from advisor_core.cli.common import print_diagnostics, read_saved_report, stderr_console
from advisor_core.cli.engine_cmds import (
    FAIL_ON,
    _codes,
    _host,
    _print_errors,
    _settings,
    check_output_flags,
    exit_code,
    plugin_options,
    render,
)


@click.command("lint")
@click.argument("configs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="CONFIG_OR_DIR...")
@click.option("--graphs", "graphs", multiple=True, type=click.Path(path_type=Path), help="Baseline IR dump directory from the last run.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(path_type=Path), help="Baseline profile from the last run.")
@click.option("--devices", type=click.IntRange(min=1), help="Device count the config will run on (checks dp × mp × pp).")
@click.option("--select", "select", multiple=True, help="Rules to run (codes, prefixes, names, tags, ALL).")
@click.option("--ignore", "ignore", multiple=True, help="Rules not to run.")
@click.option("--format", "fmt", default=None, help="text, json, sarif, markdown, github, html (or a plugin's format).")
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None, help="Lowest severity that makes the exit code 1 [default: medium].")
@click.option("--fix", "fix", is_flag=True, help="Apply the safe patches of the findings to each config (atomically).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix: also apply unsafe patches.")
@click.option("-v", "--verbose", is_flag=True, help="Also print informational diagnostics and every rule that found nothing.")
@plugin_options
def lint_command(configs: tuple[Path, ...], graphs: tuple[Path, ...], profiles: tuple[Path, ...], devices: int | None,
                 select: tuple[str, ...], ignore: tuple[str, ...], fmt: str | None, output: Path | None, fail_on: str | None,
                 fix: bool, unsafe_fixes: bool, verbose: bool, no_plugins: bool, plugin_flags: tuple[str, ...],
                 settings_file: Path | None) -> None:
    """Check training configs before they merge: no profile needed.

    Runs every rule that can judge a config on its own (recompute patterns and
    per-stage forms, dims not multiples of 16, dp × mp × pp vs --devices,
    micro_batch_num vs pipeline_stage, all_reduce_fusion_config order,
    mixed-precision settings that force casts, …) and, given a baseline --graphs
    or --profile from the last run, the checks that need one. Each finding points
    at file:line:column of the key. A directory lints every YAML file under it.
    YAML files that are not training configs are skipped, each named on one line
    (so it can run on every YAML of a pre-commit change); a file that is not valid
    YAML is an input error (exit 2, and a failed run in SARIF) whatever else was
    linted. With --fix, the
    safe patches are applied and the exit code is 1 when a file was changed (what
    pre-commit expects). Exit code: 0 nothing at or above --fail-on (default
    medium), 1 findings, 2 usage/input error.
    """
    from advisor_core.config.document import ConfigDocument
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.discover.inputs import looks_like_training_config
    from advisor_core.engine.runner import AnalysisResult, SelectionError, Skipped
    from advisor_core.engine.session import Session, SessionOptions, SharedEvidence
    from advisor_core.report.base import RenderContext

    settings = _settings(settings_file)
    host = _host(no_plugins, plugin_flags, settings)
    check_output_flags(host, fmt or settings.format, output)
    # the baseline is read once, for every config, and what is wrong with it said once
    baseline = SharedEvidence(profiles, graphs, host) if profiles or graphs else None
    options = dict(settings.rule_options)
    if devices:
        options.setdefault("LC004", {})
        options["LC004"] = {**options["LC004"], "devices": devices}
    merged: AnalysisResult | None = None
    changed_any = False
    sinks = [baseline.sink] if baseline is not None else []
    checked: list[str] = []
    not_configs: list[Path] = []
    unreadable = DiagnosticSink()
    err = stderr_console()
    for cfg in _yaml_files(configs):
        probe = DiagnosticSink()
        doc = ConfigDocument.load(cfg, probe)
        if doc is None:  # not YAML at all (or unreadable): an error, never a pass
            unreadable.extend(probe)
            continue
        if not looks_like_training_config(cfg):
            not_configs.append(cfg)  # named, found in a folder or given: nothing passes unsaid
            err.print(f"{cfg}: skipped: not a MindFormers training config (no model/parallel_config/runner_config "
                      "… sections)", style="dim", markup=False, soft_wrap=True)
            continue
        session = Session([], SessionOptions(config=cfg, graphs=list(graphs), profiles=list(profiles), settings=settings,
                                             baseline=True, config_document=doc, evidence=baseline), host=host)
        try:
            result = session.analyze(select=_codes(select) or settings.effective_select(), ignore=_codes(ignore) or settings.ignore,
                                     options=options)
        except SelectionError as exc:
            raise click.UsageError(str(exc)) from None
        sinks.append(session.sink)
        checked.append(str(cfg))
        if fix:
            before = cfg.read_bytes()
            if apply_fixes(cfg, result.findings, unsafe=unsafe_fixes, show_diff=False) == 2:
                raise SystemExit(2)
            changed_any = changed_any or cfg.read_bytes() != before
        result.skipped = [Skipped(s.code, s.name, s.plugin, f"{cfg.name}: {s.reason}") for s in result.skipped]
        if merged is None:
            merged = result
        else:
            merged.findings.extend(result.findings)
            merged.skipped.extend(result.skipped)
            merged.errors.extend(e for e in result.errors if e.message not in {x.message for x in merged.errors})
            merged.diagnostics.extend(result.diagnostics)
            merged.runs.extend(result.runs)
    if merged is not None and baseline is not None:
        merged.diagnostics[:0] = list(baseline.sink)
    if len(unreadable):
        sinks.append(unreadable)
        if merged is not None:  # whatever else was linted, a config that could not be read is an input error
            merged.diagnostics.extend(unreadable)
    if merged is None:
        # Nothing was checked: say so, and still write the (empty) report a workflow uploads.
        merged = AnalysisResult(findings=[], skipped=[], errors=[], diagnostics=list(unreadable),
                                rules=host.rules(), runs=[])
        if not len(unreadable):
            err.print(f"nothing linted: none of the {len(not_configs)} YAML file(s) given is a MindFormers training "
                      "config", markup=False, soft_wrap=True)
    from advisor_core.engine.findings import sort_findings

    merged.findings = sort_findings(merged.findings)
    merged.diagnostics = list(dict.fromkeys(merged.diagnostics))
    merged.inputs = {"configs": checked, "graphs": [str(g) for g in graphs], "profiles": [str(p) for p in profiles]}
    level = fail_on or (settings.fail_on if settings.source and settings.fail_on != "low" else "medium")
    ctx = RenderContext(inputs=merged.inputs, fail_on=level, command="lint", show_skipped=verbose)
    if checked or output is not None or (fmt or settings.format) != "text":
        render(merged, host, fmt or settings.format, output, ctx)  # no "No findings." when nothing was read
    # Each config's analysis of a baseline large enough for worker processes reads its ranks again, and says
    # again what is wrong with them: said once.
    said = DiagnosticSink()
    said.extend(d for s in sinks for d in s)  # the sink keeps each once
    print_diagnostics(said, verbose=verbose)
    _print_errors(merged)
    code = exit_code(merged, level)
    if fix and changed_any and code == 0:
        code = 1  # pre-commit: a hook that modified files fails so the change is reviewed
    raise SystemExit(code)


@click.command("fix")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--config", "config", required=True, type=click.Path(path_type=Path, dir_okay=False, exists=False),
              help="The training YAML to fix.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(path_type=Path),
              help="Profile directory of the run the config belongs to (analysed to find the patches).")
@click.option("--graphs", "graphs", multiple=True, type=click.Path(path_type=Path),
              help="IR dump directory of that run (analysed to find the patches).")
@click.option("--from-report", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Apply the patches of a saved `advisor analyze --format json` report instead of analysing again.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the unified diff and write nothing.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply unsafe patches (model shape, precision, parallel layout, recompute).")
@click.option("--select", "select", multiple=True, help="Only patches of these rules.")
@click.option("--ignore", "ignore", multiple=True, help="Not the patches of these rules.")
@plugin_options
def fix_command(paths: tuple[Path, ...], config: Path, profiles: tuple[Path, ...], graphs: tuple[Path, ...],
                from_report: Path | None, show_diff: bool, unsafe_fixes: bool, select: tuple[str, ...], ignore: tuple[str, ...],
                no_plugins: bool, plugin_flags: tuple[str, ...], settings_file: Path | None) -> None:
    """Apply the config patches findings propose, atomically.

    Safe patches by default; unsafe ones with --unsafe-fixes; display-only ones never.
    Every patch's `test` preconditions are checked against the file as it is now: if
    the file changed since it was analysed, nothing is written and the failed
    precondition is named (exit 2). Only the patched lines change; comments,
    anchors, quoting and key order are kept. --diff prints and writes nothing
    (exit 1 when there is something to change, 0 otherwise).
    """
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.engine.runner import SelectionError
    from advisor_core.engine.session import Session, SessionOptions

    if not config.is_file():
        raise click.UsageError(f"--config {config}: file does not exist")
    settings = _settings(settings_file)
    if from_report is not None:
        findings = read_saved_report(from_report).findings
        sink = DiagnosticSink()
    else:
        host = _host(no_plugins, plugin_flags, settings)
        session = Session(list(paths), SessionOptions(profiles=list(profiles), graphs=list(graphs), config=config, settings=settings),
                          host=host)
        try:
            result = session.analyze(select=_codes(select), ignore=_codes(ignore))
        except SelectionError as exc:
            raise click.UsageError(str(exc)) from None
        findings = result.findings
        sink = session.sink
        print_diagnostics(sink, verbose=False)
        if result.errors:
            _print_errors(result)
        if session.mismatches:
            stderr_console().print(f"advisor fix: not fixing {config}: it does not belong to the run given "
                                   "(see above)", markup=False, soft_wrap=True)
            raise SystemExit(2)
    code = apply_fixes(config, findings, unsafe=unsafe_fixes, show_diff=show_diff, select=_codes(select), ignore=_codes(ignore),
                       retarget=from_report is not None)
    raise SystemExit(code)


def apply_fixes(config: Path, findings: list[Any], *, unsafe: bool, show_diff: bool,
                select: list[str] | None = None, ignore: list[str] | None = None, retarget: bool = False) -> int:
    """Choose the findings' patches for ``config`` and apply them atomically; the exit code.

    Safe patches only unless ``unsafe``; display-only never; of two patches changing
    the same key the higher-ranked wins. Preconditions are checked against the file
    as it is on disk now. Returns 0 (applied, or nothing to do), 1 (``show_diff`` and
    there is a change) or 2 (refused: a precondition failed, verification or write failed).

    A patch made for another file is skipped, and said; with ``retarget`` (patches from a saved
    report, applied to a copy of the config they were made for) it applies to ``config`` when
    every patch of the report names one and the same file: its ``test`` preconditions then
    decide whether the copy still holds the values the patch was computed from.
    """
    from advisor_core.config.document import ConfigDocument
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.engine.findings import Safety
    from advisor_core.patch import (
        AtomicWriteError,
        PatchVerificationError,
        apply_patches,
        atomic_write,
        check_preconditions,
        unified_diff,
    )

    err = stderr_console()
    chosen, hidden_unsafe, conflicts = [], 0, []
    claimed: dict[str, str] = {}
    targets = {str(p.target) for f in findings for p in f.patches if p.target is not None}
    others = sorted(t for t in targets if Path(t).resolve() != config.resolve())
    retargeted = retarget and len(targets) == 1 and bool(others)
    for f in findings:
        if select and not any(f.code.startswith(s.upper()) for s in select):
            continue
        if ignore and any(f.code.startswith(s.upper()) for s in ignore):
            continue
        for p in f.patches:
            if p.target is not None and Path(p.target).resolve() != config.resolve() and not retargeted:
                continue
            if p.safety == Safety.DISPLAY_ONLY:
                continue
            if p.safety == Safety.UNSAFE and not unsafe:
                hidden_unsafe += 1
                continue
            paths_changed = [o.path for o in p.changes]
            clash = [pp for pp in paths_changed if pp in claimed]
            if clash:
                conflicts.append(f"{f.code} '{p.title}' skipped: {clash[0]} is already changed by {claimed[clash[0]]}")
                continue
            for pp in paths_changed:
                claimed[pp] = f"{f.code} '{p.title}'"
            chosen.append((f, p))
    for c in conflicts:
        err.print(f"advisor: {c}", style="yellow", markup=False, soft_wrap=True)
    if retargeted and chosen:
        err.print(f"note: the report's patches were made for {others[0]}; applying them to {config} "
                  "(each patch's preconditions are checked against it)", markup=False, soft_wrap=True)
    if not chosen:
        msg = f"{config}: nothing to fix"
        if others and not retargeted:
            msg += f" (the patches found are for {', '.join(others[:3])}{', …' if len(others) > 3 else ''})"
        if hidden_unsafe:
            msg += f" ({hidden_unsafe} unsafe fix(es) available with --unsafe-fixes)"
        err.print(msg, markup=False, soft_wrap=True)
        return 0
    sink = DiagnosticSink()
    doc = ConfigDocument.load(config, sink)  # fresh from disk: the file as it is now
    if doc is None:
        print_diagnostics(sink)
        return 2
    failures = check_preconditions(doc, [p for _, p in chosen])
    if failures:
        for fl in failures:
            err.print(f"advisor: refusing to write {config}: {fl.message}", style="bold red", markup=False, soft_wrap=True)
        return 2
    try:
        res = apply_patches(doc, [p for _, p in chosen])
    except PatchVerificationError as exc:
        err.print(f"advisor: refusing to write {config}: {exc}", style="bold red", markup=False, soft_wrap=True)
        return 2
    if not res.ok or res.new_text is None:
        for fl in res.failed:
            err.print(f"advisor: refusing to write {config}: {fl.message}", style="bold red", markup=False, soft_wrap=True)
        return 2
    diff = unified_diff(doc.text, res.new_text, config)
    if show_diff:
        sys.stdout.write(diff)  # raw: a wrapped diff would not apply
        for n in res.notes:
            err.print(f"note: {n}", style="dim", markup=False, soft_wrap=True)
        return 1 if diff else 0
    try:
        atomic_write(config, res.new_text)
    except (AtomicWriteError, OSError) as exc:
        err.print(f"advisor: cannot write {config}: {exc}", style="bold red", markup=False, soft_wrap=True)
        return 2
    for f, p in chosen:
        err.print(f"{config}: fixed {f.code}: {p.title} ({p.safety.value})", markup=False, soft_wrap=True)
    for n in res.notes:
        err.print(f"note: {n}", markup=False, soft_wrap=True)
    if hidden_unsafe:
        err.print(f"{hidden_unsafe} unsafe fix(es) not applied (use --unsafe-fixes)", markup=False)
    return 0


def _yaml_files(paths: tuple[Path, ...]) -> list[Path]:
    """The YAML files to lint: each file given, and every ``*.yaml``/``*.yml`` under a directory given."""
    out: list[Path] = []
    for p in paths:
        if not p.exists():
            raise click.UsageError(f"{p}: file does not exist")
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.suffix in (".yaml", ".yml") and q.is_file()
                              and not any(part.startswith(".") for part in q.relative_to(p).parts)))
        else:
            out.append(p)
    return out
