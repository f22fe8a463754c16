"""Per-rank units: the same report from worker processes as in-process; failures stay per rule and rank."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from engine_support import (
    TEST_RULE_HELP,
    count_unit_runs,
    host_with,
    make_dist,
    run_cli,
    write_profile,
)
from rich.console import Console

from advisor_core.cli import progress as progress_mod
from advisor_core.cli.progress import RunProgress
from advisor_core.simulate import simulate_scenario


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("units") / "ks"
    simulate_scenario("kitchen-sink", out, layers=2, steps=2, ground_truth=False)
    return out


def test_worker_processes_give_the_same_report(cluster_run: Path, tmp_path: Path) -> None:
    reports = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}.json"
        proc = run_cli("analyze", str(cluster_run), "--format", "json", "-o", str(out), "--jobs", jobs, "--no-plugins")
        assert proc.returncode == 1, proc.stderr
        reports[jobs] = out.read_bytes()
    assert reports["1"] == reports["2"]
    data = json.loads(reports["1"])
    assert len(data["inputs"]["ranks"]) == 8
    assert {"AL001", "CM001", "CT001", "CT002", "RC001"} <= {f["code"] for f in data["findings"]}



def test_a_second_analysis_of_the_same_session_gives_the_same_report(cluster_run: Path, monkeypatch) -> None:
    """The op view is kept without its kernel timeline after the first run; rules needing kernel order still get
    what they computed from it, which the run keeps: the per-rank units are not run again."""
    from advisor_core.engine.session import Session, SessionOptions

    calls = count_unit_runs(monkeypatch)
    session = Session([cluster_run], SessionOptions(jobs=1, autoload_plugins=False))
    first, second = ([f.model_dump(mode="json") for f in session.analyze().findings] for _ in range(2))
    assert any(f["title"].startswith("gradient AllReduce exposed") for f in first)
    assert first == second
    assert len(calls) == 1


def test_the_units_of_a_run_are_computed_once_per_rules_and_options(cluster_run: Path, monkeypatch) -> None:
    """What the units gave is the run's, by the rules and their options: a second analysis with the same ones
    reports the same errors and diagnostics without running them; other options run them again."""
    from pydantic import Field

    from advisor_core.engine import (
        Finding,
        Need,
        Requirements,
        Rule,
        RuleOptions,
    )
    from advisor_core.engine.session import Session, SessionOptions, SharedEvidence

    class Counted(Rule):
        __doc__ = TEST_RULE_HELP

        code = "RX010"
        name = "counted"
        summary = "counted"
        requires = Requirements(any_of=(Need.table("kernels", ("name",)),))

        class Options(RuleOptions):
            factor: int = Field(1, ge=1, description="x")

        def rank_evidence(self, rank):  # type: ignore[no-untyped-def]
            if rank.rank_id == 1:
                raise ValueError("boom")
            return len(rank.op_view().ops) * self.options.factor

        def check(self, ctx):  # type: ignore[no-untyped-def]
            yield Finding(code="RX010", rule="counted", message="-", severity="low",
                          title=str([ctx.rank_evidence(r) for r in ctx.run]))

    calls = count_unit_runs(monkeypatch)
    host = host_with(Counted)
    profile = cluster_run / "profile"
    kernels = sorted(profile.rglob("kernel_details.csv"))[2]
    shared = SharedEvidence([profile], [], host)  # as lint's configs share one baseline, each its own session
    with kernels.open("a", encoding="utf-8") as f:
        f.write("1,2\n")  # rank 2's unit says so
    try:
        results = [Session([profile], SessionOptions(jobs=1, evidence=shared), host=host).analyze(
            select=["RX010"], options=opts) for opts in (None, None, {"RX010": {"factor": 2}})]
    finally:
        kernels.write_text(kernels.read_text(encoding="utf-8").removesuffix("1,2\n"), encoding="utf-8")
    assert len(calls) == 2  # the first and the third
    assert len(shared.load()[0].units_done) == 1  # the run keeps the last only: each holds every rank's evidence
    titles = [r.findings[0].title for r in results]
    assert titles[0] == titles[1] != titles[2]
    assert titles[0].startswith("[") and ", None, " in titles[0]
    for r in results:
        assert [e.message for e in r.errors] == ["rule RX010 raised ValueError on rank 1: boom"]
        assert [d.code for d in r.diagnostics].count("malformed-rows") == 1


PLUGIN = '''
from advisor_core.engine import Finding, Need, Requirements, Rule, hookimpl


class PerRank(Rule):
    """Reports what its rank evidence saw.

    What
        x
    Why
        x
    Example
        x
    Fix
        x
    """

    code = "RX001"
    name = "per-rank"
    summary = "per-rank evidence"
    requires = Requirements(any_of=(Need.table("kernels", ("name", "duration_us")),))

    def rank_evidence(self, rank):
        if rank.rank_id == 1:
            raise ValueError("boom")
        return {"rank": rank.rank_id, "ops": len(rank.op_view().ops), "timeline": len(rank.op_view().timeline)}

    def check(self, ctx):
        seen = {r.rank_id: ctx.rank_evidence(r) for r in ctx.run}
        yield Finding(code="RX001", rule="per-rank", title=f"seen {sorted(seen.items(), key=lambda kv: kv[0])}",
                      message="-", severity="low")


@hookimpl
def advisor_register_rules():
    return [PerRank]
'''


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_rank_evidence_failure_names_rule_and_rank(jobs: str, tmp_path: Path, fake_site: Path) -> None:
    make_dist(fake_site, "advisor-perrank", "0.3", {"perrank": "perrank_rule"}, {"perrank_rule.py": PLUGIN})
    prof = tmp_path / "prof"
    for r in range(3):
        write_profile(prof, r)
    out = tmp_path / "r.json"
    proc = run_cli("analyze", str(prof), "--format", "json", "-o", str(out), "--jobs", jobs, "--select", "RX001,AIC",
                   site=fake_site)
    assert proc.returncode == 2, proc.stderr
    data = json.loads(out.read_text())
    (err,) = [e for e in data["errors"] if e.get("code") == "RX001"]
    assert err["message"] == "rule RX001 raised ValueError on rank 1: boom"
    (f,) = [f for f in data["findings"] if f["code"] == "RX001"]
    # rank 0 and 2 kept their evidence (9 distinct ops, 18 kernels each); rank 1 has none
    assert f["title"] == ("seen [(0, {'rank': 0, 'ops': 9, 'timeline': 18}), (1, None), "
                          "(2, {'rank': 2, 'ops': 9, 'timeline': 18})]")
    assert any(g["code"] == "AIC001" for g in data["findings"])  # the other rule ran


def test_timings_on_stderr(cluster_run: Path, tmp_path: Path) -> None:
    proc = run_cli("analyze", str(cluster_run / "profile"), "--format", "json", "-o", str(tmp_path / "r.json"),
                   "--timings", "--no-plugins", "--jobs", "1")
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("timings (s): wall ")
    assert any(line.strip().startswith("loads: op views, rank tables") and "(8 rank(s), summed)" in line for line in lines)
    assert any(line.strip().startswith("rule AL001") for line in lines)
    assert "ranks analysed" not in proc.stderr  # not a terminal: no progress display


def test_progress_only_on_a_terminal_after_the_delay(monkeypatch) -> None:
    monkeypatch.setattr(progress_mod, "DELAY_S", 0.0)
    buf = io.StringIO()
    with RunProgress(Console(file=buf, force_terminal=False)) as p:
        p("ranks", 1, 2)
    assert buf.getvalue() == ""
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with RunProgress(console) as p:
        p("ranks", 1, 2)
        import time

        time.sleep(0.3)
        p("ranks", 2, 2)
    assert "ranks analysed" in buf.getvalue()
    buf = io.StringIO()
    with RunProgress(Console(file=buf, force_terminal=True), enabled=False) as p:  # --quiet
        p("ranks", 1, 2)
    assert buf.getvalue() == ""


def test_a_fork_waits_until_the_display_is_not_writing(monkeypatch) -> None:
    """The analysis forks its workers while the display may be refreshing: the fork takes the display's locks."""
    import os
    import threading
    import time

    def free_elsewhere(locks: list) -> list[bool]:  # type: ignore[type-arg]
        got: list[bool] = []

        def probe() -> None:
            for lock in locks:
                ok = lock.acquire(blocking=False)
                got.append(ok)
                if ok:
                    lock.release()

        t = threading.Thread(target=probe)
        t.start()
        t.join()
        return got

    monkeypatch.setattr(progress_mod, "DELAY_S", 0.0)
    with RunProgress(Console(file=io.StringIO(), force_terminal=True, width=100)) as p:
        p("ranks", 1, 2)
        deadline = time.monotonic() + 5
        while p._progress is None and time.monotonic() < deadline:
            time.sleep(0.01)
        locks = p._write_locks()
        assert len(locks) == 3  # its own, rich's refresh thread's, the console's
        progress_mod._hold_writers()  # what the fork runs first
        assert free_elsewhere(locks) == [False, False, False]
        progress_mod._release_writers()
        assert free_elsewhere(locks) == [True, True, True]
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        assert free_elsewhere(locks) == [True, True, True]  # released again after the fork
    assert progress_mod._OPEN == []

    asked: list[int] = []

    class Probe:
        def _write_locks(self) -> list:  # type: ignore[type-arg]
            asked.append(os.getpid())
            return []

    monkeypatch.setattr(progress_mod, "_OPEN", [Probe()])
    pid = os.fork()  # any fork of this process asks the open displays first
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert asked == [os.getpid()]


