"""The simulated Ascend backend: MindFormers config in, MindSpore ≥ 2.5 profiler output and IR dumps out.

Public API::

    from advisor_core.simulate import simulate, SCENARIOS, HardwareProfile

    result = simulate("pretrain_llama2_7b.yaml", out="run/", ranks=8, steps=4, layers=4, seed=0)
    result.mean_step_time_us, result.peak_memory_bytes, result.problems

See ``advisor_core/simulate/README.md`` for the hardware profile, the cost model, the scenarios
and the ground-truth format.
"""

from __future__ import annotations

from advisor_core.simulate.engine import SimulationResult, simulate
from advisor_core.simulate.errors import SimulationInputError
from advisor_core.simulate.faults import (
    CastRoundTrip,
    DataWarmup,
    DegradedLink,
    ExpensiveMapOp,
    NDFormatOp,
    ParamTransData,
    SlowDataRank,
    SlowHostToDevice,
    SlowKernelRank,
    StrategyMismatch,
    parse_faults,
)
from advisor_core.simulate.hardware import HardwareProfile, load_hardware
from advisor_core.simulate.scenarios import SCENARIOS, Scenario, get_scenario, scenario_inputs

__all__ = [
    "simulate",
    "simulate_scenario",
    "SimulationResult",
    "SimulationInputError",
    "HardwareProfile",
    "load_hardware",
    "SCENARIOS",
    "Scenario",
    "get_scenario",
    "CastRoundTrip",
    "ExpensiveMapOp",
    "NDFormatOp",
    "ParamTransData",
    "StrategyMismatch",
    "SlowKernelRank",
    "SlowDataRank",
    "DegradedLink",
    "DataWarmup",
    "SlowHostToDevice",
    "parse_faults",
]


def simulate_scenario(name: str, out=None, *, config=None, ranks=None, steps=None, layers=None, seed=0,  # type: ignore[no-untyped-def]
                      sets=(), hardware=None, force=False, ground_truth=True, export="text",
                      profiler_steps=None) -> SimulationResult:
    """Run a registered scenario (``--config`` replaces its config; its faults still apply).

    ``profiler_steps``: ``None`` takes the scenario's (see :func:`simulate`)."""
    for flag, value in (("--layers", layers), ("--steps", steps), ("--ranks", ranks)):
        if value is not None and value <= 0:
            raise SimulationInputError(f"{flag}: {value} is not a positive integer")
    if seed < 0:
        raise SimulationInputError(f"--seed: {seed} must not be negative")
    cfg, faults, default_steps = scenario_inputs(name, config, layers)
    return simulate(cfg, hardware, faults, out, ranks, steps if steps is not None else default_steps,
                    layers if config is not None else None, seed,
                    sets=sets, force=force, name=name if config is None else "config", scenario=name,
                    ground_truth=ground_truth, export=export,
                    profiler_steps=get_scenario(name).profiler_steps if profiler_steps is None else profiler_steps)
