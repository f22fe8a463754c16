"""A pool worker hands its rank's op view back through a file; the client reads only the views a rule asks for."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
from engine_support import kitchen_sink_profile, run_cli

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.engine import rankwork, spill
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.opview.view import OpView


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory) -> Path:
    return kitchen_sink_profile(tmp_path_factory.mktemp("spill") / "three", ranks=3, steps=1)


def _view() -> OpView:
    ops = pd.DataFrame({"name": ["a/MatMul-op1", "a/Cast-op2"], "type": ["MatMul", "Cast"],
                        "in_shapes": [((8, 16),), ((4,),)], "count": [3, 1], "total_us": [30.5, 2.0]})
    return OpView(ops=ops, steps=2, step_ids=(1, 2), rows=4, source="kernel_details.csv", has=("name",))


def test_a_spilled_view_reads_back_equal_and_its_file_goes(tmp_path: Path) -> None:
    view = _view()
    handle = spill.spill_op_view(view, str(tmp_path), 7)
    assert isinstance(handle, spill.SpilledOpView)
    assert [p.name.startswith("rank7-") for p in tmp_path.iterdir()] == [True]
    back = handle.fetch()
    pd.testing.assert_frame_equal(back.ops, view.ops)
    assert (back.steps, back.step_ids, back.rows, back.source, back.has) == (2, (1, 2), 4, "kernel_details.csv",
                                                                             ("name",))
    assert list(tmp_path.iterdir()) == []


def test_a_view_that_cannot_be_written_travels_in_the_digest(tmp_path: Path) -> None:
    view = _view()
    assert spill.spill_op_view(view, str(tmp_path / "gone"), 0) is view


def test_a_lost_file_is_said_and_the_view_built_again(tmp_path: Path) -> None:
    handle = spill.spill_op_view(_view(), str(tmp_path), 3)
    os.unlink(handle.path)
    sink = DiagnosticSink()
    handle.sink = sink
    rebuilt = _view()
    handle.attach(spill.SpillDir(), lambda: rebuilt)
    assert handle.fetch() is rebuilt
    [d] = list(sink)
    assert (d.severity.value, d.code) == ("warning", "op-view-not-fetched")
    assert d.message.startswith(f"rank 3: its op view, kept by a worker process in {handle.path}, could not be "
                                "read back (FileNotFoundError: ")
    assert d.message.endswith("built here from its files instead")


def test_a_view_neither_read_back_nor_built_again_is_said_and_missing(tmp_path: Path) -> None:
    handle = spill.spill_op_view(_view(), str(tmp_path), 4)
    os.unlink(handle.path)
    handle.sink = DiagnosticSink()

    def unreadable() -> OpView:
        raise OSError("kernel_details.csv: gone too")

    handle.attach(spill.SpillDir(), unreadable)
    assert handle.fetch() is None
    [d] = list(handle.sink)
    assert d.code == "op-view-not-fetched"
    assert d.message.endswith("nor built here from its files (OSError: kernel_details.csv: gone too)")


def test_the_directory_goes_with_its_last_reference_and_only_in_its_own_process(monkeypatch) -> None:
    directory = spill.SpillDir()
    path = Path(directory.path)
    assert path.is_dir() and path.name.startswith(spill.SPILL_PREFIX)
    spill._remove_tree(str(path), os.getpid() + 1)  # a forked worker's copy of the finalizer
    assert path.is_dir()
    del directory
    gc.collect()
    assert not path.exists()
    kept = spill.SpillDir()
    spill._remove_leftovers()  # at exit, whatever still refers to it
    assert not Path(kept.path).exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="which lane runs which rank is fixed when forked")
def test_the_client_reads_only_the_views_it_is_asked_for(three_ranks: Path, monkeypatch) -> None:
    made: list[spill.SpillDir] = []
    real_dir = rankwork._spill_dir

    def recorded() -> spill.SpillDir:
        made.append(real_dir())
        return made[-1]

    monkeypatch.setattr(rankwork, "_spill_dir", recorded)
    # --jobs 3: two workers are given ranks 0 and 1 as they are forked; this process runs rank 2
    session = Session([three_ranks], SessionOptions(jobs=3, autoload_plugins=False))
    session.analyze()
    [directory] = made
    ranks = {r.rank_id: r for r in session.run}
    assert isinstance(ranks[2]._op_view, OpView)  # this process's own
    # AL001 and CM001 compare one representative rank per stage (rank 0): its view was read; rank 1's was not
    assert isinstance(ranks[0]._op_view, OpView)
    assert callable(ranks[1]._op_view)
    assert [p.name.split("-")[0] for p in Path(directory.path).iterdir()] == ["rank1"]
    alone = Session([three_ranks], SessionOptions(jobs=1, autoload_plugins=False))
    alone.analyze()
    for rank_id, own in ((r.rank_id, r) for r in alone.run):
        pd.testing.assert_frame_equal(ranks[rank_id].op_view().ops, own.op_view().ops)
    assert list(Path(directory.path).iterdir()) == []
    assert not [d for d in session.sink if d.code == "op-view-not-fetched"]


def test_no_spilled_views_are_left_behind_by_the_cli(three_ranks: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "r.json"
    # --jobs 3: rank 1's view, spilled by a worker, is never read (see above): the exit removes it
    proc = run_cli("analyze", str(three_ranks), "--no-plugins", "--jobs", "3", "--format", "json", "-o", str(out),
                   "--quiet", env={"TMPDIR": str(scratch)})
    assert proc.returncode == 1, proc.stderr
    assert list(scratch.iterdir()) == []
    alone = tmp_path / "alone.json"
    proc = run_cli("analyze", str(three_ranks), "--no-plugins", "--jobs", "1", "--format", "json", "-o", str(alone),
                   "--quiet")
    assert out.read_bytes() == alone.read_bytes()