def test_a_prefetched_table_is_read_once(cluster_run: Path, monkeypatch) -> None:
    """The step events scanned on a second thread while the kernels are read: whoever asks meanwhile waits for them."""
    import threading
    import time

    from advisor_core.loaders import registry
    from advisor_core.model.run import load_run

    calls: list[str] = []
    real = registry.read_step_events
    entered = threading.Event()

    def slow(path, columns, sink):  # type: ignore[no-untyped-def]
        calls.append(threading.current_thread().name)
        entered.set()
        time.sleep(0.3)  # long enough for the main thread to ask while the scan is running
        return real(path, columns, sink)

    monkeypatch.setattr(registry, "read_step_events", slow)
    rank = load_run(cluster_run / "profile").rank(0)
    scan = rank.prefetch("step_events")
    assert scan is not None and entered.wait(5)
    events = rank.table("step_events")
    scan.join(5)
    assert calls == ["prefetch-step_events"]
    assert events is not None and "ProfilerStep#1" in set(events["name"])


DYING = '''
import multiprocessing
import os

from advisor_core.engine import Finding, Need, Requirements, Rule, hookimpl


class DiesInAWorker(Rule):
    """Dies in a worker.

    What
        x
    Why
        x
    Example
        x
    Fix
        x
    """

    code = "RX002"
    name = "dies-in-a-worker"
    summary = "kills a worker process"
    requires = Requirements(any_of=(Need.table("kernels", ("name", "duration_us")),))

    def rank_evidence(self, rank):
        if multiprocessing.parent_process() is not None:  # a worker: die as an out-of-memory kill would
            os._exit(3)
        return rank.rank_id

    def check(self, ctx):
        seen = sorted(ctx.rank_evidence(r) for r in ctx.run)
        yield Finding(code="RX002", rule="dies-in-a-worker", title=f"seen {seen}", message="-", severity="low")


@hookimpl
def advisor_register_rules():
    return [DiesInAWorker]
'''


