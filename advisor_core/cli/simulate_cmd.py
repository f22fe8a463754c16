"""``advisor simulate SCENARIO -o OUT [...]`` and ``advisor simulate --list``."""

from __future__ import annotations

from pathlib import Path

import click

from advisor_core.cli.common import print_wrapped, stderr_console, stdout_console


@click.command("simulate")
@click.argument("scenario", required=False)
@click.option("-o", "--out", type=click.Path(path_type=Path, file_okay=False), help="Output directory (must be empty).")
@click.option("--list", "list_scenarios", is_flag=True, help="List the scenarios and exit.")
@click.option("--ranks", type=int, help="World size; data_parallel becomes ranks / (model_parallel x pipeline_stage).")
@click.option("--steps", type=int, help="Profiled steps (default: the scenario's).")
@click.option("--layers", type=int, help="Decoder layers (default: the scenario's).")
@click.option("--seed", type=int, default=0, show_default=True, help="Jitter seed (changes timing noise only).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Simulate this MindFormers YAML instead of the scenario's (the scenario's faults still apply; "
                   "use scenario 'clean' to simulate the file as it is).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (dotted path, value parsed as YAML); hardware.* keys change the hardware profile.")
@click.option("--hardware", type=click.Path(path_type=Path, dir_okay=False), help="YAML/JSON file overriding hardware fields.")
@click.option("--force", is_flag=True, help="Write into a non-empty output directory.")
@click.option("--export", "export", type=click.Choice(["text", "db", "both"]), default="text", show_default=True,
              help="Profiler export to write: the text files, the SQLite DB (ascend_mindspore_profiler_{rank}.db and "
                   "communication_analyzer.db, as MindSpore's export_type=[db]), or both.")
def simulate_command(scenario: str | None, out: Path | None, list_scenarios: bool, ranks: int | None, steps: int | None,
                     layers: int | None, seed: int, config_file: Path | None, sets: tuple[str, ...], hardware: Path | None,
                     force: bool, export: str) -> None:
    """Simulate MindSpore training on Ascend: write profiler output, IR dumps and the ground truth.

    OUT gets one *_ascend_ms directory per rank under profile/, IR dumps under graphs/rank_<id>/,
    the config as simulated under config/, the strategy file under strategy/, and expected.json
    (the problems the run really has and what each costs). Exit code 2 on bad input.
    """
    from advisor_core.simulate import SCENARIOS, SimulationInputError, simulate_scenario

    if list_scenarios:
        con = stdout_console()
        for sc in SCENARIOS.values():
            print_wrapped(con, sc.description, lead=f"{sc.name:<26} ", hang=" " * 27)
        return
    if not scenario:
        raise click.UsageError("missing SCENARIO (see advisor simulate --list)")
    if out is None:
        raise click.UsageError("missing -o/--out OUT")
    try:
        result = simulate_scenario(scenario, out, config=config_file, ranks=ranks, steps=steps, layers=layers, seed=seed,
                                   sets=sets, hardware=hardware, force=force, export=export)
    except SimulationInputError as exc:
        stderr_console().print(f"advisor simulate: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    con = stdout_console()
    w = result.workload
    print_wrapped(con, f"{scenario}: {w.world} rank(s) (dp {w.dp} x mp {w.mp} x pp {w.pp}), {result.model.steps} "
                       f"step(s), {w.layers} layer(s) -> {out}", hang="  ")
    print_wrapped(con, f"mean step time {result.mean_step_time_us / 1000:.3f} ms, peak memory "
                       f"{max(result.peak_memory_bytes.values()) / 2**30:.2f} GiB, data gap {result.gap_us / 1000:.3f} ms",
                  hang="  ")
    for p in result.problems:
        mem = f", {p['memory_bytes'] / 2**20:.1f} MiB" if p.get("memory_bytes") else ""
        print_wrapped(con, f"{p['code']} {p['id']}: {p['cost_us_per_step'] / 1000:.3f} ms/step{mem}  {p['title']}",
                      lead="  ", hang="      ")
