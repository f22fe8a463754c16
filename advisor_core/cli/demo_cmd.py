"""``advisor demo [SCENARIO]``: simulate a run into a temporary directory and analyse it.

The README's first command: it needs no NPU and no data. The report is the one
``advisor analyze`` prints; after it comes the simulator's ground truth beside what the
advisor found, so a reader sees how close the estimates are.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from advisor_core.cli.common import print_wrapped, stderr_console, stdout_console
from advisor_core.cli.engine_cmds import _host, _settings, check_output_flags, render

DEFAULT_SCENARIO = "kitchen-sink"


@click.command("demo")
@click.argument("scenario", required=False, default=DEFAULT_SCENARIO)
@click.option("--keep", type=click.Path(path_type=Path, file_okay=False),
              help="Simulate into this (empty) directory and keep it, instead of a temporary one.")
@click.option("--format", "fmt", default="text", show_default=True, help="Report format (as for analyze).")
@click.option("--no-fixes", is_flag=True, help="Do not print patch diffs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Simulation seed.")
@click.option("-v", "--verbose", is_flag=True, help="Also list every rule that reported nothing, with why.")
def demo_command(scenario: str, keep: Path | None, fmt: str, no_fixes: bool, seed: int, verbose: bool) -> None:
    """Simulate SCENARIO (default kitchen-sink: every problem on 8 ranks) and analyse it.

    Needs no accelerator. Prints the analysis report, then the simulator's ground truth
    (each injected problem and its measured cost per step) beside the finding that reports
    it. Exit code 0 unless something fails (2). See `advisor simulate --list` for scenarios.
    """
    from advisor_core.engine.session import Session, SessionOptions
    from advisor_core.report.base import RenderContext
    from advisor_core.simulate import SimulationInputError, simulate_scenario

    err = stderr_console()
    settings = _settings(None)
    host = _host(False, (), settings)
    check_output_flags(host, fmt, None)  # a mistyped --format is refused before the simulation
    tmp = None
    if keep is None:
        tmp = tempfile.mkdtemp(prefix="advisor-demo-")
        out = Path(tmp) / scenario
    else:
        out = keep
    try:
        try:
            sim = simulate_scenario(scenario, out, seed=seed)
        except SimulationInputError as exc:
            err.print(f"advisor demo: {exc}", markup=False, highlight=False, soft_wrap=True)
            raise SystemExit(2) from None
        w = sim.workload
        print_wrapped(err, f"simulated {scenario}: {w.world} rank(s) (dp {w.dp} x mp {w.mp} x pp {w.pp}), "
                           f"{sim.model.steps} steps, {w.layers} layers -> {out}", hang="  ")
        session = Session([out], SessionOptions(settings=settings), host=host)
        result = session.analyze()
        ctx = RenderContext(inputs=result.inputs, fail_on="never", show_fixes=not no_fixes, show_skipped=verbose)
        render(result, host, fmt, None, ctx)
        if fmt == "text":
            _print_truth(sim.expected or json.loads((out / "expected.json").read_text(encoding="utf-8")), result)
        if result.errors:
            raise SystemExit(2)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _print_truth(expected: dict[str, Any], result: Any) -> None:
    from advisor_core.verify import matches

    con = stdout_console()
    problems = expected.get("problems", [])
    con.print()
    print_wrapped(con, f"Ground truth ({len(problems)} injected problem(s), cost measured by re-simulating with "
                       "each fixed):", style="bold")
    found = 0
    for p in problems:
        f = next((f for f in result.findings if matches(p, f)), None)
        found += f is not None
        estimate = "not found" if f is None else f"advisor estimates {(f.saving_us or 0) / 1000:.2f} ms"
        print_wrapped(con, f"{p['id']:<28} {p['cost_us_per_step'] / 1000:8.2f} ms/step   {estimate}", lead="  ",
                      hang=" " * 31)
    con.print(f"found {found} of {len(problems)}", markup=False, highlight=False)
