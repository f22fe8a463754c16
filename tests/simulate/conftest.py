"""Simulated runs shared by the simulator tests: every scenario once, small (2 layers, 2 steps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.simulate import SCENARIOS, simulate_scenario

SMALL = {"layers": 2, "steps": 2}


def small_args(name: str) -> dict:
    # the ResNet-like data-pipeline case keeps its own size (its magnitudes are calibrated on it)
    return {"steps": 2} if name == "minddata-bottleneck" else dict(SMALL)


@pytest.fixture(scope="session")
def scenario_runs(tmp_path_factory) -> dict:
    """name → (SimulationResult, output dir)."""
    base = tmp_path_factory.mktemp("sim")
    out = {}
    for name in SCENARIOS:
        d = base / name
        out[name] = (simulate_scenario(name, d, **small_args(name)), d)
    return out


@pytest.fixture(scope="session")
def clean_run(scenario_runs):
    return scenario_runs["clean"]


@pytest.fixture(scope="session")
def sink_run(scenario_runs):
    return scenario_runs["kitchen-sink"]


def rank_dirs(out: Path) -> list[Path]:
    return sorted((out / "profile").glob("*_ascend_ms"))
