"""The worker server starts while the client sets up, for several ranks going to a pool, with the rules' modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.engine import rankwork
from advisor_core.engine.session import Session, SessionOptions
from engine_support import kitchen_sink_profile


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    return kitchen_sink_profile(tmp_path_factory.mktemp("prewarm") / "two", ranks=2, steps=1)


@pytest.fixture
def started(monkeypatch) -> list[tuple[str, ...]]:
    """The forkserver preload lists the client asked for (the server itself is not started)."""
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(rankwork, "_started_ahead", False)
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


def test_no_second_start_after_the_server_started_ahead(two_ranks: Path, started: list, monkeypatch) -> None:
    monkeypatch.setattr(rankwork, "_started_ahead", True)  # its preload (the plugins) must not be replaced
    Session([two_ranks], SessionOptions(jobs=2)).inputs()
    assert started == []


@pytest.fixture
def ahead(monkeypatch) -> list:
    """The plugin specs the worker server was started ahead with (the server itself is not started)."""
    calls: list = []
    monkeypatch.setattr(rankwork, "start_server_ahead", calls.append)
    return calls


def test_the_server_starts_ahead_for_several_ranks_going_to_a_pool(two_ranks: Path, ahead: list) -> None:
    from advisor_core.engine.plugins import plugin_spec
    from advisor_core.engine.ahead import begin_ahead

    spec = plugin_spec(autoload=False, load=["Advisor-AICPU"], block=[])
    assert begin_ahead([two_ranks], source="auto", jobs=2, scheduler=None, plugins=spec) == []
    assert ahead == [rankwork.PluginSpec(False, ("advisor-aicpu",), ())]
    for jobs, scheduler in ((1, None), (2, "tcp://127.0.0.1:1"), (None, None)):  # one core; Dask; too small to split
        begin_ahead([two_ranks], source="auto", jobs=jobs, scheduler=scheduler, plugins=spec)
    assert len(ahead) == 1


def test_the_server_loads_the_named_plugins_before_it_forks(monkeypatch) -> None:
    import json

    from advisor_core.engine import worker_server

    spec = rankwork.PluginSpec(False, (), ())
    monkeypatch.setattr(rankwork, "_WORKER_HOSTS", {})
    monkeypatch.setenv(rankwork.SERVER_PLUGINS_ENV, json.dumps([False, [], []]))
    worker_server._load_named_plugins()
    assert "CT002" in rankwork._WORKER_HOSTS[spec].rules()
    monkeypatch.setattr(rankwork, "_WORKER_HOSTS", {})
    monkeypatch.setenv(rankwork.SERVER_PLUGINS_ENV, "not json")
    worker_server._load_named_plugins()  # never stops the server: each worker loads them itself
    assert rankwork._WORKER_HOSTS == {}


def test_a_worker_forked_from_a_server_started_ahead_has_the_plugins_loaded(monkeypatch) -> None:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import forkserver

    monkeypatch.setattr(rankwork, "_main_is_importable", lambda: True)  # pytest-xdist's workers run from `-c`
    monkeypatch.setattr(rankwork, "_started_ahead", False)  # what the start below sets, for this test only
    monkeypatch.setattr(rankwork, "_preload_rules", ())
    if hasattr(forkserver._forkserver, "_stop"):
        forkserver._forkserver._stop()  # this test process may have one from another test, started without them
    spec = rankwork.PluginSpec(False, (), ())
    rankwork.start_server_ahead(spec)
    probe = "sorted(r for h in __import__('advisor_core.engine.rankwork', fromlist=['_']).{}.values() for r in h.rules())"
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=rankwork._context()) as pool:
            loaded = pool.submit(eval, probe.format("_WORKER_HOSTS")).result(timeout=120)
    finally:
        if hasattr(forkserver._forkserver, "_stop"):
            forkserver._forkserver._stop()
    assert "CT002" in loaded and "MD001" in loaded
