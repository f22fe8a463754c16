"""The worker server starts while the client sets up, for several ranks going to a pool, with the rules' modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.engine import rankwork
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.simulate import simulate_scenario

SETS = ("parallel_config.model_parallel=1", "parallel_config.pipeline_stage=1", "parallel_config.micro_batch_num=1")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prewarm") / "two"
    simulate_scenario("kitchen-sink", out, ranks=2, layers=1, steps=1, sets=SETS, ground_truth=False)
    return out / "profile"


@pytest.fixture
def started(monkeypatch) -> list[tuple[str, ...]]:
    """The forkserver preload lists the client asked for (the server itself is not started)."""
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(rankwork, "_main_is_importable", lambda: True)
    monkeypatch.setattr("multiprocessing.forkserver.ensure_running", lambda: None)
    monkeypatch.setattr(rankwork, "_context", lambda: calls.append(rankwork._preload_rules))
    return calls


def test_several_ranks_for_a_pool_preload_the_rule_modules(two_ranks: Path, started: list) -> None:
    Session([two_ranks], SessionOptions(jobs=2)).inputs()
    (modules,) = started
    assert "advisor_rules.ct002_transdata.rule" in modules and list(modules) == sorted(set(modules))


def test_no_server_for_one_core(two_ranks: Path, started: list) -> None:
    Session([two_ranks], SessionOptions(jobs=1)).inputs()
    assert started == []
