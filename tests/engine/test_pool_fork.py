"""Worker processes are forked from the client (Linux), on its main thread, before its own lane starts."""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.context as mpc
import sys
import threading
import types
from pathlib import Path

import pytest

from advisor_core.engine import rankwork
from engine_support import kitchen_sink_profile

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory) -> Path:
    return kitchen_sink_profile(tmp_path_factory.mktemp("fork") / "three", ranks=3, steps=1)


def test_workers_fork_on_the_main_thread_before_the_client_lane(three_ranks: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    from advisor_core.cli import main

    events: list[tuple[str, str]] = []

    class RecordingProcess(mpc.ForkProcess):
        def start(self) -> None:
            events.append(("fork", threading.current_thread().name))
            super().start()

    class RecordingContext(mpc.ForkContext):
        Process = RecordingProcess

    real_digest = rankwork.digest_rank

    def client_lane(rank, rules):  # type: ignore[no-untyped-def]
        events.append(("rank", threading.current_thread().name))  # in a worker, this list is the worker's copy
        return real_digest(rank, rules)

    monkeypatch.setattr(rankwork, "_context", RecordingContext)
    monkeypatch.setattr(rankwork, "digest_rank", client_lane)
    reports = {}
    for jobs in ("2", "1"):
        out = tmp_path / f"j{jobs}.json"
        code = main(["analyze", str(three_ranks), "--no-plugins", "--jobs", jobs, "--format", "json", "-o", str(out),
                     "--quiet"])
        assert code == 1
        reports[jobs] = out.read_bytes()
        if jobs == "2":
            # one worker (two lanes: it and this process), forked before this process took its first rank
            assert events[0] == ("fork", "MainThread")
            assert [e for e in events if e[0] == "fork"] == [("fork", "MainThread")]
            assert 1 <= len([e for e in events if e == ("rank", "MainThread")]) <= 2
    assert reports["1"] == reports["2"]
    assert [e for e in events if e[0] == "fork"] == [("fork", "MainThread")]  # --jobs 1 forks nothing


def test_spawned_workers_need_an_importable_main(monkeypatch) -> None:
    monkeypatch.setattr(rankwork, "_context", lambda: mp.get_context("spawn"))
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # as under `python -c`
    assert not rankwork._workers_can_start()
    monkeypatch.setattr(rankwork, "_context", lambda: mp.get_context("fork"))
    assert rankwork._workers_can_start()  # a forked worker imports nothing again
