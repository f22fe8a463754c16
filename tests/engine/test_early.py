"""What a session starts early: the worker server, for several ranks going to a pool; never an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.engine import rankwork
from advisor_core.engine.early import start_early
from advisor_core.simulate import simulate_scenario

SETS = ("parallel_config.model_parallel=1", "parallel_config.pipeline_stage=1", "parallel_config.micro_batch_num=1")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("early") / "two"
    simulate_scenario("kitchen-sink", out, ranks=2, layers=1, steps=1, sets=SETS, ground_truth=False)
    return out / "profile"


@pytest.fixture
def prewarmed(monkeypatch) -> list[tuple]:
    calls: list[tuple] = []
    monkeypatch.setattr(rankwork, "prewarm", lambda *a: calls.append(a))
    return calls


def test_several_ranks_for_a_pool_start_the_worker_server(two_ranks: Path, prewarmed: list[tuple]) -> None:
    start_early([two_ranks], source="auto", jobs=2, scheduler=None, pool=True, rule_modules=["m"])
    size = sum(p.stat().st_size for p in two_ranks.rglob("kernel_details.csv"))
    assert prewarmed == [(2, size, 2, ["m"])]  # the rank count and kernel bytes pool_size decides on


def test_nothing_starts_for_one_core_dask_or_a_host_built_by_hand(two_ranks: Path, tmp_path: Path,
                                                                  prewarmed: list[tuple]) -> None:
    start_early([two_ranks], source="auto", jobs=1, scheduler=None, pool=True)
    start_early([two_ranks], source="auto", jobs=None, scheduler="local", pool=True)
    start_early([two_ranks], source="auto", jobs=2, scheduler=None, pool=False)
    one = tmp_path / "one"
    simulate_scenario("kitchen-sink", one, ranks=1, layers=1, steps=1, sets=SETS, ground_truth=False)
    start_early([one / "profile"], source="auto", jobs=2, scheduler=None, pool=True)  # one rank: no pool
    assert prewarmed == []


def test_a_head_start_that_fails_is_no_start(two_ranks: Path, prewarmed: list[tuple], monkeypatch) -> None:
    """Whatever goes wrong in the early discovery (a file gone between two looks) leaves the run as without it."""
    from advisor_core.discover import profiles

    def gone(*a, **k):  # type: ignore[no-untyped-def]
        raise FileNotFoundError("kernel_details.csv vanished")

    monkeypatch.setattr(profiles, "discover_profiles", gone)
    assert start_early([two_ranks], source="auto", jobs=2, scheduler=None, pool=True) is None
    assert prewarmed == []
