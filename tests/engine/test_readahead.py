"""A lone rank's kernel table read ahead while the rest imports: claimed once, the same table and diagnostics."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from advisor_core.engine.ahead import begin_ahead
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.loaders import csvtable, readahead
from advisor_core.loaders.kernels import KERNELS
from engine_support import kitchen_sink_profile


@pytest.fixture(scope="module")
def lone_rank(tmp_path_factory) -> Path:
    return kitchen_sink_profile(tmp_path_factory.mktemp("readahead") / "ks", ranks=1, steps=2)


@pytest.fixture
def kernel_reads(monkeypatch) -> list[tuple[str, ...]]:
    """The thread each read of the kernel table ran on, then the columns it read."""
    reads: list[tuple[str, ...]] = []
    real = csvtable.read_csv_table

    def counted(path, spec, columns, sink, **kw):  # type: ignore[no-untyped-def]
        if spec is KERNELS:
            reads.append((threading.current_thread().name, *(columns or ())))
        return real(path, spec, columns, sink, **kw)

    from advisor_core.loaders import registry

    monkeypatch.setattr(csvtable, "read_csv_table", counted)  # what a read begun ahead calls
    monkeypatch.setattr(registry, "read_csv_table", counted)  # what the loader calls
    return reads


def _analyze(profile: Path, **opts) -> tuple[Session, list[tuple[str, str, float | None]]]:  # type: ignore[no-untyped-def]
    session = Session([profile], SessionOptions(autoload_plugins=False, **opts))
    result = session.analyze()
    return session, [(f.code, f.title, f.saving_us) for f in result.findings]


def test_the_op_view_claims_the_read_begun_ahead(lone_rank: Path, kernel_reads) -> None:
    keys = begin_ahead([lone_rank], source="auto", jobs=None, scheduler=None)
    session, findings = _analyze(lone_rank, read_ahead=keys)
    assert len(kernel_reads) == 1 and kernel_reads[0][:4] == ("advisor-readahead-kernel_details.csv", "name", "type",
                                                             "accelerator_core")
    assert readahead._pending == {}
    kernel_reads.clear()
    _, without = _analyze(lone_rank)
    assert [r[0] for r in kernel_reads] == ["MainThread"]
    assert findings == without and findings  # the same table: the same verdicts
    view = session.run.rank(session.run.rank_ids[0]).op_view()
    assert (view.rows, view.steps) == (2240, 2)


def test_the_read_s_diagnostics_are_said_once_where_the_loader_would(lone_rank: Path, tmp_path: Path) -> None:
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.model.run import load_run

    broken = tmp_path / "profile"
    shutil.copytree(lone_rank, broken)
    (csv,) = broken.rglob("kernel_details.csv")
    with open(csv, "a") as fh:
        fh.write("1,2,3\n")  # a row with the wrong number of fields
    said = {}
    for ahead in (True, False):
        sink = DiagnosticSink()
        rank = load_run(broken, sink=sink).rank(0)
        if ahead:
            readahead.begin(csv, KERNELS, ["name", "duration_us"])
        before = len(list(sink))
        table = rank.arrow_table("kernels", ["name", "duration_us"])
        said[ahead] = ([d.message for d in list(sink)[before:]], table.num_rows)
        assert readahead._pending == {}
    assert said[True] == said[False] == (["kernel_details.csv: 1 row(s) with the wrong number of fields were skipped "
                                          "(line 2242: expected 46 fields, got 3)"], 2240)


def test_a_read_nobody_asks_for_is_not_handed_out(lone_rank: Path) -> None:
    (csv,) = lone_rank.rglob("kernel_details.csv")
    key = readahead.begin(csv, KERNELS, ["name", "duration_us"])
    from advisor_core.diagnostics import DiagnosticSink

    assert readahead.claim(csv, KERNELS, ["name"], DiagnosticSink()) is None  # other columns: read as usual
    got = readahead.claim(csv, KERNELS, ["name", "duration_us"], DiagnosticSink())
    assert got is not None and got.result.arrow.column_names == ["name", "duration_us"]
    assert readahead.claim(csv, KERNELS, ["name", "duration_us"], DiagnosticSink()) is None  # claimed once
    readahead.begin(csv, KERNELS, ["name"])
    readahead.discard([key, readahead.key_of(csv, KERNELS, ["name"])])
    assert readahead._pending == {}


def test_nothing_is_read_ahead_for_a_pool_one_core_or_a_database(lone_rank: Path, tmp_path: Path) -> None:
    assert begin_ahead([lone_rank], source="auto", jobs=1, scheduler=None) == []
    assert begin_ahead([lone_rank], source="auto", jobs=None, scheduler="local") == []
    two = kitchen_sink_profile(tmp_path / "two", ranks=2, steps=1)
    assert begin_ahead([two], source="auto", jobs=None, scheduler=None) == []
    db = kitchen_sink_profile(tmp_path / "db", ranks=1, steps=1, export="both")
    assert begin_ahead([db], source="auto", jobs=None, scheduler=None) == []
    keys = begin_ahead([db], source="text", jobs=None, scheduler=None)
    assert len(keys) == 1
    readahead.discard(keys)


def _reader(name: str) -> threading.Thread:
    (thread,) = [t for t in threading.enumerate() if t.name == name]
    return thread


def test_a_read_nobody_claims_is_waited_for(lone_rank: Path, monkeypatch) -> None:
    (csv,) = lone_rank.rglob("kernel_details.csv")
    key = readahead.begin(csv, KERNELS, ["name", "duration_us"])
    ahead = readahead._pending[key]
    readahead.discard([key])  # a run that ends normally never leaves Arrow reading under the interpreter's teardown
    assert ahead.done.is_set() and ahead.result.arrow.num_rows == 2240
    may_end = threading.Event()
    real = csvtable.read_csv_table

    def held(*args, **kw):  # type: ignore[no-untyped-def]
        may_end.wait(10)
        return real(*args, **kw)

    monkeypatch.setattr(csvtable, "read_csv_table", held)
    key = readahead.begin(csv, KERNELS, ["name"])
    thread = _reader("advisor-readahead-kernel_details.csv")  # still reading
    readahead.discard([key], wait=False)  # an interrupted one does not wait (a daemon thread: nothing joins it)
    assert readahead._pending == {} and thread.daemon and thread.is_alive()
    may_end.set()
    thread.join()


def test_reads_in_turn_run_one_after_another_on_one_thread_without_arrow_s_pool(lone_rank: Path, tmp_path: Path,
                                                                                 monkeypatch) -> None:
    from advisor_core.diagnostics import DiagnosticSink

    (csv,) = lone_rank.rglob("kernel_details.csv")
    files = [tmp_path / f"{i}.csv" for i in range(3)]
    for f in files:
        shutil.copy(csv, f)
    made: list[tuple[str, str, bool]] = []
    first_may_end = threading.Event()
    real = csvtable.read_csv_table

    def recorded(path, spec, columns, sink, **kw):  # type: ignore[no-untyped-def]
        made.append((threading.current_thread().name, Path(path).name, kw.get("threads", True)))
        if Path(path) == files[0]:
            first_may_end.wait(10)
        return real(path, spec, columns, sink, **kw)

    monkeypatch.setattr(csvtable, "read_csv_table", recorded)
    keys = readahead.begin_in_turn([(f, KERNELS, ["name", "duration_us"]) for f in files])
    thread = _reader("advisor-readahead-3-in-turn")  # held in the first read
    readahead.discard([keys[1]], wait=False)  # before its turn: never read
    first_may_end.set()
    got = [readahead.claim(f, KERNELS, ["name", "duration_us"], DiagnosticSink()) for f in (files[0], files[2])]
    assert [g.result.arrow.num_rows for g in got] == [2240, 2240]
    thread.join()
    assert made == [("advisor-readahead-3-in-turn", "0.csv", False), ("advisor-readahead-3-in-turn", "2.csv", False)]
    assert readahead._pending == {}
    assert readahead.begin_in_turn([]) == []


def test_a_read_discarded_before_its_turn_is_not_waited_for_in_vain(lone_rank: Path, tmp_path: Path) -> None:
    (csv,) = lone_rank.rglob("kernel_details.csv")
    keys = readahead.begin_in_turn([(csv, KERNELS, ["name"]), (csv, KERNELS, ["name", "duration_us"])])
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (readahead.discard(keys[::-1]), done.set()), daemon=True)
    waiter.start()
    assert done.wait(10)  # the skipped read counts as ended: discard (and wait_all before a fork) return
    assert readahead._pending == {}


def _five_copies(profile: Path, dest: Path) -> Path:
    """Five ranks under ``dest``: copies of ``profile``'s one rank directory, each with its own pid in the name."""
    (rank_dir,) = [p for p in profile.iterdir() if p.is_dir()]
    for i in range(5):
        shutil.copytree(rank_dir, dest / rank_dir.name.replace("_30000_", f"_3000{i}_"))
    return dest