def test_ranks_of_a_dead_worker_are_analysed_here(tmp_path: Path, fake_site: Path) -> None:
    make_dist(fake_site, "advisor-dies", "0.1", {"dies": "dies_rule"}, {"dies_rule.py": DYING})
    prof = tmp_path / "prof"
    for r in range(4):
        write_profile(prof, r)
    out = tmp_path / "r.json"
    proc = run_cli("analyze", str(prof), "--format", "json", "-o", str(out), "--jobs", "2", "--select", "RX002",
                   site=fake_site)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    assert [f["title"] for f in data["findings"]] == ["seen [0, 1, 2, 3]"]  # every rank, whoever ran it
    assert "worker processes stopped (BrokenProcessPool" in proc.stderr
    assert "1 of 4 rank(s) analysed in this process instead" in proc.stderr  # the one the worker died on


def test_configs_that_differ_in_what_the_units_do_not_read_share_them(cluster_run: Path, tmp_path: Path,
                                                                       monkeypatch) -> None:
    """Two configs against one baseline, one without the key a config-only rule reads (RC001 and LC001 are then
    not run): the rules that do per-rank work are the same, so that work is done once."""
    from advisor_core.engine.plugins import load_plugins
    from advisor_core.engine.session import Session, SessionOptions, SharedEvidence

    calls = count_unit_runs(monkeypatch)
    own = (cluster_run / "config" / "kitchen-sink.yaml").read_text(encoding="utf-8")
    line = next(x for x in own.splitlines(keepends=True) if x.strip().startswith("select_recompute:"))
    without = tmp_path / "without.yaml"
    without.write_text(own.replace(line, ""), encoding="utf-8")
    host = load_plugins(autoload=False)
    shared = SharedEvidence([cluster_run / "profile"], [], host)
    ran = []
    for cfg in (cluster_run / "config" / "kitchen-sink.yaml", without):
        result = Session([], SessionOptions(config=cfg, jobs=1, evidence=shared), host=host).analyze()
        ran.append({r.code for r in result.runs if r.status == "ran"})
    assert {"RC001", "LC001"} <= ran[0] and not {"RC001", "LC001"} & ran[1]
    assert len(calls) == 1