def _walked_ranks(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The rank directories discovery's walker adds from now on, in order."""
    from advisor_core.discover import profiles

    walked: list[str] = []
    real = profiles._Walker._add_dir_source
    monkeypatch.setattr(profiles._Walker, "_add_dir_source",
                        lambda self, d, layout: (walked.append(d.name), real(self, d, layout)))
    return walked


def test_the_walk_for_a_lone_rank_stops_at_the_second(tmp_path: Path, lone_rank: Path, monkeypatch) -> None:
    from advisor_core.discover import profiles

    assert profiles.lone_source([lone_rank]).artifact("kernel_details").name == "kernel_details.csv"
    many = _five_copies(lone_rank, tmp_path / "many")
    walked = _walked_ranks(monkeypatch)
    assert profiles.lone_source([many]) is None
    assert len(walked) == 2  # not all five
    assert profiles.lone_source([tmp_path / "absent"]) is None


def test_analyze_reads_a_lone_rank_s_kernels_once_on_the_read_ahead_thread(lone_rank: Path, kernel_reads,
                                                                            tmp_path: Path) -> None:
    from advisor_core.cli import main

    out = tmp_path / "r.json"
    code = main(["analyze", str(lone_rank), "--no-plugins", "--format", "json", "-o", str(out), "--quiet"])
    assert code == 1 and out.exists()
    assert [r[0] for r in kernel_reads] == ["advisor-readahead-kernel_details.csv"]
    assert readahead._pending == {}


def test_analyze_with_a_selection_reads_nothing_ahead(lone_rank: Path, kernel_reads, tmp_path: Path) -> None:
    from advisor_core.cli import main

    out = tmp_path / "r.json"
    main(["analyze", str(lone_rank), "--no-plugins", "--select", "MD001", "--format", "json", "-o", str(out), "--quiet"])
    assert out.exists()
    assert [r[0] for r in kernel_reads if r[0].startswith("advisor-readahead")] == []  # MD001 reads no kernels
    assert readahead._pending == {}


def test_a_read_claimed_before_its_turn_is_still_made(lone_rank: Path, tmp_path: Path, monkeypatch) -> None:
    """The run's consistency check builds an op view before the units start, while the reads in turn go on."""
    from advisor_core.diagnostics import DiagnosticSink

    (csv,) = lone_rank.rglob("kernel_details.csv")
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    shutil.copy(csv, first)
    shutil.copy(csv, second)
    first_may_end = threading.Event()
    real = csvtable.read_csv_table

    def held(path, spec, columns, sink, **kw):  # type: ignore[no-untyped-def]
        if Path(path) == first:
            first_may_end.wait(10)
        return real(path, spec, columns, sink, **kw)

    monkeypatch.setattr(csvtable, "read_csv_table", held)
    readahead.begin_in_turn([(first, KERNELS, ["name"]), (second, KERNELS, ["name"])])
    got: list = []
    claimer = threading.Thread(target=lambda: got.append(readahead.claim(second, KERNELS, ["name"], DiagnosticSink())))
    claimer.start()
    claimer.join(0.2)  # it waits, its read not begun
    first_may_end.set()
    claimer.join(10)
    assert got[0].result is not None and got[0].result.arrow.num_rows == 2240
    readahead.discard([readahead.key_of(first, KERNELS, ["name"])])


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread dies: the case
def test_a_reader_that_dies_leaves_no_one_waiting(lone_rank: Path, monkeypatch) -> None:
    from advisor_core.diagnostics import DiagnosticSink

    (csv,) = lone_rank.rglob("kernel_details.csv")

    may_die = threading.Event()

    def dies(*args, **kw):  # type: ignore[no-untyped-def]
        may_die.wait(10)
        raise SystemExit  # ends the thread, as nothing a read raises does

    monkeypatch.setattr(csvtable, "read_csv_table", dies)
    readahead.begin_in_turn([(csv, KERNELS, ["name"]), (csv, KERNELS, ["name", "duration_us"])])
    reader = _reader("advisor-readahead-2-in-turn")
    may_die.set()
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (readahead.wait_all(), done.set()), daemon=True)
    waiter.start()
    assert done.wait(10)
    assert readahead.claim(csv, KERNELS, ["name"], DiagnosticSink()) is None  # the loader reads for itself
    readahead.discard(list(readahead._pending))
    reader.join(10)  # ended here, not in a later test