class _Thing:
    """An object a plugin's options may hold (pydantic's ``arbitrary_types_allowed``)."""


def test_options_that_are_not_plain_values_are_not_kept(cluster_run: Path, monkeypatch) -> None:
    """A plugin's options holding an object cannot be told apart by value: its units run every time, and nothing
    fails for it."""
    from pydantic import ConfigDict

    from advisor_core.engine import Need, Requirements, Rule, RuleOptions
    from advisor_core.engine.session import Session, SessionOptions

    class Holding(Rule):
        __doc__ = TEST_RULE_HELP

        code = "RX011"
        name = "holding"
        summary = "holding"
        requires = Requirements(any_of=(Need.table("kernels", ("name",)),))

        class Options(RuleOptions):
            model_config = ConfigDict(arbitrary_types_allowed=True)
            thing: _Thing = _Thing()

        def rank_evidence(self, rank):  # type: ignore[no-untyped-def]
            return 1

        def check(self, ctx):  # type: ignore[no-untyped-def]
            return []

    calls = count_unit_runs(monkeypatch)
    host = host_with(Holding)
    session = Session([cluster_run / "profile"], SessionOptions(jobs=1), host=host)
    results = [session.analyze(select=["RX011"]) for _ in range(2)]
    assert [r.errors for r in results] == [[], []]
    assert len(calls) == 2


def _record_phase(monkeypatch, module, name: str, phase: list[str], calls: list[tuple[str, int]]) -> None:
    """Record (phase, rank) for each call of ``module.name(rank, ...)`` made in this process."""
    real = getattr(module, name)

    def recorded(rank, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((phase[0], rank.rank_id))
        return real(rank, *args, **kwargs)

    monkeypatch.setattr(module, name, recorded)


def test_the_data_wait_and_step_means_are_measured_in_the_units_once_per_rank(cluster_run: Path, monkeypatch) -> None:
    """MD001 and CL003 measure each rank's data wait and mean step figures where the rank is read; the checks
    after the units (MD001's, the headroom every device-side rule asks for, the cluster picture) read them."""
    from advisor_core.analyses import cluster
    from advisor_core.engine import runner
    from advisor_core.engine.session import Session, SessionOptions
    from advisor_rules._common import data

    phase = ["before"]
    calls: list[tuple[str, int]] = []
    _record_phase(monkeypatch, data, "_data_wait", phase, calls)
    _record_phase(monkeypatch, cluster, "_step_means", phase, calls)
    real_units = runner._rank_units

    def units(*args, **kwargs):  # type: ignore[no-untyped-def]
        phase[0] = "units"
        try:
            return real_units(*args, **kwargs)
        finally:
            phase[0] = "checks"

    monkeypatch.setattr(runner, "_rank_units", units)
    result = Session([cluster_run], SessionOptions(jobs=1, autoload_plugins=False)).analyze()
    assert not result.errors
    assert {"AL001", "CT001"} <= {f.code for f in result.findings}  # rules that ask for the headroom
    assert sorted(calls) == sorted([("units", r) for r in range(8)] * 2)  # once per rank each, none after


def test_a_worker_hands_over_what_the_units_measured(cluster_run: Path, monkeypatch) -> None:
    """A pool worker's digest carries the values marked ``hand_over`` (and no other derived value); the client
    adopts them, and the report is the one the client's own units give (test_worker_processes_give_the_same_report)."""
    from advisor_core.engine import rankwork
    from advisor_core.engine.session import Session, SessionOptions
    from advisor_core.engine.spill import SpilledOpView

    digests: list = []
    real = rankwork.adopt_digests
    monkeypatch.setattr(rankwork, "adopt_digests",
                        lambda ranks, ds, sink: real(ranks, digests.extend(ds) or digests, sink))
    session = Session([cluster_run], SessionOptions(jobs=2, autoload_plugins=False))
    session.analyze()
    assert len(digests) == 8
    assert any(isinstance(d.op_view, SpilledOpView) for d in digests)  # some came from a worker process
    for d in digests:
        assert sorted(d.derived) == ["data_wait/0.3/step_time", "step_breakdown", "step_means", "step_windows"]
        rank = session.run.rank(d.rank_id)
        assert rank.handed_over().keys() == d.derived.keys()
        assert rank.cached("step_means", lambda: None) == d.derived["step_means"]


def test_only_values_marked_hand_over_are_handed_over(cluster_run: Path) -> None:
    from advisor_core.engine.session import Session, SessionOptions

    rank = Session([cluster_run], SessionOptions(jobs=1, autoload_plugins=False)).run.rank(0)
    assert rank.cached("kept_here", lambda: 1) == 1
    assert rank.cached("sent", lambda: 2, hand_over=True) == 2
    assert rank.cached("sent", lambda: 3) == 2  # computed once, whoever asks
    assert rank.cached("asked_for_later", lambda: 4) == 4
    assert rank.cached("asked_for_later", lambda: 5, hand_over=True) == 4  # marked by any caller
    assert rank.handed_over() == {"asked_for_later": 4, "sent": 2}


def test_a_data_wait_that_fails_in_the_unit_is_reported_once_by_the_check(cluster_run: Path, monkeypatch) -> None:
    """MD001's unit only measures ahead: a failure there is left to the check, which reports it as it always did."""
    from advisor_core.engine.session import Session, SessionOptions
    from advisor_rules._common import data

    real = data._data_wait

    def failing(rank, *args):  # type: ignore[no-untyped-def]
        if rank.rank_id == 1:
            raise RuntimeError("queue records unreadable")
        return real(rank, *args)

    monkeypatch.setattr(data, "_data_wait", failing)
    result = Session([cluster_run], SessionOptions(jobs=1, autoload_plugins=False)).analyze(select=["MD001"])
    assert [(e.code, e.message) for e in result.errors] == [
        ("MD001", "rule MD001 (minddata-bottleneck) raised RuntimeError: queue records unreadable")]
